/**
 * Builders of realistic market data for API tests: offer messages signed by devnet wallets
 * (EIP-712, as providers sign them), attestations signed by an attestor wallet, providers and
 * leases in the API's shapes.
 */
import { generateKeyPairFromSeed } from "@libp2p/crypto/keys";
import { peerIdFromPrivateKey } from "@libp2p/peer-id";
import { hexToBytes, keccak256, type Address, type Hex, type HDAccount, type LocalAccount } from "viem";
import type { LeaseView, ProviderView } from "../../common/api/chain.js";
import { signAttestation, signOffer } from "../../common/chain/sign.js";
import { devnetAccount } from "../../common/devnet.js";
import { ANY_RENTER, suanliDomain, type Attestation, type Offer } from "../../common/eip712.js";
import { findGpuModel, modelHash } from "../../common/gpu.js";
import type { Interconnect } from "../../common/offers/message.js";
import { signOfferMessage } from "../../common/offers/sign.js";
import type { OfferEntry, VerifiedAttestation } from "../../node/api/source.js";

/** A LeaseMarket address for EIP-712 domains in tests that deploy no market. */
export const TEST_MARKET: Address = "0x5FbDB2315678afecb367f032d93F642f64180aa3";
export const TEST_CHAIN_ID = 31337;

export const ZERO32 = `0x${"0".repeat(64)}` as const;

export type SignedOfferSpec = {
  /** EIP-712 domain: chain id and LeaseMarket address. */
  domain: { chainId: number; verifyingContract: Address };
  provider: LocalAccount;
  machineId: number;
  /** Canonical GPU model name. */
  model: string;
  units?: number;
  vramMiB?: number;
  region?: string;
  interconnect?: Interconnect;
  cluster?: `0x${string}`;
  pricePerUnitSecond: bigint;
  minBidPerUnitSecond?: bigint;
  onDemandUnits?: number;
  interruptibleUnits?: number;
  freeUnits?: number;
  minDuration?: number;
  maxDuration?: number;
  seq?: number;
  /** Unix seconds the offer is published (and received). */
  at: number;
  /** Seconds until the offer expires (default 3600). */
  expiresIn?: number;
  /** When given, signs a current hardware attestation of the machine. */
  attestor?: LocalAccount;
  /** The attestation's `cc` (GPUs verified by confidential-computing evidence; default none). */
  cc?: Hex;
  /** CPU cores, memory and disk per unit the offer declares; absent: none. */
  resources?: { cpuCoresPerUnit: number; memoryMiBPerUnit: number; diskMiBPerUnit: number };
  retention?: { outputSeconds: number };
  /** The attestation's failure history (default none). */
  failures?: number;
  lastFailureAt?: number;
};

/** An offer-book entry with real EIP-712 signatures, parsed through the gossip message schema. */
export async function signedEntry(spec: SignedOfferSpec): Promise<OfferEntry> {
  const domain = suanliDomain(spec.domain.chainId, spec.domain.verifyingContract);
  const units = spec.units ?? 8;
  const vramMiB = spec.vramMiB ?? findGpuModel(spec.model)?.vramMiB ?? 81_920;
  const offer: Offer = {
    provider: spec.provider.address,
    machineId: spec.machineId,
    model: modelHash(spec.model),
    pricePerUnitSecond: spec.pricePerUnitSecond,
    minBidPerUnitSecond: spec.minBidPerUnitSecond ?? 0n,
    minDuration: spec.minDuration ?? 60,
    maxDuration: spec.maxDuration ?? 86_400,
    collateralBps: 2000,
    startWindow: 300,
    nonce: BigInt(spec.seq ?? 1),
    expiry: spec.at + (spec.expiresIn ?? 3600),
    renter: ANY_RENTER,
  };
  const signature = await signOffer(spec.provider, domain, offer);
  const attestations = [];
  const verifiedAttestations: VerifiedAttestation[] = [];
  if (spec.attestor) {
    const attestation: Attestation = {
      provider: spec.provider.address,
      machineId: spec.machineId,
      model: offer.model,
      units,
      vramMiB,
      throughput: 123_456_789n,
      challengeId: `0x${"00".repeat(32)}`,
      root: `0x${"00".repeat(32)}`,
      gpus: `0x${"00".repeat(32)}`,
      cc: spec.cc ?? `0x${"00".repeat(32)}`,
      failures: spec.failures ?? 0,
      lastFailureAt: spec.lastFailureAt ?? 0,
      issuedAt: spec.at - 60,
      expiry: spec.at + 24 * 3600,
    };
    attestations.push(await signAttestation(spec.attestor, domain, attestation));
    verifiedAttestations.push({ attestor: spec.attestor.address, attestation });
  }
  const onDemandUnits = spec.onDemandUnits ?? 0;
  const interruptibleUnits = spec.interruptibleUnits ?? 0;
  // The provider node's libp2p key, derived from the wallet address so demo data is stable.
  const peerKey = await generateKeyPairFromSeed("Ed25519", hexToBytes(keccak256(spec.provider.address)));
  const message = await signOfferMessage(
    {
      v: 1,
      offer,
      signature,
      machine: {
        model: spec.model,
        units,
        vramMiB,
        interconnect: spec.interconnect ?? "nvlink",
        region: spec.region ?? "eu-west",
        cluster: spec.cluster ?? ZERO32,
      },
      capacity: {
        freeUnits: spec.freeUnits ?? Math.max(0, units - onDemandUnits - interruptibleUnits),
        onDemandUnits,
        interruptibleUnits,
        lowestInterruptibleBid: interruptibleUnits > 0 ? (spec.minBidPerUnitSecond ?? 1n) : null,
      },
      attestations,
      peerId: peerIdFromPrivateKey(peerKey).toString(),
      addrs: ["/ip4/127.0.0.1/tcp/4001"],
      seq: spec.seq ?? 1,
      publishedAt: spec.at,
      ...(spec.resources ? { resources: spec.resources } : {}),
      ...(spec.retention ? { retention: spec.retention } : {}),
    },
    peerKey,
  );
  return { message, verifiedAttestations, receivedAt: spec.at };
}

export type OfferSpec = Omit<SignedOfferSpec, "domain" | "provider" | "attestor"> & { provider: HDAccount; attestor?: HDAccount };

/** An offer-book entry signed by the test wallets for the test chain and market. */
export function signedOfferEntry(spec: OfferSpec): Promise<OfferEntry> {
  return signedEntry({ ...spec, domain: { chainId: TEST_CHAIN_ID, verifyingContract: TEST_MARKET } });
}

export function providerRecord(account: HDAccount, machines: ProviderView["machines"], overrides: Partial<ProviderView> = {}): ProviderView {
  return {
    address: account.address,
    peerId: "12D3KooWDpJ7As7BWAwRMfu1VU2WCqNjvq387JEYKDBj4kx6nXTN",
    metadataURI: "https://provider.example/meta.json",
    registered: true,
    stake: 10_000_000_000n,
    locked: 1_000_000_000n,
    unbonding: 0n,
    unlockAt: null,
    freeStake: 9_000_000_000n,
    reputation: { leasesCompleted: 12, faults: 1, unitSecondsDelivered: 3_600_000n, uptimePercent: 92.3 },
    machines,
    ...overrides,
  };
}

export function machineRecord(provider: Address, machineId: number, model: string, units = 8): ProviderView["machines"][number] {
  return {
    machineId,
    provider,
    model,
    modelHash: modelHash(model),
    units,
    vramMiB: 81_920,
    interconnect: "nvlink",
    region: "eu-west",
    cluster: ZERO32,
    onDemandUnits: 2,
    interruptibleUnits: 0,
    idleUnits: units - 2,
    attestations: [],
    offerKey: null,
    attestFailures: 0,
    lastAttestFailureAt: null,
  };
}

export function leaseRecord(id: bigint, renter: Address, provider: Address, overrides: Partial<LeaseView> = {}): LeaseView {
  return {
    id,
    renter,
    provider,
    machineId: 1,
    units: 2,
    pricePerUnitSecond: 1000n,
    collateralBps: 2000,
    deposit: 7_200_000n,
    paid: 0n,
    accrued: 0n,
    status: "Active",
    interruptible: false,
    startDeadline: 1_700_000_300,
    activatedAt: 1_700_000_100,
    stopAt: null,
    end: 1_700_003_700,
    ...overrides,
  };
}

export const accounts = {
  providerA: devnetAccount(1),
  providerB: devnetAccount(2),
  renter: devnetAccount(5),
  attestor: devnetAccount(7),
  stranger: devnetAccount(9),
};

/**
 * Builders of realistic market data for API tests: offer messages signed by devnet wallets
 * (EIP-712, as providers sign them), attestations signed by an attestor wallet, providers and
 * leases in the API's shapes.
 */
import type { Address, HDAccount } from "viem";
import type { LeaseView, ProviderView } from "../../common/api/chain.js";
import { devnetAccount } from "../../common/devnet.js";
import { ANY_RENTER, suanliDomain, suanliTypes, type Attestation, type Offer } from "../../common/eip712.js";
import { modelHash } from "../../common/gpu.js";
import { offerMessageSchema, type OfferMessage } from "../../common/offers/message.js";
import type { OfferEntry } from "../../node/api/source.js";

/** A LeaseMarket address for EIP-712 domains in tests that deploy no market. */
export const TEST_MARKET: Address = "0x5FbDB2315678afecb367f032d93F642f64180aa3";
export const TEST_CHAIN_ID = 31337;
export const ZERO32 = `0x${"0".repeat(64)}` as const;

export type OfferSpec = {
  provider: HDAccount;
  machineId: number;
  model: string;
  units?: number;
  vramMiB?: number;
  region?: string;
  pricePerUnitSecond: bigint;
  minBidPerUnitSecond?: bigint;
  freeUnits?: number;
  onDemandUnits?: number;
  interruptibleUnits?: number;
  minDuration?: number;
  maxDuration?: number;
  seq?: number;
  /** Unix seconds the offer was published and received. */
  at: number;
  expiresIn?: number;
  /** Sign a current attestation with this attestor. */
  attestor?: HDAccount;
  interconnect?: "none" | "nvlink" | "fabric";
  cluster?: `0x${string}`;
};

export async function signedOfferEntry(spec: OfferSpec): Promise<OfferEntry> {
  const domain = suanliDomain(TEST_CHAIN_ID, TEST_MARKET);
  const units = spec.units ?? 8;
  const vramMiB = spec.vramMiB ?? 81_920;
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
  const signature = await spec.provider.signTypedData({ domain, types: { Offer: suanliTypes.Offer }, primaryType: "Offer", message: offer });
  const verifiedAttestations = [];
  const attestations = [];
  if (spec.attestor) {
    const attestation: Attestation = {
      provider: spec.provider.address,
      machineId: spec.machineId,
      model: offer.model,
      units,
      vramMiB,
      throughput: 123_456_789n,
      issuedAt: spec.at - 60,
      expiry: spec.at + 24 * 3600,
    };
    const attestationSignature = await spec.attestor.signTypedData({
      domain,
      types: { Attestation: suanliTypes.Attestation },
      primaryType: "Attestation",
      message: attestation,
    });
    attestations.push({ attestation, signature: attestationSignature });
    verifiedAttestations.push({ attestor: spec.attestor.address, attestation });
  }
  const onDemandUnits = spec.onDemandUnits ?? 0;
  const interruptibleUnits = spec.interruptibleUnits ?? 0;
  // Parse through the gossip schema so test messages are exactly what the book would hold.
  const message: OfferMessage = offerMessageSchema.parse({
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
      freeUnits: spec.freeUnits ?? units - onDemandUnits - interruptibleUnits,
      onDemandUnits,
      interruptibleUnits,
      lowestInterruptibleBid: interruptibleUnits > 0 ? 1n : null,
    },
    attestations,
    peerId: "12D3KooWDpJ7As7BWAwRMfu1VU2WCqNjvq387JEYKDBj4kx6nXTN",
    addrs: ["/ip4/127.0.0.1/tcp/4001"],
    seq: spec.seq ?? 1,
    publishedAt: spec.at,
  });
  return { message, verifiedAttestations, receivedAt: spec.at };
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
    reputation: { leasesCompleted: 12, faults: 1, unitSecondsDelivered: 3_600_000n },
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

/**
 * Demo market data for the devnet (`suanli devnet --api-port 8080 --demo-offers`): offers signed
 * by devnet provider wallets with attestations signed by a devnet attestor wallet, exactly as the
 * offer book would hold them, and a timer that republishes one of them now and then so the
 * explorer's live updates can be watched. Devnet wallets have no value anywhere; none of this runs
 * unless asked for.
 */
import { generateKeyPairFromSeed } from "@libp2p/crypto/keys";
import { peerIdFromPrivateKey } from "@libp2p/peer-id";
import { hexToBytes, keccak256, type Address, type LocalAccount } from "viem";
import type { ProviderView } from "../../common/api/chain.js";
import { devnetAccount } from "../../common/devnet.js";
import { ANY_RENTER, suanliDomain, suanliTypes, type Attestation, type Offer } from "../../common/eip712.js";
import { findGpuModel, modelHash } from "../../common/gpu.js";
import { type Interconnect } from "../../common/offers/message.js";
import { signOfferMessage } from "../../common/offers/sign.js";
import type { InMemoryMarketSource } from "./memory-source.js";
import type { OfferEntry, VerifiedAttestation } from "./source.js";

const ZERO32 = `0x${"0".repeat(64)}` as const;

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
};

/** An offer-book entry with real EIP-712 signatures, parsed through the gossip message schema. */
export async function signedOfferEntry(spec: SignedOfferSpec): Promise<OfferEntry> {
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
  const signature = await spec.provider.signTypedData({ domain, types: { Offer: suanliTypes.Offer }, primaryType: "Offer", message: offer });
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
  // The provider node's libp2p key, derived from the wallet address so demo data is stable.
  const peerKey = await generateKeyPairFromSeed("Ed25519", hexToBytes(keccak256(spec.provider.address)));
  const message = await signOfferMessage({
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
  }, peerKey);
  return { message, verifiedAttestations, receivedAt: spec.at };
}

type DemoMachine = Omit<SignedOfferSpec, "domain" | "provider" | "at" | "attestor"> & { providerIndex: number; attested: boolean };

const DEMO_MACHINES: DemoMachine[] = [
  { providerIndex: 1, machineId: 1, model: "H100-80GB-SXM", units: 8, region: "eu-west", pricePerUnitSecond: 700n, onDemandUnits: 3, attested: true },
  { providerIndex: 1, machineId: 2, model: "A100-80GB", units: 8, region: "eu-west", pricePerUnitSecond: 420n, minBidPerUnitSecond: 150n, interruptibleUnits: 2, attested: true },
  { providerIndex: 2, machineId: 3, model: "A100-80GB", units: 4, region: "us-east", pricePerUnitSecond: 380n, attested: false },
  { providerIndex: 2, machineId: 4, model: "L40S-48GB", units: 4, region: "us-east", pricePerUnitSecond: 250n, onDemandUnits: 1, attested: true },
  { providerIndex: 3, machineId: 5, model: "RTX4090-24GB", units: 2, region: "ap-south", pricePerUnitSecond: 95n, interconnect: "none", attested: true },
  { providerIndex: 3, machineId: 6, model: "H200-141GB", units: 8, region: "ap-south", pricePerUnitSecond: 950n, onDemandUnits: 6, attested: true },
];
const ATTESTOR_INDEX = 7;

/** Fills the source with the demo providers and their offers, and lets it sign reservations for them. */
export async function seedDemoMarket(
  source: InMemoryMarketSource,
  options: { domain: SignedOfferSpec["domain"]; nowSeconds: number },
): Promise<void> {
  const attestor = devnetAccount(ATTESTOR_INDEX);
  const byProvider = new Map<number, ProviderView["machines"]>();
  for (const machine of DEMO_MACHINES) {
    const provider = devnetAccount(machine.providerIndex);
    source.addProviderSigner(provider);
    const { providerIndex: _index, attested, ...spec } = machine;
    const entry = await signedOfferEntry({ ...spec, domain: options.domain, provider, at: options.nowSeconds, attestor: attested ? attestor : undefined });
    source.putOffer(entry);
    const { machine: declared, capacity } = entry.message;
    const list = byProvider.get(machine.providerIndex) ?? [];
    list.push({
      machineId: machine.machineId,
      provider: provider.address,
      model: declared.model,
      modelHash: entry.message.offer.model,
      units: declared.units,
      vramMiB: declared.vramMiB,
      interconnect: declared.interconnect,
      region: declared.region,
      cluster: declared.cluster,
      onDemandUnits: capacity.onDemandUnits,
      interruptibleUnits: capacity.interruptibleUnits,
      idleUnits: capacity.freeUnits,
      attestations: entry.verifiedAttestations.map(({ attestor: signer, attestation }) => ({
        attestor: signer,
        units: attestation.units,
        vramMiB: attestation.vramMiB,
        throughput: attestation.throughput,
        issuedAt: attestation.issuedAt,
        expiry: attestation.expiry,
        current: attestation.expiry > options.nowSeconds,
      })),
      offerKey: null,
    });
    byProvider.set(machine.providerIndex, list);
  }
  for (const [index, machines] of byProvider) {
    const stake = BigInt(index) * 5_000_000_000n;
    source.putProvider({
      address: devnetAccount(index).address,
      peerId: "12D3KooWDpJ7As7BWAwRMfu1VU2WCqNjvq387JEYKDBj4kx6nXTN",
      metadataURI: `devnet://provider-${index}`,
      registered: true,
      stake,
      locked: stake / 10n,
      unbonding: 0n,
      unlockAt: null,
      freeStake: stake - stake / 10n,
      reputation: { leasesCompleted: 10 * index, faults: index - 1, unitSecondsDelivered: BigInt(index) * 360_000n },
      machines,
    });
  }
}

/**
 * Republishes one demo offer every `intervalMs` with a slightly different price and free capacity,
 * as providers do when their state changes. Returns a function that stops it.
 */
export function startDemoActivity(
  source: InMemoryMarketSource,
  options: { domain: SignedOfferSpec["domain"]; intervalMs: number; nowSeconds: () => number },
): () => void {
  const attestor = devnetAccount(ATTESTOR_INDEX);
  let seq = 1;
  let turn = 0;
  const timer = setInterval(() => {
    const machine = DEMO_MACHINES[turn++ % DEMO_MACHINES.length];
    seq += 1;
    const { providerIndex, attested, ...spec } = machine;
    const drift = BigInt(90 + Math.floor(Math.random() * 21)); // 90..110 %
    const units = spec.units ?? 8;
    const used = Math.floor(Math.random() * (units + 1));
    void signedOfferEntry({
      ...spec,
      domain: options.domain,
      provider: devnetAccount(providerIndex),
      at: options.nowSeconds(),
      seq,
      pricePerUnitSecond: (spec.pricePerUnitSecond * drift) / 100n,
      onDemandUnits: used,
      interruptibleUnits: 0,
      attestor: attested ? attestor : undefined,
    }).then((entry) => source.putOffer(entry));
  }, options.intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}

/**
 * Providers, machines, attestors and signed offer messages for tests and benchmarks. Signing
 * goes through libsecp256k1 (signDigest) so a benchmark can build thousands of distinct offers
 * quickly; the bytes are the same as a viem account's signature.
 */
import { generateKeyPair } from "@libp2p/crypto/keys";
import type { PrivateKey } from "@libp2p/interface";
import { peerIdFromPrivateKey } from "@libp2p/peer-id";
import { type Address, type Hex } from "viem";
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from "viem/accounts";
import { TypedDataRecoverer, signDigest } from "../../common/eip712-recover.js";
import { ANY_RENTER, type Attestation, type Offer } from "../../common/eip712.js";
import { modelHash } from "../../common/gpu.js";
import type { MachineRecord } from "../../common/offers/chain-view.js";
import type { Interconnect, OfferMessage, SignedAttestation } from "../../common/offers/message.js";
import { signOfferMessage } from "../../common/offers/sign.js";
import type { MemoryChainView } from "./memory-chain-view.js";

export const TEST_CHAIN_ID = 31337;
export const TEST_MARKET: Address = "0x5FbDB2315678afecb367f032d93F642f64180aa3";
export const ZERO_CLUSTER: Hex = `0x${"00".repeat(32)}`;

const recoverer = new TypedDataRecoverer(TEST_CHAIN_ID, TEST_MARKET);

export type Signer = { privateKey: Hex; account: PrivateKeyAccount; address: Address };

export function createSigner(): Signer {
  const privateKey = generatePrivateKey();
  const account = privateKeyToAccount(privateKey);
  return { privateKey, account, address: account.address };
}

export type ProviderFixture = Signer & { peerKey: PrivateKey; peerId: string };

/** A provider wallet plus the libp2p key of its node (pass the host's key to publish from a host). */
export async function createProvider(peerKey?: PrivateKey): Promise<ProviderFixture> {
  const key = peerKey ?? (await generateKeyPair("Ed25519"));
  return { ...createSigner(), peerKey: key, peerId: peerIdFromPrivateKey(key).toString() };
}

export type MachineSpec = {
  machineId: number;
  model: string;
  units: number;
  vramMiB: number;
  interconnect: Interconnect;
  region: string;
  cluster: Hex;
};

export function machineSpec(machineId: number, overrides: Partial<MachineSpec> = {}): MachineSpec {
  return { machineId, model: "A100-80GB", units: 8, vramMiB: 81_920, interconnect: "nvlink", region: "eu-west", cluster: ZERO_CLUSTER, ...overrides };
}

export function machineRecord(owner: Address, spec: MachineSpec): MachineRecord {
  return {
    owner,
    model: modelHash(spec.model),
    units: spec.units,
    vramMiB: spec.vramMiB,
    interconnect: spec.interconnect,
    region: spec.region,
    cluster: spec.cluster,
  };
}

/** Registers the provider with stake and declares its machines on the in-memory chain. */
export function registerOnChain(chain: MemoryChainView, provider: ProviderFixture, machines: MachineSpec[], freeStake = 10n ** 12n): void {
  chain.registerProvider(provider.address, provider.peerId, freeStake);
  for (const spec of machines) chain.declareMachine(spec.machineId, machineRecord(provider.address, spec));
}

export function nowSec(): number {
  return Math.floor(Date.now() / 1000);
}

export function signAttestationFast(attestor: Signer, attestation: Attestation): SignedAttestation {
  const digest = recoverer.digest("Attestation", attestation);
  return { attestation, signature: signDigest(digest, attestor.privateKey) };
}

/** A valid attestation of `spec` by `attestor`, expiring in `ttlSec`, with a measured `throughput` (int8 ops/s) and the GPUs it verified by CC evidence (`cc`, default none). */
export function attest(attestor: Signer, provider: Address, spec: MachineSpec, ttlSec = 3_600, throughput = 312_000n, cc: Hex = `0x${"00".repeat(32)}`): SignedAttestation {
  const now = nowSec();
  return signAttestationFast(attestor, {
    provider,
    machineId: spec.machineId,
    model: modelHash(spec.model),
    units: spec.units,
    vramMiB: spec.vramMiB,
    throughput,
    challengeId: `0x${"00".repeat(32)}`,
    root: `0x${"00".repeat(32)}`,
    gpus: `0x${"00".repeat(32)}`,
    cc,
    failures: 0,
    lastFailureAt: 0,
    issuedAt: now - 10,
    expiry: now + ttlSec,
  });
}

export type OfferDraft = {
  seq?: number;
  pricePerUnitSecond?: bigint;
  minDuration?: number;
  maxDuration?: number;
  collateralBps?: number;
  nonce?: bigint;
  expiry?: number;
  publishedAt?: number;
  freeUnits?: number;
  attestations?: SignedAttestation[];
  addrs?: string[];
  /** Sign the Offer with this key instead of the provider's. */
  offerSigner?: Signer;
  /** The provider's sealing key published with the offer. */
  sealingKey?: { publicKey: string; expiresAt: number; signature: `0x${string}` };
  /** Sign the message with this libp2p key instead of the provider node's. */
  peerKey?: PrivateKey;
  /** Override the whole Offer after defaults (for malformed cases). */
  offer?: Partial<Offer>;
};

/** A complete, signed offer message for one machine of `provider`. */
export async function buildOfferMessage(provider: ProviderFixture, spec: MachineSpec, draft: OfferDraft = {}): Promise<OfferMessage> {
  const now = nowSec();
  const offer: Offer = {
    provider: provider.address,
    machineId: spec.machineId,
    model: modelHash(spec.model),
    pricePerUnitSecond: draft.pricePerUnitSecond ?? 1_000n,
    minBidPerUnitSecond: 0n,
    minDuration: draft.minDuration ?? 60,
    maxDuration: draft.maxDuration ?? 86_400,
    collateralBps: draft.collateralBps ?? 1_000,
    startWindow: 300,
    nonce: draft.nonce ?? 1n,
    expiry: draft.expiry ?? now + 600,
    renter: ANY_RENTER,
    ...draft.offer,
  };
  const signature = signDigest(recoverer.digest("Offer", offer), (draft.offerSigner ?? provider).privateKey);
  return signOfferMessage(
    {
      v: 1,
      offer,
      signature,
      machine: { model: spec.model, units: spec.units, vramMiB: spec.vramMiB, interconnect: spec.interconnect, region: spec.region, cluster: spec.cluster },
      capacity: { freeUnits: draft.freeUnits ?? spec.units, onDemandUnits: 0, interruptibleUnits: 0, lowestInterruptibleBid: null },
      attestations: draft.attestations ?? [],
      peerId: provider.peerId,
      addrs: draft.addrs ?? ["/ip4/127.0.0.1/tcp/4001"],
      seq: draft.seq ?? 1,
      publishedAt: draft.publishedAt ?? now,
      ...(draft.sealingKey ? { sealingKey: draft.sealingKey } : {}),
    },
    draft.peerKey ?? provider.peerKey,
  );
}

/**
 * The offer message that providers gossip on `/suanli/<chainId>/offers/1`: the EIP-712 Offer the
 * LeaseMarket verifies, the machine as declared on-chain, a free-capacity snapshot, hardware
 * attestations and a sequence number. JSON on the wire; bigints travel as decimal strings.
 *
 * The EIP-712 signature covers only the Offer. Everything else (sequence number, capacity,
 * addresses) is covered by `peerSignature`: an Ed25519 signature by the libp2p key of `peerId`,
 * which receivers require to be the peer id the provider registered on-chain. So nobody but the
 * provider's own node can replay an offer with a higher sequence number or fake its capacity, and
 * any node can relay a message verbatim (gossip, the offers-sync protocol) without re-signing.
 */
import { z } from "zod";
import type { Attestation, Offer } from "../eip712.js";
import { stringifyPlain } from "../json.js";
import { addressSchema, bytes32Schema, signatureSchema } from "../schemas.js";
import { sealingKeySchema } from "../sealed.js";
import { leaseChecksSchema } from "../attest/lease-checks.js";

/** Messages larger than this are dropped before parsing. */
export const OFFER_MESSAGE_MAX_BYTES = 16 * 1024;

/** The gossipsub topic of a chain's offers. */
export function offersTopic(chainId: number): string {
  return `/suanli/${chainId}/offers/1`;
}

const uintBits = (bits: number) => {
  const limit = 2n ** BigInt(bits);
  return (
    z
      // Strings first: that is what the wire carries, and a union tries its options in order.
      .union([z.string().regex(/^\d{1,78}$/, "expected a decimal integer string"), z.bigint(), z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER)])
      .transform((value) => BigInt(value))
      .refine((value) => value < limit, { message: `must fit in uint${bits}` })
  );
};
const uint32 = z
  .number()
  .int()
  .min(0)
  .max(2 ** 32 - 1);
const uint16 = z
  .number()
  .int()
  .min(0)
  .max(2 ** 16 - 1);

export const offerWireSchema = z.strictObject({
  provider: addressSchema,
  machineId: uint32.min(1),
  model: bytes32Schema,
  pricePerUnitSecond: uintBits(96),
  minBidPerUnitSecond: uintBits(96),
  minDuration: uint32,
  maxDuration: uint32,
  collateralBps: uint16,
  startWindow: uint32,
  nonce: uintBits(64),
  expiry: uint32,
  renter: addressSchema,
}) satisfies z.ZodType<Offer, unknown>;

export const attestationWireSchema = z.strictObject({
  provider: addressSchema,
  machineId: uint32.min(1),
  model: bytes32Schema,
  units: uint16,
  vramMiB: uint32,
  throughput: uintBits(64),
  issuedAt: uint32,
  expiry: uint32,
  challengeId: bytes32Schema,
  root: bytes32Schema,
  gpus: bytes32Schema,
  cc: bytes32Schema,
  failures: uint16,
  lastFailureAt: uint32,
}) satisfies z.ZodType<Attestation, unknown>;

export const signedAttestationSchema = z.strictObject({
  attestation: attestationWireSchema,
  /** The attestor's signature; the signer must hold ATTESTOR_ROLE on-chain. */
  signature: signatureSchema,
});
export type SignedAttestation = z.output<typeof signedAttestationSchema>;

export const interconnectSchema = z.enum(["none", "nvlink", "fabric"]);
export type Interconnect = z.output<typeof interconnectSchema>;
/** On-chain encoding of the interconnect (ProviderRegistry machine field). */
export const INTERCONNECT_CODES: Record<Interconnect, number> = { none: 0, nvlink: 1, fabric: 2 };

/**
 * What each leased unit (GPU) comes with on the provider's host, declared by its node and
 * enforced by its runtime: a lease of N units gets N times these (CPU cores by `taskset` and a
 * CPU quota, memory by a cgroup or RLIMIT_AS / `--memory`, disk for its workspace). Per unit,
 * not per machine, so that any split of a machine (or of a cluster) is sized the same way.
 */
export const hostResourcesSchema = z.strictObject({
  cpuCoresPerUnit: uint16.min(1),
  memoryMiBPerUnit: uint32.min(1),
  diskMiBPerUnit: uint32.min(1),
});
export type HostResources = z.output<typeof hostResourcesSchema>;

/** The longest output retention a provider may state: 90 days (provider.outputs.retentionSeconds's bound). */
export const MAX_OUTPUT_RETENTION_SECONDS = 7_776_000;

/**
 * How long the provider keeps what a lease leaves behind (docs/data.md "Retention"): its output
 * folder, downloadable and pinned by CID, for `outputSeconds` after the task ends
 * (provider.outputs.retentionSeconds; 0: not kept), and its checkpoints (the newest two CIDs
 * pinned, every signed record served) for `checkpointSeconds` after the task ends
 * (data.checkpointRetentionSeconds; stated only by a provider whose tasks can checkpoint).
 */
export const dataRetentionSchema = z.strictObject({
  outputSeconds: z.number().int().min(0).max(MAX_OUTPUT_RETENTION_SECONDS),
  checkpointSeconds: z.number().int().min(0).max(MAX_OUTPUT_RETENTION_SECONDS).optional(),
});
export type DataRetention = z.output<typeof dataRetentionSchema>;

export const offerMessageSchema = z.strictObject({
  v: z.literal(1),
  offer: offerWireSchema,
  /** The provider's EIP-712 signature of `offer`. */
  signature: signatureSchema,
  /** The machine as declared on-chain; receivers check it against the registry. */
  machine: z.strictObject({
    /** Canonical GPU model name; keccak256(model) must equal offer.model. */
    model: z.string().min(1).max(64),
    units: uint16.min(1),
    vramMiB: uint32,
    interconnect: interconnectSchema,
    region: z.string().min(1).max(32),
    /** Machines sharing a declared fast interconnect share a cluster id; zero when standalone. */
    cluster: bytes32Schema,
  }),
  /** Free-capacity snapshot at publication. */
  capacity: z.strictObject({
    freeUnits: uint16,
    onDemandUnits: uint16,
    interruptibleUnits: uint16,
    /** Lowest bid among running interruptible leases (an on-demand renter may preempt them). */
    lowestInterruptibleBid: uintBits(96).nullable(),
  }),
  attestations: z.array(signedAttestationSchema).max(8),
  /** The provider's libp2p peer id and dialable addresses, for the reserve protocol. */
  peerId: z.string().min(1).max(128),
  addrs: z.array(z.string().min(1).max(256)).max(8),
  /** Strictly increasing per (provider, machineId): receivers drop anything not newer than held. */
  seq: z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER),
  publishedAt: uint32,
  /**
   * Absent (or 0): the machine's on-demand offer. 1..8: a reserved-term tier, an offer of its
   * own (its min duration is the tier's threshold, its price the tier's discounted price) beside
   * it. Absent rather than 0 on the wire, so on-demand messages sign exactly as before tiers.
   */
  tier: z.number().int().min(1).max(8).optional(),
  /**
   * The provider's sealing key for sealed secrets (common/sealed.ts): the public key and its
   * wallet's EIP-191 signature over it, so a renter or dApp can seal to it before reserving.
   * Covered by `peerSignature` too; receivers drop a message whose key the provider's wallet did
   * not sign. Absent from providers before it (and then not in what their peer signature signs).
   */
  sealingKey: sealingKeySchema.optional(),
  /**
   * The in-lease capacity checks the provider accepts (common/attest/lease-checks.ts): attestors
   * may spend up to `shareBps` of a lease's elapsed time challenging the leased machine, paid by
   * the provider. Absent (providers before it): DEFAULT_LEASE_CHECK_SHARE_BPS.
   */
  leaseChecks: leaseChecksSchema.optional(),
  /**
   * CPU cores, memory and disk per leased unit (hostResourcesSchema), as its runtime enforces them.
   * Covered by `peerSignature`. Absent: the node declares none (older nodes, or bounds turned
   * off), and requests that ask for any of them do not match it.
   */
  resources: hostResourcesSchema.optional(),
  /**
   * How long the provider keeps a lease's output after its task ends (dataRetentionSchema).
   * Covered by `peerSignature`. Absent: providers before it (the output manifest of a running task
   * still states its policy).
   */
  retention: dataRetentionSchema.optional(),
  /** Ed25519 signature by the key of `peerId` over `offerSigningBytes(message)`. */
  peerSignature: z.string().regex(/^0x[0-9a-fA-F]{128}$/, "expected a 64-byte Ed25519 signature as 0x followed by 128 hex digits"),
});
export type OfferMessage = z.output<typeof offerMessageSchema>;
/** An offer message before its peer signature. */
export const unsignedOfferMessageSchema = offerMessageSchema.omit({ peerSignature: true });
export type UnsignedOfferMessage = z.output<typeof unsignedOfferMessageSchema>;
export type UnsignedOfferMessageInput = z.input<typeof unsignedOfferMessageSchema>;

/** Domain separation of the peer signature: these bytes can never be mistaken for another message. */
const PEER_SIGNATURE_PREFIX = "suanli/offer-message/1\n";

/**
 * The bytes `peerSignature` signs: a prefix plus the canonical JSON of the message without its
 * peer signature. Canonical because `message` must be a schema output: zod emits keys in schema
 * order, addresses checksummed and bigints as decimal strings, whatever the sender's spelling.
 */
export function offerSigningBytes(message: UnsignedOfferMessage | OfferMessage): Uint8Array {
  return new TextEncoder().encode(offerSigningText(message));
}

/** `offerSigningBytes` as text, for callers with a faster UTF-8 encoder at hand (Node's Buffer). */
export function offerSigningText(message: UnsignedOfferMessage | OfferMessage): string {
  const { peerSignature: _omit, ...unsigned } = message as OfferMessage;
  return PEER_SIGNATURE_PREFIX + stringifyPlain(unsigned);
}

/** Reserved-term tiers a machine may publish beside its on-demand offer (the schema's bound). */
export const MAX_OFFER_TIER = 8;

/**
 * The book key of an offer: one live offer per provider machine and tier
 * (`<provider>:<machineId>` for the on-demand offer, `<provider>:<machineId>:<tier>` for a tier).
 */
export function offerKey(provider: string, machineId: number, tier = 0): string {
  return tier === 0 ? `${provider.toLowerCase()}:${machineId}` : `${provider.toLowerCase()}:${machineId}:${tier}`;
}

/** The book key of a message. */
export function messageKey(message: { offer: { provider: string; machineId: number }; tier?: number | undefined }): string {
  return offerKey(message.offer.provider, message.offer.machineId, message.tier ?? 0);
}

/** Encodes a message for the wire (bigints as decimal strings). */
export function encodeOfferMessage(message: OfferMessage): Uint8Array {
  return new TextEncoder().encode(stringifyPlain(message));
}

/** Price per GPU-hour in base units (what users read) from a price per unit-second. */
export function pricePerUnitHour(pricePerUnitSecond: bigint): bigint {
  return pricePerUnitSecond * 3600n;
}

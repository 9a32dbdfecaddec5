/**
 * Offers as the HTTP API shows them: the gossiped offer message flattened for tables, with the
 * signed EIP-712 Offer kept whole so that a front end can open a lease with it directly.
 */
import { sealingPublicKeySchema } from "../sealed.js";
import { reputationSchema } from "./reputation.js";
import { z } from "zod";
import type { Offer } from "../eip712.js";
import {
  addressWireSchema,
  amountSchema,
  bytes32WireSchema,
  gpuModelQuery,
  interconnectWireSchema,
  pageQueryShape,
  pageSchema,
  queryAddress,
  queryAmount,
  queryBool,
  queryInt,
  queryPositiveInt,
  regionQuery,
  signatureWireSchema,
  uint16Schema,
  uint32Schema,
  unixSecondsSchema,
} from "./primitives.js";

/** The EIP-712 Offer as signed by the provider (what `LeaseMarket.openLease` takes). */
export const signedOfferSchema = z.strictObject({
  provider: addressWireSchema,
  machineId: uint32Schema,
  model: bytes32WireSchema,
  pricePerUnitSecond: amountSchema,
  minBidPerUnitSecond: amountSchema,
  minDuration: uint32Schema,
  maxDuration: uint32Schema,
  collateralBps: uint16Schema,
  startWindow: uint32Schema,
  nonce: amountSchema,
  expiry: unixSecondsSchema,
  renter: addressWireSchema,
}) satisfies z.ZodType<Offer, unknown>;

/** A hardware attestation of a machine, with the attestor that signed it (verified by the node). */
export const attestationViewSchema = z.strictObject({
  attestor: addressWireSchema,
  units: uint16Schema,
  vramMiB: uint32Schema,
  throughput: amountSchema.describe("Measured throughput of the proof-of-capacity challenge (integer ops per second)."),
  issuedAt: unixSecondsSchema,
  expiry: unixSecondsSchema,
  current: z.boolean().describe("False once `expiry` has passed."),
  gpuIdentityVerified: z
    .boolean()
    .describe(
      "True when the attestor verified, per unit, NVIDIA-signed confidential-computing evidence of a distinct physical GPU of the claimed chip (Hopper and later), answering its challenge with the host reporting CC mode on and no certificate revoked by the CRLs it holds (docs/attestation.md). It proves the GPUs' identity, not that a task runs confidentially.",
    ),
  cc: bytes32WireSchema.describe(
    "keccak256 of the verified GPUs, `<chip>:<deviceId>` per unit in unit order joined by newlines; zero when none. The same value on two machines' attestations means the same GPUs.",
  ),
  failures: uint16Schema.describe(
    'Failed challenges of the machine the attestor held when it signed (its failure history, the last week by default; only time clears it, a pass does not): a pass after failures says so (docs/attestation-threats.md, "Retrying").',
  ),
  lastFailureAt: uint32Schema.describe("When the latest of those failures ended (unix seconds); 0 with none."),
});
export type AttestationView = z.output<typeof attestationViewSchema>;

export const offerViewSchema = z.strictObject({
  key: z
    .string()
    .describe("`<provider lowercase>:<machineId>` (on-demand) or `<provider lowercase>:<machineId>:<tier>` (a reserved-term tier): one live offer per provider machine and tier."),
  provider: addressWireSchema,
  machineId: uint32Schema,
  tier: z
    .number()
    .int()
    .min(1)
    .max(8)
    .optional()
    .describe(
      "Reserved-term tier 1..8: an offer of its own beside the machine's on-demand one (its minDuration the tier's term, its price the tier's discounted price). Absent for the on-demand offer.",
    ),
  model: z.string().describe("Canonical GPU model name (common/gpu.ts); a MIG slice is `<model>/<profile>`."),
  sealingKey: z
    .strictObject({ publicKey: sealingPublicKeySchema, expiresAt: unixSecondsSchema, signature: signatureWireSchema })
    .optional()
    .describe(
      "The provider's current encryption key for sealed secrets, when it expires (unix seconds: the provider rotates it) and its wallet's EIP-191 signature over both (common/sealed.ts), as published with its offers (checked by this node); seal to it only after checking the signature and the expiry yourself.",
    ),
  modelHash: bytes32WireSchema.describe("keccak256 of the canonical name, as on-chain."),
  units: uint16Schema,
  vramMiB: uint32Schema,
  interconnect: interconnectWireSchema,
  region: z.string(),
  cluster: bytes32WireSchema.describe("Machines sharing a fast interconnect share a cluster id; zero when standalone."),
  pricePerUnitSecond: amountSchema.describe("Token base units per unit-second (on-demand)."),
  pricePerUnitHour: amountSchema.describe('pricePerUnitSecond × 3600: what a person reads as "per GPU-hour".'),
  minBidPerUnitSecond: amountSchema.describe("Lowest interruptible bid accepted; 0 when the machine sells no interruptible capacity."),
  minDuration: uint32Schema,
  maxDuration: uint32Schema,
  collateralBps: uint16Schema,
  startWindow: uint32Schema,
  resources: z
    .strictObject({ cpuCoresPerUnit: uint16Schema, memoryMiBPerUnit: uint32Schema, diskMiBPerUnit: uint32Schema })
    .optional()
    .describe(
      'CPU cores, host memory (MiB) and disk (MiB) each unit comes with, as the provider\'s runtime enforces them: a lease of N units gets N times these (docs/provider.md, "Resources per GPU"). Absent when the provider declares none (its node runs without resource bounds, or predates them).',
    ),
  retention: z
    .strictObject({ outputSeconds: uint32Schema, checkpointSeconds: uint32Schema.optional() })
    .optional()
    .describe(
      'How long the provider keeps a lease\'s output folder (downloadable, and pinned by CID when its data plane is on) after the task ends; 0: not kept; and, as checkpointSeconds, its checkpoints (records served, newest two CIDs pinned), stated only when its tasks can checkpoint (docs/data.md, "Retention"). Absent when the provider predates it.',
    ),
  leaseChecks: z
    .strictObject({ shareBps: uint16Schema })
    .describe(
      'In-lease capacity checks the offer accepts: attestors may challenge the leased machine without notice for up to shareBps of the lease\'s elapsed time, paid by the provider (docs/attestation.md, "In-lease checks"); the default share when the provider announced none.',
    ),
  reputation: reputationSchema.optional().describe("The provider's on-chain reputation counters and uptime, as this node last read them; absent until it has read them."),
  expiry: unixSecondsSchema,
  capacity: z.strictObject({
    freeUnits: uint16Schema,
    onDemandUnits: uint16Schema,
    interruptibleUnits: uint16Schema,
    lowestInterruptibleBid: amountSchema.nullable().describe("Lowest bid among running interruptible leases (an on-demand renter may preempt them)."),
  }),
  attested: z.boolean().describe("True when at least one current attestation, verified by this node, covers the machine."),
  gpuIdentityVerified: z
    .boolean()
    .describe(
      "True when the attestations that count for the machine (a quorum of distinct attestors where this node applies one) verified its GPUs' identity by NVIDIA-signed confidential-computing evidence (see the attestation's `gpuIdentityVerified`; not a confidential VM).",
    ),
  attestations: z.array(attestationViewSchema),
  attestFailures: uint32Schema.describe(
    "The machine's failed challenges that count now: those within the last week that its attestations carry (`failures`) or that staked attestors announced in signed failure notices, per attestor the larger, summed over attestors (docs/attestation.md). What a match request's `maxAttestFailures` bounds.",
  ),
  attestFailuresUntil: z
    .array(z.strictObject({ until: unixSecondsSchema, failures: uint32Schema.min(1) }))
    .describe(
      "When those failures age out, ascending: `failures` of them count until `until` (unix seconds), so `attestFailures` drops by that many as each passes, without a new offer.",
    ),
  lastAttestFailureAt: unixSecondsSchema.nullable().describe("When the latest of those failures was observed (unix seconds); null with none."),
  peerId: z.string(),
  addrs: z.array(z.string()),
  seq: z.number().int().nonnegative(),
  publishedAt: unixSecondsSchema,
  receivedAt: unixSecondsSchema.describe("When this node received the current version."),
  /** The provider's signed offer, as LeaseMarket.openLease takes it. */
  signed: z.strictObject({ offer: signedOfferSchema, signature: signatureWireSchema }),
});
export type OfferView = z.output<typeof offerViewSchema>;

export const offerSortSchema = z.enum(["price", "-price", "vram", "-vram", "freeUnits", "-freeUnits", "published", "-published"], {
  error: "expected one of price, -price, vram, -vram, freeUnits, -freeUnits, published, -published",
});
export type OfferSort = z.output<typeof offerSortSchema>;

/** Filters of GET /v1/offers. Every filter is optional; all given filters must hold. */
export const offerFilterShape = {
  model: gpuModelQuery.optional().describe("GPU model name or alias (`A100`, `H100-80GB-SXM`); matched on the canonical name."),
  minFreeUnits: queryPositiveInt.optional().describe("At least this many free units (GPUs) on the machine."),
  minVramMiB: queryPositiveInt.optional().describe("At least this much memory per unit, MiB."),
  maxPricePerUnitSecond: queryAmount.optional().describe("At most this price, token base units per unit-second."),
  region: regionQuery.optional().describe("Region label, case-insensitive."),
  attested: queryBool.optional().describe("true: only attested machines; false: only machines without a current attestation."),
  gpuIdentityVerified: queryBool
    .optional()
    .describe("true: only machines whose GPUs' identity the attestations verified by NVIDIA-signed evidence (`gpuIdentityVerified`); false: only machines without it."),
  provider: queryAddress.optional().describe("Only this provider's offers."),
  interruptible: queryBool.optional().describe("true: only machines that sell interruptible capacity."),
  sort: offerSortSchema.default("price").describe("Sort order (default price ascending); `-` sorts descending."),
};

export const offerQuerySchema = z.strictObject({ ...offerFilterShape, ...pageQueryShape });
export type OfferQuery = z.output<typeof offerQuerySchema>;
/** The filter part of an offer query (what a data source receives). */
export type OfferFilter = Omit<OfferQuery, "limit" | "offset">;

export const offerPageSchema = pageSchema(offerViewSchema);
export type OfferPage = z.output<typeof offerPageSchema>;

/** `/v1/offers/{key}`: `<provider>:<machineId>`, or `<provider>:<machineId>:<tier>` for a reserved-term tier. */
export const offerKeyParamsSchema = z.strictObject({
  key: z
    .string()
    .regex(/^0x[0-9a-fA-F]{40}:\d{1,10}(:[1-8])?$/, "expected <provider address>:<machine id>[:<tier 1-8>], e.g. 0xabc…:3")
    .transform((key) => {
      const [provider, machineId, tier] = key.split(":");
      return `${provider!.toLowerCase()}:${Number(machineId)}${tier ? `:${tier}` : ""}`;
    }),
});

/** Machine-id path parameter. */
export const machineIdParamsSchema = z.strictObject({ machineId: queryInt(1, 2 ** 32 - 1) });

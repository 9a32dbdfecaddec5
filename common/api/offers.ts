/**
 * Offers as the HTTP API shows them: the gossiped offer message flattened for tables, with the
 * signed EIP-712 Offer kept whole so that a front end can open a lease with it directly.
 */
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
  /** Measured throughput of the proof-of-capacity challenge (integer ops per second). */
  throughput: amountSchema,
  issuedAt: unixSecondsSchema,
  expiry: unixSecondsSchema,
  /** False once `expiry` has passed. */
  current: z.boolean(),
});
export type AttestationView = z.output<typeof attestationViewSchema>;

export const offerViewSchema = z.strictObject({
  /** `<provider lowercase>:<machineId>`: one live offer per provider machine. */
  key: z.string(),
  provider: addressWireSchema,
  machineId: uint32Schema,
  /** Canonical GPU model name (common/gpu.ts); a MIG slice is `<model>/<profile>`. */
  model: z.string(),
  /** keccak256 of the canonical name, as on-chain. */
  modelHash: bytes32WireSchema,
  units: uint16Schema,
  vramMiB: uint32Schema,
  interconnect: interconnectWireSchema,
  region: z.string(),
  /** Machines sharing a fast interconnect share a cluster id; zero when standalone. */
  cluster: bytes32WireSchema,
  /** Token base units per unit-second (on-demand). */
  pricePerUnitSecond: amountSchema,
  /** pricePerUnitSecond × 3600: what a person reads as "per GPU-hour". */
  pricePerUnitHour: amountSchema,
  /** Lowest interruptible bid accepted; 0 when the machine sells no interruptible capacity. */
  minBidPerUnitSecond: amountSchema,
  minDuration: uint32Schema,
  maxDuration: uint32Schema,
  collateralBps: uint16Schema,
  startWindow: uint32Schema,
  expiry: unixSecondsSchema,
  capacity: z.strictObject({
    freeUnits: uint16Schema,
    onDemandUnits: uint16Schema,
    interruptibleUnits: uint16Schema,
    /** Lowest bid among running interruptible leases (an on-demand renter may preempt them). */
    lowestInterruptibleBid: amountSchema.nullable(),
  }),
  /** True when at least one current attestation, verified by this node, covers the machine. */
  attested: z.boolean(),
  attestations: z.array(attestationViewSchema),
  peerId: z.string(),
  addrs: z.array(z.string()),
  seq: z.number().int().nonnegative(),
  publishedAt: unixSecondsSchema,
  /** When this node received the current version. */
  receivedAt: unixSecondsSchema,
  /** The provider's signed offer, as LeaseMarket.openLease takes it. */
  signed: z.strictObject({ offer: signedOfferSchema, signature: signatureWireSchema }),
});
export type OfferView = z.output<typeof offerViewSchema>;

export const offerSortSchema = z.enum(
  ["price", "-price", "vram", "-vram", "freeUnits", "-freeUnits", "published", "-published"],
  { error: "expected one of price, -price, vram, -vram, freeUnits, -freeUnits, published, -published" },
);
export type OfferSort = z.output<typeof offerSortSchema>;

/** Filters of GET /v1/offers. Every filter is optional; all given filters must hold. */
export const offerFilterShape = {
  /** GPU model name or alias (`A100`, `H100-80GB-SXM`); matched on the canonical name. */
  model: gpuModelQuery.optional(),
  /** At least this many free units (GPUs) on the machine. */
  minFreeUnits: queryPositiveInt.optional(),
  /** At least this much memory per unit, MiB. */
  minVramMiB: queryPositiveInt.optional(),
  /** At most this price, token base units per unit-second. */
  maxPricePerUnitSecond: queryAmount.optional(),
  /** Region label, case-insensitive. */
  region: regionQuery.optional(),
  /** true: only attested machines; false: only machines without a current attestation. */
  attested: queryBool.optional(),
  /** Only this provider's offers. */
  provider: queryAddress.optional(),
  /** true: only machines that sell interruptible capacity. */
  interruptible: queryBool.optional(),
  /** Sort order (default price ascending); `-` sorts descending. */
  sort: offerSortSchema.default("price"),
};

export const offerQuerySchema = z.strictObject({ ...offerFilterShape, ...pageQueryShape });
export type OfferQuery = z.output<typeof offerQuerySchema>;
/** The filter part of an offer query (what a data source receives). */
export type OfferFilter = Omit<OfferQuery, "limit" | "offset">;

export const offerPageSchema = pageSchema(offerViewSchema);
export type OfferPage = z.output<typeof offerPageSchema>;

/** `/v1/offers/{key}`: `<provider>:<machineId>`. */
export const offerKeyParamsSchema = z.strictObject({
  key: z
    .string()
    .regex(/^0x[0-9a-fA-F]{40}:\d{1,10}$/, "expected <provider address>:<machine id>, e.g. 0xabc…:3")
    .transform((key) => {
      const [provider, machineId] = key.split(":");
      return `${provider.toLowerCase()}:${Number(machineId)}`;
    }),
});

/** Machine-id path parameter. */
export const machineIdParamsSchema = z.strictObject({ machineId: queryInt(1, 2 ** 32 - 1) });

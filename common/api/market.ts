/**
 * Market statistics, the match dry-run, reservations, health, node info and error bodies of the
 * HTTP API.
 */
import { z } from "zod";
import type { ReserveRequest } from "../eip712.js";
import { reputationSchema } from "./chain.js";
import { signedOfferSchema } from "./offers.js";
import {
  addressWireSchema,
  amountSchema,
  bytes32WireSchema,
  gpuModelQuery,
  queryInt,
  regionQuery,
  signatureWireSchema,
  uint16Schema,
  uint32Schema,
  unixSecondsSchema,
} from "./primitives.js";

// ---- statistics ----

export const statsQuerySchema = z.strictObject({
  /** One model (name or alias); default: every model seen in the window. */
  model: gpuModelQuery.optional(),
  /** Window start, unix seconds (default: `to` − 24 h). */
  from: queryInt(0, 2 ** 32 - 1).optional(),
  /** Window end, unix seconds (default: now). */
  to: queryInt(0, 2 ** 32 - 1).optional(),
  /** Bucket width in seconds, 60..86400 (default 3600). At most 1000 buckets per window. */
  bucketSeconds: queryInt(60, 86_400).default(3600),
});

/** A statistics window after defaults: what a data source receives. */
export type StatsWindow = { model?: string | undefined; from: number; to: number; bucketSeconds: number };

/** Most buckets one statistics request may ask for. */
export const MAX_STATS_BUCKETS = 1000;

/** Price distribution over offers, token base units per unit-second. */
export const priceSummarySchema = z.strictObject({
  min: amountSchema,
  p10: amountSchema,
  p50: amountSchema,
  p90: amountSchema,
  max: amountSchema,
});
export type PriceSummary = z.output<typeof priceSummarySchema>;

export const statsBucketSchema = z.strictObject({
  /** Bucket start, unix seconds; the bucket covers [start, start + bucketSeconds). */
  start: unixSecondsSchema,
  /** Distinct offers seen in the bucket (their last state in the bucket counts). */
  offers: z.number().int().nonnegative(),
  units: z.number().int().nonnegative(),
  /** Units leased (on-demand + interruptible). */
  usedUnits: z.number().int().nonnegative(),
  /** usedUnits / units, or null without offers. */
  utilization: z.number().min(0).max(1).nullable(),
  price: priceSummarySchema.nullable(),
});
export type StatsBucket = z.output<typeof statsBucketSchema>;

export const modelStatsSchema = z.strictObject({
  model: z.string(),
  /** The live book now. */
  current: z.strictObject({
    offers: z.number().int().nonnegative(),
    units: z.number().int().nonnegative(),
    freeUnits: z.number().int().nonnegative(),
    usedUnits: z.number().int().nonnegative(),
    utilization: z.number().min(0).max(1).nullable(),
    price: priceSummarySchema.nullable(),
  }),
  series: z.array(statsBucketSchema),
});
export type ModelStats = z.output<typeof modelStatsSchema>;

export const marketStatsSchema = z.strictObject({
  from: unixSecondsSchema,
  to: unixSecondsSchema,
  bucketSeconds: z.number().int().positive(),
  models: z.array(modelStatsSchema),
});
export type MarketStats = z.output<typeof marketStatsSchema>;

// ---- match dry-run ----

export const matchRequestSchema = z.strictObject({
  /** GPU model name or alias. */
  model: gpuModelQuery,
  gpuCount: z.number().int().min(1).max(1024),
  /** Minimum memory per GPU, MiB. */
  minVramMiB: z.number().int().positive().optional(),
  /** Lease duration, seconds. */
  duration: z.number().int().positive().max(2 ** 32 - 1),
  /** Highest acceptable price, token base units per unit-second. */
  maxPricePerUnitSecond: amountSchema.optional(),
  /** Interruptible (preemptible) capacity at a bid price instead of on-demand. */
  interruptible: z.boolean().default(false),
  /** The bid per unit-second; required when interruptible. */
  bidPerUnitSecond: amountSchema.optional(),
  region: regionQuery.optional(),
  /** Minimum completed leases minus faults of the provider. */
  minReputation: z.number().int().min(0).optional(),
  /** Only machines with a current hardware attestation (default true). */
  attestedOnly: z.boolean().default(true),
  /** `machine`: all GPUs on one machine; `cluster`: a group of machines on a declared fast interconnect is acceptable. */
  colocation: z.enum(["machine", "cluster"]).default("machine"),
  /** Candidates to return, 1..20 (default 5). */
  limit: z.number().int().min(1).max(20).default(5),
}).superRefine((request, ctx) => {
  if (request.interruptible && request.bidPerUnitSecond === undefined) {
    ctx.addIssue({ code: "custom", path: ["bidPerUnitSecond"], message: "required when interruptible is true" });
  }
  if (request.interruptible && request.bidPerUnitSecond === 0n) {
    ctx.addIssue({ code: "custom", path: ["bidPerUnitSecond"], message: "must be greater than zero" });
  }
});
export type MatchRequest = z.output<typeof matchRequestSchema>;

export const matchCandidateSchema = z.strictObject({
  /** 1 is the best. */
  rank: z.number().int().positive(),
  /** Ranking score (higher is better): effective price first, then reputation and attestation freshness. */
  score: z.number(),
  provider: addressWireSchema,
  /** The machines and units this candidate would lease (one entry unless colocation is `cluster`). */
  allocations: z.array(
    z.strictObject({ offerKey: z.string(), machineId: uint32Schema, units: uint16Schema }),
  ),
  /** Price per unit-second the renter would pay (offer price, or the bid when interruptible). */
  pricePerUnitSecond: amountSchema,
  /** gpuCount × price × duration: the deposit the lease would take. */
  totalCost: amountSchema,
  region: z.string(),
  attested: z.boolean(),
  reputation: reputationSchema.nullable(),
});
export type MatchCandidate = z.output<typeof matchCandidateSchema>;

export const matchResultSchema = z.strictObject({
  matched: z.boolean(),
  candidates: z.array(matchCandidateSchema),
  /** How the book was narrowed down: which constraint removed how many offers, in the order applied. */
  explanation: z.strictObject({
    considered: z.number().int().nonnegative(),
    eliminated: z.array(z.strictObject({ constraint: z.string(), removed: z.number().int().nonnegative(), detail: z.string() })),
    /** What to change to get a match; null when matched. */
    hint: z.string().nullable(),
  }),
});
export type MatchResult = z.output<typeof matchResultSchema>;

// ---- reservations (a signed write) ----

/** The EIP-712 ReserveRequest a renter signs (common/eip712.ts). */
export const reserveRequestWireSchema = z.strictObject({
  renter: addressWireSchema,
  provider: addressWireSchema,
  machineId: uint32Schema.min(1),
  units: uint16Schema.min(1),
  duration: uint32Schema.min(1),
  interruptible: z.boolean(),
  bidPerUnitSecond: amountSchema,
  issuedAt: unixSecondsSchema,
  nonce: bytes32WireSchema,
}) satisfies z.ZodType<ReserveRequest, unknown>;

export const reservationBodySchema = z.strictObject({
  request: reserveRequestWireSchema,
  /** The renter's EIP-712 signature of `request` (domain: Suanli / 1 / chain id / LeaseMarket). */
  signature: signatureWireSchema,
});
export type ReservationBody = z.output<typeof reservationBodySchema>;

export const reserveRefusalSchema = z.enum([
  "no-such-offer",
  "insufficient-capacity",
  "duration-out-of-range",
  "interruptible-not-offered",
  "bid-too-low",
  "provider-unreachable",
  "provider-refused",
]);
export type ReserveRefusal = z.output<typeof reserveRefusalSchema>;

export const reservationAnswerSchema = z.discriminatedUnion("accepted", [
  z.strictObject({
    accepted: z.literal(true),
    /** The provider's acceptance: an Offer bound to the renter, to open the lease with. */
    acceptance: z.strictObject({ offer: signedOfferSchema, signature: signatureWireSchema }),
    /** The provider holds the units until this time. */
    holdUntil: unixSecondsSchema,
  }),
  z.strictObject({
    accepted: z.literal(false),
    reason: reserveRefusalSchema,
    message: z.string(),
  }),
]);
export type ReservationAnswer = z.output<typeof reservationAnswerSchema>;

// ---- node ----

export const healthStatusSchema = z.enum(["ok", "degraded", "down"]);
export type HealthStatus = z.output<typeof healthStatusSchema>;

export const healthCheckSchema = z.strictObject({
  /** `chain`, `offers`, `p2p`, ... */
  name: z.string(),
  status: healthStatusSchema,
  detail: z.string().nullable(),
});
export type HealthCheck = z.output<typeof healthCheckSchema>;

export const healthSchema = z.strictObject({
  /** The worst of the checks. 503 goes with `down`. */
  status: healthStatusSchema,
  version: z.string(),
  uptimeSeconds: z.number().int().nonnegative(),
  checks: z.array(healthCheckSchema),
});
export type Health = z.output<typeof healthSchema>;

export const nodeInfoSchema = z.strictObject({
  version: z.string(),
  chainId: z.number().int().positive(),
  contracts: z.strictObject({
    token: addressWireSchema,
    registry: addressWireSchema.nullable(),
    market: addressWireSchema.nullable(),
  }),
  token: z.strictObject({ symbol: z.string(), decimals: z.number().int().min(0).max(36) }),
  /** Canonical GPU models, for filter menus. */
  gpuModels: z.array(z.strictObject({ name: z.string(), vramMiB: z.number().int().positive() })),
  /** Whether POST /v1/reservations is served (it needs a LeaseMarket for the EIP-712 domain). */
  reservations: z.boolean(),
});
export type NodeInfo = z.output<typeof nodeInfoSchema>;

export const apiErrorSchema = z.strictObject({
  error: z.strictObject({
    /** Stable error name to match on (`InvalidInputError`, `OfferNotFoundError`, `RateLimitedError`, ...). */
    name: z.string(),
    message: z.string(),
    /** For 400: each offending field (dotted path) and what was wrong. */
    fields: z.array(z.strictObject({ path: z.string(), message: z.string() })).optional(),
  }),
});
export type ApiErrorBody = z.output<typeof apiErrorSchema>;

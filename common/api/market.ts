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
  model: gpuModelQuery.optional().describe("One model (name or alias); default: every model seen in the window."),
  from: queryInt(0, 2 ** 32 - 1).optional().describe("Window start, unix seconds (default: `to` − 24 h)."),
  to: queryInt(0, 2 ** 32 - 1).optional().describe("Window end, unix seconds (default: now)."),
  bucketSeconds: queryInt(60, 86_400).default(3600).describe("Bucket width in seconds, 60..86400 (default 3600). At most 1000 buckets per window."),
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
  start: unixSecondsSchema.describe("Bucket start, unix seconds; the bucket covers [start, start + bucketSeconds)."),
  offers: z.number().int().nonnegative().describe("Distinct offers seen in the bucket (their last state in the bucket counts)."),
  units: z.number().int().nonnegative(),
  usedUnits: z.number().int().nonnegative().describe("Units leased (on-demand + interruptible)."),
  utilization: z.number().min(0).max(1).nullable().describe("usedUnits / units, or null without offers."),
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
  model: gpuModelQuery.describe("GPU model name or alias."),
  gpuCount: z.number().int().min(1).max(1024),
  minVramMiB: z.number().int().positive().optional().describe("Minimum memory per GPU, MiB."),
  duration: z.number().int().positive().max(2 ** 32 - 1).describe("Lease duration, seconds."),
  maxPricePerUnitSecond: amountSchema.optional().describe("Highest acceptable price, token base units per unit-second."),
  interruptible: z.boolean().default(false).describe("Interruptible (preemptible) capacity at a bid price instead of on-demand."),
  bidPerUnitSecond: amountSchema.optional().describe("The bid per unit-second; required when interruptible."),
  region: regionQuery.optional(),
  minReputation: z.number().int().min(0).optional().describe("Minimum completed leases minus faults of the provider."),
  attestedOnly: z.boolean().default(true).describe("Only machines with a current hardware attestation (default true)."),
  colocation: z.enum(["machine", "cluster"]).default("machine").describe("`machine`: all GPUs on one machine; `cluster`: a group of machines on a declared fast interconnect is acceptable."),
  limit: z.number().int().min(1).max(20).default(5).describe("Candidates to return, 1..20 (default 5)."),
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
  rank: z.number().int().positive().describe("1 is the best."),
  score: z.number().describe("Ranking score (higher is better): effective price first, then reputation and attestation freshness."),
  provider: addressWireSchema,
  /** The machines and units this candidate would lease (one entry unless colocation is `cluster`). */
  allocations: z.array(
    z.strictObject({ offerKey: z.string(), machineId: uint32Schema, units: uint16Schema }),
  ),
  pricePerUnitSecond: amountSchema.describe("Price per unit-second the renter would pay (offer price, or the bid when interruptible)."),
  totalCost: amountSchema.describe("gpuCount × price × duration: the deposit the lease would take."),
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
    hint: z.string().nullable().describe("What to change to get a match; null when matched."),
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
  signature: signatureWireSchema.describe("The renter's EIP-712 signature of `request` (domain: Suanli / 1 / chain id / LeaseMarket)."),
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
    holdUntil: unixSecondsSchema.describe("The provider holds the units until this time."),
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
  name: z.string().describe("`chain`, `offers`, `p2p`, ..."),
  status: healthStatusSchema,
  detail: z.string().nullable(),
});
export type HealthCheck = z.output<typeof healthCheckSchema>;

export const healthSchema = z.strictObject({
  status: healthStatusSchema.describe("The worst of the checks. 503 goes with `down`."),
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
  gpuModels: z.array(z.strictObject({ name: z.string(), vramMiB: z.number().int().positive() })).describe("Canonical GPU models, for filter menus."),
  reservations: z.boolean().describe("Whether POST /v1/reservations is served (it needs a LeaseMarket for the EIP-712 domain)."),
});
export type NodeInfo = z.output<typeof nodeInfoSchema>;

export const apiErrorSchema = z.strictObject({
  error: z.strictObject({
    name: z.string().describe("Stable error name to match on (`InvalidInputError`, `OfferNotFoundError`, `RateLimitedError`, ...)."),
    message: z.string(),
    fields: z.array(z.strictObject({ path: z.string(), message: z.string() })).optional().describe("For 400: each offending field (dotted path) and what was wrong."),
  }),
});
export type ApiErrorBody = z.output<typeof apiErrorSchema>;

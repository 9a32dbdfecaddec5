/**
 * Market statistics, the match dry-run, reservations, health, node info and error bodies of the
 * HTTP API.
 */
import { z } from "zod";
import { sealingPublicKeySchema } from "../sealed.js";
import type { ReserveRequest } from "../eip712.js";
import { REFUSAL_REASONS } from "../matching/handshake.js";
import { matchRequestSchema as engineMatchRequestSchema } from "../matching/request.js";
import { reputationSchema } from "./chain.js";
import { signedOfferSchema } from "./offers.js";
import { delegationApiSchema } from "./relay.js";
import { addressWireSchema, amountSchema, bytes32WireSchema, gpuModelQuery, queryInt, signatureWireSchema, uint16Schema, uint32Schema, unixSecondsSchema } from "./primitives.js";

// ---- statistics ----

export const statsQuerySchema = z.strictObject({
  model: gpuModelQuery.optional().describe("One model (name or alias); default: every model seen in the window."),
  from: queryInt(0, 2 ** 32 - 1)
    .optional()
    .describe("Window start, unix seconds (default: `to` − 24 h)."),
  to: queryInt(0, 2 ** 32 - 1)
    .optional()
    .describe("Window end, unix seconds (default: now)."),
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

/**
 * The body of POST /v1/match: the renter's match request exactly as the SDK and the CLI take it
 * (common/matching/request.ts: `gpuType`, `gpuCount`, `duration`, USD prices per GPU-hour, ...).
 * One request format everywhere, so a front end can move between the node and the SDK freely.
 */
export const matchRequestSchema = engineMatchRequestSchema;
export type MatchRequest = z.output<typeof matchRequestSchema>;

/** Query of POST /v1/match. */
export const matchQuerySchema = z.strictObject({
  limit: queryInt(1, 64).optional().describe("Candidates to return, 1..64 (default: the node's matching.maxCandidates)."),
});

export const costBreakdownSchema = z.strictObject({
  price: z.number().describe("weights.price × premium over the cheapest fitting offer."),
  reputation: z.number().describe("weights.reputation × (1 − reputation score)."),
  freshness: z.number().describe("weights.freshness × attestation age / horizon (unattested: the full weight)."),
  latency: z.number().describe("weights.latency × measured latency / ceiling."),
  preempt: z.number().describe("1000 when the candidate needs preemption, else 0."),
  multiMachine: z.number().describe("matching.multiMachinePenalty for a group of machines, else 0."),
});

export const matchAllocationSchema = z.strictObject({
  offerKey: z.string(),
  provider: addressWireSchema,
  machineId: uint32Schema,
  units: uint16Schema.describe("Units to lease on this machine."),
  preempt: z.boolean().describe("Some of these units are held by interruptible leases the lease would preempt."),
  pricePerUnitSecond: amountSchema.describe("What the lease pays per unit-second: the offer price on demand, the bid when interruptible."),
  model: z.string(),
  region: z.string(),
  attestationExpiry: unixSecondsSchema.nullable().describe("When the machine's quorum attestation expires; null when it has none."),
  attestFailures: uint32Schema.describe("The machine's failed challenges counted at match time (the offer view's `attestFailures`): at most the request's `maxAttestFailures`."),
  peerId: z.string().describe("The provider node's libp2p peer id (reserve protocol)."),
  seq: z.number().int().nonnegative().describe("The offer version matched."),
  resources: z
    .strictObject({ cpuCores: z.number().int().positive(), memoryMiB: z.number().int().positive(), diskMiB: z.number().int().positive() })
    .nullable()
    .describe("What these units come with on the provider's host (units × the offer's per-unit resources), enforced by its runtime; null when the offer declares none."),
});

export const matchCandidateSchema = z.strictObject({
  rank: z.number().int().positive().describe("1 is the best."),
  cost: z.number().describe("Ranking cost, lower is better (docs/matching.md)."),
  breakdown: costBreakdownSchema,
  provider: addressWireSchema.describe("The provider of the first allocation."),
  units: z.number().int().positive().describe("Units over all allocations (= gpuCount)."),
  preempt: z.boolean(),
  pricePerGpuHour: amountSchema.describe("Units-weighted mean price per GPU-hour, token base units."),
  pricePerGpuHourUsd: z
    .string()
    .regex(/^\d+\.\d{2,6}$/)
    .describe("The same price in USD per GPU-hour: the unit of the request's maxPricePerGpuHour (1 token = 1 USD)."),
  totalCost: amountSchema.describe("Σ units × price per unit-second × duration: the deposits the leases would take."),
  reputation: reputationSchema.describe("The provider's on-chain counters."),
  allocations: z.array(matchAllocationSchema).describe("One per machine: one unless colocation is `cluster`."),
});
export type MatchCandidate = z.output<typeof matchCandidateSchema>;

export const matchExplanationSchema = z.strictObject({
  summary: z.string().describe("One line: what was asked and which constraint removed the last offers."),
  totalOffers: z.number().int().nonnegative().describe("Offers in the book when the request was matched."),
  steps: z
    .array(
      z.strictObject({
        constraint: z
          .string()
          .describe("gpuType, region, price, interruptible, bid, offerExpiry, duration, vram, hostResources, attestation, gpuIdentityVerified, reputation, capacity, excluded."),
        label: z.string().describe("What the constraint requires, in words."),
        removed: z.number().int().nonnegative().describe("Offers this constraint removed from those the previous ones left."),
        remaining: z.number().int().nonnegative(),
      }),
    )
    .describe("Every constraint applied, in order."),
  nearMisses: z.array(
    z.strictObject({
      constraint: z.string().describe("The constraint that, relaxed alone, would let these offers fit."),
      count: z.number().int().nonnegative().nullable().describe("Offers failing only this constraint, when counted."),
      message: z.string(),
      nearest: z
        .strictObject({ key: z.string(), model: z.string(), region: z.string(), pricePerGpuHour: amountSchema })
        .nullable()
        .describe("The nearest such offer, when there is one to point at."),
    }),
  ),
  nearMissSearchTruncated: z.boolean().describe("A search for nearest offers stopped at matching.explainScanLimit."),
  message: z.string().describe("The whole explanation as text."),
});
export type MatchExplanation = z.output<typeof matchExplanationSchema>;

export const matchResultSchema = z.strictObject({
  matched: z.boolean(),
  candidates: z.array(matchCandidateSchema).describe("Ranked, best first; empty when nothing matched."),
  explanation: matchExplanationSchema.nullable().describe("Why nothing matched: which constraint removed how many offers, and the nearest offers. Null when matched."),
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
  signature: signatureWireSchema.describe(
    "The EIP-712 signature of `request` (domain: Suanli / 1 / chain id / LeaseMarket) by `request.renter`, or by its session key with `delegation`.",
  ),
  delegation: delegationApiSchema.optional(),
});
export type ReservationBody = z.output<typeof reservationBodySchema>;

export const reserveRefusalSchema = z.enum(REFUSAL_REASONS);
export type ReserveRefusal = z.output<typeof reserveRefusalSchema>;

/** The provider's answer to a reservation, as the reserve protocol carries it (common/matching/handshake.ts). */
export const reservationAnswerSchema = z.discriminatedUnion("accepted", [
  z.strictObject({
    accepted: z.literal(true),
    /** The provider's acceptance: an Offer bound to the renter, to open the lease with. */
    acceptance: z.strictObject({ offer: signedOfferSchema, signature: signatureWireSchema }),
    units: uint16Schema.min(1).describe("Units the provider holds for the renter."),
    holdUntil: unixSecondsSchema.describe("The provider holds the units until this time."),
    preempt: z.array(amountSchema).describe("Interruptible leases the lease must preempt (LeaseTerms.preempt)."),
    sealingKey: z
      .strictObject({ publicKey: sealingPublicKeySchema, expiresAt: unixSecondsSchema, signature: signatureWireSchema })
      .optional()
      .describe(
        "The provider's current encryption key for sealed secrets and when it expires, signed by its wallet; the SDK checks the signature and the expiry before sealing to it.",
      ),
  }),
  z.strictObject({
    accepted: z.literal(false),
    reason: reserveRefusalSchema,
    message: z.string().nullable().describe("A sentence from the provider, when it gave one."),
    availableUnits: uint16Schema.nullable().describe("Units the provider could hold now, when it says."),
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
    sessions: addressWireSchema.nullable().describe("The SessionKeys revocation list renters revoke session-key delegations in; null when the deployment predates it."),
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
    fields: z
      .array(z.strictObject({ path: z.string(), message: z.string() }))
      .optional()
      .describe("For 400: each offending field (dotted path) and what was wrong."),
  }),
});
export type ApiErrorBody = z.output<typeof apiErrorSchema>;

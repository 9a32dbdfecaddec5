/**
 * Options of the matching engine: the ranking weights and the limits of a match. Every default
 * is documented in docs/matching.md with the reason for it; a node takes these from its
 * configuration (`matching.*`), the SDK from `createClient`.
 */
import { z } from "zod";
import { parseInput } from "../validation.js";

const weight = (fallback: number) => z.number().min(0).max(100).default(fallback);

export const rankingWeightsSchema = z.strictObject({
  /** Price premium over the cheapest fitting offer, as a fraction of it (0.10 = 10% dearer). */
  price: weight(1),
  /** 1 − reputation score (0 = perfect record, 0.5 = no history). */
  reputation: weight(0.3),
  /** Attestation age as a fraction of `freshnessHorizonSeconds` (capped at 1; unattested = 1). */
  freshness: weight(0.1),
  /** Measured latency as a fraction of `latencyCeilingMs` (capped at 1). */
  latency: weight(0.1),
});
export type RankingWeights = z.output<typeof rankingWeightsSchema>;

export const matchingOptionsSchema = z.strictObject({
  weights: rankingWeightsSchema.prefault({}),
  /** Attestations this old or older count as fully stale in ranking (they still pass attestedOnly until they expire). */
  freshnessHorizonSeconds: z
    .number()
    .int()
    .positive()
    .max(365 * 86_400)
    .default(86_400),
  /** Latencies at or above this rank as the worst. */
  latencyCeilingMs: z.number().positive().max(60_000).default(500),
  /** Latency assumed for providers this node has not measured (half the default ceiling: neither favoured nor punished much). */
  unknownLatencyMs: z.number().nonnegative().max(60_000).default(250),
  /** Cost added to a candidate spread over several machines of a cluster, so one machine wins a near tie. */
  multiMachinePenalty: z.number().min(0).max(100).default(0.05),
  /** Candidates returned by a match (the allocator falls back through them in order). */
  maxCandidates: z.number().int().min(1).max(64).default(8),
  /** An offer must stay valid at least this long after the match, time for reserve and the open transaction. */
  minOfferValiditySeconds: z.number().int().nonnegative().max(3600).default(60),
  /** Most entries examined when looking for the "nearest offers" of a no-match answer outside the scanned set. */
  explainScanLimit: z.number().int().positive().max(10_000_000).default(2_000),
});
export type MatchingOptions = z.output<typeof matchingOptionsSchema>;
export type MatchingOptionsInput = z.input<typeof matchingOptionsSchema>;

/** Validates engine options; throws InvalidInputError naming the bad key. */
export function parseMatchingOptions(input: unknown = {}): MatchingOptions {
  return parseInput(matchingOptionsSchema, input ?? {}, "matching options");
}

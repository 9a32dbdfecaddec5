/**
 * Bounds every provider holds challenges to, whoever signed them (docs/attestation.md, "Challenge
 * bounds and the check budget"; issue 35 items 5 and 8). A provider has one challenge slot (its
 * GPUs are what is measured): without bounds one attestor could sign a challenge that holds it
 * for minutes, and attestors together, or requests from anyone, could take most of a leased
 * GPU's time. The provider refuses what is out of bounds with a signed refusal (refusal.ts): the
 * attestor records it as an error, never the provider's failure, and anyone holding the challenge
 * and the refusal can check that the refusal was due.
 *
 * - Window: cutoffAtMs − issuedAtMs ≤ MAX_CHALLENGE_WINDOW_MS (2 min). The gpu preset's window is
 *   the deadline (10 s of compute + 2 s) × cutoffFactor 4 = 48 s; cpu-devnet's about 40 s.
 * - Size: each unit's sub-challenge needs at most MAX_UNIT_COMPUTE_SECONDS (60 s) at the claimed
 *   class's full datasheet int8 rate. The gpu preset sizes it to 10 s at the class's calibrated
 *   efficiency (< 1), so at most 10 s at the datasheet rate: 6× below the bound.
 * - Per-attestor share of the slot: one attestor's challenges may hold a provider's slot at most
 *   MAX_ATTESTOR_SLOT_MS (15 min) of any ATTESTOR_SLOT_PERIOD_MS (1 h), 25 %; with the window
 *   bound, at most 2 min at a time.
 * - In-lease budget: all challenges of a leased machine together take at most the share its offer
 *   announces (`leaseChecks.shareBps`) of the lease's elapsed time, split evenly over the on-chain
 *   attestor set (ProviderRegistry.attestorCount), plus one challenge per attestor
 *   (leaseCheckLimitMs).
 */
import type { ChallengeFields } from "./messages.js";
import { challengeOps } from "./arithmetic.js";
import { unitInt8OpsPerSecond } from "./params.js";

/** Longest time from a challenge's issue to its cutoff. */
export const MAX_CHALLENGE_WINDOW_MS = 120_000;
/** Most seconds one unit's sub-challenge may need at the claimed class's full datasheet int8 rate. */
export const MAX_UNIT_COMPUTE_SECONDS = 60;
/** The period over which one attestor's use of a provider's slot is counted. */
export const ATTESTOR_SLOT_PERIOD_MS = 3_600_000;
/** Most slot time one attestor's challenges may take of a provider per period: 25 %. */
export const MAX_ATTESTOR_SLOT_MS = 900_000;
/**
 * Most machines one challenge round holds (docs/attestation.md, "Challenge rounds"): an attestor
 * challenges a provider's unleased machines together, at most this many at once (one stream each,
 * under libp2p's 64 outbound streams per protocol and connection); the provider's node accepts as
 * many streams from one attestor, plus two.
 */
export const MAX_ROUND_MACHINES = 32;

/**
 * Why a challenge's fields are out of bounds, or undefined when they are within. Depends on the
 * fields only, so the attestor (or anyone) can check a provider's `out_of_bounds` refusal.
 */
export function challengeBoundsViolation(fields: Pick<ChallengeFields, "model" | "units" | "rowsPerUnit" | "cols" | "rounds" | "issuedAtMs" | "cutoffAtMs">): string | undefined {
  const window = fields.cutoffAtMs - fields.issuedAtMs;
  if (window > MAX_CHALLENGE_WINDOW_MS) return `its window (issue to cutoff) is ${window} ms, more than ${MAX_CHALLENGE_WINDOW_MS} ms`;
  let unitRate: number;
  try {
    unitRate = unitInt8OpsPerSecond(fields.model);
  } catch {
    return `its model ${fields.model} has no known int8 rate`;
  }
  const unitOps = challengeOps(fields.rowsPerUnit, fields.cols, fields.rounds);
  const limit = BigInt(Math.floor(unitRate * MAX_UNIT_COMPUTE_SECONDS));
  if (unitOps > limit)
    return `each unit's sub-challenge needs ${unitOps} int8 ops, more than ${MAX_UNIT_COMPUTE_SECONDS} s of one ${fields.model} at its datasheet rate (${limit})`;
  return undefined;
}

/**
 * The check time (ms) one attestor may have used on a leased machine before the provider refuses
 * its next challenge of it `lease_budget`: the lease's budget (`shareBps` of its elapsed time)
 * split over `attestorCount` attestors. The provider refuses only an attestor that already used
 * some time and at least this much, so each attestor's first check is never refused, and all
 * checks of a lease take at most shareBps × elapsed plus one challenge (≤ MAX_CHALLENGE_WINDOW_MS)
 * per attestor.
 */
export function leaseCheckLimitMs(shareBps: number, elapsedMs: number, attestorCount: number): number {
  return Math.floor((Math.max(0, elapsedMs) * shareBps) / 10_000 / Math.max(1, attestorCount));
}

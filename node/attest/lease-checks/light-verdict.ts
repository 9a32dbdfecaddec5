/**
 * How an attestor judges a lease's light in-lease checks (docs/attestation.md "In-lease checks",
 * issue 35 item 4). A light check needs `attest.leaseChecks.rateShare` of each GPU, so an honest
 * machine answers it beside its renter's task; still, a loaded machine can be late now and then.
 * So:
 *
 * - wrong rows (a provably false answer, signed by the provider) fault at once;
 * - any other failure (slow, late, refused, malformed...) faults only when at least
 *   `failuresToFault` of the lease's last `failureWindow` checks by this attestor failed.
 *
 * The proposer applies it before proposing a capacity fault and the co-signer to its own checks
 * before it co-signs one without a transcript (in-lease.ts).
 */
import type { TrackedLease } from "../faults/index.js";
import type { ChallengeRecord } from "../challenge/index.js";

export type LightVerdictRule = { failuresToFault: number; failureWindow: number };

export type LightVerdict =
  /** Wrong rows during the lease: `at`, the failed check. */
  | { due: true; why: "wrong_rows"; at: ChallengeRecord }
  /** `failed` of the last `window` checks failed: `first`, the earliest failure among them; `last`, the newest. */
  | { due: true; why: "failures"; failed: number; window: number; first: ChallengeRecord; last: ChallengeRecord }
  | { due: false; failed: number; window: number };

/**
 * The lease's verdicts by this attestor, newest first: its scheduled and in-lease results of the
 * lease's machine and provider started during the lease. A requested challenge (anyone may ask
 * for one) and an error (no verdict on the machine) never count.
 */
export function leaseVerdicts(history: readonly ChallengeRecord[], lease: Pick<TrackedLease, "provider" | "activatedAt">): ChallengeRecord[] {
  return history.filter(
    (record) =>
      record.trigger !== "request" &&
      record.startedAtMs >= lease.activatedAt * 1000 &&
      record.provider.toLowerCase() === lease.provider.toLowerCase() &&
      record.outcome !== "error",
  );
}

/** Judges a lease's verdicts (newest first, leaseVerdicts) under the rule. */
export function judgeLightChecks(verdicts: readonly ChallengeRecord[], rule: LightVerdictRule): LightVerdict {
  const wrong = verdicts.find((record) => record.outcome === "fail" && record.reason === "wrong_rows");
  if (wrong) return { due: true, why: "wrong_rows", at: wrong };
  const window = verdicts.slice(0, rule.failureWindow);
  const failures = window.filter((record) => record.outcome === "fail");
  if (failures.length >= rule.failuresToFault && failures.length > 0) {
    return { due: true, why: "failures", failed: failures.length, window: window.length, first: failures[failures.length - 1]!, last: failures[0]! };
  }
  return { due: false, failed: failures.length, window: window.length };
}

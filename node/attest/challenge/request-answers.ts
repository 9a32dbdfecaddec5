/**
 * The answers of the attest-request protocol (`/suanli/attest-request/1.0.0`, challenger.ts) that
 * do not run a challenge: a recorded result, a machine in its failure backoff, a leased machine.
 */
import type { FailureReason } from "../../../common/attest/messages.js";
import type { ChallengeErrorReason, ChallengeOutcomeMessageInput } from "../../../common/attest/wire.js";
import type { FailureEntry } from "./failure-history.js";
import type { ChallengeRecord } from "./results.js";

/** A refusal `backoff`: the machine (or, never passed here, its provider) holds failures whose wait has not ended. */
export function backoffAnswer(machineId: number, held: { failure: FailureEntry; failures: number; retryAtMs: number }): ChallengeOutcomeMessageInput {
  const { failure } = held;
  const whose =
    failure.machineId === machineId
      ? `machine ${machineId} holds ${held.failures} failed challenge(s) in this attestor's history (latest: ${failure.reason})`
      : `provider ${failure.provider} holds ${held.failures} failed challenge(s) (latest: machine ${failure.machineId}, ${failure.reason}) and machine ${machineId} never passed here`;
  return {
    v: 1,
    machineId,
    outcome: "error",
    reason: "backoff",
    detail: `${whose}; the wait doubles with each failure and only time clears them: no challenge before the backoff ends`,
    retryAfter: Math.ceil(held.retryAtMs / 1000),
  };
}

/**
 * A request for a leased machine (issue 35 item 4): its newest unexpired attestation from this
 * attestor's records, or a refusal `leased` until the lease ends. Never a challenge (a full one
 * would need the renter's GPU), never a failure: the machine is checked by light in-lease checks.
 */
export function leasedAnswer(machineId: number, leaseEnd: number, history: readonly ChallengeRecord[], nowMs: number): ChallengeOutcomeMessageInput {
  const nowSeconds = Math.floor(nowMs / 1000);
  const cached = history.find((record) => record.outcome === "pass" && record.attestation && record.attestation.attestation.expiry > nowSeconds);
  if (cached) return outcomeMessage(cached, true);
  return {
    v: 1,
    machineId,
    outcome: "error",
    reason: "leased",
    detail: `machine ${machineId} is leased until ${leaseEnd} and this attestor holds no unexpired attestation of it: a leased machine gets only light in-lease checks, which attest nothing`,
    retryAfter: leaseEnd,
  };
}

/** A record as the attest-request protocol answers it. */
export function outcomeMessage(record: ChallengeRecord, cached: boolean): ChallengeOutcomeMessageInput {
  if (record.outcome === "pass" && record.attestation) {
    return { v: 1, machineId: record.machineId, outcome: "pass", attestation: record.attestation, measuredThroughput: record.measuredThroughput ?? 0n, cached };
  }
  if (record.outcome === "fail") {
    return {
      v: 1,
      machineId: record.machineId,
      outcome: "fail",
      reason: record.reason as FailureReason,
      detail: (record.detail ?? "").slice(0, 1_000),
      measuredThroughput: record.measuredThroughput,
      cached,
    };
  }
  return { v: 1, machineId: record.machineId, outcome: "error", reason: record.reason as ChallengeErrorReason, detail: (record.detail ?? "").slice(0, 1_000), retryAfter: null };
}

/** Each requester's (Noise-authenticated peer id's) answered requests in the current hour. */
export class RequesterAllowance {
  private readonly counts = new Map<string, [hourStartMs: number, count: number]>();

  /** Counts one request of `requester` against `perHour`; returns when it may ask again (unix s) when the allowance is spent. */
  count(requester: string, nowMs: number, perHour: number): number | undefined {
    const hourStart = nowMs - (nowMs % 3_600_000);
    const held = this.counts.get(requester);
    const count = held && held[0] === hourStart ? held[1] : 0;
    if (count >= perHour) return Math.ceil((hourStart + 3_600_000) / 1000);
    this.counts.delete(requester);
    this.counts.set(requester, [hourStart, count + 1]);
    if (this.counts.size > 10_000) this.counts.delete(this.counts.keys().next().value!);
    return undefined;
  }
}

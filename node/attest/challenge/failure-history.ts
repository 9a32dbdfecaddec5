/**
 * The attestor's failure history (issue 35, item 3): every failed challenge of a machine, kept in
 * level for `attest.attestor.failureHistorySeconds` (a week by default) whatever passes after it,
 * so that only time clears it. It sets two things:
 *
 * - how long the machine waits for its next challenge, scheduled or requested (forced included;
 *   in-lease checks never wait): `retryAfterFailureSeconds · 2^(n−1)`, at most
 *   `maxRetryAfterFailureSeconds`, after the latest of the n failures it holds. A provider cannot
 *   shorten it: a pass does not clear the history, and a machine this attestor never passed waits on
 *   its provider's history (all its machines), so a new machine id buys no fresh try;
 * - what the attestor signs into the machine's next attestation (`failures`, `lastFailureAt`), so
 *   every offer book, the matcher and the explorer see that a pass came after failures.
 *
 * With the defaults (first wait 300 s, cap 6 h) a machine that fails every try gets at most 10
 * challenges in any 24 hours per attestor (docs/attestation-threats.md, "Retrying").
 */
import type { Address } from "viem";
import type { Repository } from "../../store/store.js";
import type { ChallengeRecord, ChallengeTrigger } from "./results.js";

/** One failed challenge, as the history keeps it. */
export type FailureEntry = { machineId: number; provider: Address; reason: string; trigger: ChallengeTrigger; finishedAtMs: number };

/** The failures a machine (or a provider) holds now. */
export type FailureSummary = {
  /** Failures within the history window. */
  failures: number;
  /** The latest of them, when there is one. */
  latest: FailureEntry | undefined;
};

export type FailureHistoryOptions = {
  /** How long a failure is remembered (ms). */
  windowMs: number;
  /** The wait after the first failure (ms); it doubles with each failure held. */
  firstRetryMs: number;
  /** The longest wait (ms). */
  maxRetryMs: number;
};

/** Most failures read for one summary; beyond it the wait is at its cap anyway, and `failures` is a uint16. */
const MAX_COUNTED = 65_535;

const pad = (value: number, width: number) => value.toString().padStart(width, "0");
const machinePrefix = (machineId: number) => `m/${pad(machineId, 10)}/`;
const providerPrefix = (provider: string) => `p/${provider.toLowerCase()}/`;
/** The first key after every key that starts with `prefix` (its last "/" bumped to "0"). */
const after = (prefix: string) => `${prefix.slice(0, -1)}0`;
const ZERO_ADDRESS = "0x0000000000000000000000000000000000000000";

/**
 * The wait before the next challenge of a machine holding `failures` failures: 0 for none, else
 * first · 2^(failures − 1), at most max.
 */
export function failureBackoffMs(failures: number, firstRetryMs: number, maxRetryMs: number): number {
  if (failures <= 0) return 0;
  // 2^(n−1) overflows nothing below 2^52; past 40 doublings the cap has long bound.
  return Math.min(maxRetryMs, firstRetryMs * 2 ** Math.min(failures - 1, 40));
}

export class FailureHistory {
  constructor(
    private readonly repo: Repository<FailureEntry>,
    private readonly o: FailureHistoryOptions,
  ) {}

  /** Records a failed challenge (other outcomes are ignored), and forgets what fell out of the window. */
  async add(record: ChallengeRecord, nowMs: number): Promise<void> {
    if (record.outcome !== "fail") return;
    const entry: FailureEntry = { machineId: record.machineId, provider: record.provider, reason: record.reason ?? "", trigger: record.trigger, finishedAtMs: record.finishedAtMs };
    const at = pad(record.finishedAtMs, 15);
    await this.repo.put(`${machinePrefix(record.machineId)}${at}`, entry);
    if (record.provider !== ZERO_ADDRESS) await this.repo.put(`${providerPrefix(record.provider)}${at}/${pad(record.machineId, 10)}`, entry);
    await this.prune(machinePrefix(record.machineId), nowMs);
    if (record.provider !== ZERO_ADDRESS) await this.prune(providerPrefix(record.provider), nowMs);
  }

  /** The machine's failures within the window. */
  ofMachine(machineId: number, nowMs: number): Promise<FailureSummary> {
    return this.summary(machinePrefix(machineId), nowMs);
  }

  /** The provider's failures within the window, on all of its machines. */
  ofProvider(provider: string, nowMs: number): Promise<FailureSummary> {
    return this.summary(providerPrefix(provider), nowMs);
  }

  /** When a machine holding `summary` may be challenged again (unix ms); undefined when it holds no failure. */
  retryAtMs(summary: FailureSummary): number | undefined {
    if (!summary.latest) return undefined;
    return summary.latest.finishedAtMs + failureBackoffMs(summary.failures, this.o.firstRetryMs, this.o.maxRetryMs);
  }

  private async summary(prefix: string, nowMs: number): Promise<FailureSummary> {
    const since = pad(Math.max(0, nowMs - this.o.windowMs + 1), 15);
    let failures = 0;
    let latest: FailureEntry | undefined;
    for await (const [, entry] of this.repo.entries({ gte: `${prefix}${since}`, lt: after(prefix), reverse: true, limit: MAX_COUNTED })) {
      latest ??= entry;
      failures++;
    }
    return { failures, latest };
  }

  private async prune(prefix: string, nowMs: number): Promise<void> {
    const before = `${prefix}${pad(Math.max(0, nowMs - this.o.windowMs + 1), 15)}`;
    const stale: string[] = [];
    for await (const [key] of this.repo.entries({ gte: prefix, lt: before, limit: 1_000 })) stale.push(key);
    for (const key of stale) await this.repo.del(key);
  }
}

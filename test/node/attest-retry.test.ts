/**
 * Issue 35, item 3: partial hardware passed by retrying. A set-up with a fraction f of the required
 * rate passes one try with at most f^32 (32 rows opened); forcing a challenge every minute gave it
 * 1,440 tries a day (f = 0.79: ≥ 50 % a day). Now each failure goes into the machine's failure
 * history (level, only time clears it) and the wait before the next try doubles, forced requests
 * included. The attack is replayed here on the attestor's real failure history over a day of
 * virtual time: the machine fails every try it gets and re-forces every minute.
 */
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { devnetAccount } from "../../common/devnet.js";
import { FailureHistory, failureBackoffMs } from "../../node/attest/challenge/failure-history.js";
import { attestorRoleOptionsSchema, type ChallengeRecord } from "../../node/attest/challenge/index.js";
import { Bucket } from "../../node/store/buckets.js";
import { Store } from "../../node/store/store.js";

const DAY_MS = 86_400_000;
const defaults = attestorRoleOptionsSchema.parse({});
const options = {
  windowMs: defaults.failureHistorySeconds * 1000,
  firstRetryMs: defaults.retryAfterFailureSeconds * 1000,
  maxRetryMs: defaults.maxRetryAfterFailureSeconds * 1000,
};

function failure(machineId: number, atMs: number): ChallengeRecord {
  return {
    machineId,
    provider: devnetAccount(1).address,
    model: "H100-80GB-SXM",
    units: 8,
    challengeId: null,
    trigger: "request",
    startedAtMs: atMs,
    finishedAtMs: atMs + 12_000,
    outcome: "fail",
    reason: "wrong_rows",
    detail: null,
    measuredThroughput: null,
    attestation: null,
  };
}

/** Forces a challenge every minute for `days` days from `startMs`; every try that runs fails. Returns the tries' times. */
async function forceEveryMinute(history: FailureHistory, machineId: number, startMs: number, days: number): Promise<number[]> {
  const tries: number[] = [];
  for (let nowMs = startMs; nowMs < startMs + days * DAY_MS; nowMs += 60_000) {
    const retryAt = history.retryAtMs(await history.ofMachine(machineId, nowMs));
    if (retryAt !== undefined && nowMs < retryAt) continue; // refused `backoff`: no challenge runs
    tries.push(nowMs);
    await history.add(failure(machineId, nowMs), nowMs + 12_000);
  }
  return tries;
}

describe("retrying a failed challenge is bounded (issue 35, item 3)", function () {
  this.timeout(60_000);
  let dir: string;
  let store: Store;
  before(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "suanli-retry-"));
    store = await Store.open(dir);
  });
  after(async () => {
    await store.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("the wait doubles from 300 s to 6 h: at most 10 tries in any 24 hours, so a 79 %-rate set-up passes with under 1 % a day", () => {
    assert.deepEqual(
      [0, 1, 2, 3, 8, 9, 100].map((n) => failureBackoffMs(n, options.firstRetryMs, options.maxRetryMs) / 1000),
      [0, 300, 600, 1_200, 21_600, 21_600, 21_600],
    );
    // Any 24 h window: try i+1 waits at least min(cap, first · 2^(i−1)) after try i (the history keeps a week).
    let tries = 1;
    for (let spent = 0, i = 1; ; i++) {
      spent += failureBackoffMs(i, options.firstRetryMs, options.maxRetryMs);
      if (spent >= DAY_MS) break;
      tries++;
    }
    assert.equal(tries, 10);
    const perTry = 0.79 ** 32;
    assert.ok(perTry * tries <= 0.01, `${perTry} × ${tries}`);
  });

  it("a machine forcing a challenge every minute for two days gets 10 tries the first day and 4 the second; its history stays visible after a pass", async () => {
    const history = new FailureHistory(store.repository(Bucket.attestFailures), options);
    const start = 1_800_000_000_000;
    const tries = await forceEveryMinute(history, 7, start, 2);
    const firstDay = tries.filter((at) => at < start + DAY_MS).length;
    assert.equal(firstDay, 10, `1,440 forced requests, ${firstDay} challenges`);
    assert.equal(tries.length - firstDay, 4);
    // What its next attestation would carry: every failure of the week, whatever passes in between.
    const now = start + 2 * DAY_MS;
    const summary = await history.ofMachine(7, now);
    assert.equal(summary.failures, 14);
    assert.equal(summary.latest?.finishedAtMs, tries.at(-1)! + 12_000);
    // A fresh machine id of the same provider waits on the provider's history: it buys no new try.
    const provider = await history.ofProvider(devnetAccount(1).address, now);
    assert.equal(provider.failures, 14);
    assert.ok(history.retryAtMs(provider)! > now);
    // Only time clears it: a week after the last failure, nothing is held.
    const later = tries.at(-1)! + options.windowMs + 60_000;
    assert.equal((await history.ofMachine(7, later)).failures, 0);
    await history.add(failure(7, later), later);
    assert.equal((await history.ofMachine(7, later)).failures, 1, "the old entries were pruned");
  });
});

import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { devnetAccount } from "../../common/devnet.js";
import type { SignedAttestation } from "../../common/attest/attestation.js";
import { ChallengeResults, type ChallengeRecord } from "../../node/attest/challenge/index.js";
import { Store } from "../../node/store/store.js";

function record(machineId: number, startedAtMs: number, outcome: ChallengeRecord["outcome"] = "fail"): ChallengeRecord {
  return {
    machineId,
    provider: devnetAccount(1).address,
    model: "A100-80GB",
    units: 1,
    challengeId: null,
    trigger: "schedule",
    startedAtMs,
    finishedAtMs: startedAtMs + 50,
    outcome,
    reason: outcome === "fail" ? "late_commit" : null,
    detail: null,
    measuredThroughput: outcome === "pass" ? 123_456_789_012_345n : null,
    attestation: null,
  };
}

describe("attestor challenge results in level", () => {
  let dir: string;
  let store: Store;
  before(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "suanli-results-"));
    store = await Store.open(dir);
  });
  after(async () => {
    await store.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("keeps each machine's newest results, newest first, apart from other machines'", async () => {
    const results = new ChallengeResults(store, 3);
    // Machine 1 and machine 10 share a decimal prefix: their keys must not mix.
    for (const at of [1_000, 5_000, 2_000, 4_000, 3_000]) await results.add(record(1, at));
    await results.add(record(10, 9_000, "pass"));
    assert.deepEqual(
      (await results.history(1)).map((r) => r.startedAtMs),
      [5_000, 4_000, 3_000],
    );
    assert.equal((await results.latest(1))?.startedAtMs, 5_000);
    const ten = await results.latest(10);
    assert.equal(ten?.outcome, "pass");
    assert.equal(ten?.measuredThroughput, 123_456_789_012_345n);
    assert.equal(await results.latest(2), undefined);
    // A new controller over the same database reads what was written (the attestor restarted).
    assert.equal((await new ChallengeResults(store, 3).latest(1))?.startedAtMs, 5_000);
  });

  it("keeps a pass whose attestation may still be disputed beyond the limit, and prunes it once expired", async () => {
    let nowMs = 1_000_000;
    const results = new ChallengeResults(store, 2, () => nowMs);
    const pass = (startedAtMs: number, expiry: number): ChallengeRecord => ({
      ...record(20, startedAtMs, "pass"),
      attestation: { attestation: { expiry } as SignedAttestation["attestation"], signature: "0x" },
      commit: { rowsPerUnit: 512, roots: [`0x${"11".repeat(32)}`], devices: [], signature: "0x01" },
    });
    await results.add(pass(1_000, 2_000)); // expires at 2,000 s
    await results.add(pass(2_000, 1_500)); // expires at 1,500 s
    for (const at of [3_000, 4_000, 5_000]) await results.add(record(20, at));
    assert.deepEqual(
      (await results.history(20)).map((r) => r.startedAtMs),
      [5_000, 4_000, 2_000, 1_000],
    );
    nowMs = 1_600_000; // the second pass's attestation expired: the next add prunes it
    await results.add(record(20, 6_000));
    assert.deepEqual(
      (await results.history(20)).map((r) => r.startedAtMs),
      [6_000, 5_000, 1_000],
    );
  });
});

/**
 * Gas snapshot (issue #39: "a snapshot test that fails when a function gets dearer than the table
 * says"). It runs the gas benchmark itself (bench/gas.ts: the real deploy script on Hardhat's
 * in-process network, gasUsed from each receipt, about 5 s) and compares every operation with
 * bench/gas-snapshot.json, the figures of docs/performance.md's table. An operation may cost up to
 * GAS_NOISE more than its snapshot (signatures and ids change a few calldata bytes between runs:
 * zero and nonzero bytes cost 4 and 16 gas); past that the test fails and names it. A change that
 * makes an operation cheaper passes; write the new figures into the snapshot and the table
 * (`npm run bench -- gas --json` prints them) so that the next change is held to them.
 */
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { run } from "../../bench/gas.js";

const SNAPSHOT = new URL("../../bench/gas-snapshot.json", import.meta.url);
/** Gas an operation may vary between runs of the same code (calldata bytes of signatures and ids). */
const GAS_NOISE = 32;

/** Each operation that got dearer than its snapshot allows, or that the snapshot does not hold, in words. */
export function dearerThanSnapshot(measured: Record<string, number>, snapshot: Record<string, number>, noise = GAS_NOISE): string[] {
  const problems: string[] = [];
  for (const [operation, used] of Object.entries(measured)) {
    const allowed = snapshot[operation];
    if (allowed === undefined) problems.push(`${operation}: ${used} gas, not in bench/gas-snapshot.json (add it, and a row to docs/performance.md)`);
    else if (used > allowed + noise) problems.push(`${operation}: ${used} gas, ${used - allowed} more than the snapshot's ${allowed}`);
  }
  for (const operation of Object.keys(snapshot)) {
    if (!(operation in measured)) problems.push(`${operation}: in the snapshot but no longer measured (remove it, or measure it again)`);
  }
  return problems;
}

describe("gas snapshot: no contract operation gets dearer than docs/performance.md says", function () {
  this.timeout(120_000);

  it("measures every operation at or under its snapshot", async () => {
    const snapshot = JSON.parse(await readFile(SNAPSHOT, "utf8")) as Record<string, number>;
    const log = console.log;
    console.log = () => {};
    let measured: Record<string, number>;
    try {
      measured = (await run([])) as Record<string, number>;
    } finally {
      console.log = log;
    }
    assert.ok(Object.keys(measured).length >= 20, "the benchmark measured its operations");
    assert.deepEqual(dearerThanSnapshot(measured, snapshot), []);
  });

  it("names an operation that got dearer, a new one and a gone one, and lets noise and savings pass", () => {
    const snapshot = { openLease: 156_062, activate: 31_261, gone: 1_000 };
    assert.deepEqual(dearerThanSnapshot({ openLease: 156_062 + GAS_NOISE, activate: 30_000, gone: 900 }, snapshot), []);
    assert.deepEqual(dearerThanSnapshot({ openLease: 156_062 + GAS_NOISE + 1, activate: 31_261, fresh: 5 }, snapshot), [
      `openLease: ${156_062 + GAS_NOISE + 1} gas, ${GAS_NOISE + 1} more than the snapshot's 156062`,
      "fresh: 5 gas, not in bench/gas-snapshot.json (add it, and a row to docs/performance.md)",
      "gone: in the snapshot but no longer measured (remove it, or measure it again)",
    ]);
  });
});

/**
 * The soak benchmark's short version (bench/soak.ts): 30 s of random leases and tasks on three
 * provider nodes with faults injected at random, then the money checked. Nothing lost, nothing
 * leased twice, nothing stuck, no node growing past the stated bound.
 */
import assert from "node:assert/strict";
import { run } from "../../bench/soak.js";

describe("chaos: the soak benchmark, short", function () {
  this.timeout(300_000);

  it("runs leases under random faults and loses no base unit", async () => {
    const summary = (await run(["--seconds", "30", "--seed", "7"])) as Record<string, unknown>;
    assert.deepEqual(summary.violations, []);
    assert.equal(summary.baseUnitsLost, 0n);
    assert.equal(summary.unitsDoubleLeased, 0);
    assert.equal(summary.leasesStuck, 0);
    assert.equal(summary.leasesOpenAfterDrain, 0);
    assert.ok((summary.leasesRun as number) > 5, `leases ran (${summary.leasesRun})`);
    assert.ok((summary.tasksCompleted as number) > 0);
    assert.ok((summary.faultsInjected as number) >= 4, `faults were injected (${summary.faultsInjected})`);
    assert.ok((summary.faults as Record<string, number>).providerKill! >= 1, "a provider node was SIGKILLed and restarted");
    assert.equal(summary.nodeResourcesWithinBounds, true, JSON.stringify(summary.nodes));
  });
});

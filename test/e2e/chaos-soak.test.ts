/**
 * The soak benchmark's 45-second version (bench/soak.ts): three provider nodes and three
 * attestors as real processes, four SDK renters submitting random tasks (short, long, failing,
 * on demand and interruptible, cancelled, extended, migrated) while every fault kind is injected
 * (RPC outage, delay, reset; provider SIGKILL past the QoS window and restart; attestor SIGKILL and
 * restart), then the money checked. Nothing lost, nothing leased twice, nothing stuck, no node
 * growing past the stated bound, and the scripted actions, the planned preemption, fault and
 * migration, and every fault kind actually happened (so it cannot pass on a run where nothing was
 * tried).
 */
import assert from "node:assert/strict";
import { FAULT_KINDS, run } from "../../bench/soak.js";

describe("chaos: the soak benchmark, 45 seconds", function () {
  this.timeout(600_000);

  it("runs dozens of tasks under every kind of fault and loses no base unit", async () => {
    const summary = await run(["--seconds", "45", "--renters", "4", "--seed", "7"]);
    const shown = JSON.stringify(summary, (_, value: unknown) => (typeof value === "bigint" ? value.toString() : value));
    // The money and the units.
    assert.deepEqual(summary.violations, [], shown);
    assert.equal(summary.baseUnitsLost, 0n, shown);
    assert.equal(summary.unitsDoubleLeased, 0, shown);
    assert.equal(summary.leasesStuck, 0, shown);
    assert.equal(summary.leasesOpenAfterDrain, 0, shown);
    // Every node within the stated bound on heap and handles.
    assert.equal(summary.nodeResourcesWithinBounds, true, shown);
    // Every kind of action and fault happened at least once.
    const at = (key: string) => summary[key] as number;
    assert.ok(at("leasesRun") >= 8, `leases ran: ${shown}`);
    for (const key of ["tasksCompleted", "tasksFailed", "cancels", "extends"]) assert.ok(at(key) >= 1, `${key} >= 1: ${shown}`);
    // The planned scenarios: an on-demand lease preempted an interruptible one, a provider killed
    // past the QoS window had its lease faulted by the attestors' quorum, and autoMigrate moved
    // the task (bench/soak.ts, "Planned scenarios").
    for (const key of ["preemptions", "leasesFaulted", "migrations"]) assert.ok(at(key) >= 1, `${key} >= 1: ${shown}`);
    const faults = summary.faults as Record<string, number>;
    for (const kind of FAULT_KINDS) assert.ok((faults[kind] ?? 0) >= 1, `fault ${kind} injected: ${shown}`);
  });
});

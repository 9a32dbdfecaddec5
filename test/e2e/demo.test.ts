import assert from "node:assert/strict";
import { runDemo, type DemoSummary } from "../../node/demo/demo.js";

/**
 * The demo's flow as a test: real provider and attestor processes, the SDK as renters, the
 * embedded chain. Asserts on receipts, lease states and balances.
 */
describe("the whole market (npm run demo)", function () {
  this.timeout(240_000);
  let summary: DemoSummary;
  const narrative: string[] = [];

  before(async () => {
    summary = await runDemo({ out: (line) => narrative.push(line) });
  });

  it("attests every provider's machine before renters use them", () => {
    assert.equal(summary.attestedOffers, 3);
    assert.ok(narrative.some((line) => /attested=true/.test(line)));
  });

  it("runs a real task: its output, a completed lease, a verified report, exact money", () => {
    const { job } = summary;
    assert.equal(job.state, "succeeded");
    assert.equal(job.exitCode, 0);
    assert.equal(job.completion?.verified, true);
    assert.ok(
      summary.jobLogs.some((line) => line.includes("148933 primes below 2000000")),
      "the computation's result is in the logs",
    );
    const [lease] = job.leases;
    assert.equal(lease!.endReason, "Completed");
    assert.equal(lease!.status, "Settled");
    assert.equal(lease!.model, "A100-80GB");
    assert.equal(lease!.cost + lease!.refunded, lease!.deposit);
    assert.ok(lease!.gas.length > 0 && lease!.gas.every((step) => step.gasUsed > 0n));
    assert.equal(summary.renterBalances.job, summary.renterFunding - job.totalCost, "the renter paid exactly the metered cost");
  });

  it("preempts the interruptible lease for the on-demand one, billing it only to the end of its notice", () => {
    const [preempted] = summary.interruptible.leases;
    assert.equal(summary.interruptible.state, "preempted");
    assert.equal(preempted!.endReason, "Preempted");
    assert.equal(preempted!.cost + preempted!.refunded, preempted!.deposit);
    assert.ok(preempted!.refunded > 0n);
    assert.equal(summary.renterBalances.interruptible, summary.renterFunding - summary.interruptible.totalCost);

    const [onDemand] = summary.onDemand.leases;
    assert.equal(summary.onDemand.state, "succeeded");
    assert.equal(onDemand!.endReason, "Completed");
    assert.equal(onDemand!.machineId, preempted!.machineId, "the same GPUs");
    assert.equal(summary.renterBalances.onDemand, summary.renterFunding - summary.onDemand.totalCost);
  });

  it("returns the provider's GPUs to its idle workload when the lease ends, and stops everything", () => {
    assert.equal(summary.idleResumed, true);
    assert.match(narrative.at(-1) ?? "", /Done\./);
  });
});

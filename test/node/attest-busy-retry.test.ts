/**
 * Two attestors meet at one provider over libp2p on 127.0.0.1: a scheduled challenge answered
 * `busy` (the other attestor's challenge holds the provider's single slot) is tried again within
 * seconds (node/attest/challenge/challenger.ts: BUSY_RETRY_BASE_MS × attempt, jittered ±50 %, at
 * most BUSY_RETRIES in a row), not at the next scan: here scans are an hour apart, so the second
 * attestor's pass can only come from its busy retries. A busy answer is never a failure.
 */
import assert from "node:assert/strict";
import { devnetAccount } from "../../common/devnet.js";
import { BUSY_RETRIES, BUSY_RETRY_BASE_MS } from "../../node/attest/challenge/challenger.js";
import { CpuRunner } from "../../node/attest/runner/index.js";
import { machineOffer, type TestDaemon } from "../support/attest.js";
import { HeldRunner, leasedProvider, NO_OWN_CHECKS, startAttestorPair, TEST_LIVENESS as LIVENESS } from "../support/attest-lease.js";
import { startDevnet, type Devnet } from "../support/devnet.js";
import { waitFor } from "../support/wait.js";

/** How long the first attestor's challenge holds the provider's slot. */
const HOLD_MS = 3_000;

describe("busy retries between two attestors over libp2p: the one answered busy passes within seconds, not at the next scan", function () {
  this.timeout(120_000);
  let devnet: Devnet;
  let cpu: CpuRunner;
  const nodes: TestDaemon[] = [];
  before(async () => {
    devnet = await startDevnet({ params: { faultQuorum: 2 }, attestors: [devnetAccount(6).address, devnetAccount(7).address], wallClockBlocks: true });
    cpu = new CpuRunner({ workers: 1 });
  });
  after(async () => {
    for (const node of nodes.reverse()) await node.close().catch(() => undefined);
    await cpu?.close();
    await devnet?.close();
  });

  it("both scan a new offer at once; the one refused busy retries after 2 s × attempt (±50 %) and passes once the slot is free; no failure", async () => {
    const runner = new HeldRunner(cpu);
    // Machine 0 is leased (light checks only, none here); machine 1's offer appears once both attestors run.
    const { provider, machines, machineIds } = await leasedProvider(devnet, 1, runner, { count: 2 });
    nodes.push(provider.daemon);
    const machineId = machineIds[1]!;
    const role = { scheduleIntervalMs: 3_600_000, maxConcurrentChallenges: 4 };
    const { a, b } = await startAttestorPair(devnet, provider.daemon, { liveness: LIVENESS, leaseChecks: NO_OWN_CHECKS, attestor: role }, nodes);
    for (const { daemon } of [a, b]) await waitFor("the leased machine's offer in the book", () => daemon.offers.book.byMachine(machineIds[0]!).length > 0, { timeoutMs: 30_000 });

    // The new offer is scanned by both at once (the only scan in the next hour); the first challenge holds the slot.
    runner.held = true;
    await provider.daemon.offers.publisher!.set(machineOffer(machines[1]!));
    await waitFor("one attestor's challenge holding the slot", () => runner.holding >= 1, { timeoutMs: 30_000, intervalMs: 20 });
    const history = async (node: typeof a) => (await node.attestor.results.history(machineId, 20)).reverse();
    const busyOne = await waitFor(
      "the other attestor answered busy",
      async () => {
        for (const node of [a, b]) if ((await history(node)).some((record) => record.reason === "busy")) return node;
        return undefined;
      },
      { timeoutMs: 30_000, intervalMs: 50 },
    );
    await new Promise((resolve) => setTimeout(resolve, HOLD_MS));
    const releasedAt = Date.now();
    runner.release();

    for (const node of [a, b]) {
      await waitFor("both attestors' passes", async () => (await history(node)).some((record) => record.outcome === "pass"), {
        timeoutMs: 30_000,
        intervalMs: 50,
        state: async () => (await history(node)).map(({ outcome, reason, trigger, startedAtMs }) => ({ outcome, reason, trigger, startedAtMs })),
      });
    }
    // The busy attestor: busy answers, then a pass, all from the one scan and its retries (scheduled, a few seconds apart).
    const records = await history(busyOne);
    const busies = records.filter((record) => record.reason === "busy");
    const pass = records.find((record) => record.outcome === "pass")!;
    assert.deepEqual(
      records.map((record) => `${record.outcome}:${record.reason ?? ""}`),
      [...busies.map(() => "error:busy"), "pass:"],
      "busy answers, then the pass: nothing failed",
    );
    assert.ok(busies.length >= 1 && busies.length <= BUSY_RETRIES, `${busies.length} busy answers`);
    assert.ok(
      records.every((record) => record.trigger === "schedule"),
      "every try is the scheduled challenge",
    );
    // Each retry waited BUSY_RETRY_BASE_MS × attempt × (0.5..1.5) after the busy answer before it.
    for (const [n, busy] of busies.entries()) {
      const next = records[records.indexOf(busy) + 1]!;
      const waited = next.startedAtMs - busy.finishedAtMs;
      assert.ok(waited >= BUSY_RETRY_BASE_MS * (n + 1) * 0.5 - 50, `retry ${n + 1} came ${waited} ms after the busy answer`);
      assert.ok(waited <= BUSY_RETRY_BASE_MS * (n + 1) * 1.5 + 2_000, `retry ${n + 1} came ${waited} ms after the busy answer`);
    }
    // The pass came within one retry's wait of the slot being freed, not an hour later at the next scan.
    assert.ok(pass.startedAtMs - releasedAt <= BUSY_RETRY_BASE_MS * (busies.length + 1) * 1.5 + 2_000, `${pass.startedAtMs - releasedAt} ms after the slot was freed`);
    for (const node of [a, b]) assert.equal((await node.attestor.failures.ofMachine(machineId, Date.now())).failures, 0, "a busy answer is never a failure");
  });
});

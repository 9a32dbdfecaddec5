/**
 * Issue 35, item 4: a capacity fault without a transcript (a machine too slow under light in-lease
 * checks, no wrong row) needs every signer's own evidence: `failuresToFault` (3) of its last
 * `failureWindow` (4) checks of the machine during the lease failed. Shown here over real libp2p
 * nodes on 127.0.0.1 and a devnet (light-checks.test.ts shows the rule on the state machines):
 * two attestors (quorum two) drive their light checks of a leased machine whose runner the test
 * makes slow or not; one attestor at 3 of 4 proposes, the other at 2 of 4 declines and the lease
 * stays active; once the other has 3 of 4 of its own the fault lands (kind 2), once.
 */
import assert from "node:assert/strict";
import { parseEventLogs } from "viem";
import { leaseMarketAbi } from "../../common/abi.js";
import { readLease } from "../../common/chain/market.js";
import { devnetAccount } from "../../common/devnet.js";
import { FaultKind } from "../../common/eip712.js";
import { CpuRunner, type Runner, type RunnerChallenge, type RunnerCommitment } from "../../node/attest/runner/index.js";
import type { TestDaemon } from "../support/attest.js";
import { leasedProvider, NO_OWN_CHECKS, startAttestorPair, TEST_LIVENESS as LIVENESS } from "../support/attest-lease.js";
import { startDevnet, type Devnet } from "../support/devnet.js";
import { waitFor } from "../support/wait.js";

const ATTESTORS = [6, 7] as const;
/** cpu-devnet with a 1 s allowance: a light check's deadline is about 1.1 s, its cutoff 4.4 s. */
const CHALLENGE = { preset: "cpu-devnet", latencyAllowanceMs: 1_000 };
/** A slow machine's commit comes this late: after the deadline, before the cutoff (`slow_for_class`, no wrong row). */
const SLOW_MS = 2_500;

/** Honest rows, committed SLOW_MS late while `slow` (a machine slower than its class under the renter's load). */
class SlowRunner implements Runner {
  readonly name = "slow";
  slow = false;
  constructor(private readonly cpu: Runner) {}
  async computeCommit(challenge: RunnerChallenge, options?: { signal?: AbortSignal }): Promise<RunnerCommitment> {
    const commitment = await this.cpu.computeCommit(challenge, options);
    if (this.slow) await new Promise((resolve) => setTimeout(resolve, SLOW_MS));
    return commitment;
  }
  async close(): Promise<void> {}
}

describe("the co-signer's 3-of-4 rule over libp2p: a slow machine is faulted only once each signer saw 3 of its last 4 light checks fail (issue 35, item 4)", function () {
  this.timeout(120_000);
  let devnet: Devnet;
  let cpu: CpuRunner;
  const nodes: TestDaemon[] = [];
  before(async () => {
    devnet = await startDevnet({ params: { faultQuorum: 2 }, attestors: ATTESTORS.map((i) => devnetAccount(i).address), wallClockBlocks: true });
    cpu = new CpuRunner({ workers: 1 });
  });
  after(async () => {
    for (const node of nodes.reverse()) await node.close().catch(() => undefined);
    await cpu?.close();
    await devnet?.close();
  });

  it("B at 3 of 4 proposes; A at 2 of 4 declines and the lease stays active; A's third failure makes the fault land, once", async () => {
    const market = devnet.deployment.contracts.market!;
    const runner = new SlowRunner(cpu);
    const { provider, machineIds, leaseId } = await leasedProvider(devnet, 1, runner);
    nodes.push(provider.daemon);
    const [machineId] = machineIds as [number];
    // Neither attestor runs checks of its own (the test drives them) nor scans: only what the test asks happens.
    const attest = { liveness: LIVENESS, leaseChecks: NO_OWN_CHECKS, attestor: { scheduleIntervalMs: 3_600_000 }, challenge: CHALLENGE };
    const { a, b } = await startAttestorPair(devnet, provider.daemon, attest, nodes);
    for (const { daemon } of [a, b]) await waitFor("the offer in the book", () => daemon.offers.book.byMachine(machineId).length > 0, { timeoutMs: 30_000 });
    await waitFor("both attestors tracking the lease", () => [a, b].every(({ attestor }) => attestor.prober!.state(leaseId) !== undefined), { timeoutMs: 30_000 });

    /** One light in-lease check by `who`, the machine slow or not; returns its outcome and reason. */
    const check = async (who: typeof a, slow: boolean) => {
      runner.slow = slow;
      const record = await who.attestor.challenger.challenge(machineId, "lease");
      assert.ok(record.light, "an in-lease check is light");
      assert.deepEqual([record.outcome, record.reason], slow ? ["fail", "slow_for_class"] : ["pass", null], record.detail ?? "");
    };
    const status = async () => (await readLease(devnet.admin.publicClient, market, leaseId)).status;

    // B: fail, pass, fail, fail: 3 of its last 4. It proposes a capacity fault, with no transcript to show.
    for (const slow of [true, false, true, true]) await check(b, slow);
    const proposal = await waitFor("B's capacity fault proposal", () => b.attestor.faults!.get(leaseId, FaultKind.capacity), { timeoutMs: 10_000, intervalMs: 50 });
    assert.equal(proposal.role, "proposer");
    assert.equal(proposal.evidence, undefined, "no wrong row: no transcript");

    // A: fail, pass, fail: 2 of its last 3 (of 4). It has no evidence of its own and declines; nothing lands.
    for (const slow of [true, false, true]) await check(a, slow);
    await new Promise((resolve) => setTimeout(resolve, 2 * LIVENESS.backupSubmitDelayMs));
    assert.equal(await status(), "Active", "one attestor's 3 of 4 is not a quorum");
    const signers = b.attestor.faults!.get(leaseId, FaultKind.capacity)?.signatures.map((s) => s.signer) ?? [];
    assert.deepEqual(signers, [devnetAccount(ATTESTORS[1]).address], "only B signed while A held 2 of 4");

    // A's third failure of 4: now both hold their own evidence, and the fault lands.
    await check(a, true);
    const ended = await waitFor(
      "the lease faulted on-chain",
      async () => {
        const lease = await readLease(devnet.admin.publicClient, market, leaseId);
        return lease.status !== "Active" ? lease : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 250 },
    );
    assert.equal(ended.endReason, "Faulted");
    const events = parseEventLogs({ abi: leaseMarketAbi, logs: await devnet.admin.publicClient.getLogs({ address: market, fromBlock: devnet.deployment.deploymentBlock }) });
    const submitted = events.filter((event) => event.eventName === "FaultSubmitted" && event.args.leaseId === leaseId);
    assert.equal(submitted.length, 1, "faulted once");
    assert.ok(submitted[0]!.eventName === "FaultSubmitted" && submitted[0]!.args.kind === FaultKind.capacity);
  });
});

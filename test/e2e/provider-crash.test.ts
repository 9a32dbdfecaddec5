import assert from "node:assert/strict";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { COMPLETION_HOLD_SECONDS } from "../../common/chain/market.js";
import { startBundleServer, type BundleServer } from "../support/bundles.js";
import { advanceChain, startDevnet, type Devnet } from "../support/devnet.js";
import { ProviderProcess, writeProviderConfig } from "../support/provider-process.js";
import { leaseEvents, TestRenter } from "../support/renter.js";
import { isRunning } from "../support/processes.js";
import { waitFor } from "../support/wait.js";

async function runs(file: string): Promise<{ pid: number }[]> {
  const text = await readFile(file, "utf8").catch(() => "");
  return text
    .split("\n")
    .filter((line) => line.startsWith("run "))
    .map((line) => ({ pid: Number(line.split(" ")[1]) }));
}

describe("provider agent: crash and restart", function () {
  this.timeout(120_000);
  let devnet: Devnet;
  let bundles: BundleServer;
  let dir: string;
  let renter: TestRenter;
  let node: ProviderProcess | undefined;

  before(async () => {
    devnet = await startDevnet();
    bundles = await startBundleServer();
    dir = await mkdtemp(path.join(tmpdir(), "suanli-crash-"));
    renter = await TestRenter.start(devnet, 2);
  });
  after(async () => {
    if (node && node.child.exitCode === null) await node.kill("SIGKILL");
    await renter?.close();
    await bundles?.close();
    await devnet?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("SIGKILL mid-lease: the restarted node kills the orphaned task, terminates its lease once, and serves a lease opened while it was down", async () => {
    const { configFile } = await writeProviderConfig(devnet, 1, { dir, overrides: { metrics: { enabled: true, port: 0 } } });

    node = await ProviderProcess.start(configFile);
    const machineId = node.ready.machines[0]!.machineId;
    const providerBefore = await renter.balance(node.ready.address);
    const markA = path.join(dir, "a.log");
    const markB = path.join(dir, "b.log");
    const long = await bundles.bundle({ "run.sh": 'echo "run $$ $(date +%s%3N)" >> "$MARK"\necho started\nsleep 60\n' });
    const short = await bundles.bundle({ "run.sh": 'echo "run $$ $(date +%s%3N)" >> "$MARK"\nsleep 1\necho finished\n' });

    // Lease A runs a long task; a reservation for B is held but not opened yet.
    const leaseA = await renter.rent(node.peer, { machineId, units: 1, duration: 120 });
    await renter.sendTask(node.peer, leaseA, { bundle: long, command: "sh run.sh", env: { MARK: markA } });
    await renter.waitStatus(node.peer, leaseA, (s) => s.state === "running", "task A to run");
    const holdB = await renter.reserve(node.peer, { machineId, units: 1, duration: 60 });
    assert.equal(holdB.accepted, true);
    if (!holdB.accepted) return;

    // The crash: the task survives its node, and nobody watches it.
    assert.equal(await node.kill("SIGKILL"), null);
    const [orphan] = await runs(markA);
    assert.ok(orphan && (await isRunning(orphan.pid)), "the task outlived the killed node");
    // Lease B opens while the node is down (the renter needs only the signed acceptance).
    const leaseB = await renter.open(holdB, { machineId, units: 1, duration: 60 });

    node = await ProviderProcess.start(configFile);
    // A: what was left of the task is killed and the lease terminated; it is never started again.
    const terminated = await renter.waitLease(leaseA, ["Ended", "Settled"], 30_000);
    assert.equal(terminated.endReason, "Terminated");
    await waitFor("the orphaned task to be gone", async () => !(await isRunning(orphan.pid)), { timeoutMs: 10_000 });
    const statusA = await renter.waitStatus(node.peer, leaseA, (s) => s.state === "failed", "A's status after the restart");
    assert.equal(statusA.error?.name, "TaskLostError");

    // B: the restarted node found the lease in the chain's history and runs its task once.
    await renter.sendTask(node.peer, leaseB, { bundle: short, command: "sh run.sh", env: { MARK: markB } });
    await renter.waitStatus(node.peer, leaseB, (s) => s.state === "succeeded", "task B to finish");
    const settledA = await renter.waitLease(leaseA, ["Settled"], 30_000);
    const completedB = await renter.waitLease(leaseB, ["Settled"], 30_000);
    assert.equal(completedB.endReason, "Completed");
    // B's last fault window of pay is held with its collateral (issue #34): past the window, the restarted node's own
    // claim releases it.
    await advanceChain(devnet, COMPLETION_HOLD_SECONDS + 1);
    const settledB = await renter.waitReleased(leaseB);
    assert.equal((await runs(markA)).length, 1, "task A ran once");
    assert.equal((await runs(markB)).length, 1, "task B ran once");

    // Money: each lease paid exactly once, what it accrued; A's renter also got the early-end penalty.
    let paid = 0n;
    for (const leaseId of [leaseA, leaseB]) {
      const events = await leaseEvents(devnet, leaseId);
      const activated = events.find((e) => e.eventName === "LeaseActivated")!.args as { activatedAt: number; end: number };
      const ended = events.find((e) => e.eventName === "LeaseEnded")!.args as { stopAt: number; providerTotal: bigint; credit: bigint };
      const claims = events.filter((e) => e.eventName === "LeaseClaimed").map((e) => (e.args as { amount: bigint }).amount);
      assert.equal(ended.providerTotal, 100n * BigInt(ended.stopAt - activated.activatedAt));
      assert.equal(
        claims.reduce((a, b) => a + b, 0n),
        ended.providerTotal,
        `lease ${leaseId} paid once`,
      );
      paid += ended.providerTotal;
      if (leaseId === leaseA) {
        const collateral = (100n * 120n * 1_000n) / 10_000n;
        assert.equal(ended.credit, (collateral * BigInt(activated.end - ended.stopAt)) / BigInt(activated.end - activated.activatedAt));
      }
    }
    assert.equal(settledA.paid + settledB.paid, paid);
    const collateralPenalty = ((await leaseEvents(devnet, leaseA)).find((e) => e.eventName === "LeaseEnded")!.args as { credit: bigint }).credit;
    assert.equal((await renter.balance(node.ready.address)) - providerBefore, paid);
    assert.ok(collateralPenalty > 0n);

    // The node's Prometheus endpoint (metrics.enabled) counts what happened since the restart.
    const metrics = await (await fetch(node.ready.metricsUrl!)).text();
    assert.match(metrics, /suanli_provider_tasks_total\{result="lost"\} 1/);
    assert.match(metrics, /suanli_provider_tasks_total\{result="succeeded"\} 1/);
    assert.match(metrics, /suanli_provider_transactions_total\{function="terminate",outcome="ok"\} 1/);
    assert.match(metrics, /suanli_provider_leases\{state="running"\} 0/);

    // A clean stop.
    assert.equal(await node.kill("SIGTERM"), 0);
  });
});

/**
 * Chaos on the provider's host: faults of the machine a provider node runs on rather than of the
 * network or the chain (harness in test/support/chaos-host.ts). Each case runs a real provider
 * node process on a devnet and ends with the money check (`checkLedger`).
 *
 * - The node's data dir put back from an older copy (a restored backup): the chain is the truth;
 *   the node must not activate or claim twice, lose the lease, or leave the task it forgot
 *   running on a unit.
 * - The data dir's disk full mid-lease: writes fail with a clear error, nothing half-written; the
 *   node keeps its promises or ends the lease by the rules, and recovers once space is back.
 * - The node's wall clock 30 s off the chain's (ahead and behind): the lease's timing follows the
 *   chain's time.
 */
import assert from "node:assert/strict";
import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { leaseMarketAbi } from "../../common/abi.js";
import { COMPLETION_HOLD_SECONDS } from "../../common/chain/market.js";
import { startBundleServer, type BundleServer } from "../support/bundles.js";
import { checkLedger, RpcProxy, watchWallets, type SeenTransaction, type WatchedWallet } from "../support/chaos.js";
import { mineBlock, processesWithMarker, removeDir, restoreDir, skewedClockEnv, SmallDisk, snapshotDir } from "../support/chaos-host.js";
import { advanceChain, startDevnet, type Devnet } from "../support/devnet.js";
import { ProviderProcess, writeProviderConfig } from "../support/provider-process.js";
import { leaseEvents, TestRenter } from "../support/renter.js";
import { waitFor } from "../support/wait.js";

describe("chaos: faults of the provider's host", function () {
  this.timeout(120_000);
  let devnet: Devnet;
  let bundles: BundleServer;
  let proxy: RpcProxy;
  let dir: string;
  let renter: TestRenter;
  /** The renter's wallet, watched from before its first lease (the ledger counts every lease's events). */
  let renterWallet: WatchedWallet;
  const nodes: ProviderProcess[] = [];
  const disks: SmallDisk[] = [];

  before(async () => {
    devnet = await startDevnet();
    bundles = await startBundleServer();
    proxy = await RpcProxy.start(devnet.rpcUrl);
    dir = await mkdtemp(path.join(tmpdir(), "suanli-chaos-host-"));
    renter = await TestRenter.start(devnet, 2);
    renterWallet = (await watchWallets(devnet, [{ address: renter.address, role: "renter" }]))[0]!;
  });
  after(async () => {
    for (const node of nodes) if (node.child.exitCode === null && node.child.signalCode === null) await node.kill("SIGKILL");
    for (const disk of disks) await disk.unmount();
    await renter?.close();
    await proxy?.close();
    await bundles?.close();
    await devnet?.close();
    await removeDir(dir);
  });

  /** Writes the config of provider `index` (its data in `dataDir`, the chain through the proxy) and returns its path. */
  async function providerConfig(index: number, dataDir: string, provider: Record<string, unknown> = {}): Promise<string> {
    return (await writeProviderConfig(devnet, index, { dir, dataDir, rpcUrl: proxy.url, overrides: { provider } })).configFile;
  }

  async function startNode(configFile: string, env?: Record<string, string>): Promise<ProviderProcess> {
    const node = await ProviderProcess.start(configFile, { env });
    nodes.push(node);
    return node;
  }

  /** The market transactions sent for `leaseId` from now until the returned function is called. */
  function recordTransactions(leaseId: bigint): { seen: SeenTransaction[]; stop: () => void } {
    const seen: SeenTransaction[] = [];
    const stop = proxy.onTransaction((tx) => {
      const forLease = Array.isArray(tx.args[0]) ? (tx.args[0] as unknown[]).includes(leaseId) : tx.args[0] === leaseId;
      if (forLease) seen.push(tx);
    });
    return { seen, stop };
  }

  async function assertMoney(wallets: WatchedWallet[], machineId: number): Promise<void> {
    const ledger = await checkLedger(devnet, { wallets, capacity: new Map([[machineId, 2]]) });
    assert.deepEqual(ledger.violations, []);
  }

  it("a data dir restored from before the lease's activation and claim: no second activate or claim, the forgotten task is killed, the lease ends once by the rules", async () => {
    const dataDir = path.join(dir, "restore-data");
    const configFile = await providerConfig(3, dataDir);
    let node = await startNode(configFile);
    const machineId = node.ready.machines[0]!.machineId;
    const wallets = [renterWallet, ...(await watchWallets(devnet, [{ address: node.ready.address, role: "provider" }]))];

    const marker = `chaos-restore-${process.pid}`;
    const task = await bundles.bundle({ "run.sh": "echo started\nsleep 60\necho finished\n" });
    // Longer than the fault window: a claim pays until now - 600 s (issue #34), so the node can claim while it runs.
    const leaseId = await renter.rent(node.peer, { machineId, units: 1, duration: 900 });
    // The node has written the lease's record (the status is served from it): back it up now.
    assert.equal((await renter.status(node.peer, leaseId)).state, "waiting_spec");
    const backup = path.join(dir, "restore-backup");
    await snapshotDir(dataDir, backup);

    await renter.sendTask(node.peer, leaseId, { bundle: task, command: `sh run.sh ${marker}` });
    await renter.waitStatus(node.peer, leaseId, (s) => s.state === "running", "the task to run");
    // The devnet's clock moves with blocks: past the fault window at once, then a block at a time until the node has
    // claimed part of the lease.
    await advanceChain(devnet, COMPLETION_HOLD_SECONDS);
    await waitFor(
      "the node to claim",
      async () => {
        await mineBlock(devnet.rpcUrl);
        return (await renter.lease(leaseId)).paid > 0n;
      },
      { timeoutMs: 60_000, intervalMs: 500 },
    ).catch((error: unknown) => {
      throw new Error(`${(error as Error).message}\n${node.stderr.slice(-30).join("\n")}`);
    });
    const before = await renter.lease(leaseId);
    assert.equal(before.status, "Active");

    await node.kill("SIGKILL");
    assert.ok((await processesWithMarker(marker)).length > 0, "the task outlived its node (it leads its own process group)");
    await restoreDir(backup, dataDir);

    const txs = recordTransactions(leaseId);
    node = await startNode(configFile);
    const ended = await renter.waitLease(leaseId, ["Ended", "Settled"], 30_000);
    assert.equal(ended.endReason, "Terminated", "the task the restored record did not know of was lost: the lease is terminated by the rules");
    await waitFor("the forgotten task's processes to be killed", async () => (await processesWithMarker(marker)).length === 0, { timeoutMs: 10_000 });
    const status = await renter.status(node.peer, leaseId);
    assert.equal(status.error?.name, "TaskLostError", `the renter is told why (${JSON.stringify(status.error)})`);
    await renter.waitLease(leaseId, ["Settled"], 30_000);
    txs.stop();
    assert.deepEqual(
      txs.seen.filter((tx) => tx.functionName === "activate"),
      [],
      "the restored node did not activate again",
    );
    const events = await leaseEvents(devnet, leaseId);
    assert.equal(events.filter((e) => e.eventName === "LeaseActivated").length, 1, "activated once");
    assert.equal(events.filter((e) => e.eventName === "LeaseEnded").length, 1, "ended once");
    await assertMoney(wallets, machineId);

    // Both units are free again: a lease of the whole machine runs on the restored node.
    const next = await renter.rent(node.peer, { machineId, units: 2, duration: 30 });
    await renter.sendTask(node.peer, next, { bundle: await bundles.bundle({ "run.sh": "echo finished\n" }), command: "sh run.sh" });
    await renter.waitStatus(node.peer, next, (s) => s.state === "succeeded", "the next task to finish");
    assert.equal((await renter.waitLease(next, ["Settled"], 30_000)).endReason, "Completed");
    await assertMoney(wallets, machineId);
    assert.equal(await node.kill("SIGTERM"), 0);
  });

  it("the data dir's disk full mid-lease: writes fail with a clear error, the lease is kept or ended by the rules, and the node recovers once space is back", async () => {
    const dataDir = path.join(dir, "full-data");
    // Mounting needs root; where it is refused the test fails and says why (no silent skip).
    const disk = await SmallDisk.mount(dataDir, 32 * 1024 * 1024);
    disks.push(disk);
    const configFile = await providerConfig(4, dataDir);
    const node = await startNode(configFile);
    const machineId = node.ready.machines[0]!.machineId;
    const wallets = [renterWallet, ...(await watchWallets(devnet, [{ address: node.ready.address, role: "provider" }]))];

    // The task ends once the test says so (a file appears; at most 30 s): after the disk is full.
    const go = path.join(dir, "full-go");
    const task = await bundles.bundle({ "run.sh": 'echo started\ni=0\nwhile [ ! -e "$1" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done\necho finished\n' });
    const leaseId = await renter.rent(node.peer, { machineId, units: 1, duration: 60 });
    // A 16 KiB variable makes every write of this lease's record (the record keeps the spec) larger
    // than the slack a filled tmpfs may leave in the last page of level's log: the task's end
    // cannot slip into that slack, so its write fails whatever the page alignment.
    await renter.sendTask(node.peer, leaseId, { bundle: task, command: `sh run.sh ${go}`, env: { PAD: "x".repeat(16 * 1024) } });
    await renter.waitStatus(node.peer, leaseId, (s) => s.state === "running", "the task to run");

    const filled = await disk.fill();
    assert.equal(await disk.free(), 0, `the disk is full (${filled} bytes written)`);
    await writeFile(go, "");
    // The task ends while nothing can be written: the node says so, keeps the result in memory and stays up.
    const refused = await waitFor("the node to log that it cannot record the task's end", () => node.stderr.find((line) => line.includes("Cannot record the task's end")), {
      timeoutMs: 20_000,
    }).catch((error: unknown) => {
      throw new Error(
        `${(error as Error).message}\n${node.stderr
          .filter((l) => !l.includes("Lease reconciliation failed"))
          .slice(-30)
          .join("\n")}`,
      );
    });
    assert.match(refused, /"level":"error".*no space left/i, "a clear error naming the full disk");
    // A new lease is refused cleanly while the node cannot record its reservation: nothing opens, nothing is paid.
    const leasesBefore = await devnet.admin.publicClient.readContract({ address: devnet.deployment.contracts.market!, abi: leaseMarketAbi, functionName: "nextLeaseId" });
    await assert.rejects(
      renter.rent(node.peer, { machineId, units: 1, duration: 60 }),
      /reserve refused: busy .*disk is full/,
      "the reservation cannot be recorded, so it is refused, saying why",
    );
    assert.equal(await devnet.admin.publicClient.readContract({ address: devnet.deployment.contracts.market!, abi: leaseMarketAbi, functionName: "nextLeaseId" }), leasesBefore);
    assert.equal((await renter.lease(leaseId)).status, "Active", "the lease waits while the node cannot record its task's end");
    assert.equal(node.child.exitCode, null, `the node survived the full disk:\n${node.stderr.slice(-20).join("\n")}`);

    // Space comes back: the task's end is recorded and reported, the lease completed (not terminated).
    await disk.release();
    const settled = await renter.waitLease(leaseId, ["Settled"], 30_000);
    assert.equal(settled.endReason, "Completed", "the node kept its promise: the task's success was reported");
    assert.equal((await renter.status(node.peer, leaseId)).state, "succeeded");
    await assertMoney(wallets, machineId);

    // The store is whole: the node, killed and restarted on the same data dir, opens it and still knows the result.
    await node.kill("SIGKILL");
    const again = await startNode(configFile);
    const status = await renter.status(again.peer, leaseId);
    assert.equal(status.state, "succeeded", `the restarted node read the lease's record (${JSON.stringify(status.error)})`);
    await assertMoney(wallets, machineId);
    assert.equal(await again.kill("SIGTERM"), 0);
  });

  for (const skew of [-30, 30]) {
    it(`a node whose clock is ${skew > 0 ? "ahead of" : "behind"} the chain's by ${Math.abs(skew)} s activates an idle lease on the chain's time: neither before its margin nor past its start deadline`, async () => {
      const index = skew < 0 ? 5 : 6;
      // A short start window and margin: the node activates a lease whose renter sent no task
      // MARGIN s before its start deadline, in chain time; a 30 s error either way shows.
      const margin = 4;
      const configFile = await providerConfig(index, path.join(dir, `skew-${index}-data`), { terms: { startWindowSeconds: 12 }, leases: { activateMarginSeconds: margin } });
      const node = await startNode(configFile, await skewedClockEnv(skew));
      const machineId = node.ready.machines[0]!.machineId;
      const wallets = [renterWallet, ...(await watchWallets(devnet, [{ address: node.ready.address, role: "provider" }]))];
      const leaseId = await renter.rent(node.peer, { machineId, units: 1, duration: 20 });
      const opened = await renter.lease(leaseId);
      const activated = await renter.waitLease(leaseId, ["Active", "Ended", "Settled", "Cancelled"], 30_000);
      assert.ok(activated.activatedAt > 0, `the node activated the lease (${activated.status}):\n${node.stderr.slice(-15).join("\n")}`);
      assert.ok(activated.activatedAt <= opened.startDeadline, `activated at ${activated.activatedAt}, not past the start deadline ${opened.startDeadline}`);
      assert.ok(
        activated.activatedAt >= opened.startDeadline - margin - 2,
        `activated at ${activated.activatedAt}: not before ${margin} s (and 2 s of polling) ahead of the deadline ${opened.startDeadline} (the renter does not pay for time it did not get)`,
      );
      // The renter's task runs in the time it paid for and the lease completes by the rules.
      await renter.sendTask(node.peer, leaseId, { bundle: await bundles.bundle({ "run.sh": "echo finished\n" }), command: "sh run.sh" });
      await renter.waitStatus(node.peer, leaseId, (s) => s.state === "succeeded", "the task to finish");
      assert.equal((await renter.waitLease(leaseId, ["Settled"], 30_000)).endReason, "Completed");
      await assertMoney(wallets, machineId);
      assert.equal(await node.kill("SIGTERM"), 0);
    });
  }
});

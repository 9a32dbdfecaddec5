/**
 * Resume (issue 36, docs/data.md "Resume"): two real provider nodes (devnet chain, libp2p on
 * 127.0.0.1, level, Helia with data.enabled, bubblewrap) and the real SDK. An interruptible job
 * that counts steps and checkpoints every 5 is preempted by an on-demand renter; the SDK's
 * autoMigrate re-rents it on the other provider from the newest checkpoint, and it finishes having
 * redone at most 5 steps. `suanli resume TASK` re-submits a cancelled task from its checkpoint.
 * The job steps at 0.3 s while the test has to catch it running (its first checkpoint comes after
 * the 10 s period floor), and at FAST once it only has to finish (a resumed run, a run started again).
 */
import assert from "node:assert/strict";
import path from "node:path";
import { devnetAccount } from "../../common/devnet.js";
import { stringifyTagged } from "../../common/json.js";
import { detectBubblewrap } from "../../node/provider/runtime/sandbox.js";
import { createClient, type SuanliClient, type TaskRecord } from "../../sdk/index.js";
import type { ServedBundle } from "../support/bundles.js";
import { lastJson, runCli } from "../support/cli.js";
import { fund, type Devnet } from "../support/devnet.js";
import type { TestProvider } from "../support/provider.js";
import { TestRenter } from "../support/renter.js";
import { connectRenter, startRenterMarket, type RenterMarket } from "../support/renter-market.js";
import { waitFor } from "../support/wait.js";
import { leaseEvents } from "../support/renter.js";
import { readLease } from "../../common/chain/market.js";
import { leaseMarketAbi } from "../../common/abi.js";
import { tokenBalance } from "../support/chaos.js";
import { countingJob } from "../support/counting-job.js";
import { startTestDaemon } from "../support/daemons.js";
import { getData, listData } from "../../sdk/index.js";
import { mkdtemp, readFile } from "node:fs/promises";

const show = (value: unknown) => stringifyTagged(value);
/** The chain's preemption notice here, seconds. */
const NOTICE = 2;
/** Steps between two checkpoints the job writes: a resume redoes at most this many. */
const EVERY = 5;

/** The job: test/support/counting-job.ts, saving its step every EVERY steps. */
const COUNTER = countingJob(EVERY);
/** Seconds a step of a run that only has to finish (the job's $FAST): its steps and their checks stay, the wait goes. */
const FAST = "0.02";
/** How often the tests look for the first checkpoint (10 s away): each look asks a provider and verifies signatures. */
const POLL_MS = 250;

const dataProvider = {
  // A checkpoint nobody serves ends its lease after this (the third test waits for it); one that is served comes in well under a second.
  data: { enabled: true, fetchTimeoutMs: 4_000 },
  provider: {
    inventory: { source: "declared", declared: [{ model: "A100-80GB", count: 1, region: "eu-west" }] },
    minBids: { "A100-80GB": { pricePerUnitSecond: "50" } },
    reserve: { holdSeconds: 5 },
    runtime: { sandbox: "bubblewrap", network: false },
  },
};

describe("resume: a preempted job continues from its newest checkpoint on another provider; suanli resume", function () {
  this.timeout(300_000);
  let market: RenterMarket;
  let dir: string;
  let devnet: Devnet;
  let counter: ServedBundle;
  let providers: TestProvider[];
  let client: SuanliClient;
  const renterIndex = 5;
  // The name the CLI gives the task file in its --state-dir: `suanli resume` and the client read the same records.
  const stateFileName = `tasks-{deployment}-${devnetAccount(renterIndex).address.toLowerCase()}.json`;
  const stateFile = () => path.join(dir, stateFileName);

  const lines = async (taskId: string) => {
    const out: string[] = [];
    for await (const line of client.logs(taskId, { follow: false })) out.push(line.text);
    return out;
  };

  before(async () => {
    assert.equal((await detectBubblewrap()).available, true, "CI installs bubblewrap (.ci/run)");
    // Both providers' offers in the SDK before the tests start.
    market = await startRenterMarket({
      name: "resume",
      devnet: { params: { preemptionNotice: NOTICE } },
      providers: [dataProvider, dataProvider],
      renter: renterIndex,
      fund: 1_000_000_000n,
      renterStateFile: stateFileName,
      freeUnits: 1,
      offers: 2,
      offerTimeoutMs: 30_000,
    });
    ({ work: dir, devnet, providers, client } = market);
    counter = await market.bundles.bundle({ "run.sh": COUNTER });
  });
  after(async () => {
    // A provider the last test closed is closed again at once.
    await market?.close();
  });

  it("an interruptible job preempted by an on-demand renter is re-rented by autoMigrate, resumes from the newest checkpoint and finishes, redoing at most 5 steps, the renter paying only for the seconds each lease ran", async () => {
    const renterAddress = devnetAccount(renterIndex).address;
    const balanceBefore = await tokenBalance(devnet, renterAddress);
    const submitted = await client.submitTask({
      gpuType: "A100",
      gpuCount: 1,
      duration: 120,
      interruptible: true,
      bidPerGpuHour: "0.2",
      attestedOnly: false,
      bundleUrl: counter.url,
      sha256: counter.sha256,
      command: "sh run.sh",
      // Still running when preempted (about 14 s in, 30 s to go); the resumed run is fast.
      env: { TOTAL: "100", FAST },
      checkpointPeriodSeconds: 10,
      autoMigrate: true,
    });
    const first = providers.find((p) => p.peer.address === submitted.provider)!;
    const waiting = client.wait(submitted.taskId, { timeoutMs: 200_000 });
    waiting.catch(() => undefined);
    // A periodic checkpoint first (the SDK records it while it waits), then the on-demand renter takes the unit.
    await waitFor("a periodic checkpoint", async () => (await client.checkpoints(submitted.taskId)).newest !== null, { timeoutMs: 40_000, intervalMs: POLL_MS });
    const preemptor = await TestRenter.start(devnet, 6);
    const demandLease = await preemptor.rent(first.peer, { machineId: first.agent.machines[0]!.machineId, units: 1, duration: 30 });
    // Its own short task starts once the interruptible one stopped; the unit is free again after it.
    assert.equal((await preemptor.sendTask(first.peer, demandLease, { bundle: counter, command: "true" })).state, "accepted");
    const receipt = await waiting;
    await preemptor.close();

    assert.equal(receipt.state, "succeeded", show(receipt));
    assert.equal(receipt.leases.length, 2, show(receipt.leases));
    assert.equal(receipt.leases[0]!.endReason, "Preempted");
    assert.notEqual(receipt.leases[1]!.provider, first.peer.address, "re-rented on the other provider");
    const record = (await client.tasks()).find((task) => task.taskId === submitted.taskId) as TaskRecord;
    const [preempted, resumed] = record.attempts;
    const cid = preempted!.checkpoint?.record.cid;
    assert.ok(cid, `the first lease's newest checkpoint is recorded: ${show(preempted)}`);
    assert.equal(resumed!.resumedFrom, cid, "the new lease resumed from the first lease's newest checkpoint");
    assert.equal(receipt.leases[1]!.resumedFrom, cid, "the receipt names it");
    assert.equal(receipt.leases[0]!.resumedFrom, null);
    assert.equal((await client.status(submitted.taskId)).attempts.at(-1)!.resumedFrom, cid);

    // The first lease's own logs (read as the same wallet): how far it got before the preemption.
    const sameWallet = await TestRenter.start(devnet, renterIndex, 0n);
    const before = (await sameWallet.allLogs(first.peer, preempted!.leaseId)).map((line) => line.text);
    await sameWallet.close();
    const reached = Math.max(...before.filter((line) => line.startsWith("step=")).map((line) => Number(line.slice(5))));
    const after = await lines(submitted.taskId);
    assert.ok(after.includes(`resumed=${cid}`), after.join("\n"));
    const start = Number(after.find((line) => line.startsWith("start="))?.slice(6));
    assert.ok(start > 0 && start % EVERY === 0, `resumed from a saved step: ${start}\n${after.join("\n")}`);
    assert.ok(reached - start <= EVERY && reached >= start, `at most ${EVERY} steps redone: reached ${reached}, resumed at ${start}`);
    assert.ok(after.includes("done=100"), after.join("\n"));
    assert.ok(!after.includes("step=1"), "the resumed lease did not start over");

    // Paid only for delivered seconds: each lease's provider total is units x price x the seconds from its activation to
    // its stop on chain (the preempted one to the end of its notice, while the task flushed its checkpoint), the rest
    // of each deposit came back, and the renter's balance moved by exactly those totals (no SLA credit here).
    let paid = 0n;
    for (const lease of receipt.leases) {
      const events = await leaseEvents(devnet, lease.leaseId);
      const activatedAt = (events.find((e) => e.eventName === "LeaseActivated")!.args as { activatedAt: number }).activatedAt;
      const ended = events.find((e) => e.eventName === "LeaseEnded")!.args as { stopAt: number; providerTotal: bigint; refund: bigint };
      const view = await readLease(devnet.admin.publicClient, devnet.deployment.contracts.market!, lease.leaseId);
      const delivered = BigInt(view.units) * view.pricePerUnitSecond * BigInt(ended.stopAt - activatedAt);
      assert.equal(ended.providerTotal, delivered, `lease ${lease.leaseId}: paid for ${ended.stopAt - activatedAt} s at ${view.pricePerUnitSecond}: ${show(lease)}`);
      assert.equal(lease.cost, delivered, `the receipt's cost of lease ${lease.leaseId}`);
      assert.equal(lease.credit, 0n);
      paid += delivered;
    }
    assert.equal(receipt.totalCost, paid);
    assert.equal(balanceBefore - (await tokenBalance(devnet, renterAddress)), paid, "the renter's balance moved by the delivered seconds only");
  });

  it("suanli resume TASK: refused while the task runs, then re-submits the cancelled task from its newest checkpoint; a succeeded task is refused, one without checkpoints is NoCheckpointError", async () => {
    const base = [
      "--rpc-url",
      devnet.rpcUrl,
      "--deployments",
      devnet.deploymentsDir,
      "--bootstrap",
      providers.map((p) => p.peer.addr).join(","),
      "--state-dir",
      dir,
      "--devnet-account",
      String(renterIndex),
    ];
    const submitted = await client.submitTask({
      gpuType: "A100",
      gpuCount: 1,
      duration: 120,
      maxPricePerGpuHour: "1",
      attestedOnly: false,
      bundleUrl: counter.url,
      sha256: counter.sha256,
      command: "sh run.sh",
      env: { TOTAL: "120", FAST },
      checkpointPeriodSeconds: 10,
    });
    // While the first checkpoint is awaited (the 10 s period): `suanli resume` refuses the running task, and the renter's own node starts.
    const refusing = runCli(["resume", submitted.taskId, "--json", ...base]);
    const starting = startTestDaemon(devnet, {
      p2p: { bootstrap: providers.map((p) => p.peer.addr) },
      api: { enabled: true, host: "127.0.0.1", port: 0 },
      data: { enabled: true, fetchTimeoutMs: 10_000 },
    });
    starting.then((node) => market.defer(() => node.close())).catch(() => undefined);
    const running = await refusing;
    assert.equal(running.code, 1, running.stderr);
    assert.match(running.stderr, /TaskStillRunningError|still running/);
    await waitFor("a periodic checkpoint", async () => (await client.checkpoints(submitted.taskId)).newest !== null, { timeoutMs: 40_000, intervalMs: POLL_MS });
    assert.equal((await client.status(submitted.taskId)).state, "running", "the task still runs after the refusal");

    await client.cancel(submitted.taskId);

    // suanli checkpoints TASK --pin-on URL: the renter's own node fetches the newest checkpoint from the provider and keeps it.
    const own = await starting;
    const listed = await runCli(["checkpoints", submitted.taskId, "--json", "--pin-on", own.api!.url, ...base], { timeoutMs: 60_000 });
    assert.equal(listed.code, 0, listed.stderr);
    const copy = lastJson<{ newest: { record: { cid: string; seq: string | number } }; pinned: { cid: string; pinned: boolean; name: string; bytes: number } }>(listed.stdout);
    assert.equal(copy.pinned.cid, copy.newest.record.cid, "the newest checkpoint is the one pinned");
    assert.equal(copy.pinned.pinned, true);
    assert.equal(copy.pinned.name, `${submitted.taskId}-checkpoint-${copy.newest.record.seq}`);
    assert.equal((await listData({ nodeUrl: own.api!.url })).items.find((item) => item.cid === copy.pinned.cid)?.pinned, true, "kept on the renter's node");
    const back = path.join(await mkdtemp(path.join(dir, "pinned-checkpoint-")), "copy");
    assert.equal((await getData(copy.pinned.cid, back, { nodeUrl: own.api!.url, timeoutMs: 2_000 })).verified, true, "served by the renter's node from its own copy");
    const saved = await readFile(path.join(back, "state"), "utf8").catch(() => "");
    assert.match(saved, /^\d+/, "the copy holds the job's saved step");

    const resumed = await runCli(["resume", submitted.taskId, "--json", "--max-price", "1", ...base], { timeoutMs: 120_000 });
    assert.equal(resumed.code, 0, resumed.stderr);
    const answer = lastJson<{ taskId: string; leaseId: string; resumedFrom: { cid: string; leaseId: string } }>(resumed.stdout);
    assert.equal(answer.taskId, submitted.taskId);
    assert.equal(answer.resumedFrom.leaseId, String(submitted.leaseId));

    // The CLI wrote the task file: a fresh client follows the new lease.
    const follower = await createClient({
      rpcUrl: devnet.rpcUrl,
      account: devnetAccount(renterIndex),
      bootstrap: providers.map((p) => p.peer.addr),
      deployment: devnet.deploymentsDir,
      stateFile: stateFile(),
    });
    try {
      const receipt = await follower.wait(submitted.taskId, { timeoutMs: 120_000 });
      assert.equal(receipt.state, "succeeded", show(receipt));
      assert.equal(receipt.leases.at(-1)!.resumedFrom, answer.resumedFrom.cid);
      const out: string[] = [];
      for await (const line of follower.logs(submitted.taskId, { follow: false })) out.push(line.text);
      assert.ok(out.includes(`resumed=${answer.resumedFrom.cid}`), out.join("\n"));
      const start = Number(out.find((line) => line.startsWith("start="))?.slice(6));
      assert.ok(start >= EVERY, `resumed from a saved step: ${out.join("\n")}`);
      assert.ok(out.includes("done=120"), out.join("\n"));

      const plain = await follower.submitTask({
        gpuType: "A100",
        gpuCount: 1,
        duration: 60,
        maxPricePerGpuHour: "1",
        attestedOnly: false,
        bundleUrl: counter.url,
        sha256: counter.sha256,
        command: "sh run.sh",
        env: { STEPS: "1" },
      });
      await follower.wait(plain.taskId, { timeoutMs: 60_000 });
      // It succeeded: nothing to resume. One cancelled before any checkpoint: NoCheckpointError.
      await assert.rejects(follower.resume(plain.taskId), { name: "TaskStateError" });
      const stopped = await follower.submitTask({
        gpuType: "A100",
        gpuCount: 1,
        duration: 60,
        maxPricePerGpuHour: "1",
        attestedOnly: false,
        bundleUrl: counter.url,
        sha256: counter.sha256,
        command: "sh run.sh",
        env: { STEPS: "100" },
      });
      await follower.cancel(stopped.taskId);
      await assert.rejects(follower.resume(stopped.taskId), { name: "NoCheckpointError" });
      await assert.rejects(follower.resume(plain.taskId, { duration: "long" as unknown as number }), { name: "InvalidInputError" });
    } finally {
      await follower.close();
    }
  });
  it("when no node serves the checkpoint any more (its provider is gone), the resumed lease does not start and autoMigrate starts the task again from the beginning", async () => {
    // A client of its own: the first one avoids the provider it saw preempted for ten minutes.
    await fund(devnet, await devnet.wallet(8), 1_000_000_000n);
    // Both providers free in its SDK.
    const own = await connectRenter(devnet, { name: "renter 8", account: devnetAccount(8), bootstrap: providers.map((p) => p.peer.addr), freeUnits: 1, offers: 2 });
    market.defer(() => own.close());
    // The lease it opens first (nothing else opens one meanwhile): only that run steps at 0.3 s, the run started again is fast.
    const firstLease = (await devnet.admin.publicClient.readContract({ address: devnet.deployment.contracts.market!, abi: leaseMarketAbi, functionName: "nextLeaseId" })) as bigint;
    const submitted = await own.submitTask({
      gpuType: "A100",
      gpuCount: 1,
      duration: 120,
      interruptible: true,
      bidPerGpuHour: "0.2",
      attestedOnly: false,
      bundleUrl: counter.url,
      sha256: counter.sha256,
      command: "sh run.sh",
      // Checkpoints no other job made (test 1's job, at the same steps, left its CIDs cached on both providers).
      env: { TOTAL: "100", MARK: `run-${Date.now()}`, FAST, SLOW_TASK: `lease-${firstLease}` },
      checkpointPeriodSeconds: 10,
      autoMigrate: true,
    });
    assert.equal(submitted.leaseId, firstLease, "the lease whose run is slow");
    const first = providers.find((p) => p.peer.address === submitted.provider)!;
    const waiting = own.wait(submitted.taskId, { timeoutMs: 200_000 });
    waiting.catch(() => undefined);
    const attempts = async () => ((await own.tasks()).find((task) => task.taskId === submitted.taskId) as TaskRecord).attempts;
    // wait reads the records every second, the provider snapshots every 10 s: the job (30 s at 0.3 s a step) is still running when one is recorded.
    await waitFor("wait to record a checkpoint", async () => (await attempts())[0]!.checkpoint !== undefined, { timeoutMs: 60_000, intervalMs: POLL_MS });
    const preemptor = await TestRenter.start(devnet, 7);
    await preemptor.rent(first.peer, { machineId: first.agent.machines[0]!.machineId, units: 1, duration: 30 });
    await preemptor.close();
    // The only node holding the checkpoint goes away during the notice.
    await first.close();

    const receipt = await waiting;
    assert.equal(receipt.state, "succeeded", show(receipt));
    const [preempted, unavailable, fresh] = await attempts();
    assert.equal(receipt.leases.length, 3, show(receipt.leases));
    assert.equal(unavailable!.resumedFrom, preempted!.checkpoint!.record.cid, "the second lease tried the recorded checkpoint");
    assert.equal(unavailable!.migratedBecause, "CheckpointUnavailable");
    assert.equal(fresh!.resumedFrom, undefined, "the third starts from the beginning");
    const out: string[] = [];
    for await (const line of own.logs(submitted.taskId, { follow: false })) out.push(line.text);
    assert.ok(out.includes("resumed=none") && out.includes("start=0") && out.includes("done=100"), out.join("\n"));
  });
});

/**
 * Checkpoints and resume (issue 36, docs/data.md): a real provider node (devnet chain, libp2p on
 * 127.0.0.1, level, Helia with data.enabled, bubblewrap) snapshots a task's $SUANLI_CHECKPOINT_DIR,
 * signs the records and serves them with the task's status; the renter's own node pins the newest;
 * a second lease resumes from the newest.
 */
import assert from "node:assert/strict";
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { CheckpointSignatureError, checkpointToWire, signCheckpoint, verifyCheckpoints } from "../../common/attest/checkpoint.js";
import { stringifyTagged } from "../../common/json.js";
import { silentLogger } from "../../node/log/logger.js";
import { CheckpointBook } from "../../node/provider/agent/checkpoints.js";
import { detectBubblewrap } from "../../node/provider/runtime/sandbox.js";
import { startBundleServer, type BundleServer, type ServedBundle } from "../support/bundles.js";
import { startDevnet, type Devnet } from "../support/devnet.js";
import { startTestDaemon } from "../support/daemons.js";
import { pinData } from "../../sdk/index.js";
import { startTestProvider, type TestProvider } from "../support/provider.js";
import { leaseEvents, TestRenter } from "../support/renter.js";
import { waitFor } from "../support/wait.js";
import { readLease } from "../../common/chain/market.js";

const show = (value: unknown) => stringifyTagged(value);

/** Counts steps; every 5 steps writes the step into $SUANLI_CHECKPOINT_DIR/state. Resumed, it starts after the saved step. */
const COUNTER = [
  'echo "resumed=${SUANLI_RESUMED_FROM:-none} dir=$SUANLI_CHECKPOINT_DIR"',
  'start=0; if [ -f "$SUANLI_CHECKPOINT_DIR/state" ]; then start=$(cat "$SUANLI_CHECKPOINT_DIR/state"); fi',
  'echo "start=$start"',
  "i=$start; end=$((start + STEPS))",
  'while [ $i -lt $end ]; do i=$((i + 1)); if [ $((i % 5)) -eq 0 ]; then echo $i > "$SUANLI_CHECKPOINT_DIR/state.tmp" && mv "$SUANLI_CHECKPOINT_DIR/state.tmp" "$SUANLI_CHECKPOINT_DIR/state"; fi; sleep 0.5; done',
  'echo "done=$i"',
  "",
].join("\n");

/** The chain's preemption notice in this file, seconds. */
const NOTICE = 6;

/** The time the interruptible task takes to flush after SIGTERM, seconds (the notice's snapshot is taken meanwhile). */
const FLUSH_SECONDS = 1.5;

/**
 * Writes "running" into its checkpoint folder and runs until SIGTERM, which it answers by flushing:
 * after FLUSH_SECONDS, "flushed <unix ms the signal came>" replaces the state (written aside, then
 * renamed), and it exits.
 */
const INTERRUPTIBLE = [
  'echo running > "$SUANLI_CHECKPOINT_DIR/state"',
  `trap 'got=$(date +%s%3N); sleep ${FLUSH_SECONDS}; echo "flushed $got" > "$SUANLI_CHECKPOINT_DIR/state.tmp" && mv "$SUANLI_CHECKPOINT_DIR/state.tmp" "$SUANLI_CHECKPOINT_DIR/state"; exit 0' TERM`,
  "while :; do sleep 0.1; done",
  "",
].join("\n");

/** A small checkpoint, a period for it to be taken, then a flood past the provider's quota. */
const FLOOD = ['echo 5 > "$SUANLI_CHECKPOINT_DIR/state"', "sleep 13", 'head -c 300000 /dev/zero > "$SUANLI_CHECKPOINT_DIR/flood.bin"', "echo flooded", ""].join("\n");

describe("provider: checkpoints signed and served, and resume from one", function () {
  this.timeout(120_000);
  let root: string;
  let devnet: Devnet;
  let bundles: BundleServer;
  let provider: TestProvider;
  let renter: TestRenter;
  let machineId: number;
  let counter: ServedBundle;
  let flood: ServedBundle;
  let interruptible: ServedBundle;

  before(async () => {
    assert.equal((await detectBubblewrap()).available, true, "CI installs bubblewrap (.ci/run)");
    root = await mkdtemp(path.join(tmpdir(), "suanli-provider-checkpoints-"));
    await chmod(root, 0o711);
    devnet = await startDevnet({ wallClockBlocks: true, params: { preemptionNotice: NOTICE } });
    bundles = await startBundleServer();
    provider = await startTestProvider(devnet, 1, {
      data: { enabled: true, fetchTimeoutMs: 5_000, checkpointMaxBytes: 64 * 1024 },
      // minBids: it sells interruptible capacity too (the preemption case).
      provider: { reserve: { holdSeconds: 5 }, runtime: { sandbox: "bubblewrap", network: false }, minBids: { "A100-80GB": { pricePerUnitSecond: "50" } } },
    });
    renter = await TestRenter.start(devnet, 2);
    machineId = provider.agent.machines[0]!.machineId;
    counter = await bundles.bundle({ "run.sh": COUNTER });
    flood = await bundles.bundle({ "run.sh": FLOOD });
    interruptible = await bundles.bundle({ "run.sh": INTERRUPTIBLE });
  });
  after(async () => {
    await renter?.close();
    await provider?.close();
    await bundles?.close();
    await devnet?.close();
    if (root) await rm(root, { recursive: true, force: true });
  });

  async function run(spec: unknown) {
    const leaseId = await renter.rent(provider.peer, { machineId, units: 1, duration: 60 });
    assert.equal((await renter.sendTask(provider.peer, leaseId, spec)).state, "accepted");
    const status = await renter.waitStatus(provider.peer, leaseId, (s) => ["succeeded", "failed", "exceeded"].includes(s.state), "the task to end", 40_000);
    const lines = (await renter.allLogs(provider.peer, leaseId)).map((line) => line.text);
    // The next test rents the same unit: wait until the node's completion has ended this lease on chain
    // (on a loaded CI host the next openLease once came before it and reverted).
    await leaseEnded(leaseId);
    return { leaseId, status, lines };
  }

  /** Waits until the lease has ended on chain, so that the next case can rent its units. */
  async function leaseEnded(leaseId: bigint): Promise<void> {
    await waitFor(
      `lease ${leaseId} to end on chain`,
      async () => {
        const lease = await readLease(devnet.admin.publicClient, devnet.deployment.contracts.market!, leaseId);
        return lease.status !== "Open" && lease.status !== "Active";
      },
      { timeoutMs: 60_000 },
    );
  }

  let first: { leaseId: bigint; cid: string };

  it("snapshots the checkpoint folder on the period and at the end; the renter gets the newest record signed by the lease's provider", async () => {
    const { leaseId, status, lines } = await run({ bundle: counter, command: "sh run.sh", env: { STEPS: "28" }, checkpoint: { periodSeconds: 10 } });
    assert.equal(status.state, "succeeded", `${show(status.error)}\n${lines.join("\n")}`);
    assert.ok(
      lines.some((line) => /^resumed=none dir=\/.+\/checkpoint$/.test(line)),
      lines.join("\n"),
    );
    const records = await verifyCheckpoints(status.checkpoints ?? [], { domain: renter.domain, provider: provider.peer.address, leaseId });
    assert.ok(records.length >= 2, `a periodic and an end snapshot: ${show(status.checkpoints)}`);
    const newest = records[0]!;
    assert.equal(newest.record.seq, BigInt(records.length), "sequence numbers 1, 2, ...");
    assert.ok(records[1]!.record.time <= newest.record.time);
    // The newest CID holds the last state the task wrote (step 25 of 28), read back from the provider's store.
    const target = path.join(root, "newest");
    await provider.daemon.data!.get(newest.record.cid, target);
    assert.equal((await readFile(path.join(target, "state"), "utf8")).trim(), "25");
    assert.equal(status.checkpointError, undefined);
    first = { leaseId, cid: newest.record.cid };
  });

  it("the renter's own node pins the newest checkpoint from the provider (pinData with the provider's addresses): fetched over bitswap, pinned, the task's last state", async () => {
    const own = await startTestDaemon(devnet, { data: { enabled: true, fetchTimeoutMs: 10_000 }, api: { enabled: true, host: "127.0.0.1", port: 0 } });
    try {
      const providerAddrs = provider.daemon.p2p.host.getMultiaddrs().map((addr) => addr.toString());
      assert.ok(providerAddrs.every((addr) => addr.includes("/p2p/")));
      const pinned = await pinData(first.cid, { nodeUrl: own.api!.url, providers: providerAddrs, timeoutMs: 10_000, name: "newest-checkpoint" });
      assert.deepEqual([pinned.cid, pinned.pinned], [first.cid, true]);
      assert.ok(own.data!.counters.fetchedBlocks > 0, "fetched from the provider over bitswap");
      // Pinned on the renter's node, with the state the task wrote last.
      const target = path.join(root, "pinned-newest");
      await own.data!.get(first.cid, target, { timeoutMs: 1_000 });
      assert.equal((await readFile(path.join(target, "state"), "utf8")).trim(), "25");
      assert.equal((await own.data!.list()).find((entry) => entry.cid === first.cid)?.pinned, true);
    } finally {
      await own.close();
    }
  });

  it("refuses a record whose signature is not the lease's provider's, or whose fields were altered", async () => {
    const status = await renter.status(provider.peer, first.leaseId);
    const wire = (status.checkpoints ?? []).map((signed) => checkpointToWire(signed));
    const altered = { ...wire[wire.length - 1]!, record: { ...wire[wire.length - 1]!.record, cid: "bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy" } };
    const options = { domain: renter.domain, provider: provider.peer.address, leaseId: first.leaseId };
    await assert.rejects(verifyCheckpoints([...wire, altered], options), (error: Error) => error instanceof CheckpointSignatureError && error.name === "CheckpointSignatureError");
    const stranger = privateKeyToAccount(generatePrivateKey());
    const forged = await signCheckpoint(stranger, renter.domain, { leaseId: first.leaseId, seq: 99n, cid: first.cid, bytes: 3n, time: 1n });
    await assert.rejects(verifyCheckpoints([checkpointToWire(forged)], options), (error: Error) => {
      assert.equal(error.name, "CheckpointSignatureError");
      assert.match(error.message, /not by the lease's provider/);
      return true;
    });
    // The honest records alone verify.
    assert.ok((await verifyCheckpoints(wire, options)).length >= 2);
  });

  it("a second lease resumes from the newest checkpoint: $SUANLI_RESUMED_FROM and a writable copy of its files", async () => {
    const { status, lines, leaseId } = await run({ bundle: counter, command: "sh run.sh", env: { STEPS: "6" }, resumeFrom: first.cid });
    assert.equal(status.state, "succeeded", `${show(status.error)}\n${lines.join("\n")}`);
    assert.ok(
      lines.some((line) => line.startsWith(`resumed=${first.cid} `)),
      lines.join("\n"),
    );
    assert.ok(lines.includes("start=25"), lines.join("\n"));
    assert.ok(lines.includes("done=31"), lines.join("\n"));
    // It wrote step 30 into the copy, and its end snapshot holds it.
    const records = await verifyCheckpoints(status.checkpoints ?? [], { domain: renter.domain, provider: provider.peer.address, leaseId });
    const target = path.join(root, "resumed");
    await provider.daemon.data!.get(records[0]!.record.cid, target);
    assert.equal((await readFile(path.join(target, "state"), "utf8")).trim(), "30");
  });

  it("a folder flooded past data.checkpointMaxBytes is not snapshotted: CheckpointQuotaError, the previous checkpoint stays the newest", async () => {
    const { leaseId, status, lines } = await run({ bundle: flood, command: "sh run.sh", checkpoint: { periodSeconds: 10 } });
    assert.equal(status.state, "succeeded", `${show(status.error)}\n${lines.join("\n")}`);
    assert.ok(lines.includes("flooded"), lines.join("\n"));
    assert.equal(status.checkpointError?.name, "CheckpointQuotaError", show(status));
    assert.match(status.checkpointError!.message, /checkpointMaxBytes/);
    const records = await verifyCheckpoints(status.checkpoints ?? [], { domain: renter.domain, provider: provider.peer.address, leaseId });
    assert.equal(records.length, 1, "the periodic snapshot before the flood, and no other");
    const target = path.join(root, "flooded");
    await provider.daemon.data!.get(records[0]!.record.cid, target);
    assert.equal((await readFile(path.join(target, "state"), "utf8")).trim(), "5");
  });

  it("preemption: SIGTERM as the notice begins; the task flushes its folder and exits within the notice; snapshots as the notice began and after the exit; units held to the notice's end", async () => {
    // Both units, so that the on-demand renter below must preempt; a checkpoint period of a day: no periodic snapshot.
    const leaseId = await renter.rent(provider.peer, { machineId, units: 2, duration: 120, interruptible: true, bidPerUnitSecond: 60n });
    // exec: the trapping script is the task's main process. Without it the /bin/sh -c that runs a
    // string command ends at SIGTERM, and the task with it before its flush (docs/data.md).
    const spec = { bundle: interruptible, command: "exec sh run.sh", checkpoint: { periodSeconds: 86_400 } };
    assert.equal((await renter.sendTask(provider.peer, leaseId, spec)).state, "accepted");
    await renter.waitStatus(provider.peer, leaseId, (s) => s.state === "running", "the interruptible task to run", 40_000);
    const preemptor = await TestRenter.start(devnet, 3);
    const units = async () => Object.fromEntries((await provider.daemon.metrics.providerUnits.get()).values.map((v) => [v.labels.mode, v.value]));
    try {
      const reply = await preemptor.reserve(provider.peer, { machineId, units: 2, duration: 30 });
      assert.ok(reply.accepted, show(reply));
      assert.deepEqual(reply.preempt, [leaseId.toString()]);
      const demandLease = await preemptor.open(reply, { machineId, units: 2, duration: 30 });
      const ended = await renter.waitStatus(
        provider.peer,
        leaseId,
        (s) => s.state === "preempted" && (s.checkpoints?.length ?? 0) >= 2,
        "the task preempted, with its end checkpoint",
        40_000,
      );
      const seenAt = Date.now();
      const unitsThen = await units();
      const preempted = (await leaseEvents(devnet, leaseId)).find((e) => e.eventName === "LeasePreempted")!.args as { stopAt: number };
      const stopAtMs = preempted.stopAt * 1000;
      const records = (await verifyCheckpoints(ended.checkpoints ?? [], { domain: renter.domain, provider: provider.peer.address, leaseId })).reverse();
      assert.equal(records.length, 2, `one as the notice began, one after the task's exit: ${show(ended.checkpoints)}`);
      const states: string[] = [];
      for (const [i, signed] of records.entries()) {
        const target = path.join(root, `preempted-${i}`);
        await provider.daemon.data!.get(signed.record.cid, target);
        states.push((await readFile(path.join(target, "state"), "utf8")).trim());
      }
      assert.equal(states[0], "running", "the notice's snapshot: the state as the notice began, taken while the task was flushing");
      const flushed = /^flushed (\d+)$/.exec(states[1]!);
      assert.ok(flushed, `the end snapshot holds what the task flushed on SIGTERM: ${states[1]}`);
      // Before, the task got SIGTERM only when the notice was over (stopAt), and flushed after it.
      const gotTermAt = Number(flushed[1]);
      assert.ok(gotTermAt < stopAtMs, `SIGTERM came during the notice, not at its end: ${stopAtMs - gotTermAt} ms before stopAt`);
      const flushedRecordAt = Number(records[1]!.record.time);
      assert.ok(flushedRecordAt < stopAtMs, `the flushed checkpoint was signed before the notice ended (${stopAtMs - flushedRecordAt} ms before stopAt)`);
      assert.ok(Number(records[0]!.record.time) <= flushedRecordAt);
      // The task is over, but its units stay the preempted lease's until the notice ends (then the preemptor's).
      if (seenAt < stopAtMs - 300) assert.equal(unitsThen.interruptible, 2, `units during the notice after the task's exit: ${show(unitsThen)}`);
      await waitFor("the units freed at the notice's end", async () => ((await units()).interruptible === 0 ? true : undefined), { timeoutMs: 20_000 });
      assert.ok(Date.now() >= stopAtMs - 1_000, `freed at the notice's end, not before (${stopAtMs - Date.now()} ms before stopAt)`);
      // The on-demand lease runs a short task and ends, so that the units are free for the next case.
      assert.equal((await preemptor.sendTask(provider.peer, demandLease, { bundle: counter, command: "true" })).state, "accepted");
      await leaseEnded(demandLease);
    } finally {
      await preemptor.close();
    }
  });

  it("checkpoints stay for the retention the offers state, then go: records no longer served, their CIDs unpinned; a lease whose task has not ended keeps them", async () => {
    const offer = await waitFor("the machine's offer", () => provider.daemon.offers.publisher!.current(machineId));
    assert.equal(offer.retention?.checkpointSeconds, 7 * 86_400, "the default data.checkpointRetentionSeconds, stated in the offer");
    // A book of its own on the provider's data plane, with an hour's retention, so that the sweep's clock can be moved.
    const book = new CheckpointBook({ data: provider.daemon.data!, dataDir: path.join(root, "retention"), maxBytes: 1 << 20, retentionSeconds: 3_600, logger: silentLogger() });
    try {
      const signer = { account: privateKeyToAccount(generatePrivateKey()), domain: renter.domain };
      const snapshot = async (leaseId: bigint, state: string) => {
        const workspace = path.join(root, `retention-${leaseId}`);
        await mkdir(path.join(workspace, "checkpoint"), { recursive: true });
        await writeFile(path.join(workspace, "checkpoint", "state"), `${state}\n`);
        const signed = await book.snapshot(leaseId, workspace, signer, "end");
        assert.ok(signed, book.lastError(leaseId)?.message);
        return signed.record.cid;
      };
      const pinned = async (cid: string) => (await provider.daemon.data!.list()).some((entry) => entry.cid === cid && entry.pinned);
      // Two of lease 7 (one after the other: the same folder), one of lease 8.
      const ended = [await snapshot(7n, `retention ${Date.now()} a`), await snapshot(7n, `retention ${Date.now()} b`)];
      const running = await snapshot(8n, `retention ${Date.now()} c`);
      const endedAt = 1_000_000;
      await book.ended(7n, endedAt);
      assert.deepEqual(await book.sweep(endedAt + 3_600_000 - 1), [], "a millisecond before the hour is over");
      assert.equal((await book.records(7n)).length, 2);
      assert.ok((await Promise.all(ended.map(pinned))).every(Boolean), "both pinned while kept");
      assert.deepEqual(await book.sweep(endedAt + 3_600_000), [7n], "the hour is over");
      assert.deepEqual(await book.records(7n), []);
      assert.deepEqual(await Promise.all(ended.map(pinned)), [false, false], "its CIDs unpinned");
      assert.equal((await book.records(8n)).length, 1, "lease 8's task has not ended: kept");
      assert.equal(await pinned(running), true);
      assert.deepEqual(await book.sweep(endedAt + 3_600_000), [], "nothing left to sweep");
    } finally {
      await book.close();
    }
  });

  it("refuses a checkpoint period under the floor and a resumeFrom that is not a CID, naming the field", async () => {
    const leaseId = await renter.rent(provider.peer, { machineId, units: 1, duration: 60 });
    await assert.rejects(renter.sendTask(provider.peer, leaseId, { bundle: counter, command: "true", checkpoint: { periodSeconds: 1 } }), (error: Error) => {
      assert.match(error.message, /"checkpoint",\s*"periodSeconds"/);
      assert.match(error.message, /at least 10 seconds/);
      return true;
    });
    await assert.rejects(renter.sendTask(provider.peer, leaseId, { bundle: counter, command: "true", resumeFrom: "not-a-cid" }), /checkpoint CID/);
  });
});

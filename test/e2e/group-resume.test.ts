/**
 * Resume of a group task (issue 36, docs/data.md "Group tasks: the whole group resumes"): two real
 * provider nodes (devnet chain, libp2p on 127.0.0.1, level, Helia with data.enabled, bubblewrap),
 * each a cluster of two one-GPU machines, and the real SDK. An interruptible two-rank job counts
 * steps; each rank checkpoints its own state ("<rank> <step>") every 5 steps and at SIGTERM. An
 * on-demand renter preempts rank 1's machine; the SDK cancels rank 0, waits for both end
 * snapshots, and re-rents the whole group on the other cluster, each new rank from the newest
 * checkpoint of the same rank: both go on from the step they flushed, none from the other's state.
 */
import assert from "node:assert/strict";
import { stringifyTagged } from "../../common/json.js";
import { detectBubblewrap } from "../../node/provider/runtime/sandbox.js";
import type { TaskAttempt, TaskRecord } from "../../sdk/index.js";
import { startRenterMarket, type RenterMarket } from "../support/renter-market.js";
import { TestRenter } from "../support/renter.js";
import { waitFor } from "../support/wait.js";

const show = (value: unknown) => stringifyTagged(value);
/** The chain's preemption notice here, seconds. */
const NOTICE = 3;
/** Steps each rank counts; the first group is preempted about 11 s in (0.3 s a step: 120 s for all, so a loaded host never sees it end before its preemption), the resumed one runs fast (0.02 s a step). */
const TOTAL = 400;

/**
 * Each rank's job (`exec sh run.sh`: the trapping shell is the task's main process). Resumed, it
 * logs whose state it found (`state-of-rank=`) and the step it starts after.
 */
const JOB = [
  'echo "rank=$SUANLI_RANK resumed=${SUANLI_RESUMED_FROM:-none}"',
  'cd "$SUANLI_CHECKPOINT_DIR"',
  'start=0; if [ -f state ]; then read owner start < state; echo "state-of-rank=$owner"; fi',
  'echo "start=$start"',
  'pace=0.3; if [ -n "$SUANLI_RESUMED_FROM" ]; then pace=0.02; fi',
  'save() { echo "$SUANLI_RANK $1" > state.tmp && mv state.tmp state; }',
  "i=$start",
  `trap 'save $i; echo "flushed=$i"; exit 0' TERM`,
  'while [ $i -lt $TOTAL ]; do i=$((i + 1)); echo "step=$i"; if [ $((i % 5)) -eq 0 ]; then save $i; fi; sleep $pace; done',
  'echo "done=$i"',
  "",
].join("\n");

/** A cluster of two one-GPU machines that sells interruptible capacity, with a data plane and bubblewrap. */
const clusterOf = (cluster: string, masterAddress: string) => ({
  // A checkpoint nobody serves ends its lease after this (the second case); one that is served comes in well under a second.
  data: { enabled: true, fetchTimeoutMs: 4_000 },
  provider: {
    inventory: {
      source: "declared",
      declared: [
        { model: "A100-80GB", count: 1, region: "eu-west", interconnect: "fabric", cluster },
        { model: "A100-80GB", count: 1, region: "eu-west", interconnect: "fabric", cluster },
      ],
    },
    minBids: { "A100-80GB": { pricePerUnitSecond: "50" } },
    reserve: { holdSeconds: 5 },
    groupJobs: { masterAddress, masterPort: 29_511 },
    runtime: { sandbox: "bubblewrap", network: false },
    // The cancelled rank has SIGTERM and this long to flush.
    grace: { taskStopMs: 2_000, idleStopMs: 300, preemptionNoticeMs: 1_000 },
  },
});

describe("group resume: a preempted rank moves the whole group, each rank from its own newest checkpoint", function () {
  this.timeout(240_000);
  let market: RenterMarket;
  const renterIndex = 5;

  before(async () => {
    assert.equal((await detectBubblewrap()).available, true, "CI installs bubblewrap (.ci/run)");
    market = await startRenterMarket({
      name: "group-resume",
      devnet: { params: { preemptionNotice: NOTICE } },
      providers: [clusterOf("rack-1", "10.0.0.1"), clusterOf("rack-2", "10.0.0.2")],
      renter: renterIndex,
      fund: 1_000_000_000n,
      freeUnits: 1,
      offers: 4,
      offerTimeoutMs: 30_000,
    });
  });
  after(async () => {
    await market?.close();
  });

  it("rank 1 preempted: rank 0 cancelled, both flush; the group resumes on the other cluster, rank r from rank r's flushed step, nothing lost or redone", async () => {
    const { client, providers, devnet, bundles } = market;
    const bundle = await bundles.bundle({ "run.sh": JOB });
    const submitted = await client.submitTask({
      gpuType: "A100",
      gpuCount: 2,
      colocation: "cluster",
      duration: 120,
      interruptible: true,
      bidPerGpuHour: "0.2",
      attestedOnly: false,
      bundleUrl: bundle.url,
      sha256: bundle.sha256,
      command: "exec sh run.sh",
      env: { TOTAL: String(TOTAL) },
      checkpointPeriodSeconds: 10,
      autoMigrate: true,
    });
    const firstGroup = submitted.attempt.group!;
    assert.equal(firstGroup.length, 2, show(submitted.attempt));
    const record = async () => (await client.tasks()).find((task) => task.taskId === submitted.taskId) as TaskRecord;
    const waiting = client.wait(submitted.taskId, { timeoutMs: 180_000 });
    waiting.catch(() => undefined);
    // wait keeps every rank's newest verified checkpoint in the task file as it appears.
    await waitFor("a periodic checkpoint of each rank", async () => (await record()).attempts[0]!.group!.every((member) => member.checkpoint !== undefined), {
      timeoutMs: 60_000,
      intervalMs: 500,
    });
    const peerOf = (member: TaskAttempt) => providers.find((p) => p.peer.address === member.provider)!.peer;
    const preemptor = await TestRenter.start(devnet, 6);
    try {
      await preemptor.rent(peerOf(firstGroup[1]!), { machineId: firstGroup[1]!.machineId, units: 1, duration: 30 });
      const receipt = await waiting;
      assert.equal(receipt.state, "succeeded", show(receipt));
    } finally {
      await preemptor.close();
    }

    const { attempts } = await record();
    assert.equal(attempts.length, 2, `the group moved once: ${show(attempts)}`);
    assert.equal(attempts[0]!.migratedBecause, "Preempted");
    const [before, after] = [attempts[0]!.group!, attempts[1]!.group!];
    assert.equal(after.length, 2, "the whole group moved");
    for (const member of after) assert.notEqual(member.provider, firstGroup[0]!.provider, "to the other provider's cluster");

    const sameWallet = await TestRenter.start(devnet, renterIndex, 0n);
    try {
      for (const rank of [0, 1]) {
        const cid = before[rank]!.checkpoint?.record.cid;
        assert.ok(cid, `rank ${rank}'s newest checkpoint is recorded`);
        assert.equal(after[rank]!.resumedFrom, cid, `new rank ${rank} resumed from old rank ${rank}'s newest checkpoint`);
        const old = (await sameWallet.allLogs(peerOf(before[rank]!), before[rank]!.leaseId)).map((line) => line.text);
        const flushed = Number(old.find((line) => line.startsWith("flushed="))?.slice(8));
        assert.ok(flushed > 0, `old rank ${rank} got SIGTERM (${rank === 1 ? "the notice" : "the cancel"}) and flushed its step:\n${old.join("\n")}`);
        const now = (await sameWallet.allLogs(peerOf(after[rank]!), after[rank]!.leaseId)).map((line) => line.text);
        assert.ok(now.includes(`rank=${rank} resumed=${cid}`), now.join("\n"));
        assert.ok(now.includes(`state-of-rank=${rank}`), `rank ${rank} found its own rank's state:\n${now.join("\n")}`);
        assert.ok(now.includes(`start=${flushed}`), `rank ${rank} resumed at the step it flushed (${flushed}):\n${now.join("\n")}`);
        const steps = now.filter((line) => line.startsWith("step=")).map((line) => Number(line.slice(5)));
        assert.deepEqual(
          steps,
          Array.from({ length: TOTAL - flushed }, (_, i) => flushed + 1 + i),
          `rank ${rank}: no step redone, none skipped`,
        );
        assert.ok(now.includes(`done=${TOTAL}`), now.join("\n"));
      }
    } finally {
      await sameWallet.close();
    }
  });

  it("a group whose checkpoint no node serves is not failed: every rank starts again from the beginning", async () => {
    const { client, bundles } = market;
    const bundle = await bundles.bundle({ "run.sh": JOB });
    // A well-formed CID of bytes no node holds.
    const missing = "bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy";
    const submitted = await client.submitTask({
      gpuType: "A100",
      gpuCount: 2,
      colocation: "cluster",
      duration: 60,
      maxPricePerGpuHour: "1",
      attestedOnly: false,
      bundleUrl: bundle.url,
      sha256: bundle.sha256,
      command: "exec sh run.sh",
      env: { TOTAL: "3" },
      resumeFrom: missing,
      autoMigrate: true,
    });
    const receipt = await client.wait(submitted.taskId, { timeoutMs: 120_000 });
    assert.equal(receipt.state, "succeeded", show(receipt));
    const { attempts } = (await client.tasks()).find((task) => task.taskId === submitted.taskId) as TaskRecord;
    assert.equal(attempts.length, 2, show(attempts));
    assert.equal(attempts[0]!.migratedBecause, "CheckpointUnavailable");
    assert.deepEqual(
      attempts[0]!.group!.map((member) => member.resumedFrom),
      [missing, missing],
    );
    assert.deepEqual(
      attempts[1]!.group!.map((member) => member.resumedFrom),
      [undefined, undefined],
      "not picked again: from the beginning",
    );
    const sameWallet = await TestRenter.start(market.devnet, renterIndex, 0n);
    try {
      for (const [rank, member] of attempts[1]!.group!.entries()) {
        const peer = market.providers.find((p) => p.peer.address === member.provider)!.peer;
        const lines = (await sameWallet.allLogs(peer, member.leaseId)).map((line) => line.text);
        assert.ok(lines.includes(`rank=${rank} resumed=none`) && lines.includes("start=0") && lines.includes("done=3"), lines.join("\n"));
      }
    } finally {
      await sameWallet.close();
    }
  });

  it("client.resume of a cancelled group: the whole group again, every rank from its own flushed step", async () => {
    const { client, bundles, providers } = market;
    const bundle = await bundles.bundle({ "run.sh": JOB });
    const submitted = await client.submitTask({
      gpuType: "A100",
      gpuCount: 2,
      colocation: "cluster",
      duration: 60,
      maxPricePerGpuHour: "1",
      attestedOnly: false,
      bundleUrl: bundle.url,
      sha256: bundle.sha256,
      command: "exec sh run.sh",
      env: { TOTAL: "200" },
      checkpointPeriodSeconds: 10,
    });
    const first = submitted.attempt.group!;
    const peerOf = (member: TaskAttempt) => providers.find((p) => p.peer.address === member.provider)!.peer;
    const sameWallet = await TestRenter.start(market.devnet, renterIndex, 0n);
    try {
      const logsOf = async (member: TaskAttempt) => (await sameWallet.allLogs(peerOf(member), member.leaseId)).map((line) => line.text);
      // A few steps on each rank (no periodic checkpoint yet: the end snapshots after the cancel are all there is).
      const sofar = async (member: TaskAttempt) => (await sameWallet.logs(peerOf(member), member.leaseId)).lines.map((line) => line.text);
      for (const member of first) await waitFor(`lease ${member.leaseId} at step 3`, async () => (await sofar(member)).includes("step=3"), { timeoutMs: 30_000, intervalMs: 300 });
      await client.cancel(submitted.taskId);
      // The provider's offers show its machines free again before the group can be matched there.
      const provider = first[0]!.provider;
      await waitFor(
        "the cluster's offers free again",
        async () => (await client.queryOffers()).filter((offer) => offer.provider === provider && offer.freeUnits >= 1).length >= 2,
        {
          timeoutMs: 30_000,
          intervalMs: 500,
        },
      );
      const resumed = await client.resume(submitted.taskId);
      const receipt = await client.wait(submitted.taskId, { timeoutMs: 120_000 });
      assert.equal(receipt.state, "succeeded", show(receipt));
      const { attempts } = (await client.tasks()).find((task) => task.taskId === submitted.taskId) as TaskRecord;
      assert.equal(attempts.length, 2, show(attempts));
      const [before, after] = [attempts[0]!.group!, attempts[1]!.group!];
      assert.equal(after.length, 2, "the whole group again");
      assert.equal(resumed.resumedFrom.cid, after[0]!.resumedFrom, "the answer names rank 0's checkpoint");
      for (const rank of [0, 1]) {
        const cid = before[rank]!.checkpoint?.record.cid;
        assert.ok(cid, `rank ${rank}'s end snapshot is recorded`);
        assert.equal(after[rank]!.resumedFrom, cid, `new rank ${rank} resumed from old rank ${rank}'s checkpoint`);
        const flushed = Number((await logsOf(before[rank]!)).find((line) => line.startsWith("flushed="))?.slice(8));
        const now = await logsOf(after[rank]!);
        assert.ok(flushed >= 3 && now.includes(`state-of-rank=${rank}`) && now.includes(`start=${flushed}`), `rank ${rank} from its flushed step ${flushed}:\n${now.join("\n")}`);
        assert.ok(now.includes("done=200"), now.join("\n"));
      }
    } finally {
      await sameWallet.close();
    }
  });
});

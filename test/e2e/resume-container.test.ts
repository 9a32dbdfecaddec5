/**
 * Resume of a container task (issue 36, docs/data.md "Resume"): two real provider nodes with the
 * Podman runtime (devnet chain, libp2p on 127.0.0.1, level, Helia with data.enabled) and the real
 * SDK. An interruptible task in a container counts steps and checkpoints every 5 into
 * $SUANLI_CHECKPOINT_DIR (a folder of its bind-mounted workspace, owned by the container's root
 * through the node's id mapping). An on-demand renter preempts it: the notice's SIGTERM reaches
 * the shell through `podman kill --signal TERM` and the container's init, and the shell flushes
 * the step it reached and exits. The SDK's autoMigrate re-rents it on the other provider from the
 * end snapshot; the resumed container finds the files in its own checkpoint folder, writable by its
 * root, and goes on from the very step the first one reached: nothing lost, nothing redone.
 * Two task containers in all (plus each node's self-test at its start).
 */
import assert from "node:assert/strict";
import { stringifyTagged } from "../../common/json.js";
import type { TaskRecord } from "../../sdk/index.js";
import { BUSYBOX_IMAGE, requireContainerSupport } from "../support/container-images.js";
import { startRenterMarket, type RenterMarket } from "../support/renter-market.js";
import { TestRenter } from "../support/renter.js";
import { waitFor } from "../support/wait.js";

const show = (value: unknown) => stringifyTagged(value);
/** The chain's preemption notice here, seconds: the task flushes at its SIGTERM, well within it. */
const NOTICE = 3;
/** Steps the job counts in all; the first container is preempted about 11 s in (0.3 s a step: 120 s for all, so a loaded host never sees it end before its preemption), the resumed one runs fast (0.02 s a step). */
const TOTAL = 400;

/**
 * The job, a string command (the container's /bin/sh -c runs it, under the container's init).
 * `owner=` is the uid, inside the container, of what the resumed run found in its folder; `probe=`
 * says whether its root can write there. At SIGTERM it saves the step it reached and exits.
 */
const JOB = [
  'echo "resumed=${SUANLI_RESUMED_FROM:-none} dir=$SUANLI_CHECKPOINT_DIR"',
  'cd "$SUANLI_CHECKPOINT_DIR"',
  'start=0; if [ -f state ]; then start=$(cat state); echo "owner=$(stat -c %u state)"; if echo x > probe; then echo probe=ok; rm probe; else echo probe=refused; fi; fi',
  'echo "start=$start"',
  'pace=0.3; if [ -n "$SUANLI_RESUMED_FROM" ]; then pace=0.02; fi',
  "save() { echo $1 > state.tmp && mv state.tmp state; }",
  "i=$start",
  `trap 'save $i; echo "flushed=$i"; exit 0' TERM`,
  `while [ $i -lt ${TOTAL} ]; do i=$((i + 1)); echo "step=$i"; if [ $((i % 5)) -eq 0 ]; then save $i; fi; sleep $pace; done`,
  'echo "done=$i"',
].join("\n");

const containerProvider = {
  data: { enabled: true, fetchTimeoutMs: 10_000 },
  provider: {
    inventory: { source: "declared", declared: [{ model: "A100-80GB", count: 1, region: "eu-west" }] },
    minBids: { "A100-80GB": { pricePerUnitSecond: "50" } },
    reserve: { holdSeconds: 5 },
    // The test host has no GPU: no device flags; tasks have no network.
    runtime: { kind: "container", containerEngine: "podman", containerGpus: "none", network: false },
    grace: { taskStopMs: 2_000, idleStopMs: 300, preemptionNoticeMs: 1_000 },
  },
};

describe("resume of a container task: preempted under Podman, resumed on another provider from its flushed checkpoint", function () {
  this.timeout(240_000);
  let market: RenterMarket;
  const renterIndex = 5;

  before(async () => {
    await requireContainerSupport();
    market = await startRenterMarket({
      name: "resume-container",
      devnet: { params: { preemptionNotice: NOTICE } },
      providers: [containerProvider, containerProvider],
      renter: renterIndex,
      fund: 1_000_000_000n,
      freeUnits: 1,
      offers: 2,
      offerTimeoutMs: 60_000,
    });
  });
  after(async () => {
    await market?.close();
  });

  it("the notice's SIGTERM reaches the container's shell, which flushes its step; autoMigrate resumes it on the other provider from that step, its root owning the files", async () => {
    const { client, providers, devnet } = market;
    const submitted = await client.submitTask({
      gpuType: "A100",
      gpuCount: 1,
      duration: 120,
      interruptible: true,
      bidPerGpuHour: "0.2",
      attestedOnly: false,
      image: BUSYBOX_IMAGE,
      command: JOB,
      checkpointPeriodSeconds: 10,
      autoMigrate: true,
    });
    const first = providers.find((p) => p.peer.address === submitted.provider)!;
    const waiting = client.wait(submitted.taskId, { timeoutMs: 180_000 });
    waiting.catch(() => undefined);
    // A periodic checkpoint first (10 s, the floor), then an on-demand renter takes the unit. It sends no task: no third container.
    await waitFor("a periodic checkpoint", async () => (await client.checkpoints(submitted.taskId)).newest !== null, { timeoutMs: 60_000, intervalMs: 500 });
    const preemptor = await TestRenter.start(devnet, 6);
    try {
      await preemptor.rent(first.peer, { machineId: first.agent.machines[0]!.machineId, units: 1, duration: 30 });
      const receipt = await waiting;
      assert.equal(receipt.state, "succeeded", show(receipt));
      assert.equal(receipt.leases.length, 2, show(receipt.leases));
      assert.equal(receipt.leases[0]!.endReason, "Preempted");
      assert.notEqual(receipt.leases[1]!.provider, first.peer.address, "re-rented on the other provider");
    } finally {
      await preemptor.close();
    }

    const record = (await client.tasks()).find((task) => task.taskId === submitted.taskId) as TaskRecord;
    const [preempted, resumed] = record.attempts;
    const cid = preempted!.checkpoint?.record.cid;
    assert.ok(cid, `the first lease's newest checkpoint is recorded: ${show(preempted)}`);
    assert.equal(resumed!.resumedFrom, cid, "the new lease resumed from the first lease's newest checkpoint");

    // The first container's own logs (read as the same wallet): the step it reached and flushed at the notice's SIGTERM.
    const sameWallet = await TestRenter.start(devnet, renterIndex, 0n);
    const before = (await sameWallet.allLogs(first.peer, preempted!.leaseId)).map((line) => line.text);
    await sameWallet.close();
    const reached = Math.max(0, ...before.filter((line) => line.startsWith("step=")).map((line) => Number(line.slice(5))));
    const flushed = Number(before.find((line) => line.startsWith("flushed="))?.slice(8));
    // The trap runs between two commands: after the last step logged, or (rarely) after the next step's count and before its line.
    assert.ok(
      reached > 0 && (flushed === reached || flushed === reached + 1),
      `the shell got SIGTERM in its container and flushed the step it reached (${reached}):\n${before.join("\n")}`,
    );

    const after: string[] = [];
    for await (const line of client.logs(submitted.taskId, { follow: false })) after.push(line.text);
    assert.ok(after.includes(`resumed=${cid} dir=/workspace/checkpoint`), after.join("\n"));
    // The flushed step, not the last multiple of 5 and not 0: the checkpoint is the one the task wrote last.
    assert.ok(after.includes(`start=${flushed}`), `resumed at step ${flushed}, the one flushed:\n${after.join("\n")}`);
    assert.ok(after.includes("owner=0"), `the files are the container root's: ${after.join("\n")}`);
    assert.ok(after.includes("probe=ok"), `the container's root can write its checkpoint folder: ${after.join("\n")}`);
    const steps = after.filter((line) => line.startsWith("step=")).map((line) => Number(line.slice(5)));
    assert.deepEqual(
      steps,
      Array.from({ length: TOTAL - flushed }, (_, i) => flushed + 1 + i),
      "no step redone, none skipped",
    );
    assert.ok(after.includes(`done=${TOTAL}`), after.join("\n"));
  });
});

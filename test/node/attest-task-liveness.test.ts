/**
 * Issue 24, item 4: "probes answered with the task stopped". With task liveness (the renter's SDK
 * sends a nonce with the spec; the task writes it into $SUANLI_LIVENESS_FILE) the provider's node
 * answers probes only while the task runs and echoes the nonce: a lease whose task stopped while
 * the node kept running is faulted (kind 1) by a quorum of attestors. A lease whose renter did not
 * ask for task liveness is not faulted when its task, which ignores the nonce, stops.
 */
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { testTokenAbi } from "../../common/abi.js";
import { readLease } from "../../common/chain/market.js";
import { devnetAccount } from "../../common/devnet.js";
import { FaultKind } from "../../common/eip712.js";
import { taskSpecSchema, type TaskSpec } from "../../common/protocols/task-spec.js";
import type { ProviderMachine } from "../../node/attest/provider.js";
import { CpuRunner } from "../../node/attest/runner/cpu.js";
import { taskLivenessOf } from "../../node/provider/agent/attestation.js";
import { livenessEnvironment } from "../../node/provider/runtime/task.js";
import { parseSubmitParameters } from "../../sdk/actions/submitTask.js";
import { addrOf, DURATION, openActiveLease, PRICE, startAttestorDaemon, startProviderDaemon, TEST_MACHINE, type TestDaemon } from "../support/attest.js";
import { fund, registerProvider, send, startDevnet, type Devnet } from "../support/devnet.js";
import { waitFor } from "../support/wait.js";

const ATTESTORS = [6, 7];
const LIVENESS = { probeIntervalMs: 400, probeTimeoutMs: 2_000, qosWindowSeconds: 4, minFailedProbes: 2, backupSubmitDelayMs: 3_000 };

/** A task as the provider's runtime starts it: its own process, in its workspace, with the provider's liveness variables. */
type Task = { spec: TaskSpec; workspace: string; child: ChildProcess };

async function startTask(spec: TaskSpec, script: string): Promise<Task> {
  const workspace = await mkdtemp(path.join(tmpdir(), "suanli-task-"));
  const child = spawn("/bin/sh", ["-c", script], { cwd: workspace, env: { PATH: process.env.PATH ?? "/usr/bin:/bin", ...livenessEnvironment(spec, workspace) }, stdio: "ignore" });
  return { spec, workspace, child };
}

const running = (task: Task) => task.child.exitCode === null && task.child.signalCode === null;

describe("attestor role: task liveness (issue 24, item 4)", function () {
  this.timeout(180_000);
  let devnet: Devnet;

  before(async () => {
    devnet = await startDevnet({
      params: { faultQuorum: 2, attestorFaultWindow: LIVENESS.qosWindowSeconds },
      attestors: ATTESTORS.map((i) => devnetAccount(i).address),
      wallClockBlocks: true,
    });
  });
  after(async () => devnet?.close());

  it("a lease whose task stopped is faulted although the provider's node answers; without the renter's opt-in it is not", async () => {
    const nodes: TestDaemon[] = [];
    const tasks: Task[] = [];
    const cpu = new CpuRunner({ workers: 1 });
    try {
      const market = devnet.deployment.contracts.market!;
      // The renter's SDK draws the nonce and puts it in the spec only when asked.
      const base = { gpuType: "A100", gpuCount: 1, duration: 3_600, maxPricePerGpuHour: "5", image: "busybox:1.36", command: "true" };
      const withLiveness = parseSubmitParameters({ ...base, taskLiveness: true }).spec;
      const without = parseSubmitParameters(base).spec;
      assert.match(withLiveness.taskLiveness?.nonce ?? "", /^[0-9a-f]{64}$/);
      assert.notEqual(parseSubmitParameters({ ...base, taskLiveness: true }).spec.taskLiveness?.nonce, withLiveness.taskLiveness?.nonce);
      assert.equal(without.taskLiveness, undefined);
      assert.equal(taskSpecSchema.safeParse({ ...without, taskLiveness: { nonce: "short" } }).success, false);

      const renter = await devnet.wallet(5);
      const machines: ProviderMachine[] = [];
      const leaseTasks = new Map<bigint, Task>();
      const provider = await startProviderDaemon(devnet, 1, {
        runner: cpu,
        machines: () => machines,
        // What the provider agent passes: the lease's spec, and whether its task process runs.
        taskLiveness: (leaseId) => {
          const task = leaseTasks.get(leaseId);
          return taskLivenessOf(task ? { phase: running(task) ? "running" : "ended", spec: task.spec } : undefined, task);
        },
      });
      nodes.push(provider.daemon);
      const ids = await registerProvider(devnet, await devnet.wallet(1), {
        peerId: provider.daemon.p2p.host.peerId.toString(),
        stake: 10_000_000n,
        machines: [TEST_MACHINE, TEST_MACHINE],
      });
      for (const machineId of ids) machines.push({ machineId, ...TEST_MACHINE });
      await fund(devnet, renter, PRICE * BigInt(DURATION) * 2n);
      await send(renter, { address: devnet.deployment.contracts.token, abi: testTokenAbi, functionName: "approve", args: [market, PRICE * BigInt(DURATION) * 2n] } as never);
      const watched = await openActiveLease(devnet, renter, 1, ids[0]!);
      const plain = await openActiveLease(devnet, renter, 1, ids[1]!);

      // The opted-in task echoes its nonce; the other ignores it. Both run.
      const echoing = await startTask(withLiveness, 'printf %s "$SUANLI_LIVENESS_NONCE" > "$SUANLI_LIVENESS_FILE"; exec sleep 600');
      const ignoring = await startTask(without, "exec sleep 600");
      tasks.push(echoing, ignoring);
      leaseTasks.set(watched, echoing);
      leaseTasks.set(plain, ignoring);

      const attestors: Awaited<ReturnType<typeof startAttestorDaemon>>[] = [];
      for (const index of ATTESTORS) {
        const bootstrap = [addrOf(provider.daemon), ...attestors.map((started) => addrOf(started.daemon))];
        const started = await startAttestorDaemon(devnet, index, { p2p: { bootstrap }, attest: { liveness: LIVENESS, leaseChecks: { enabled: false } } });
        nodes.push(started.daemon);
        attestors.push(started);
      }
      const heard = (leaseId: bigint) => attestors.every(({ attestor }) => attestor.prober!.state(leaseId)?.lastSuccessAt !== undefined);
      await waitFor("every attestor hearing from both leases while their tasks run", () => heard(watched) && heard(plain), { timeoutMs: 30_000, intervalMs: 50 });

      // Both tasks stop; the provider's node keeps running and answering what it may.
      for (const task of tasks) {
        task.child.kill("SIGKILL");
        await new Promise((resolve) => (running(task) ? task.child.once("exit", resolve) : resolve(undefined)));
      }
      const stoppedAt = Math.floor(Date.now() / 1000);

      const ended = await waitFor(
        "the opted-in lease faulted",
        async () => {
          const lease = await readLease(devnet.admin.publicClient, market, watched);
          return lease.status !== "Active" ? lease : undefined;
        },
        { timeoutMs: 60_000, intervalMs: 200 },
      );
      assert.equal(ended.endReason, "Faulted");
      const record = await waitFor(
        "the fault recorded as landed",
        () => attestors.map(({ attestor }) => attestor.faults!.get(watched)).find((entry) => entry?.status === "landed"),
        { timeoutMs: 15_000 },
      );
      assert.equal(record.fault.kind, FaultKind.unresponsive);
      assert.ok(record.fault.observedAt >= stoppedAt - 1, `observedAt ${record.fault.observedAt} is before the task stopped at ${stoppedAt}`);

      // The lease whose renter did not opt in runs on: its node answers, its stopped task is not held to a nonce.
      await new Promise((resolve) => setTimeout(resolve, (LIVENESS.qosWindowSeconds + 2) * 1000));
      assert.equal((await readLease(devnet.admin.publicClient, market, plain)).status, "Active");
      for (const { attestor } of attestors) {
        assert.equal(attestor.faults!.get(plain), undefined);
        assert.ok((attestor.prober!.state(plain)?.lastSuccessAt ?? 0) >= stoppedAt, "the plain lease's probes were answered after its task stopped");
      }
    } finally {
      for (const node of nodes.reverse()) await node.close();
      for (const task of tasks) {
        if (running(task)) task.child.kill("SIGKILL");
        await rm(task.workspace, { recursive: true, force: true });
      }
      await cpu.close();
    }
  });
});

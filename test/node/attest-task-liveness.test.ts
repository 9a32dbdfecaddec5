/**
 * Issue #34, finding 2: with task liveness, whether a lease was "alive" depended on a file the
 * renter's task writes. A task that wrote the nonce, then overwrote the file and slept, made honest
 * attestors co-sign a fault and the renter collected the SLA credit (+178,800 on a 360,000 deposit).
 * Nothing the renter's code writes may decide a collateral payout: the provider's node answers
 * probes for the leases it serves whatever the task's file holds, so no fault lands.
 */
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { testTokenAbi } from "../../common/abi.js";
import { readLease } from "../../common/chain/market.js";
import { devnetAccount } from "../../common/devnet.js";
import { taskSpecSchema, type TaskSpec } from "../../common/protocols/task-spec.js";
import type { ProviderMachine } from "../../node/attest/challenge/index.js";
import { CpuRunner } from "../../node/attest/runner/index.js";
import { echoesNonce, livenessEnvironment } from "../../node/provider/runtime/task.js";
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

describe("attestor role: task liveness never decides a fault (issue #34, finding 2)", function () {
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

  it("a task that writes the nonce, then overwrites the file and sleeps, gets no fault and no credit: the node keeps answering", async () => {
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
      const provider = await startProviderDaemon(devnet, 1, {
        runner: cpu,
        machines: () => machines,
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

      // The attack: the opted-in task echoes its nonce, then overwrites the file and sleeps (it stays running).
      // The other ignores the nonce and is killed.
      const silent = await startTask(withLiveness, 'printf %s "$SUANLI_LIVENESS_NONCE" > "$SUANLI_LIVENESS_FILE"; sleep 1; echo gone > "$SUANLI_LIVENESS_FILE"; exec sleep 600');
      const ignoring = await startTask(without, "exec sleep 600");
      tasks.push(silent, ignoring);

      const attestors: Awaited<ReturnType<typeof startAttestorDaemon>>[] = [];
      for (const index of ATTESTORS) {
        const bootstrap = [addrOf(provider.daemon), ...attestors.map((started) => addrOf(started.daemon))];
        const started = await startAttestorDaemon(devnet, index, { p2p: { bootstrap }, attest: { liveness: LIVENESS, leaseChecks: { enabled: false } } });
        nodes.push(started.daemon);
        attestors.push(started);
      }
      const heard = (leaseId: bigint) => attestors.every(({ attestor }) => attestor.prober!.state(leaseId)?.lastSuccessAt !== undefined);
      await waitFor("every attestor hearing from both leases", () => heard(watched) && heard(plain), { timeoutMs: 30_000, intervalMs: 50 });
      ignoring.child.kill("SIGKILL");
      await waitFor("the silent task's file no longer holding the nonce", async () => !(await echoesNonce(silent.workspace, withLiveness.taskLiveness!.nonce)), {
        timeoutMs: 10_000,
      });
      const silentAt = Math.floor(Date.now() / 1000);

      // Twice the QoS window later: both leases still Active, no fault, every probe answered after the silence.
      await new Promise((resolve) => setTimeout(resolve, (2 * LIVENESS.qosWindowSeconds + 2) * 1000));
      for (const leaseId of [watched, plain]) {
        assert.equal((await readLease(devnet.admin.publicClient, market, leaseId)).status, "Active");
        for (const { attestor } of attestors) {
          assert.equal(attestor.faults!.get(leaseId), undefined);
          assert.ok((attestor.prober!.state(leaseId)?.lastSuccessAt ?? 0) >= silentAt + LIVENESS.qosWindowSeconds, "probes answered after the silence");
        }
      }
      assert.ok(running(silent), "the silent task still runs: only the agent's silence rule ends its lease");
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

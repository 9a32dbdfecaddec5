/**
 * A lease's task, from accepted spec to exit: units and bundle prepared together, the lease
 * activated only once the task can start at once, the process started (recorded `starting`
 * first: a task runs at most once), its exit recorded with a signed completion report, its
 * output kept and its units handed back. After a restart, `recover` starts a preparation over
 * and ends what may have started (docs/provider.md).
 */
import { rm } from "node:fs/promises";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { signCompletion } from "../../../common/attest/completion.js";
import { leaseMarketAbi } from "../../../common/abi.js";
import type { LeaseView } from "../../../common/chain/market.js";
import { TASK_NOT_STARTED_EXIT_CODE, type TaskState } from "../../../common/protocols/lease.js";
import { TASK_SILENCE_SECONDS } from "../../../common/protocols/task-spec.js";
import { runDetached } from "../../../common/detached.js";
import { isDiskFull } from "../../store/store.js";
import { blameOf } from "../errors.js";
import { processStartTicks } from "../runtime/orphans.js";
import type { TaskHandle, TaskResult } from "../runtime/runtime.js";
import type { TaskSpec } from "../runtime/task.js";
import { revertName } from "./chain-tx.js";
import { publishOutput, type PublishedOutput } from "./output-publish.js";
import { checkpointBook, prepareInputs, prepareResume } from "./task-inputs.js";
import type { LeaseHost, Live } from "./lease-context.js";
import { markEnded } from "./lease-step.js";
import { watchLiveness } from "./liveness-watch.js";
import { oneLineSource, sourceOfHandle } from "./log-sources.js";
import { chainFields, type EndAction, type LeaseRecord, type TaskError } from "./records.js";

const ZERO_DIGEST = `0x${"0".repeat(64)}` as const;

function errorOf(error: unknown): TaskError {
  const e = error as { name?: string; shortMessage?: string; message?: string };
  return { name: typeof e?.name === "string" ? e.name : "Error", message: String(e?.shortMessage ?? e?.message ?? error).slice(0, 2000) };
}

export class TaskPipeline {
  constructor(private readonly host: LeaseHost) {
    // An output pinned by CID stays pinned as long as the output is kept (outputs.retentionSeconds).
    const data = host.ctx.inputs?.data;
    if (data) host.ctx.outputs?.onRelease((cid) => data.unpin(cid)).catch((error: unknown) => host.ctx.logger.warn("Cannot release outputs' CIDs", {}, error));
  }

  /** Prepares and runs a lease's task in the background; its end brings a reconcile pass. */
  launch(leaseId: bigint, spec: TaskSpec): void {
    const { host } = this;
    const live: Live = { abort: new AbortController() };
    host.live.set(leaseId, live);
    live.pipeline = this.run(leaseId, spec, live)
      .catch((error: unknown) => host.ctx.logger.error("Task pipeline failed", { leaseId }, error))
      .finally(() => {
        if (host.live.get(leaseId) === live) host.live.delete(leaseId);
        host.schedule(leaseId);
      });
  }

  private async run(leaseId: bigint, spec: TaskSpec, live: Live): Promise<void> {
    const { host } = this;
    const { runtime, capacity, logger } = host.ctx;
    const taskId = host.units.taskId(leaseId);
    const picked = await host.withLock(leaseId, () => host.units.claim(host.ctx.records.get(leaseId)!));
    const durationMs = await host.remainingMs(picked);
    const noticeMs = await host.units.noticeFor(picked);
    const [prepared, assigned] = await Promise.allSettled([
      // Inputs first (fetched or cached, issue 36): one nobody serves in time is the renter's failure.
      // The checkpoint to resume from is fetched the same way, then copied writable into the workspace.
      Promise.all([prepareInputs(host.ctx.inputs, spec, live.abort.signal), prepareResume(host.ctx.inputs, spec, live.abort.signal)]).then(([inputs, resume]) =>
        runtime.prepare(
          { taskId, spec, devices: picked.devices, durationMs, inputs, ...(resume ? { resume } : {}), ...(spec.group?.rank === 0 ? { master: host.groupMaster() } : {}) },
          { signal: live.abort.signal },
        ),
      ),
      host.units.assign(picked, noticeMs),
    ]);
    const handle = prepared.status === "fulfilled" ? prepared.value : undefined;
    const failure = prepared.status === "rejected" ? prepared.reason : assigned.status === "rejected" ? assigned.reason : undefined;
    if (live.abort.signal.aborted || failure !== undefined) {
      await handle?.cleanup().catch(() => undefined);
      if (live.abortReason === "shutdown") return; // resumed (or waited for again) at the next start
      await host.withLock(leaseId, () => this.notStarted(leaseId, live, failure));
      if (failure !== undefined) {
        logger.warn("Task could not start", { leaseId }, failure);
        host.ctx.metrics.providerTasks.inc({ result: "failed" });
      }
      return;
    }
    live.handle = handle;

    // Activate (metering starts) only now that the task can start at once.
    const ready = await host.withLock(leaseId, async () => {
      let view = await host.readChain(leaseId);
      let activatedWallMs: number | null = null;
      if (view.status === "Open") {
        try {
          await host.ctx.tx.send({ address: host.ctx.market, abi: leaseMarketAbi, functionName: "activate", args: [leaseId] });
          activatedWallMs = Date.now();
          logger.info("Lease activated", { leaseId });
        } catch (error) {
          logger.warn("Cannot activate the lease", { leaseId, error: revertName(error) }, error);
        }
        view = await host.readChain(leaseId);
      }
      if (view.status !== "Active" || live.abort.signal.aborted) return undefined;
      // From here on the task is never started again, whatever happens to this process.
      const starting = await host.ctx.records.update(leaseId, (r) => {
        r.chain = chainFields(view);
        r.activatedWallMs ??= activatedWallMs;
        r.phase = "starting";
        r.state = "preparing";
        r.image = handle!.image ?? null;
      });
      // Started under the lock: a lease that ends meanwhile is seen with the task attached, so
      // stopping it reaches the process.
      await handle!.start();
      try {
        capacity.attachTask(taskId, handle!);
      } catch (error) {
        await handle!.stop(0);
        throw error;
      }
      const pid = handle!.pid ?? null;
      const pidStartTicks = pid === null ? null : ((await processStartTicks(pid)) ?? null);
      return host.ctx.records.update(leaseId, (r) => {
        r.phase = "running";
        r.state = "running";
        r.pid = pid;
        r.pidStartTicks = pidStartTicks;
        r.startedAt = Date.now();
        r.activatedWallMs ??= starting.activatedWallMs;
      });
    });
    if (!ready) {
      await handle!.cleanup().catch(() => undefined);
      if (live.abortReason === "shutdown") return;
      await host.withLock(leaseId, async () => {
        await host.releaseUnits(leaseId);
        await host.ctx.records.update(leaseId, (r) => {
          if (r.phase !== "ended") markEnded(r, "stopped", r.error ?? { name: "LeaseStateError", message: `The lease is ${r.chain.status} on-chain; the task was not started` });
        });
      });
      return;
    }

    logger.info("Task started", { leaseId, pid: ready.pid, units: picked.unitIds.length });
    const period = spec.checkpoint?.periodSeconds;
    const book = checkpointBook(host.ctx.inputs);
    // A task without a checkpoint folder costs a snapshot at a preemption notice nothing (no folder: no record).
    book?.track(leaseId, handle!.workspace, this.signer());
    if (period !== undefined) book?.startPeriodic(leaseId, handle!.workspace, this.signer(), period * 1000);
    host.updateGauges();
    handle!.setRemainingTime(await host.remainingMs(ready));
    const watch = spec.taskLiveness && this.watchHeartbeat(leaseId, handle!.workspace, spec.taskLiveness, live);
    const result = await handle!.wait();
    watch?.stop();
    await this.exited(leaseId, handle!, result, live);
  }

  /** The task never started (aborted, or it failed to prepare); the caller holds the lease's lock. */
  private async notStarted(leaseId: bigint, live: Live, failure: unknown): Promise<void> {
    const { host } = this;
    await host.releaseUnits(leaseId);
    const record = await host.ctx.records.update(leaseId, (r) => {
      if (live.abort.signal.aborted) {
        const error =
          live.abortReason === "cancel"
            ? { name: "TaskCancelledError", message: "The renter cancelled the task before it started" }
            : { name: "LeaseEndedError", message: `The lease ended on-chain (${r.chain.endReason}) before its task started` };
        markEnded(r, r.chain.endReason === "Preempted" ? "preempted" : "stopped", r.error ?? error);
        return;
      }
      markEnded(r, "failed", errorOf(failure));
      // The renter's input was bad: the lease ends with a completion report at once (the renter
      // pays for the second or two it takes). The node's own failure: it terminates and pays the penalty.
      r.endAction = blameOf(failure) === "renter" ? "complete" : "terminate";
      r.exitCode = TASK_NOT_STARTED_EXIT_CODE;
      r.result = { status: "error", chainExitCode: TASK_NOT_STARTED_EXIT_CODE, outputDigest: ZERO_DIGEST, unitSeconds: 0 };
    });
    const log = oneLineSource(`The task could not start: ${record.error?.name}: ${record.error?.message}`);
    host.finishedLogs.keep(leaseId, log.source);
    await host.ctx.records.update(leaseId, (r) => {
      r.nextLogSeq = log.nextSeq;
    });
  }

  /** spec.taskLiveness: a task silent past its allowance is stopped, and its lease completed as the renter's (liveness-watch.ts). */
  private watchHeartbeat(leaseId: bigint, workspace: string, liveness: NonNullable<TaskSpec["taskLiveness"]>, live: Live) {
    const silenceSeconds = liveness.silenceSeconds ?? TASK_SILENCE_SECONDS.default;
    return watchLiveness({
      workspace,
      nonce: liveness.nonce,
      silenceMs: silenceSeconds * 1000,
      onSilent: (silentForMs) => {
        this.host.ctx.logger.warn("Task silent: no liveness heartbeat within its allowance; stopping it and completing the lease as the renter's", {
          leaseId,
          silenceSeconds,
          silentForMs,
        });
        live.abortReason ??= "silent";
        runDetached(this.host.units.stopTask(leaseId), this.host.ctx.logger, "Stopping a silent task", { leaseId });
      },
    });
  }

  private signer() {
    return { account: this.host.ctx.account, domain: this.host.ctx.domain };
  }

  private async exited(leaseId: bigint, handle: TaskHandle, ended: TaskResult, live: Live): Promise<void> {
    const { host } = this;
    // The last checkpoint, after the task's exit (a stopped task had SIGTERM and the grace period to flush; a preempted one, the notice from its first SIGTERM), before the workspace goes.
    const book = checkpointBook(host.ctx.inputs);
    book?.stopPeriodic(leaseId);
    book?.untrack(leaseId);
    await book?.snapshot(leaseId, handle.workspace, this.signer(), "end");
    // From now on the retention period runs (data.checkpointRetentionSeconds).
    await book?.ended(leaseId).catch((error: unknown) => host.ctx.logger.warn("Cannot record a task's end for its checkpoints' retention", { leaseId, error: String(error) }));
    // Data plane on: the output is pinned by CID and the completion signs the CID's digest (issue 36).
    const published =
      ended.outputDigestSource === "output-dir"
        ? await publishOutput({ data: host.ctx.inputs?.data, outputs: host.ctx.outputs, logger: host.ctx.logger }, leaseId, path.join(handle.workspace, "output"))
        : undefined;
    const result: TaskResult = published ? { ...ended, outputDigest: published.digest } : ended;
    const completion = await signCompletion(host.ctx.account, host.ctx.domain, {
      leaseId,
      exitCode: result.chainExitCode,
      outputDigest: result.outputDigest,
      unitSeconds: BigInt(result.unitSeconds),
    });
    host.finishedLogs.keep(leaseId, sourceOfHandle(handle));
    // The task's end must be recorded before the node acts on it. A full disk refuses the write:
    // the result stays in memory (the task stays attached, so no pass takes it for lost) and the
    // write is tried again until there is space or the node stops.
    for (let attempt = 0; ; attempt++) {
      try {
        await this.recordExit(leaseId, handle, result, live, completion, published);
        if (attempt > 0) host.ctx.logger.info("Task's end recorded: the data dir has space again", { leaseId, attempts: attempt + 1 });
        break;
      } catch (error) {
        if (!isDiskFull(error) || live.abortReason === "shutdown") throw error;
        if (attempt === 0) {
          host.ctx.logger.error(
            "Cannot record the task's end: the data dir's disk is full. The result is kept in memory and recorded once there is space",
            { leaseId, status: result.status },
            error,
          );
        }
        await sleep(Math.min(5_000, 250 * 2 ** Math.min(attempt, 5)));
      }
    }
    const record = host.ctx.records.get(leaseId)!;
    host.ctx.metrics.providerTasks.inc({ result: record.error?.name === "TaskLostError" ? "lost" : record.state });
    host.ctx.logger.info("Task ended", { leaseId, state: record.state, exitCode: record.exitCode, unitSeconds: result.unitSeconds });
    host.updateGauges();
    if (live.abortReason === "shutdown") await host.withLock(leaseId, () => host.reconcileLocked(leaseId)).catch(() => undefined);
  }

  /** Writes a task's end into its lease's record (idempotent: tried again after a refused write), keeps its output, hands its units back. */
  private async recordExit(
    leaseId: bigint,
    handle: TaskHandle,
    result: TaskResult,
    live: Live,
    completion: LeaseRecord["completion"],
    published: PublishedOutput | undefined,
  ): Promise<void> {
    const { host } = this;
    await host.withLock(leaseId, async () => {
      const view = await host.readChain(leaseId).catch(() => undefined);
      await host.ctx.records.update(leaseId, (r) => {
        if (view) r.chain = chainFields(view);
        const over = r.chain.status !== "Active";
        let state: TaskState;
        let error: TaskError | null = result.error ? { name: result.error.name, message: result.error.message } : null;
        if (live.abortReason === "shutdown") {
          state = "failed";
          error = { name: "TaskLostError", message: "The provider node stopped while the task ran; the task was stopped and the lease terminated" };
        } else if (live.abortReason === "silent") {
          // The renter's own task went silent (spec.taskLiveness): the renter's side, completed below.
          state = "failed";
          const seconds = r.spec?.taskLiveness?.silenceSeconds ?? TASK_SILENCE_SECONDS.default;
          error = {
            name: "TaskSilentError",
            message: `The task wrote no liveness heartbeat for over ${seconds} s (taskLiveness): the provider stopped it and completed the lease; it is paid until then and the rest of the deposit is refunded`,
          };
        } else if (result.status === "succeeded") state = "succeeded";
        else if (result.status === "exceeded") {
          state = "exceeded";
          error = { name: "TaskExceededError", message: "The task ran past its lease time and was stopped (SIGTERM, then SIGKILL after the grace period)" };
        } else if (result.status === "stopped") state = r.chain.endReason === "Preempted" ? "preempted" : "stopped";
        else state = "failed";
        markEnded(r, state, error);
        r.exitCode = result.exitCode ?? result.chainExitCode;
        r.result = { status: result.status, chainExitCode: result.chainExitCode, outputDigest: result.outputDigest, unitSeconds: result.unitSeconds };
        r.completion = completion;
        r.outputCid = published?.cid ?? null;
        r.nextLogSeq = handle.readLogs(Number.MAX_SAFE_INTEGER).nextSeq;
        r.startedAt = result.startedAt;
        r.endedAt = result.endedAt;
        let action: EndAction = "none";
        // The node's machinery failed (the container engine could not start the container): the
        // provider's fault, ended by the rules (terminate: refund + penalty), never a completion.
        const providerFault = result.error?.blame === "provider";
        if (!over) action = live.abortReason === "shutdown" || providerFault ? "terminate" : r.endAction === "await_close" ? "await_close" : "complete";
        r.endAction = action;
      });
      // Before the workspace goes: the output the completion report digests stays for the renter.
      // Pinned by CID: the staged copy (exactly the CID's files) is what stays.
      await host.ctx.outputs?.keep(leaseId, published?.dir ?? path.join(handle.workspace, "output"), published?.cid);
      // A staged copy the store refused to keep (over its caps) goes; its pin goes with the output's record.
      if (published) await rm(published.dir, { recursive: true, force: true }).catch(() => undefined);
      await host.releaseUnits(leaseId);
      await handle.cleanup().catch(() => undefined);
    });
  }

  /**
   * A lease whose record says no task was ever sent (`waiting_spec`), checked once per node run:
   * if processes of its task run on this host anyway, the record is older than the task (the data
   * dir was restored from an older copy, or lost a write). They are killed, never adopted, and
   * the lease is ended as for a task lost in a restart (`TaskLostError`, terminated while Open or
   * Active). Returns whether such a task was found.
   */
  async reapForgotten(record: LeaseRecord, view: LeaseView): Promise<boolean> {
    const { host } = this;
    const leaseId = record.leaseId;
    const killed = await host.ctx.runtime.reap(host.units.taskId(leaseId)).catch(() => 0);
    if (killed === 0) return false;
    await host.releaseUnits(leaseId);
    await host.ctx.records.update(leaseId, (r) => {
      markEnded(r, "failed", {
        name: "TaskLostError",
        message:
          "The provider node's lease record was older than its task (its data was restored from an older copy); the task was stopped and is not run again. The lease is terminated: the renter gets the rest of its deposit back plus the early-termination penalty",
      });
      r.endAction = view.status === "Active" || view.status === "Open" ? "terminate" : "none";
    });
    host.ctx.metrics.providerTasks.inc({ result: "lost" });
    host.ctx.logger.warn("A task the lease record does not know of was running (the data dir is older than the node's last run): killed it and ending the lease", {
      leaseId,
      processesKilled: killed,
      status: view.status,
    });
    return true;
  }

  /** After a restart: a preparation starts over (it never ran); a task that may have started is killed and the lease terminated. */
  async recover(record: LeaseRecord, view: LeaseView): Promise<void> {
    const { host } = this;
    const leaseId = record.leaseId;
    const taskId = host.units.taskId(leaseId);
    if (record.phase === "preparing") {
      await host.ctx.runtime.reap(taskId).catch(() => 0);
      if (record.specResumable && record.spec) {
        host.ctx.logger.info("Preparing a task again after a restart", { leaseId });
        this.launch(leaseId, record.spec as TaskSpec);
      } else {
        // The spec held secrets, which were never stored: the renter sends it again.
        await host.ctx.records.update(leaseId, (r) => {
          r.phase = "waiting_spec";
          r.state = "waiting_spec";
          r.spec = null;
        });
        host.ctx.logger.info("Waiting for the task spec again after a restart (it held secrets)", { leaseId });
      }
      return;
    }
    const killed = await host.ctx.runtime.reap(taskId, { pid: record.pid ?? undefined, startTicks: record.pidStartTicks ?? undefined });
    await host.releaseUnits(leaseId);
    await host.ctx.records.update(leaseId, (r) => {
      markEnded(r, "failed", {
        name: "TaskLostError",
        message:
          "The provider node restarted while the task ran; the task was stopped and is not run again. The lease is terminated: the renter gets the rest of its deposit back plus the early-termination penalty",
      });
      r.endAction = view.status === "Active" || view.status === "Open" ? "terminate" : "none";
    });
    host.ctx.metrics.providerTasks.inc({ result: "lost" });
    host.ctx.logger.warn("Task lost in a restart: killed what was left and terminating the lease", { leaseId, processesKilled: killed });
  }
}

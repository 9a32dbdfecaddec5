/**
 * The provider's leases, from the chain event that opens one to the claim that settles it.
 *
 * The controller is level-triggered: `reconcile(leaseId)` reads the lease from the chain once,
 * asks `nextStep` (lease-step.ts: a pure function of the record, the chain's view and the time)
 * what to do, and does it — activate, report completion, terminate, stop a task whose lease
 * ended, hand units back. Chain events, task exits, renter requests, a periodic sweep and a
 * restart all just call it, so a step missed for any reason (an event seen twice, a crash
 * between two steps) is taken on the next pass.
 *
 * Parts: task pipeline (task-pipeline.ts: prepare, start, end a task; inputs in task-inputs.ts),
 * unit ledger (unit-ledger.ts), lease lookup (lease-lookup.ts: is an unknown lease ours?),
 * protocols (protocols.ts: status and logs from `task()`). A task runs at most once (docs/provider.md).
 */
import { getAddress, type Address, type Hex } from "viem";
import { signCompletion } from "../../../common/attest/completion.js";
import { leaseMarketAbi } from "../../../common/abi.js";
import { readLease, type LeaseView } from "../../../common/chain/market.js";
import { TASK_NOT_STARTED_EXIT_CODE, type RenterAction, type RenterAuth, type TaskState } from "../../../common/protocols/lease.js";
import type { ChainEvent } from "../../chain/follower.js";
import type { TaskHandle } from "../runtime/runtime.js";
import { secretsOf, storableSpec, type TaskSpec } from "../runtime/task.js";
import { ChainTime } from "./chain-clock.js";
import { revertName } from "./chain-tx.js";
import { LeaseStateError } from "./errors.js";
import { openSealedSpecKeys } from "./sealing.js";
import type { LeaseControllerContext, LeaseHost, Live } from "./lease-context.js";
import { LeaseLookup } from "./lease-lookup.js";
import { markEnded, nextStep, type LeaseAction } from "./lease-step.js";
import { FinishedLogs, sourceOfHandle, type LogSource } from "./log-sources.js";
import { chainFields, newLeaseRecord, type LeaseRecord } from "./records.js";
import { notAuthorized } from "./renter-auth.js";
import { checkpointBook, refuseUnmountableInputs } from "./task-inputs.js";
import { TaskPipeline } from "./task-pipeline.js";
import { UnitLedger } from "./unit-ledger.js";
import { runDetached } from "../../../common/detached.js";

export type { LeaseControllerContext } from "./lease-context.js";

const ZERO_DIGEST = `0x${"0".repeat(64)}` as Hex;
/** Finished tasks whose logs stay readable in memory. */
const FINISHED_TASKS_KEPT = 64;
/** How long a request about a lease not yet confirmed waits before LeaseNotConfirmedError, unless chain.confirmationWaitMs says otherwise. */
const CONFIRMATION_WAIT_MS = 6_000;
/** Most plans in one reconcile pass: a pass plans again only after a restart's recovery. */
const PLANS_PER_PASS = 3;

/** A lease's task as its renter may see it: the record, the running task's handle, its log. */
export type LeaseTaskView = { record: LeaseRecord; handle: TaskHandle | undefined; logs: LogSource | undefined };

export class LeaseController implements LeaseHost {
  readonly live = new Map<bigint, Live>();
  /** Logs of tasks that ended (or never ran), for late readers. */
  readonly finishedLogs = new FinishedLogs(FINISHED_TASKS_KEPT);
  readonly units: UnitLedger;
  private readonly pipeline: TaskPipeline;
  private readonly lookup: LeaseLookup;
  private readonly locks = new Map<bigint, Promise<unknown>>();
  private readonly queued = new Set<bigint>();
  /**
   * Leases whose record may be older than their task (see `TaskPipeline.reapForgotten`): those
   * recorded before this run, or learned of from history or a renter's request rather than from a
   * live event. Each is checked once, on its next pass in `waiting_spec`.
   */
  private readonly suspect = new Set<bigint>();
  private readonly provider: Address;
  private sweepTimer: NodeJS.Timeout | undefined;
  /** The chain's clock as this node learned it from fresh blocks: lease timing never reads the local clock directly. */
  readonly times: ChainTime;
  private stopping = false;

  constructor(readonly ctx: LeaseControllerContext) {
    this.provider = getAddress(ctx.account.address);
    this.times = new ChainTime(ctx.publicClient);
    this.units = new UnitLedger({ ...ctx, readLease: (leaseId) => this.readChain(leaseId), chainTime: () => this.times.now() });
    this.pipeline = new TaskPipeline(this);
    this.lookup = new LeaseLookup({ publicClient: ctx.publicClient, market: ctx.market, provider: this.provider, confirmations: ctx.confirmations });
  }

  // ---- lifecycle ----

  /** Takes back the units of leases that hold them (before the idle workload starts) and reconciles every open lease. */
  async start(): Promise<void> {
    for (const record of this.ctx.records.all()) {
      this.lookup.saw(record.leaseId);
      if (!record.closed) this.suspect.add(record.leaseId);
    }
    this.units.restore();
    this.updateGauges();
    this.sweepTimer = setInterval(() => this.sweep(), this.ctx.options.leases.reconcileIntervalMs);
    this.sweepTimer.unref();
  }

  /** Reconciles every open lease now (also runs on the interval). */
  sweep(): void {
    for (const record of this.ctx.records.open()) this.schedule(record.leaseId);
  }

  /**
   * Stops the controller: running tasks are stopped and their leases terminated (best effort;
   * a restart finishes what is left), preparations are abandoned and resumed at the next start.
   */
  async stop(): Promise<void> {
    this.stopping = true;
    if (this.sweepTimer) clearInterval(this.sweepTimer);
    const running = [...this.live.entries()];
    for (const [leaseId, live] of running) {
      live.abortReason ??= "shutdown";
      live.abort.abort();
      // A running task is stopped (SIGTERM, grace, SIGKILL); its exit terminates the lease.
      if (live.handle) runDetached(this.units.stopTask(leaseId), this.ctx.logger, "Stopping a task", { leaseId });
    }
    await Promise.all(running.map(([, live]) => live.pipeline?.catch(() => undefined)));
    await Promise.all([...this.locks.values()].map((lock) => lock.catch(() => undefined)));
  }

  // ---- chain events ----

  /** Records leases opened with this provider and reconciles those an event touches. */
  async onChainEvent(event: ChainEvent, delivery: { backfill: boolean } = { backfill: true }): Promise<void> {
    switch (event.eventName) {
      case "LeaseOpened": {
        const leaseId = event.args.leaseId;
        if (getAddress(event.args.provider) !== this.provider) {
          this.lookup.saw(leaseId);
          return;
        }
        // Delivered live, the lease's block was just made: its time is the chain's time now.
        if (!delivery.backfill) {
          const block = await this.ctx.publicClient.getBlock({ blockNumber: event.blockNumber }).catch(() => undefined);
          if (block) this.times.clock.fresh(Number(block.timestamp));
        }
        if (this.ctx.reservations.commit(event.args.offerNonce.toString())) await this.ctx.reservations.persist();
        if (!this.ctx.records.get(leaseId)) {
          if (!(await this.recordOpened(leaseId, () => this.readChain(leaseId), event.args.offerNonce, delivery.backfill))) return;
        }
        this.lookup.saw(leaseId);
        this.schedule(leaseId);
        return;
      }
      case "LeaseActivated":
      case "LeasePreempted":
      case "LeaseEnded":
      case "LeaseExtended":
      case "LeaseShrunk":
      case "LeaseSettled":
      case "LeaseClaimed":
      case "CompletionReported":
      case "CompletionReleased": {
        const leaseId = event.args.leaseId;
        if (!this.ctx.records.get(leaseId)) return;
        if (event.eventName === "LeaseClaimed") this.ctx.metrics.providerEarnings.inc(Number(event.args.amount - event.args.fee));
        this.schedule(leaseId);
        return;
      }
      default:
        return;
    }
  }

  // ---- renter requests (the protocol layer parsed the bodies) ----

  /**
   * Checks a renter request and returns the lease's record: the signature first (local, cheap),
   * then whether the signer is the renter of a lease of this provider (its record, or the chain
   * read at most once per lease), then a delegation's chain step (revocation), then the nonce,
   * used up in the same step as its check. Strangers get one answer whether the lease exists or not.
   */
  private async authorize(auth: RenterAuth, action: RenterAction, body: unknown): Promise<LeaseRecord> {
    const leaseId = auth.request.leaseId;
    const signer = await this.ctx.verifier.authenticate(auth, { leaseId, action, body });
    const known = this.ctx.records.get(leaseId);
    if (known) {
      if (getAddress(known.renter) !== signer) throw notAuthorized(leaseId);
      await this.ctx.verifier.accept(auth);
      return known;
    }
    const view = await this.lookup.forRenter(leaseId, signer, () => notAuthorized(leaseId), this.ctx.confirmationWaitMs ?? CONFIRMATION_WAIT_MS);
    await this.ctx.verifier.accept(auth);
    const record = await this.recordOpened(leaseId, () => Promise.resolve(view), 0n, true);
    if (!record) throw notAuthorized(leaseId);
    return record;
  }

  /**
   * Records a lease and logs "Lease opened" once: its LeaseOpened event and its renter's first request both come here, and await
   * between seeing no record and writing one, so both run under the lease's lock; the later finds the record and leaves it as is.
   */
  private recordOpened(leaseId: bigint, read: () => Promise<LeaseView>, offerNonce: bigint, suspect: boolean): Promise<LeaseRecord | undefined> {
    return this.withLock(leaseId, async () => {
      const known = this.ctx.records.get(leaseId);
      if (known) return known;
      const view = await read();
      if (view.status === "None") return undefined;
      const record = await this.ctx.records.put(newLeaseRecord(view, offerNonce, this.ctx.sealing?.ring.nowMs() ?? Date.now(), { seenLive: !suspect }));
      if (suspect) this.suspect.add(leaseId);
      this.ctx.logger.info("Lease opened", { leaseId, renter: view.renter, machineId: view.machineId, units: view.units, interruptible: view.interruptible });
      this.updateGauges();
      return record;
    });
  }

  /** Where rank 0 of a group job on this node is reached (provider.groupJobs). */
  groupMaster(): { addr: string; port: number } {
    return { addr: this.ctx.options.groupJobs.masterAddress, port: this.ctx.options.groupJobs.masterPort };
  }

  /** The task spec of a lease: accepted once, prepared and run in the background. */
  async submitTask(
    auth: RenterAuth,
    spec: TaskSpec,
  ): Promise<{ leaseId: bigint; state: "accepted" | "already_running" | "already_done"; master?: { addr: string; port: number } }> {
    const answer = await this.acceptTask(auth, spec);
    return spec.group?.rank === 0 ? { ...answer, master: this.groupMaster() } : answer;
  }

  private async acceptTask(auth: RenterAuth, spec: TaskSpec): Promise<{ leaseId: bigint; state: "accepted" | "already_running" | "already_done" }> {
    const leaseId = auth.request.leaseId;
    await this.authorize(auth, "task", { spec });
    refuseUnmountableInputs(this.ctx.inputs, spec);
    const opened = await openSealedSpecKeys(this.ctx.sealing, leaseId, spec, this.ctx.records.get(leaseId) ?? {});
    spec = opened.spec;
    return this.withLock(leaseId, async () => {
      const current = this.ctx.records.get(leaseId)!;
      if (current.phase === "ended") return { leaseId, state: "already_done" as const };
      if (current.phase !== "waiting_spec") return { leaseId, state: "already_running" as const };
      const view = await this.readChain(leaseId);
      if (view.status !== "Open" && view.status !== "Active") {
        throw new LeaseStateError(`Lease ${leaseId} is ${view.status} on-chain: it takes no task`);
      }
      if (this.stopping) throw new LeaseStateError("The provider node is shutting down; send the task again once it is back");
      // Written before anything acts on it; secrets stay in memory only.
      await this.ctx.records.update(leaseId, (r) => {
        r.chain = chainFields(view);
        r.phase = "preparing";
        r.state = "preparing";
        r.spec = storableSpec(spec);
        r.specResumable = secretsOf(spec).size === 0;
        // From now on the lease needs only the sealing keys its secrets opened with (none without secrets).
        r.sealingKeyIds = opened.keyIds;
      });
      this.ctx.logger.info("Task accepted", { leaseId });
      this.updateGauges();
      this.pipeline.launch(leaseId, spec);
      return { leaseId, state: "accepted" as const };
    });
  }

  /** The lease's record, its running task and its log, for the renter's status and logs requests. */
  async task(auth: RenterAuth, action: "status" | "logs", body: unknown): Promise<LeaseTaskView> {
    const leaseId = auth.request.leaseId;
    await this.authorize(auth, action, body);
    const record = this.ctx.records.get(leaseId)!;
    const handle = this.live.get(leaseId)?.handle;
    return { record, handle, logs: handle ? sourceOfHandle(handle) : this.finishedLogs.get(leaseId) };
  }

  /**
   * Checks a task I/O request (output, exec, forward) against the lease's renter; returns the
   * lease's record and, while the task runs, its handle.
   */
  async authorizeIo(auth: RenterAuth, action: "output" | "exec" | "forward", body: unknown): Promise<{ record: LeaseRecord; handle: TaskHandle | undefined }> {
    const leaseId = auth.request.leaseId;
    await this.authorize(auth, action, body);
    const current = this.ctx.records.get(leaseId)!;
    const handle = this.live.get(leaseId)?.handle;
    return { record: current, handle: current.phase === "running" && handle?.state === "running" ? handle : undefined };
  }

  /**
   * The renter asks to stop its task. The task is stopped now; the renter then closes the lease
   * (`close`), and if it has not within `provider.leases.cancelGraceSeconds`, the node ends it
   * with a completion report so that the renter stops paying.
   */
  async cancel(auth: RenterAuth): Promise<{ leaseId: bigint; state: TaskState }> {
    const leaseId = auth.request.leaseId;
    await this.authorize(auth, "cancel", {});
    const stopping = await this.withLock(leaseId, async () => {
      const current = this.ctx.records.get(leaseId)!;
      if (current.phase === "ended") return undefined;
      const endAfter = this.times.clock.nowMs() + this.ctx.options.leases.cancelGraceSeconds * 1000;
      await this.ctx.records.update(leaseId, (r) => {
        r.endAction = "await_close";
        r.endAfter = endAfter;
        if (r.phase === "waiting_spec") markEnded(r, "stopped", { name: "TaskCancelledError", message: "The renter cancelled the lease before sending a task" });
      });
      this.ctx.logger.info("Lease cancelled by the renter", { leaseId });
      const live = this.live.get(leaseId);
      if (!live) return undefined;
      live.abortReason ??= "cancel";
      live.abort.abort();
      // Wrapped: the lock must not wait for the task to stop (its exit needs the lock).
      return { done: live.handle ? this.units.stopTask(leaseId) : live.pipeline };
    });
    // Answer once the task has stopped, or after a few seconds (the status shows the rest).
    if (stopping?.done) await Promise.race([stopping.done.catch(() => undefined), new Promise((resolve) => setTimeout(resolve, 5_000).unref())]);
    if (stopping?.done) await this.withLock(leaseId, async () => undefined);
    this.updateGauges();
    return { leaseId, state: this.ctx.records.get(leaseId)!.state };
  }

  // ---- reconciliation ----

  /** Reconciles a lease soon (coalesced: one pass queued per lease at a time). */
  schedule(leaseId: bigint): void {
    if (this.queued.has(leaseId)) return;
    this.queued.add(leaseId);
    runDetached(
      this.withLock(leaseId, async () => {
        this.queued.delete(leaseId);
        await this.reconcileLocked(leaseId);
      }),
      this.ctx.logger,
      "Lease reconciliation (retried on the next pass)",
      { leaseId },
    );
  }

  /** Reconciles one lease now and waits for it (tests, shutdown). */
  reconcile(leaseId: bigint): Promise<void> {
    return this.withLock(leaseId, () => this.reconcileLocked(leaseId));
  }

  /** One pass: the lease read once, the actions `nextStep` plans taken in order. The caller holds the lease's lock. */
  async reconcileLocked(leaseId: bigint): Promise<void> {
    let record = this.ctx.records.get(leaseId);
    if (!record || record.closed) return;
    const view = await this.readChain(leaseId);
    if (view.status === "None") return;
    // A record restored from an older copy may not know of a task that ran: the host is checked once.
    if (record.phase === "waiting_spec" && this.suspect.delete(leaseId)) {
      if (await this.pipeline.reapForgotten(record, view)) record = this.ctx.records.get(leaseId)!;
    }
    const now = await this.times.step();
    for (let plan = 0; plan < PLANS_PER_PASS; plan++) {
      const live = this.live.get(leaseId);
      const task = live && { handleState: live.handle?.state, aborted: live.abort.signal.aborted, abortReason: live.abortReason };
      const actions = nextStep({ record, task, stopping: this.stopping, activateMarginSeconds: this.ctx.options.leases.activateMarginSeconds }, view, now);
      for (const action of actions) record = await this.take(action, record, view, live);
      if (actions.at(-1)?.kind !== "recover") return;
      record = this.ctx.records.get(leaseId)!;
    }
  }

  /** Carries out one planned action; returns the record as it is after it. */
  private async take(action: LeaseAction, record: LeaseRecord, view: LeaseView, live: Live | undefined): Promise<LeaseRecord> {
    const { records, logger } = this.ctx;
    const leaseId = record.leaseId;
    switch (action.kind) {
      case "sync":
        return records.update(leaseId, (r) => {
          r.chain = chainFields(view);
          r.units = view.units;
        });
      case "shrink":
        return this.units.shrink(record, action.units, this.live.has(leaseId));
      case "extend":
        live?.handle?.setRemainingTime(await this.remainingMs(record));
        return record;
      case "recover":
        await this.pipeline.recover(record, view);
        return records.get(leaseId)!;
      case "activate": {
        const activated = await this.send("activate", leaseId);
        const updated = activated ? await records.update(leaseId, (r) => void (r.activatedWallMs = Date.now())) : record;
        if (action.why === "preparing") logger.info("Lease activated while its task is still being prepared (start deadline near)", { leaseId });
        else logger.info("Lease activated without a task spec (start deadline near)", { leaseId });
        return updated;
      }
      case "hold-units":
        await this.units.hold(record);
        return records.get(leaseId)!;
      case "set-end-action":
        return records.update(leaseId, (r) => void (r.endAction = action.endAction));
      case "terminate":
        if (await this.send("terminate", leaseId)) logger.info("Lease terminated", { leaseId, reason: record.error?.name });
        return record;
      case "complete": {
        if (action.activateFirst) await this.send("activate", leaseId);
        const completion =
          record.completion ??
          (await signCompletion(this.ctx.account, this.ctx.domain, {
            leaseId,
            exitCode: record.result?.chainExitCode ?? TASK_NOT_STARTED_EXIT_CODE,
            outputDigest: record.result?.outputDigest ?? ZERO_DIGEST,
            unitSeconds: 0n,
          }));
        if (!record.completion) record = await records.update(leaseId, (r) => void (r.completion = completion));
        const { report } = completion;
        if (await this.send("complete", leaseId, [report.exitCode, report.outputDigest, report.unitSeconds])) {
          logger.info("Completion reported", { leaseId, exitCode: report.exitCode, unitSeconds: report.unitSeconds });
        }
        // The transaction's events bring the next pass.
        return record;
      }
      case "preempt-task":
        logger.info("Lease preempted: SIGTERM to the task now; what still runs is stopped when the notice ends", { leaseId, stopAt: view.stopAt, noticeMs: action.noticeMs });
        runDetached(this.ctx.capacity.preempt(this.units.taskId(leaseId), action.noticeMs), undefined, "Preempting a task");
        checkpointBook(this.ctx.inputs)?.snapshotAtNotice(leaseId); // the task's state as the notice begins (checkpoints.ts)
        // Not aborted: a preparation in flight finishes into a stopped task.
        if (live) live.abortReason = "lease-ended";
        return record;
      case "stop-task":
        if (live) {
          live.abortReason ??= "lease-ended";
          live.abort.abort();
          if (live.handle) runDetached(this.units.stopTask(leaseId), logger, "Stopping a task", { leaseId });
        }
        logger.info("Lease ended on-chain: stopping its task", { leaseId, reason: view.endReason });
        return record;
      case "mark-ended":
        return records.update(leaseId, (r) => {
          if (action.state !== null) markEnded(r, action.state, action.error);
          r.endAction = "none";
        });
      case "release-units":
        await this.releaseUnits(leaseId);
        return records.get(leaseId)!;
      case "close": {
        const closed = await records.update(leaseId, (r) => void (r.closed = true));
        this.suspect.delete(leaseId);
        logger.info("Lease closed", { leaseId, status: view.status, reason: view.endReason, paid: view.paid });
        this.updateGauges();
        return closed;
      }
    }
  }

  // ---- helpers ----

  /** Sends a lease transaction; false when it failed (logged; the next pass reads the lease again). */
  private async send(
    functionName: "activate" | "complete" | "terminate",
    leaseId: bigint,
    completion?: readonly [exitCode: number, outputDigest: Hex, unitSeconds: bigint],
  ): Promise<boolean> {
    try {
      if (functionName === "complete") await this.ctx.tx.send({ address: this.ctx.market, abi: leaseMarketAbi, functionName, args: [leaseId, ...completion!] });
      else await this.ctx.tx.send({ address: this.ctx.market, abi: leaseMarketAbi, functionName, args: [leaseId] });
      return true;
    } catch (error) {
      // A lease that moved on (the renter closed it, a deadline passed) is read again on the next pass.
      this.ctx.logger.warn(`Cannot ${functionName} the lease`, { leaseId, error: revertName(error) }, error);
      return false;
    }
  }

  readChain(leaseId: bigint): Promise<LeaseView> {
    return readLease(this.ctx.publicClient, this.ctx.market, leaseId);
  }

  /** The time the next block will carry, at least (see ChainTime). */
  chainNow(): Promise<number> {
    return this.times.nextBlockTime();
  }

  /**
   * How long a task of this lease may still run: the paid duration (end − activatedAt) counted
   * on this node's clock from when it saw the activation, so a chain clock that runs ahead
   * (a devnet) does not cut the renter's time short; without that moment, what the chain says is left.
   */
  async remainingMs(record: LeaseRecord): Promise<number> {
    const { chain } = record;
    if (chain.status !== "Active" || chain.end === 0) return chain.duration * 1000;
    if (record.activatedWallMs !== null) return Math.max(0, (chain.end - chain.activatedAt) * 1000 - (Date.now() - record.activatedWallMs));
    return Math.max(0, (chain.end - (await this.chainNow())) * 1000);
  }

  /** Hands a lease's units back to the idle workload and forgets them. */
  async releaseUnits(leaseId: bigint): Promise<void> {
    await this.units.release(leaseId);
    this.updateGauges();
  }

  updateGauges(): void {
    const counts = new Map<string, number>();
    for (const record of this.ctx.records.open()) counts.set(record.state, (counts.get(record.state) ?? 0) + 1);
    for (const state of ["waiting_spec", "preparing", "running", "succeeded", "failed", "exceeded", "stopped", "preempted"]) {
      this.ctx.metrics.providerLeases.set({ state }, counts.get(state) ?? 0);
    }
  }

  withLock<T>(leaseId: bigint, fn: () => Promise<T>): Promise<T> {
    const previous = this.locks.get(leaseId) ?? Promise.resolve();
    const run = previous.then(fn, fn);
    const tail = run.catch(() => undefined);
    this.locks.set(leaseId, tail);
    runDetached(
      tail.then(() => {
        if (this.locks.get(leaseId) === tail) this.locks.delete(leaseId);
      }),
      this.ctx.logger,
      "Releasing a lease lock",
      { leaseId },
    );
    return run;
  }
}

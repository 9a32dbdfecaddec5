/**
 * Capacity switching on one machine. Each unit is in one of the contract's three modes: `idle`
 * (no lease: the provider's idle workload runs on it), `ai` (an on-demand lease) or
 * `interruptible` (a lease at a bid that may be preempted).
 *
 * - {@link CapacityManager.assign} takes units for a lease. It stops the idle workload on them
 *   first (SIGTERM, grace, SIGKILL) and, for units held by an interruptible lease, preempts that
 *   lease; it resolves only when the units are free, so the caller starts the task after it.
 *   Units held by an on-demand lease are refused (the chain never leases a unit twice).
 * - {@link CapacityManager.preempt} sends an interruptible lease's task SIGTERM as the notice
 *   begins (it may flush and exit), stops whatever still runs when the notice ends, and releases
 *   the units then, not before.
 * - {@link CapacityManager.release} ends a lease's hold (stopping its task if it still runs) and
 *   returns the units to the idle workload (during a preemption notice: when the notice ends).
 * Every change of a unit's mode is emitted as a `mode` event.
 *
 * The chain side (which lease to preempt, when a lease ends) is the caller's: this class only
 * does what it is told, in order, with real processes.
 */
import { EventEmitter } from "node:events";
import { setTimeout as sleep } from "node:timers/promises";
import { silentLogger, type Logger } from "../../log/logger.js";
import { UnitsBusyError, UnknownLeaseError } from "../errors.js";
import { ManagedProcess } from "../runtime/process-group.js";
import { runDetached } from "../../../common/detached.js";

export type UnitMode = "idle" | "ai" | "interruptible";
export type LeaseMode = Exclude<UnitMode, "idle">;

export type CapacityUnit = {
  id: string;
  /** CUDA_VISIBLE_DEVICES entry of the unit (GPU or MIG UUID). */
  device: string;
};

export type IdleWorkloadOptions = {
  /** A string runs through /bin/sh -c; an array is run directly. */
  command: string | string[];
  /** Added to PATH, HOME and LANG of the node; the idle workload gets nothing else of the node's environment. */
  env?: Record<string, string>;
  cwd?: string;
  /** `unit`: one process per idle unit; `machine`: one process over all idle units, restarted when the set changes. */
  scope?: "unit" | "machine";
  /** SIGTERM to SIGKILL when idle work makes way for a lease. */
  stopGraceMs?: number;
  /** First delay before restarting an idle process that exited; doubles on each quick failure. */
  restartDelayMs?: number;
  maxRestartDelayMs?: number;
};

export type ModeChange = { unitId: string; from: UnitMode; to: UnitMode; leaseId: string | null; at: number };

/** Anything that can be stopped: a runtime TaskHandle qualifies. */
export type StoppableTask = {
  /** SIGTERM, up to graceMs, SIGKILL. */
  stop(graceMs?: number): Promise<unknown>;
  /** SIGTERM alone, no wait, no kill (a preemption notice begins); idempotent, a no-op once the task exited. */
  sendTerm?(): Promise<unknown>;
};

export type CapacityManagerOptions = {
  units: CapacityUnit[];
  idle?: IdleWorkloadOptions | undefined;
  /** Grace given to a lease's task when it is preempted or released while running. */
  taskStopGraceMs?: number;
  /** Notice used when assign() has to preempt and the caller gives none. */
  defaultPreemptionNoticeMs?: number;
  logger?: Logger;
};

/** `preemption`: the notice runs (or ran) out; `noticeOver`: it has, and the units may go. */
type Lease = { id: string; mode: LeaseMode; units: string[]; task?: StoppableTask; preemption?: Promise<void>; noticeOver?: boolean };

/** An idle process that keeps itself running (with backoff) until stopped. */
class IdleWorker {
  private process: ManagedProcess | undefined;
  private stopped = false;
  private failures = 0;
  private restartTimer: AbortController | undefined;
  /** How many times the idle command was started (for status and tests). */
  starts = 0;

  constructor(
    readonly units: CapacityUnit[],
    private readonly options: IdleWorkloadOptions,
    private readonly logger: Logger,
  ) {}

  get pid(): number | undefined {
    return this.process?.hasExited === false ? this.process.pid : undefined;
  }

  start(): void {
    if (this.stopped) return;
    const argv = typeof this.options.command === "string" ? ["/bin/sh", "-c", this.options.command] : this.options.command;
    const env: Record<string, string> = {};
    for (const key of ["PATH", "HOME", "LANG"]) if (process.env[key] !== undefined) env[key] = process.env[key]!;
    Object.assign(env, this.options.env, {
      CUDA_VISIBLE_DEVICES: this.units.map((unit) => unit.device).join(","),
      CUDA_DEVICE_ORDER: "PCI_BUS_ID",
      SUANLI_IDLE_UNITS: this.units.map((unit) => unit.id).join(","),
    });
    const startedAt = Date.now();
    this.starts++;
    const proc = ManagedProcess.spawn({
      argv,
      cwd: this.options.cwd ?? process.cwd(),
      env,
      onLine: (stream, line) => this.logger.debug("Idle workload output", { units: env.SUANLI_IDLE_UNITS, stream, line }),
    });
    this.process = proc;
    runDetached(
      proc.exited.then((exit) => {
        if (this.stopped || this.process !== proc) return;
        // Quick failures back off exponentially; a run of a minute or more resets the count.
        this.failures = Date.now() - startedAt > 60_000 ? 0 : this.failures + 1;
        const delay = Math.min(this.options.maxRestartDelayMs ?? 60_000, (this.options.restartDelayMs ?? 1_000) * 2 ** Math.max(0, this.failures - 1));
        this.logger.warn("Idle workload exited; restarting", {
          units: env.SUANLI_IDLE_UNITS,
          code: exit.code,
          signal: exit.signal,
          error: exit.spawnError?.code,
          restartInMs: delay,
        });
        const timer = new AbortController();
        this.restartTimer = timer;
        sleep(delay, undefined, { signal: timer.signal }).then(
          () => this.start(),
          () => undefined,
        );
      }),
      this.logger,
      "Restarting the idle workload",
    );
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.restartTimer?.abort();
    if (this.process && !this.process.hasExited) await this.process.terminate(this.options.stopGraceMs ?? 5_000);
  }
}

export class CapacityManager extends EventEmitter {
  private readonly units = new Map<string, CapacityUnit>();
  private readonly holder = new Map<string, string>();
  private readonly leases = new Map<string, Lease>();
  /** Units an assign() is waiting for: a release in the meantime must not put idle work on them. */
  private readonly claimed = new Set<string>();
  private readonly workers = new Set<IdleWorker>();
  private readonly logger: Logger;
  private started = false;
  private closed = false;
  private queue: Promise<unknown> = Promise.resolve();

  constructor(private readonly options: CapacityManagerOptions) {
    super();
    for (const unit of options.units) this.units.set(unit.id, unit);
    this.logger = options.logger ?? silentLogger();
  }

  /** `mode`: a unit changed mode (idle, ai, interruptible). */
  override on(event: "mode", listener: (change: ModeChange) => void): this {
    return super.on(event, listener);
  }

  override off(event: "mode", listener: (change: ModeChange) => void): this {
    return super.off(event, listener);
  }

  /** Starts the idle workload on every unit without a lease. */
  async start(): Promise<void> {
    await this.serial(async () => {
      this.started = true;
      this.startIdle();
    });
  }

  /** Stops all idle work. Leases' tasks belong to their owners and are left alone. */
  async close(): Promise<void> {
    await this.serial(async () => {
      this.closed = true;
      await Promise.all([...this.workers].map((worker) => worker.stop()));
      this.workers.clear();
    });
  }

  /** Each unit's mode and the lease holding it. */
  modes(): Record<string, { mode: UnitMode; leaseId: string | null }> {
    const out: Record<string, { mode: UnitMode; leaseId: string | null }> = {};
    for (const id of this.units.keys()) {
      const leaseId = this.holder.get(id) ?? null;
      out[id] = { mode: leaseId ? this.leases.get(leaseId)!.mode : "idle", leaseId };
    }
    return out;
  }

  /** PIDs of the running idle processes, by the units they serve (status pages, tests). */
  idleProcesses(): { units: string[]; pid: number | undefined; starts: number }[] {
    return [...this.workers].map((worker) => ({ units: worker.units.map((unit) => unit.id), pid: worker.pid, starts: worker.starts }));
  }

  /**
   * Takes `unitIds` for `leaseId`. Resolves once idle work on them has stopped and any
   * interruptible lease holding them has been preempted (SIGTERM, its notice) and stopped.
   */
  async assign(leaseId: string, unitIds: string[], mode: LeaseMode, options: { preemptNoticeMs?: number } = {}): Promise<void> {
    const unknown = unitIds.filter((id) => !this.units.has(id));
    if (unknown.length > 0) throw new UnitsBusyError(unknown, "no such unit on this machine");
    if (new Set(unitIds).size !== unitIds.length) throw new UnitsBusyError(unitIds, "a unit is listed twice");
    for (const id of unitIds) this.claimed.add(id);
    try {
      // Each round preempts the current holders; a new holder cannot appear in between because
      // the units are claimed. Two rounds cover a holder that was being preempted already.
      for (let round = 0; round < 3; round++) {
        const blockers = await this.serial(async () => {
          const existing = this.leases.get(leaseId);
          if (existing && existing.units.some((id) => !unitIds.includes(id))) throw new UnitsBusyError(unitIds, `lease ${leaseId} already holds other units`);
          const holders = new Set<string>();
          for (const id of unitIds) {
            const holderId = this.holder.get(id);
            if (holderId && holderId !== leaseId) holders.add(holderId);
          }
          const onDemand = [...holders].filter((id) => this.leases.get(id)?.mode === "ai");
          if (onDemand.length > 0) throw new UnitsBusyError(unitIds, `held by on-demand lease ${onDemand.join(", ")}`);
          if (holders.size > 0) return [...holders];
          await this.take(leaseId, unitIds, mode);
          return [];
        });
        if (blockers.length === 0) return;
        await Promise.all(blockers.map((holderId) => this.preempt(holderId, options.preemptNoticeMs ?? this.options.defaultPreemptionNoticeMs ?? 0).catch(() => undefined)));
      }
      throw new UnitsBusyError(unitIds, "the units did not become free");
    } finally {
      for (const id of unitIds) this.claimed.delete(id);
    }
  }

  /** Registers the task running for a lease, so preemption and release can stop it. */
  attachTask(leaseId: string, task: StoppableTask): void {
    const lease = this.leases.get(leaseId);
    if (!lease) throw new UnknownLeaseError(leaseId);
    lease.task = task;
    // Attached during a notice (a start that raced the preemption): it gets the notice's SIGTERM too.
    if (lease.preemption && !lease.noticeOver) this.termAtNotice(lease);
  }

  /**
   * Preempts an interruptible lease. Its task gets SIGTERM at once, as the notice begins (it may
   * trap it, flush its checkpoint folder and exit, or run on); after `noticeMs` whatever still runs
   * gets SIGTERM again, the grace period, SIGKILL, and the units are released. They stay the
   * lease's for the whole notice, even when its task exits early (its renter pays for them until
   * the notice ends). Calling it again returns the same preemption.
   */
  preempt(leaseId: string, noticeMs: number): Promise<void> {
    const lease = this.leases.get(leaseId);
    if (!lease) return Promise.reject(new UnknownLeaseError(leaseId));
    if (lease.mode !== "interruptible") return Promise.reject(new UnitsBusyError(lease.units, `lease ${leaseId} is on-demand and cannot be preempted`));
    if (!lease.preemption) {
      this.logger.info("Preempting lease: SIGTERM to its task now, stopped when the notice ends", { leaseId, noticeMs });
      // Unref'd: a node stopping during a notice does not wait it out.
      lease.preemption = sleep(noticeMs, undefined, { ref: false })
        .then(() => {
          lease.noticeOver = true;
          return this.release(leaseId);
        })
        .catch((error) => {
          if (!(error instanceof UnknownLeaseError)) throw error;
        });
      this.termAtNotice(lease);
    }
    return lease.preemption;
  }

  /**
   * Ends a lease's hold: stops its task if it still runs, returns its units to idle work. During a
   * preemption notice the task is stopped now but the units go when the notice ends (preempt()).
   */
  async release(leaseId: string): Promise<void> {
    const lease = this.leases.get(leaseId);
    if (!lease) throw new UnknownLeaseError(leaseId);
    if (lease.task) await lease.task.stop(this.options.taskStopGraceMs ?? 10_000);
    if (lease.preemption && !lease.noticeOver) return;
    await this.serial(async () => {
      // Read again under the lock: the lease may have been released and taken again meanwhile.
      const current = this.leases.get(leaseId);
      if (!current) return;
      // Update the whole state first, then tell listeners: a listener may read modes().
      this.leases.delete(leaseId);
      const freed = [...this.holder].filter(([, holderId]) => holderId === leaseId).map(([id]) => id);
      for (const id of freed) this.holder.delete(id);
      for (const id of freed) this.emitMode(id, current.mode, "idle", null);
      await this.restartIdle();
    });
  }

  /**
   * A lease keeps only `keepUnitIds` of its units (its renter released the others on-chain): the
   * others go back to idle work at once, and to the next lease. Its task is not stopped.
   */
  async shrink(leaseId: string, keepUnitIds: readonly string[]): Promise<string[]> {
    return this.serial(async () => {
      const lease = this.leases.get(leaseId);
      if (!lease) return [];
      const keep = new Set(keepUnitIds);
      const dropped = lease.units.filter((id) => !keep.has(id));
      if (dropped.length === 0) return [];
      lease.units = lease.units.filter((id) => keep.has(id));
      for (const id of dropped) if (this.holder.get(id) === leaseId) this.holder.delete(id);
      for (const id of dropped) this.emitMode(id, lease.mode, "idle", null);
      await this.restartIdle();
      return dropped;
    });
  }

  /** The notice's SIGTERM to the lease's task, when it has one that takes it (not awaited: the notice runs meanwhile). */
  private termAtNotice(lease: Lease): void {
    if (lease.task?.sendTerm) runDetached(lease.task.sendTerm(), this.logger, "Sending SIGTERM at a preemption notice", { leaseId: lease.id });
  }

  // --- internals (always called inside serial()) ---

  private async take(leaseId: string, unitIds: string[], mode: LeaseMode): Promise<void> {
    const fresh = unitIds.filter((id) => this.holder.get(id) !== leaseId);
    const lease = this.leases.get(leaseId) ?? { id: leaseId, mode, units: [] };
    // Units leave idle work before they are handed over.
    this.leases.set(leaseId, lease);
    for (const id of fresh) this.holder.set(id, leaseId);
    await this.restartIdle();
    for (const id of fresh) {
      lease.units.push(id);
      this.emitMode(id, "idle", mode, leaseId);
    }
  }

  /** Idle units: no lease holds them and no assign() is waiting for them. */
  private idleUnits(): CapacityUnit[] {
    return [...this.units.values()].filter((unit) => !this.holder.has(unit.id) && !this.claimed.has(unit.id));
  }

  private startIdle(): void {
    const idle = this.options.idle;
    if (!idle || !this.started || this.closed) return;
    const free = this.idleUnits();
    if ((idle.scope ?? "unit") === "machine") {
      if (free.length > 0 && this.workers.size === 0) this.spawnWorker(free);
      return;
    }
    const served = new Set([...this.workers].flatMap((worker) => worker.units.map((unit) => unit.id)));
    for (const unit of free) if (!served.has(unit.id)) this.spawnWorker([unit]);
  }

  private spawnWorker(units: CapacityUnit[]): void {
    const worker = new IdleWorker(units, this.options.idle!, this.logger);
    this.workers.add(worker);
    worker.start();
  }

  /** Stops idle workers serving units that are no longer idle, then starts workers where needed. */
  private async restartIdle(): Promise<void> {
    const idleIds = new Set(this.idleUnits().map((unit) => unit.id));
    const machineScope = (this.options.idle?.scope ?? "unit") === "machine";
    const stale = [...this.workers].filter((worker) => {
      const ids = worker.units.map((unit) => unit.id);
      if (!ids.every((id) => idleIds.has(id))) return true;
      // A machine-wide worker must also grow when units come back.
      return machineScope && ids.length !== idleIds.size;
    });
    await Promise.all(
      stale.map(async (worker) => {
        this.workers.delete(worker);
        await worker.stop();
      }),
    );
    this.startIdle();
  }

  private emitMode(unitId: string, from: UnitMode, to: UnitMode, leaseId: string | null): void {
    if (from === to) return;
    this.emit("mode", { unitId, from, to, leaseId, at: Date.now() } satisfies ModeChange);
  }

  /** Runs state changes one at a time. */
  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.queue.then(fn, fn);
    this.queue = next.catch(() => undefined);
    return next;
  }
}

/**
 * Which lease holds which of this node's units. The capacity manager knows units by task id
 * (`lease-<id>`); the ledger issues those ids and keeps the way back to the lease, so nothing
 * parses a task id to find its lease. It picks units for a lease (idle first, then units of
 * leases that ended, then units of interruptible leases it preempts), hands them to the
 * capacity manager, shrinks a lease's units, counts units held beyond what leases pay for
 * (draining) and gives units back to the idle workload.
 */
import type { LeaseView } from "../../../common/chain/market.js";
import type { Logger } from "../../log/logger.js";
import type { CapacityManager } from "../capacity/capacity-manager.js";
import type { Inventory } from "../inventory/inventory.js";
import type { ProviderOptions } from "../options.js";
import type { Runtime } from "../runtime/runtime.js";
import type { MachineMarket } from "./offers.js";
import type { LeaseRecord, LeaseRecords } from "./records.js";
import { runDetached } from "../../../common/detached.js";

export type UnitLedgerDeps = {
  records: LeaseRecords;
  capacity: CapacityManager;
  machines: MachineMarket;
  inventory: Inventory;
  runtime: Runtime;
  options: ProviderOptions;
  logger: Logger;
  /** Reads a lease from the chain (for the notice of leases this one preempts). */
  readLease(leaseId: bigint): Promise<LeaseView>;
  /** The chain's time now, in (fractional) unix seconds. */
  chainTime(): Promise<number>;
};

export class UnitLedger {
  /** Unit id → lease whose task uses (or is about to use) it. */
  private readonly owners = new Map<string, bigint>();
  /** Task id given to the capacity manager and the runtime → its lease. */
  private readonly tasks = new Map<string, bigint>();

  constructor(private readonly deps: UnitLedgerDeps) {}

  /** The task id of a lease's task, for the capacity manager and the runtime. */
  taskId(leaseId: bigint): string {
    const taskId = `lease-${leaseId}`;
    this.tasks.set(taskId, leaseId);
    return taskId;
  }

  /** The lease a capacity holder (a task id this ledger issued) belongs to. */
  private leaseOfHolder(holder: string | null | undefined): LeaseRecord | undefined {
    if (!holder) return undefined;
    const leaseId = this.tasks.get(holder);
    return leaseId === undefined ? undefined : this.deps.records.get(leaseId);
  }

  /** After a restart: units of open leases that hold them are theirs again. */
  restore(): void {
    for (const record of this.deps.records.open()) {
      this.taskId(record.leaseId);
      if (record.unitIds.length > 0 && !record.released) for (const unit of record.unitIds) this.owners.set(unit, record.leaseId);
    }
  }

  /**
   * Units for a lease on its machine: idle ones first, then units of leases that ended on-chain
   * (still stopping), then units of interruptible leases (preempted for this one).
   */
  private pick(record: LeaseRecord): string[] {
    const machine = this.deps.machines.machine(record.machineId);
    if (!machine) return [];
    const modes = this.deps.capacity.modes();
    const rank = (unit: string): number => {
      const owner = this.owners.get(unit);
      const holder = modes[unit]?.leaseId;
      if (owner === undefined && !holder) return 0;
      const ownerRecord = owner !== undefined ? this.deps.records.get(owner) : this.leaseOfHolder(holder);
      if (!ownerRecord) return 0;
      if (ownerRecord.chain.status !== "Open" && ownerRecord.chain.status !== "Active") return 1;
      if (ownerRecord.interruptible) return 2;
      return 3;
    };
    return machine.unitIds
      .map((unit, index) => ({ unit, index, rank: rank(unit) }))
      .filter((entry) => entry.rank < 3)
      .sort((a, b) => a.rank - b.rank || a.index - b.index)
      .slice(0, record.units)
      .map((entry) => entry.unit);
  }

  /** Gives a lease its units (those it has, or new ones picked) and records them with their devices. */
  async claim(record: LeaseRecord): Promise<LeaseRecord> {
    const units = record.unitIds.length === record.units ? record.unitIds : this.pick(record);
    for (const unit of units) this.owners.set(unit, record.leaseId);
    const devices = units.map((unit) => this.deps.inventory.units.find((u) => u.id === unit)?.device ?? unit);
    return this.deps.records.update(record.leaseId, (r) => {
      r.unitIds = units;
      r.devices = devices;
    });
  }

  /** Hands a claimed lease's units to the capacity manager (after holders that ended let go). */
  async assign(record: LeaseRecord, noticeMs: number): Promise<void> {
    await this.freeEndedHolders(record.unitIds);
    await this.deps.capacity.assign(this.taskId(record.leaseId), record.unitIds, record.interruptible ? "interruptible" : "ai", { preemptNoticeMs: noticeMs });
  }

  /** Takes a lease's units from the idle workload without a task (activated without a spec). */
  async hold(record: LeaseRecord): Promise<void> {
    const claimed = await this.claim(record);
    const noticeMs = await this.noticeFor(claimed);
    // Not awaited: freeing the units may wait out a preemption notice.
    runDetached(this.assign(claimed, noticeMs), this.deps.logger, "Taking the units of an activated lease", { leaseId: record.leaseId });
  }

  /**
   * Notice for interruptible leases that hold units this lease takes: until their `stopAt`, read
   * from the chain (our record of them may not have caught up with the preemption yet, and the
   * first notice given to the capacity manager is the one it keeps).
   */
  async noticeFor(record: LeaseRecord): Promise<number> {
    let latest = 0;
    const holders = new Set<bigint>();
    const modes = this.deps.capacity.modes();
    for (const unit of record.unitIds) {
      const holder = modes[unit]?.leaseId;
      const leaseId = holder ? this.tasks.get(holder) : undefined;
      if (leaseId !== undefined) holders.add(leaseId);
    }
    for (const holder of holders) {
      const view = await this.deps.readLease(holder);
      if (view.endReason === "Preempted" && view.stopAt > latest) latest = view.stopAt;
    }
    if (latest === 0) return this.deps.options.grace.preemptionNoticeMs;
    return Math.max(0, Math.round((latest - (await this.deps.chainTime())) * 1000));
  }

  /**
   * Waits until leases that ended on-chain have let go of these units (their tasks stop with a
   * grace period): the capacity manager refuses units an on-demand lease still holds.
   */
  private async freeEndedHolders(units: readonly string[]): Promise<void> {
    const modes = this.deps.capacity.modes();
    const holders = new Set<string>();
    for (const unit of units) {
      const holder = modes[unit]?.leaseId;
      const record = this.leaseOfHolder(holder);
      if (holder && record && record.chain.status !== "Open" && record.chain.status !== "Active" && record.chain.endReason !== "Preempted") holders.add(holder);
    }
    await Promise.all([...holders].map((holder) => this.deps.capacity.release(holder).catch(() => undefined)));
  }

  /**
   * The renter released units early (`LeaseShrunk`) and stopped paying for them. Without a task
   * yet (`taskLive` false), the lease keeps its first `units` units and the others go back to
   * idle work and the next lease at once. A task being prepared or running keeps them all until
   * it ends: its environment (CUDA_VISIBLE_DEVICES, container devices) cannot change under it,
   * and another tenant must never share a GPU with it. Until then those units are neither
   * offered nor reserved (`MachineMarket.setDraining`).
   */
  async shrink(record: LeaseRecord, units: number, taskLive: boolean): Promise<LeaseRecord> {
    if (taskLive) {
      this.updateDraining(record.machineId);
      return record;
    }
    const keep = record.unitIds.slice(0, units);
    const dropped = record.unitIds.slice(units);
    const updated = await this.deps.records.update(record.leaseId, (r) => {
      r.unitIds = keep;
      r.devices = r.devices.slice(0, units);
    });
    for (const unit of dropped) if (this.owners.get(unit) === record.leaseId) this.owners.delete(unit);
    await this.deps.capacity.shrink(this.taskId(record.leaseId), keep);
    this.deps.logger.info("Lease shrunk; released units go back to idle work", { leaseId: record.leaseId, kept: keep, released: dropped });
    this.updateDraining(record.machineId);
    return updated;
  }

  /** Units of a machine held by tasks beyond what their leases pay for now (after a shrink). */
  private updateDraining(machineId: number): void {
    let draining = 0;
    for (const record of this.deps.records.open()) {
      if (record.machineId !== machineId || record.released) continue;
      draining += Math.max(0, record.unitIds.length - record.units);
    }
    this.deps.machines.setDraining(machineId, draining);
  }

  /** Lets the capacity manager stop a lease's task now (SIGTERM, grace, SIGKILL); never throws. */
  stopTask(leaseId: bigint): Promise<void> {
    return this.deps.capacity.release(this.taskId(leaseId)).catch(() => undefined);
  }

  /** Hands a lease's units back to the idle workload and forgets them. */
  async release(leaseId: bigint): Promise<void> {
    await this.deps.capacity.release(this.taskId(leaseId)).catch(() => undefined);
    for (const [unit, owner] of this.owners) if (owner === leaseId) this.owners.delete(unit);
    const record = this.deps.records.get(leaseId);
    if (record && record.unitIds.length > record.units) {
      // A shrunk lease's task is over: what it kept beyond its units is for sale again.
      await this.deps.records.update(leaseId, (r) => {
        r.unitIds = r.unitIds.slice(0, r.units);
        r.devices = r.devices.slice(0, r.units);
      });
      this.updateDraining(record.machineId);
    }
    if (record && !record.released && record.phase === "ended") {
      await this.deps.runtime.reap(this.taskId(leaseId)).catch(() => 0);
      await this.deps.records.update(leaseId, (r) => void (r.released = true));
    }
  }
}

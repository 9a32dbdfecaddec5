/**
 * The provider's reservation table: units it has promised to renters for a short time (the
 * hold behind a signed acceptance). It never promises more than it has: holds drawing on free
 * units never exceed the free units, and holds that may preempt interruptible leases never
 * exceed free plus preemptible units. A hold ends when it expires, is released, or is committed
 * because its lease opened (its units then leave the capacity).
 *
 * A pure class with an injected clock (milliseconds). The provider agent persists it through
 * `snapshot()` / `ReservationTable.restore()` and feeds capacity from chain events with
 * `setCapacity`.
 */
import { z } from "zod";
import { SuanliError } from "../errors.js";
import { parseInput } from "../validation.js";

export type MachineCapacity = {
  /** Units with no lease. */
  freeUnits: number;
  /** Units held by interruptible leases that an opener may preempt. */
  preemptibleUnits: number;
};

export type Hold = {
  readonly id: string;
  readonly machineId: number;
  readonly units: number;
  /** Whether the hold may draw on preemptible units. */
  readonly preempt: boolean;
  /** Units drawn from free units, and from preemptible ones (free first, like the contract). */
  readonly fromFree: number;
  readonly fromPreemptible: number;
  /** Unix ms. */
  readonly createdAt: number;
  /** Unix ms. */
  readonly expiresAt: number;
  /** Free-form owner (the renter address), for logs and refusals. */
  readonly renter: string;
};

export type HoldResult = { readonly ok: true; readonly hold: Hold } | { readonly ok: false; readonly reason: "insufficient-units" | "unknown-machine"; readonly available: number };

const holdRequestSchema = z.strictObject({
  /** Unique per reservation (the ReserveRequest nonce); repeating a live hold's id returns it. */
  id: z.string().min(1).max(100),
  machineId: z
    .number()
    .int()
    .min(1)
    .max(2 ** 32 - 1),
  units: z.number().int().min(1).max(65_535),
  /** May draw on preemptible units once free units run out (on-demand, or a bid above the lowest). */
  preempt: z.boolean().default(false),
  renter: z.string().max(100).default(""),
  /** Overrides the table's TTL for this hold. */
  ttlMs: z.number().int().min(1).max(3_600_000).optional(),
});
export type HoldRequest = z.input<typeof holdRequestSchema>;

const capacitySchema = z.strictObject({
  freeUnits: z.number().int().min(0).max(65_535),
  preemptibleUnits: z.number().int().min(0).max(65_535).default(0),
});

export const reservationTableOptionsSchema = z.strictObject({
  /** How long a hold lasts unless released or committed: long enough for the renter's open transaction. */
  ttlMs: z.number().int().min(1).max(3_600_000).default(60_000),
});

/** A reservation id reused with different terms while the first hold is alive. */
export class ReservationConflictError extends SuanliError {
  override name = "ReservationConflictError";
}

export type ReservationSnapshot = {
  machines: { machineId: number; freeUnits: number; preemptibleUnits: number }[];
  holds: Hold[];
};

type Machine = { capacity: MachineCapacity; heldFree: number; heldPreemptible: number; holds: Map<string, Hold> };

export class ReservationTable {
  private readonly machines = new Map<number, Machine>();
  private readonly byId = new Map<string, Hold>();
  private readonly ttlMs: number;
  private readonly now: () => number;

  constructor(options: z.input<typeof reservationTableOptionsSchema> & { now?: () => number } = {}) {
    const { now, ...rest } = options;
    this.ttlMs = parseInput(reservationTableOptionsSchema, rest, "reservation table options").ttlMs;
    this.now = now ?? Date.now;
  }

  /**
   * Sets a machine's capacity (from the chain). When capacity shrank under the live holds (a
   * lease opened without reserving), the newest holds are dropped until the rest fit, so the
   * table never promises more than exists; the dropped holds are returned.
   */
  setCapacity(machineId: number, capacity: z.input<typeof capacitySchema>): Hold[] {
    const parsed = parseInput(capacitySchema, capacity, "machine capacity");
    const machine = this.machines.get(machineId);
    if (!machine) {
      this.machines.set(machineId, { capacity: parsed, heldFree: 0, heldPreemptible: 0, holds: new Map() });
      return [];
    }
    this.sweepMachine(machine);
    machine.capacity = parsed;
    // Re-place the holds oldest first under the new capacity; those that no longer fit are dropped.
    const holds = [...machine.holds.values()].sort((a, b) => a.createdAt - b.createdAt || (a.id < b.id ? -1 : 1));
    machine.holds.clear();
    machine.heldFree = 0;
    machine.heldPreemptible = 0;
    const dropped: Hold[] = [];
    for (const hold of holds) {
      const placed = this.place(machine, hold.units, hold.preempt);
      if (!placed) {
        dropped.push(hold);
        this.byId.delete(hold.id);
        continue;
      }
      const replaced = { ...hold, ...placed };
      machine.holds.set(hold.id, replaced);
      this.byId.set(hold.id, replaced);
    }
    return dropped;
  }

  /** Forgets a machine (removed from the registry); its holds go with it. */
  removeMachine(machineId: number): void {
    const machine = this.machines.get(machineId);
    if (!machine) return;
    for (const id of machine.holds.keys()) this.byId.delete(id);
    this.machines.delete(machineId);
  }

  /** Units a new hold could get now: free ones, or with `preempt` also preemptible ones. */
  available(machineId: number, preempt = false): number {
    const machine = this.machines.get(machineId);
    if (!machine) return 0;
    this.sweepMachine(machine);
    return this.room(machine, preempt);
  }

  /** Holds units for a renter, or says why not. Never holds more than available. */
  hold(request: HoldRequest): HoldResult {
    const parsed = parseInput(holdRequestSchema, request, "hold request");
    const machine = this.machines.get(parsed.machineId);
    if (!machine) return { ok: false, reason: "unknown-machine", available: 0 };
    this.sweepMachine(machine);
    const existing = this.byId.get(parsed.id);
    if (existing) {
      if (existing.machineId === parsed.machineId && existing.units === parsed.units && existing.renter === parsed.renter) {
        return { ok: true, hold: existing };
      }
      throw new ReservationConflictError(`Reservation ${parsed.id} already holds other units.`);
    }
    const placed = this.place(machine, parsed.units, parsed.preempt);
    if (!placed) return { ok: false, reason: "insufficient-units", available: this.room(machine, parsed.preempt) };
    const now = this.now();
    const hold: Hold = {
      id: parsed.id,
      machineId: parsed.machineId,
      units: parsed.units,
      preempt: parsed.preempt,
      ...placed,
      createdAt: now,
      expiresAt: now + (parsed.ttlMs ?? this.ttlMs),
      renter: parsed.renter,
    };
    machine.holds.set(hold.id, hold);
    this.byId.set(hold.id, hold);
    return { ok: true, hold };
  }

  /** Ends a hold without a lease (the renter gave up, or its transaction failed). */
  release(id: string): boolean {
    const hold = this.byId.get(id);
    if (!hold) return false;
    this.drop(hold);
    return true;
  }

  /**
   * The hold's lease opened: the hold ends and its units leave the capacity (free first, then
   * preemptible, as the contract takes them). Returns the hold, or undefined if it had expired
   * or never existed — then the caller re-reads capacity from the chain.
   */
  commit(id: string): Hold | undefined {
    const hold = this.byId.get(id);
    if (!hold) return undefined;
    const machine = this.machines.get(hold.machineId)!;
    this.drop(hold);
    machine.capacity = {
      freeUnits: machine.capacity.freeUnits - hold.fromFree,
      preemptibleUnits: machine.capacity.preemptibleUnits - hold.fromPreemptible,
    };
    return hold;
  }

  /** Drops expired holds everywhere; returns them. */
  sweep(): Hold[] {
    const expired: Hold[] = [];
    for (const machine of this.machines.values()) expired.push(...this.sweepMachine(machine));
    return expired;
  }

  /** Live holds, of one machine or all. */
  holds(machineId?: number): Hold[] {
    const machines = machineId === undefined ? [...this.machines.values()] : [this.machines.get(machineId)].filter((m) => m !== undefined);
    const out: Hold[] = [];
    for (const machine of machines) {
      this.sweepMachine(machine);
      out.push(...machine.holds.values());
    }
    return out;
  }

  capacity(machineId: number): MachineCapacity | undefined {
    const machine = this.machines.get(machineId);
    return machine ? { ...machine.capacity } : undefined;
  }

  snapshot(): ReservationSnapshot {
    this.sweep();
    return {
      machines: [...this.machines.entries()].map(([machineId, m]) => ({ machineId, ...m.capacity })),
      holds: [...this.byId.values()].map((hold) => ({ ...hold })),
    };
  }

  /** Rebuilds a table from a snapshot; expired holds are dropped, and holds that no longer fit too. */
  static restore(snapshot: ReservationSnapshot, options: ConstructorParameters<typeof ReservationTable>[0] = {}): ReservationTable {
    const table = new ReservationTable(options);
    for (const machine of snapshot.machines) {
      table.setCapacity(machine.machineId, { freeUnits: machine.freeUnits, preemptibleUnits: machine.preemptibleUnits });
    }
    const now = table.now();
    for (const hold of [...snapshot.holds].sort((a, b) => a.createdAt - b.createdAt)) {
      if (hold.expiresAt <= now) continue;
      const machine = table.machines.get(hold.machineId);
      if (!machine) continue;
      const placed = table.place(machine, hold.units, hold.preempt);
      if (!placed) continue;
      const restored = { ...hold, ...placed };
      machine.holds.set(hold.id, restored);
      table.byId.set(hold.id, restored);
    }
    return table;
  }

  private room(machine: Machine, preempt: boolean): number {
    const free = machine.capacity.freeUnits - machine.heldFree;
    if (!preempt) return Math.max(0, free);
    return Math.max(0, free) + Math.max(0, machine.capacity.preemptibleUnits - machine.heldPreemptible);
  }

  /** Reserves units on the machine's counters (free first) or returns null when they do not fit. */
  private place(machine: Machine, units: number, preempt: boolean): { fromFree: number; fromPreemptible: number } | null {
    const free = Math.max(0, machine.capacity.freeUnits - machine.heldFree);
    const fromFree = Math.min(units, free);
    const fromPreemptible = units - fromFree;
    if (fromPreemptible > 0 && (!preempt || fromPreemptible > machine.capacity.preemptibleUnits - machine.heldPreemptible)) return null;
    machine.heldFree += fromFree;
    machine.heldPreemptible += fromPreemptible;
    return { fromFree, fromPreemptible };
  }

  private drop(hold: Hold): void {
    const machine = this.machines.get(hold.machineId)!;
    machine.holds.delete(hold.id);
    machine.heldFree -= hold.fromFree;
    machine.heldPreemptible -= hold.fromPreemptible;
    this.byId.delete(hold.id);
  }

  private sweepMachine(machine: Machine): Hold[] {
    const now = this.now();
    const expired: Hold[] = [];
    for (const hold of machine.holds.values()) if (hold.expiresAt <= now) expired.push(hold);
    for (const hold of expired) this.drop(hold);
    return expired;
  }
}

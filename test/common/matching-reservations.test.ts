import assert from "node:assert/strict";
import fc from "fast-check";
import { InvalidInputError } from "../../common/errors.js";
import { ReservationTable } from "../../common/matching/index.js";

function table(now = { t: 1_000 }, ttlMs = 30_000): { table: ReservationTable; now: { t: number } } {
  return { table: new ReservationTable({ ttlMs, now: () => now.t }), now };
}

describe("matching: provider reservation table", () => {
  it("holds units up to the free units and refuses beyond, saying how many are left", () => {
    const { table: t } = table();
    t.setCapacity(1, { freeUnits: 4 });
    assert.equal(t.hold({ id: "a", machineId: 1, units: 3 }).ok, true);
    assert.equal(t.available(1), 1);
    assert.deepEqual(t.hold({ id: "b", machineId: 1, units: 2 }), { ok: false, reason: "insufficient-units", available: 1 });
    assert.equal(t.hold({ id: "c", machineId: 1, units: 1 }).ok, true);
    assert.equal(t.available(1), 0);
    assert.deepEqual(t.hold({ id: "d", machineId: 9, units: 1 }), { ok: false, reason: "unknown-machine", available: 0 });
  });

  it("frees units when a hold expires", () => {
    const { table: t, now } = table();
    t.setCapacity(1, { freeUnits: 2 });
    const held = t.hold({ id: "a", machineId: 1, units: 2, renter: "0xrenter" });
    assert.ok(held.ok);
    assert.equal(held.hold.expiresAt, 31_000);
    now.t = 30_999;
    assert.equal(t.available(1), 0);
    now.t = 31_000;
    assert.equal(t.available(1), 2);
    assert.deepEqual(t.holds(), []);
    assert.equal(t.commit("a"), undefined, "an expired hold cannot be committed");
  });

  it("sweeps expired holds and honours a per-hold TTL", () => {
    const { table: t, now } = table();
    t.setCapacity(1, { freeUnits: 4 });
    t.hold({ id: "short", machineId: 1, units: 1, ttlMs: 100 });
    t.hold({ id: "long", machineId: 1, units: 1 });
    now.t += 100;
    assert.deepEqual(
      t.sweep().map((h) => h.id),
      ["short"],
    );
    assert.deepEqual(
      t.holds(1).map((h) => h.id),
      ["long"],
    );
  });

  it("releases a hold on request", () => {
    const { table: t } = table();
    t.setCapacity(1, { freeUnits: 2 });
    t.hold({ id: "a", machineId: 1, units: 2 });
    assert.equal(t.release("a"), true);
    assert.equal(t.release("a"), false);
    assert.equal(t.available(1), 2);
  });

  it("on lease open ends the hold and takes its units out of the capacity", () => {
    const { table: t } = table();
    t.setCapacity(1, { freeUnits: 4 });
    t.hold({ id: "a", machineId: 1, units: 3 });
    const committed = t.commit("a");
    assert.equal(committed?.units, 3);
    assert.deepEqual(t.capacity(1), { freeUnits: 1, preemptibleUnits: 0 });
    assert.equal(t.available(1), 1);
    assert.deepEqual(t.holds(), []);
  });

  it("draws on preemptible units only for holds that may preempt, free units first", () => {
    const { table: t } = table();
    t.setCapacity(1, { freeUnits: 2, preemptibleUnits: 4 });
    assert.equal(t.hold({ id: "plain", machineId: 1, units: 3 }).ok, false);
    const held = t.hold({ id: "od", machineId: 1, units: 3, preempt: true });
    assert.ok(held.ok);
    assert.equal(held.hold.fromFree, 2);
    assert.equal(held.hold.fromPreemptible, 1);
    assert.equal(t.available(1), 0);
    assert.equal(t.available(1, true), 3);
    t.commit("od");
    assert.deepEqual(t.capacity(1), { freeUnits: 0, preemptibleUnits: 3 });
  });

  it("returns the same hold for a repeated id and refuses the id for other units", () => {
    const { table: t } = table();
    t.setCapacity(1, { freeUnits: 4 });
    const first = t.hold({ id: "a", machineId: 1, units: 2, renter: "r" });
    const again = t.hold({ id: "a", machineId: 1, units: 2, renter: "r" });
    assert.deepEqual(again, first);
    assert.equal(t.available(1), 2);
    assert.throws(() => t.hold({ id: "a", machineId: 1, units: 1, renter: "r" }), { name: "ReservationConflictError" });
  });

  it("drops the newest holds when the chain reports less capacity than is held", () => {
    const { table: t, now } = table();
    t.setCapacity(1, { freeUnits: 4 });
    t.hold({ id: "old", machineId: 1, units: 2 });
    now.t += 1;
    t.hold({ id: "new", machineId: 1, units: 2 });
    const dropped = t.setCapacity(1, { freeUnits: 3 });
    assert.deepEqual(
      dropped.map((h) => h.id),
      ["new"],
    );
    assert.deepEqual(
      t.holds(1).map((h) => h.id),
      ["old"],
    );
    assert.equal(t.available(1), 1);
  });

  it("survives a snapshot and restore, without expired holds", () => {
    const { table: t, now } = table();
    t.setCapacity(1, { freeUnits: 4, preemptibleUnits: 2 });
    t.setCapacity(2, { freeUnits: 1 });
    t.hold({ id: "a", machineId: 1, units: 2, renter: "r" });
    t.hold({ id: "b", machineId: 1, units: 1, ttlMs: 10 });
    const snapshot = JSON.parse(JSON.stringify(t.snapshot()));
    now.t += 10;
    const restored = ReservationTable.restore(snapshot, { ttlMs: 30_000, now: () => now.t });
    assert.deepEqual(
      restored.holds().map((h) => h.id),
      ["a"],
    );
    assert.equal(restored.available(1), 2);
    assert.deepEqual(restored.capacity(2), { freeUnits: 1, preemptibleUnits: 0 });
    restored.removeMachine(1);
    assert.deepEqual(restored.holds(), []);
  });

  it("validates its inputs, naming the field", () => {
    const { table: t } = table();
    t.setCapacity(1, { freeUnits: 4 });
    assert.throws(
      () => t.hold({ id: "a", machineId: 1, units: 0 }),
      (e: unknown) => e instanceof InvalidInputError && e.fields[0] === "units",
    );
    assert.throws(
      () => t.setCapacity(1, { freeUnits: -1 }),
      (e: unknown) => e instanceof InvalidInputError && e.fields[0] === "freeUnits",
    );
    assert.throws(
      () => new ReservationTable({ ttlMs: 0 }),
      (e: unknown) => e instanceof InvalidInputError && e.fields[0] === "ttlMs",
    );
  });

  it("never holds more than it has, whatever the sequence of operations", () => {
    type Op =
      | { kind: "hold"; machine: number; units: number; preempt: boolean; ttl: number }
      | { kind: "release" | "commit"; pick: number }
      | { kind: "tick"; ms: number }
      | { kind: "capacity"; machine: number; free: number; preemptible: number };
    const op: fc.Arbitrary<Op> = fc.oneof(
      fc.record({
        kind: fc.constant("hold" as const),
        machine: fc.integer({ min: 1, max: 3 }),
        units: fc.integer({ min: 1, max: 5 }),
        preempt: fc.boolean(),
        ttl: fc.integer({ min: 1, max: 500 }),
      }),
      fc.record({ kind: fc.constantFrom("release" as const, "commit" as const), pick: fc.nat() }),
      fc.record({ kind: fc.constant("tick" as const), ms: fc.integer({ min: 0, max: 300 }) }),
      fc.record({
        kind: fc.constant("capacity" as const),
        machine: fc.integer({ min: 1, max: 3 }),
        free: fc.integer({ min: 0, max: 8 }),
        preemptible: fc.integer({ min: 0, max: 4 }),
      }),
    );
    fc.assert(
      fc.property(fc.array(op, { maxLength: 80 }), (ops) => {
        const now = { t: 0 };
        const t = new ReservationTable({ ttlMs: 1000, now: () => now.t });
        for (const m of [1, 2, 3]) t.setCapacity(m, { freeUnits: 4, preemptibleUnits: 2 });
        let ids = 0;
        for (const o of ops) {
          if (o.kind === "hold") t.hold({ id: String(++ids), machineId: o.machine, units: o.units, preempt: o.preempt, ttlMs: o.ttl });
          else if (o.kind === "tick") now.t += o.ms;
          else if (o.kind === "capacity") t.setCapacity(o.machine, { freeUnits: o.free, preemptibleUnits: o.preemptible });
          else {
            const live = t.holds();
            if (live.length > 0) {
              const id = live[o.pick % live.length]!.id;
              if (o.kind === "release") t.release(id);
              else t.commit(id);
            }
          }
          for (const m of [1, 2, 3]) {
            const capacity = t.capacity(m)!;
            const holds = t.holds(m);
            const fromFree = holds.reduce((n, h) => n + h.fromFree, 0);
            const fromPreemptible = holds.reduce((n, h) => n + h.fromPreemptible, 0);
            assert.ok(capacity.freeUnits >= 0 && capacity.preemptibleUnits >= 0);
            assert.ok(fromFree <= capacity.freeUnits, `machine ${m}: ${fromFree} held of ${capacity.freeUnits} free`);
            assert.ok(fromPreemptible <= capacity.preemptibleUnits);
            for (const h of holds) {
              assert.equal(h.fromFree + h.fromPreemptible, h.units);
              assert.ok(h.expiresAt > now.t);
            }
            assert.equal(t.available(m), capacity.freeUnits - fromFree);
          }
        }
      }),
      { numRuns: 200, seed: 7 },
    );
  });
});

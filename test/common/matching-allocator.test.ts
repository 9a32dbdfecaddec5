import assert from "node:assert/strict";
import type { Address } from "viem";
import { InvalidInputError } from "../../common/errors.js";
import {
  type Acceptance,
  type AllocateDependencies,
  type CandidatePart,
  MatchingEngine,
  type ReserveReply,
  allocate,
  leaseTermsFor,
  parseMatchRequest,
  reserveRequestFor,
} from "../../common/matching/index.js";
import { NOW, type OfferSpec, SIGNATURE, entry, providerAddress, requestInput } from "../support/matching-fixtures.js";

const RENTER: Address = providerAddress(0xabc);

function engineWith(specs: OfferSpec[]): MatchingEngine {
  const engine = new MatchingEngine({}, { now: () => NOW });
  for (const spec of specs) engine.upsert(entry(spec));
  return engine;
}

function accept(part: CandidatePart, overrides: Partial<Acceptance["offer"]> = {}): Acceptance {
  return {
    accepted: true,
    offer: { ...part.entry.offer, renter: RENTER, expiry: NOW + 120, nonce: 7n, ...overrides },
    signature: SIGNATURE,
    units: part.units,
    holdUntil: NOW + 60,
    preempt: [],
  };
}

type Log = { reserved: number[]; opened: number[]; released: number[]; closed: number[] };

/** Dependencies whose provider answers are decided per machine id. */
function deps(
  engine: MatchingEngine,
  answer: (part: CandidatePart, signal: AbortSignal) => Promise<ReserveReply> | ReserveReply,
  openFails: (part: CandidatePart) => boolean = () => false,
  extra: Partial<AllocateDependencies<{ machineId: number }>> = {},
): AllocateDependencies<{ machineId: number }> & { log: Log } {
  const log: Log = { reserved: [], opened: [], released: [], closed: [] };
  return {
    log,
    engine,
    renter: RENTER,
    now: () => NOW,
    timeoutMs: 50,
    rematchDelayMs: 5,
    reserve: async (part, _request, signal) => {
      log.reserved.push(part.entry.machineId);
      return answer(part, signal);
    },
    open: async (_acceptance, part) => {
      if (openFails(part)) throw new Error("execution reverted: InsufficientUnits");
      log.opened.push(part.entry.machineId);
      return { machineId: part.entry.machineId };
    },
    release: async (_acceptance, part) => void log.released.push(part.entry.machineId),
    close: async (lease) => void log.closed.push(lease.machineId),
    ...extra,
  };
}

const three: OfferSpec[] = [
  { machineId: 1, price: 400 },
  { machineId: 2, price: 500 },
  { machineId: 3, price: 600 },
];

describe("matching: allocation", () => {
  it("refuses bad input before reserving anything, naming the field", async () => {
    const d = deps(engineWith(three), (part) => accept(part));
    for (const bad of [requestInput({ gpuCount: 0 }), requestInput({ duration: -1 }), requestInput({ maxPricePerGpuHour: "1e9" }), { gpuType: "A100" }]) {
      await assert.rejects(allocate(bad, d), (e: unknown) => e instanceof InvalidInputError && e.fields.length > 0);
    }
    assert.deepEqual(d.log.reserved, []);
    assert.deepEqual(d.log.opened, []);
  });

  it("reserves with the best candidate and opens its lease", async () => {
    const d = deps(engineWith(three), (part) => accept(part));
    const result = await allocate(requestInput({ gpuCount: 2 }), d);
    assert.ok(result.ok);
    assert.deepEqual(d.log.reserved, [1]);
    assert.deepEqual(d.log.opened, [1]);
    assert.equal(result.leases.length, 1);
    assert.equal(result.leases[0]!.part.units, 2);
    assert.deepEqual(
      result.attempts.map((a) => a.outcome),
      ["leased"],
    );
    assert.equal(result.rounds, 1);
  });

  it("falls back to the next candidate on a refusal", async () => {
    const d = deps(engineWith(three), (part) => (part.entry.machineId === 1 ? { accepted: false, reason: "insufficient-units", availableUnits: 0 } : accept(part)));
    const result = await allocate(requestInput(), d);
    assert.ok(result.ok);
    assert.deepEqual(d.log.reserved, [1, 2]);
    assert.deepEqual(
      result.attempts.map((a) => [a.key.split(":")[1], a.outcome]),
      [
        ["1", "refused"],
        ["2", "leased"],
      ],
    );
    assert.match(result.attempts[0]!.detail!, /insufficient-units/);
  });

  it("falls back on a timeout and releases an acceptance that arrives late", async () => {
    let lateDelivered!: () => void;
    const late = new Promise<void>((resolve) => (lateDelivered = resolve));
    const d = deps(engineWith(three), async (part) => {
      if (part.entry.machineId !== 1) return accept(part);
      await new Promise((resolve) => setTimeout(resolve, 120)); // answers after the 50 ms deadline
      setTimeout(lateDelivered, 5);
      return accept(part);
    });
    const result = await allocate(requestInput(), d);
    assert.ok(result.ok);
    assert.equal(result.attempts[0]!.outcome, "timeout");
    assert.deepEqual(d.log.opened, [2]);
    await late;
    assert.deepEqual(d.log.released, [1], "the late hold is released, not left to expire");
  });

  it("gives the provider's call an abort signal when it times out", async () => {
    let aborted = false;
    const d = deps(engineWith(three), (part, signal) => {
      if (part.entry.machineId !== 1) return accept(part);
      return new Promise((_, reject) =>
        signal.addEventListener("abort", () => {
          aborted = true;
          reject(new Error("aborted"));
        }),
      );
    });
    const result = await allocate(requestInput(), d);
    assert.ok(result.ok);
    assert.equal(aborted, true);
  });

  it("falls back when the lease transaction fails and releases that hold", async () => {
    const d = deps(
      engineWith(three),
      (part) => accept(part),
      (part) => part.entry.machineId === 1,
    );
    const result = await allocate(requestInput(), d);
    assert.ok(result.ok);
    assert.deepEqual(
      result.attempts.map((a) => a.outcome),
      ["open-failed", "leased"],
    );
    assert.match(result.attempts[0]!.detail!, /InsufficientUnits/);
    assert.deepEqual(d.log.released, [1]);
    assert.deepEqual(d.log.opened, [2]);
  });

  it("does not open with an acceptance that does not match the offer (price above the cap)", async () => {
    const d = deps(engineWith(three), (part) => (part.entry.machineId === 1 ? accept(part, { pricePerUnitSecond: 5000n }) : accept(part)));
    const result = await allocate(requestInput(), d);
    assert.ok(result.ok);
    assert.deepEqual(
      result.attempts.map((a) => a.outcome),
      ["acceptance-mismatch", "leased"],
    );
    assert.match(result.attempts[0]!.detail!, /above the cap/);
    assert.deepEqual(d.log.opened, [2]);
    assert.deepEqual(d.log.released, [1]);
  });

  it("names the mismatched field and both values, in the attempt and in the failure message", async () => {
    const d = deps(engineWith(three), (part) => accept(part, { pricePerUnitSecond: 5000n + BigInt(part.entry.machineId) }));
    const result = await allocate(requestInput(), d);
    assert.ok(!result.ok);
    assert.match(result.attempts[0]!.detail!, /^acceptance price is above the cap: offer\.pricePerUnitSecond 5001 > maxPricePerUnitSecond \d+$/);
    assert.match(result.message, /3 provider's acceptance did not match the offer\n\s+acceptance price is above the cap: offer\.pricePerUnitSecond 5001 > maxPricePerUnitSecond/);
    const late = await allocate(
      requestInput(),
      deps(engineWith(three), (part) => ({ ...accept(part), holdUntil: NOW - 5 })),
    );
    assert.ok(!late.ok);
    assert.equal(late.attempts[0]!.detail, `acceptance already expired: holdUntil ${NOW - 5} <= chain time ${NOW}`);
  });

  it("judges an acceptance's expiry by the chain's clock, which may run far behind or ahead of the wall clock", async () => {
    // The provider writes expiry and holdUntil in chain time (the contract checks block time).
    for (const skew of [-3_600, 3_600]) {
      const chain = NOW + skew;
      const inChainTime = (part: CandidatePart) => ({ ...accept(part, { expiry: chain + 120 }), holdUntil: chain + 120 });
      const d = deps(engineWith(three), inChainTime, undefined, { chainNow: () => chain });
      const result = await allocate(requestInput(), d);
      assert.ok(result.ok, `chain ${skew} s off the wall clock: ${result.ok ? "" : result.message}`);
      assert.deepEqual(d.log.opened, [1]);
    }
    // An acceptance that has expired on the chain is not opened, whatever the wall clock says.
    const expired = deps(engineWith(three), (part) => ({ ...accept(part, { expiry: NOW + 100 }), holdUntil: NOW + 100 }), undefined, { chainNow: () => NOW + 3_600 });
    const result = await allocate(requestInput(), expired);
    assert.ok(!result.ok);
    assert.match(result.message, new RegExp(`acceptance already expired: offer\\.expiry ${NOW + 100} <= chain time ${NOW + 3_600}`));
  });

  it("treats a provider that throws as unreachable and moves on", async () => {
    const d = deps(engineWith(three), (part) => {
      if (part.entry.machineId === 1) throw new Error("dial failed: connection refused");
      return accept(part);
    });
    const result = await allocate(requestInput(), d);
    assert.ok(result.ok);
    assert.deepEqual(
      result.attempts.map((a) => a.outcome),
      ["reserve-error", "leased"],
    );
  });

  it("re-matches when a round's candidates are all lost, and retries a machine that republished", async () => {
    const engine = engineWith(three);
    engine.upsert(entry({ machineId: 1, price: 400, seq: 1 }));
    let republished = false;
    const d = deps(engine, (part) => {
      if (!republished) {
        // Everything is taken in round 1; machine 1 then frees units and republishes.
        if (part.entry.machineId === 3) {
          republished = true;
          engine.upsert(entry({ machineId: 1, price: 400, seq: 2 }));
        }
        return { accepted: false, reason: "insufficient-units" };
      }
      return accept(part);
    });
    const result = await allocate(requestInput(), d);
    assert.ok(result.ok);
    assert.equal(result.rounds, 2);
    assert.deepEqual(d.log.reserved, [1, 2, 3, 1]);
    assert.equal(result.leases[0]!.part.entry.seq, 2);
  });

  it("waits for a refusing machine to republish rather than fail while its new offer is on the way", async () => {
    const engine = engineWith([{ machineId: 1 }]);
    let refused = false;
    const d = deps(engine, (part) => {
      if (refused) return accept(part);
      refused = true;
      setTimeout(() => engine.upsert(entry({ machineId: 1, seq: 2 })), 8); // the gossip arrives a little later
      return { accepted: false, reason: "insufficient-units", availableUnits: 0 };
    });
    const result = await allocate(requestInput(), { ...d, maxRounds: 20 });
    assert.ok(result.ok, result.ok ? "" : result.message);
    assert.ok(result.rounds >= 3, `rounds ${result.rounds}`);
    assert.deepEqual(
      result.attempts.map((a) => a.outcome),
      ["refused", "leased"],
    );
  });

  it("answers no-match with the explanation and reserves nothing", async () => {
    const d = deps(engineWith(three), (part) => accept(part));
    const result = await allocate(requestInput({ gpuCount: 9 }), d);
    assert.ok(!result.ok);
    assert.equal(result.reason, "no-match");
    assert.equal(result.explanation?.steps.at(-1)?.constraint, "capacity");
    assert.match(result.message, /No offer fits 9 × A100-80GB/);
    assert.deepEqual(d.log.reserved, []);
  });

  it("after losing every candidate explains what was tried and what the market holds now", async () => {
    const d = deps(engineWith(three), () => ({ accepted: false, reason: "insufficient-units" }));
    const result = await allocate(requestInput(), d);
    assert.ok(!result.ok);
    assert.equal(result.reason, "exhausted");
    assert.deepEqual(d.log.reserved, [1, 2, 3]);
    assert.match(result.message, /No lease could be opened after trying 3 machines/);
    assert.match(result.message, /3 refused by the provider/);
    assert.match(result.message, /3 A100-80GB machines fit everything else but were already tried/);
    assert.deepEqual(result.unclosed, []);
  });

  it("stops at maxAttempts", async () => {
    const d = deps(engineWith(three), () => ({ accepted: false, reason: "busy" }), undefined, { maxAttempts: 2 });
    const result = await allocate(requestInput(), d);
    assert.ok(!result.ok);
    assert.equal(result.reason, "exhausted");
    assert.deepEqual(d.log.reserved, [1, 2]);
  });

  it("stops between candidates when the caller aborts", async () => {
    const controller = new AbortController();
    const d = deps(engineWith(three), () => {
      controller.abort();
      return { accepted: false, reason: "busy" };
    });
    const result = await allocate(requestInput(), { ...d, signal: controller.signal });
    assert.ok(!result.ok);
    assert.equal(result.reason, "aborted");
    assert.deepEqual(d.log.reserved, [1]);
  });

  describe("groups on a cluster", () => {
    const cluster: OfferSpec[] = [
      { machineId: 1, units: 2, free: 2, cluster: 9, price: 400 },
      { machineId: 2, units: 2, free: 2, cluster: 9, price: 400 },
      { machineId: 3, units: 4, free: 4, price: 900 },
    ];

    it("needs a close dependency before reserving a group", async () => {
      const d = deps(engineWith(cluster), (part) => accept(part), undefined, { close: undefined });
      await assert.rejects(allocate(requestInput({ gpuCount: 4, colocation: "cluster" }), d), { name: "AllocatorConfigurationError" });
      assert.deepEqual(d.log.reserved, []);
    });

    it("leases every machine of the group", async () => {
      const d = deps(engineWith(cluster), (part) => accept(part));
      const result = await allocate(requestInput({ gpuCount: 4, colocation: "cluster" }), d);
      assert.ok(result.ok);
      assert.deepEqual(
        result.leases.map((l) => [l.part.entry.machineId, l.part.units]),
        [
          [1, 2],
          [2, 2],
        ],
      );
    });

    it("closes the opened leases when a later one fails, then falls back", async () => {
      const d = deps(
        engineWith(cluster),
        (part) => accept(part),
        (part) => part.entry.machineId === 2,
      );
      const result = await allocate(requestInput({ gpuCount: 4, colocation: "cluster" }), d);
      assert.ok(result.ok);
      assert.deepEqual(d.log.opened, [1, 3]);
      assert.deepEqual(d.log.closed, [1], "the first lease of the broken group is closed (full refund)");
      assert.deepEqual(d.log.released, [2]);
      assert.deepEqual(
        result.leases.map((l) => l.part.entry.machineId),
        [3],
      );
      assert.deepEqual(
        result.attempts.map((a) => [a.key.split(":")[1], a.outcome]),
        [
          ["2", "open-failed"],
          ["1", "group-incomplete"],
          ["3", "leased"],
        ],
      );
    });

    it("releases the holds of a group when one machine refuses", async () => {
      const d = deps(engineWith(cluster), (part) => (part.entry.machineId === 2 ? { accepted: false, reason: "busy" } : accept(part)));
      const result = await allocate(requestInput({ gpuCount: 4, colocation: "cluster" }), d);
      assert.ok(result.ok);
      assert.deepEqual(d.log.released, [1]);
      assert.deepEqual(d.log.opened, [3]);
    });

    it("reports a lease it could not close so the caller can", async () => {
      const d = deps(
        engineWith(cluster.slice(0, 2)),
        (part) => accept(part),
        (part) => part.entry.machineId === 2,
        { close: async () => Promise.reject(new Error("rpc down")) },
      );
      const result = await allocate(requestInput({ gpuCount: 4, colocation: "cluster" }), d);
      assert.ok(!result.ok);
      assert.deepEqual(
        result.unclosed.map((l) => l.part.entry.machineId),
        [1],
      );
      assert.match(result.message, /could not be closed/);
    });
  });
});

describe("matching: handshake data", () => {
  it("builds the EIP-712 ReserveRequest and the openLease terms from a request and an acceptance", () => {
    const request = parseMatchRequest(requestInput({ mode: "interruptible", bidPerGpuHour: "0.72", maxPricePerGpuHour: "1.00", gpuCount: 2 }));
    const part: CandidatePart = { entry: entry({ machineId: 2, minBid: 100 }), units: 2, preempt: true, pricePerUnitSecond: 200n };
    const nonce = `0x${"ab".repeat(32)}` as const;
    assert.deepEqual(reserveRequestFor(request, part, RENTER, NOW, nonce), {
      renter: RENTER,
      provider: part.entry.provider,
      machineId: 2,
      units: 2,
      duration: 3600,
      interruptible: true,
      bidPerUnitSecond: 200n,
      issuedAt: NOW,
      nonce,
    });
    const acceptance = { ...accept(part), preempt: ["12", "13"] };
    assert.deepEqual(leaseTermsFor(request, acceptance), {
      units: 2,
      duration: 3600,
      maxPricePerUnitSecond: 277n,
      interruptible: true,
      bidPerUnitSecond: 200n,
      preempt: [12n, 13n],
    });
  });
});

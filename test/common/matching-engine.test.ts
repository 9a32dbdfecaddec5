import assert from "node:assert/strict";
import fc from "fast-check";
import { type Candidate, type MatchResult, MatchingEngine, type MatchingOptionsInput, PREEMPT_PENALTY, parseMatchRequest, reputationScore } from "../../common/matching/index.js";
import { InvalidInputError } from "../../common/errors.js";
import { NOW, type OfferSpec, entry, requestInput } from "../support/matching-fixtures.js";

function engineWith(specs: OfferSpec[], options: MatchingOptionsInput = {}): MatchingEngine {
  const engine = new MatchingEngine(options, { now: () => NOW });
  for (const spec of specs) engine.upsert(entry(spec));
  return engine;
}

function match(engine: MatchingEngine, overrides: Record<string, unknown> = {}): MatchResult {
  return engine.match(parseMatchRequest(requestInput(overrides)));
}

function keys(result: MatchResult): string[] {
  assert.ok(result.ok, result.ok ? "" : result.explanation.message);
  return result.candidates.map((c) => c.parts.map((p) => `${p.entry.machineId}x${p.units}`).join("+"));
}

/** The step of the explanation for a constraint, asserting the match failed. */
function removedBy(result: MatchResult, constraint: string): number {
  assert.ok(!result.ok, "expected no match");
  const step = result.explanation.steps.find((s) => s.constraint === constraint);
  assert.ok(step, `no step ${constraint} in ${result.explanation.steps.map((s) => s.constraint).join(",")}`);
  return step.removed;
}

describe("matching: constraints", () => {
  it("keeps only the requested GPU models", () => {
    const engine = engineWith([{ machineId: 1, model: "H100-80GB-SXM" }, { machineId: 2 }, { machineId: 3, model: "A100-40GB", vramMiB: 40_960 }]);
    assert.deepEqual(keys(match(engine)), ["2x1"]);
    assert.deepEqual(keys(match(engine, { gpuType: "any 80GB" })).sort(), ["1x1", "2x1"]);
    assert.equal(removedBy(match(engine, { gpuType: "L4" }), "gpuType"), 3);
  });

  it("keeps only the requested regions, case-insensitively", () => {
    const engine = engineWith([
      { machineId: 1, region: "EU-West" },
      { machineId: 2, region: "us-east" },
    ]);
    assert.deepEqual(keys(match(engine, { region: "eu-west" })), ["1x1"]);
    assert.deepEqual(keys(match(engine, { region: ["US-EAST", "ap-south"] })), ["2x1"]);
    assert.equal(removedBy(match(engine, { region: "ap-south" }), "region"), 2);
  });

  it("applies the price cap inclusively, per GPU-hour", () => {
    // 1000 base units/s = 3.60 USD/GPU-h exactly; 1001 is above.
    const engine = engineWith([
      { machineId: 1, price: 1000 },
      { machineId: 2, price: 1001 },
    ]);
    assert.deepEqual(keys(match(engine, { maxPricePerGpuHour: "3.60" })), ["1x1"]);
    assert.equal(removedBy(match(engine, { maxPricePerGpuHour: "3.599" }), "price"), 2);
  });

  it("skips offers that expire before they could be reserved and opened", () => {
    const engine = engineWith(
      [
        { machineId: 1, expiry: NOW + 30 },
        { machineId: 2, expiry: NOW + 3600 },
      ],
      { minOfferValiditySeconds: 60 },
    );
    assert.deepEqual(keys(match(engine)), ["2x1"]);
    engine.remove(entry({ machineId: 2 }).key);
    assert.equal(removedBy(match(engine), "offerExpiry"), 1);
  });

  it("requires the duration within the offer's min and max", () => {
    const engine = engineWith([
      { machineId: 1, minDuration: 7200 },
      { machineId: 2, maxDuration: 1800 },
      { machineId: 3, minDuration: 3600, maxDuration: 3600 },
    ]);
    assert.deepEqual(keys(match(engine, { duration: 3600 })), ["3x1"]);
    assert.equal(removedBy(match(engine, { duration: 30 }), "duration"), 3);
  });

  it("requires the minimum VRAM per GPU", () => {
    const engine = engineWith([
      { machineId: 1, model: "H100-80GB-SXM", vramMiB: 81_559 },
      { machineId: 2, vramMiB: 81_920 },
    ]);
    assert.deepEqual(keys(match(engine, { gpuType: "any 80GB", minVramMiB: 81_920 })), ["2x1"]);
    assert.equal(removedBy(match(engine, { gpuType: "any", minVramMiB: 100_000 }), "vram"), 2);
  });

  it("requires a current attestation unless attestedOnly is false", () => {
    const engine = engineWith([{ machineId: 1, attestedAgo: null }, { machineId: 2, attestedAgo: 90_000, attestationExpiry: NOW - 1 }, { machineId: 3 }]);
    assert.deepEqual(keys(match(engine)), ["3x1"]);
    assert.deepEqual(keys(match(engine, { attestedOnly: false })).sort(), ["1x1", "2x1", "3x1"]);
    engine.remove(entry({ machineId: 3 }).key);
    assert.equal(removedBy(match(engine), "attestation"), 2);
  });

  it("requires the minimum reputation score", () => {
    const engine = engineWith([
      { machineId: 1, completed: 0, faults: 0 }, // 0.5
      { machineId: 2, completed: 8, faults: 0 }, // 0.9
      { machineId: 3, completed: 10, faults: 10 }, // 0.5
    ]);
    assert.equal(reputationScore({ leasesCompleted: 8, faults: 0 }), 0.9);
    assert.deepEqual(keys(match(engine, { minReputation: 0.9 })), ["2x1"]);
    assert.equal(removedBy(match(engine, { minReputation: 0.95 }), "reputation"), 3);
  });

  it("requires enough free units on one machine", () => {
    const engine = engineWith([
      { machineId: 1, units: 8, free: 2, onDemand: 6 },
      { machineId: 2, units: 4, free: 4 },
    ]);
    assert.deepEqual(keys(match(engine, { gpuCount: 4 })), ["2x4"]);
    assert.equal(removedBy(match(engine, { gpuCount: 5 }), "capacity"), 2);
  });

  it("lets on-demand requests preempt interruptible units, ranked below free units", () => {
    const engine = engineWith([
      { machineId: 1, units: 8, free: 0, interruptible: 8, lowestBid: 100, price: 300 }, // cheaper, needs preemption
      { machineId: 2, units: 8, free: 4, onDemand: 4, price: 900 },
    ]);
    const result = match(engine, { gpuCount: 4 });
    assert.deepEqual(keys(result), ["2x4", "1x4"]);
    assert.ok(result.ok);
    assert.equal(result.candidates[0]!.preempt, false);
    assert.equal(result.candidates[1]!.preempt, true);
    assert.equal(result.candidates[1]!.parts[0]!.preempt, true);
    assert.ok(result.candidates[1]!.cost >= PREEMPT_PENALTY);
    assert.equal(result.candidates[1]!.breakdown.preempt, PREEMPT_PENALTY);
  });

  describe("interruptible", () => {
    const interruptible = (bid: string, extra: Record<string, unknown> = {}) =>
      requestInput({ mode: "interruptible", bidPerGpuHour: bid, maxPricePerGpuHour: undefined, ...extra });

    it("needs machines that sell interruptible capacity at a minimum bid the bid meets", () => {
      const engine = engineWith([
        { machineId: 1, minBid: 0 }, // not sold
        { machineId: 2, minBid: 300 }, // 1.08 USD/h
        { machineId: 3, minBid: 200 }, // 0.72 USD/h
      ]);
      const result = engine.match(parseMatchRequest(interruptible("0.72")));
      assert.deepEqual(keys(result), ["3x1"]);
      assert.ok(result.ok);
      assert.equal(result.candidates[0]!.parts[0]!.pricePerUnitSecond, 200n, "an interruptible lease pays the bid");
      const none = engine.match(parseMatchRequest(interruptible("0.70")));
      assert.equal(removedBy(none, "interruptible"), 1);
      assert.equal(removedBy(none, "bid"), 2);
    });

    it("preempts only when the bid beats the lowest running bid", () => {
      const engine = engineWith([{ machineId: 1, units: 4, free: 0, interruptible: 4, lowestBid: 250, minBid: 100 }]);
      assert.equal(removedBy(engine.match(parseMatchRequest(interruptible("0.90"))), "capacity"), 1); // 250/s = 0.90/h: not above
      const result = engine.match(parseMatchRequest(interruptible("0.9036"))); // 251/s
      assert.deepEqual(keys(result), ["1x1"]);
      assert.ok(result.ok && result.candidates[0]!.preempt);
    });
  });

  it("skips machines already tried at the same seq, not after they republish", () => {
    const engine = engineWith([
      { machineId: 1, price: 100 },
      { machineId: 2, price: 200 },
    ]);
    const tried = new Map([[entry({ machineId: 1 }).key, 1]]);
    const request = parseMatchRequest(requestInput());
    assert.deepEqual(keys(engine.match(request, { exclude: tried })), ["2x1"]);
    engine.upsert(entry({ machineId: 1, price: 100, seq: 2 }));
    assert.deepEqual(keys(engine.match(request, { exclude: tried })), ["1x1", "2x1"]);
  });
});

describe("matching: ranking", () => {
  it("ranks by price first with the default weights", () => {
    const engine = engineWith([
      { machineId: 1, price: 700 },
      { machineId: 2, price: 500 },
      { machineId: 3, price: 600 },
    ]);
    assert.deepEqual(keys(match(engine)), ["2x1", "3x1", "1x1"]);
  });

  it("at equal price prefers reputation, then fresher attestations, then lower latency", () => {
    const engine = engineWith([
      { machineId: 1, completed: 0 },
      { machineId: 2, completed: 50 },
      { machineId: 3, completed: 50, attestedAgo: 80_000 },
      { machineId: 4, completed: 50, latencyMs: 400 },
    ]);
    const result = match(engine);
    assert.deepEqual(keys(result), ["2x1", "4x1", "3x1", "1x1"]);
    assert.ok(result.ok);
    const [best] = result.candidates;
    assert.equal(best!.breakdown.price, 0);
    assert.ok(Math.abs(best!.breakdown.reputation - 0.3 * (1 - 51 / 52)) < 1e-12);
    assert.ok(Math.abs(best!.breakdown.freshness - 0.1 * (3600 / 86_400)) < 1e-12);
    assert.ok(Math.abs(best!.breakdown.latency - 0.1 * (50 / 500)) < 1e-12);
  });

  it("lets a better provider win over a small price premium; the weights decide", () => {
    const specs: OfferSpec[] = [
      { machineId: 1, price: 500, completed: 0, faults: 3 }, // cheap, poor record (0.2)
      { machineId: 2, price: 530, completed: 100 }, // 6% dearer, excellent
    ];
    assert.deepEqual(keys(match(engineWith(specs))), ["2x1", "1x1"]);
    assert.deepEqual(keys(match(engineWith(specs, { weights: { reputation: 0.01 } }))), ["1x1", "2x1"]);
  });

  it("unknown latency ranks as the configured unknownLatencyMs", () => {
    const specs: OfferSpec[] = [
      { machineId: 1, latencyMs: null },
      { machineId: 2, latencyMs: 300 },
    ];
    assert.deepEqual(keys(match(engineWith(specs))), ["1x1", "2x1"]);
    assert.deepEqual(keys(match(engineWith(specs, { unknownLatencyMs: 500 }))), ["2x1", "1x1"]);
  });

  it("returns at most maxCandidates, ties broken by key", () => {
    const engine = engineWith(
      Array.from({ length: 12 }, (_, i) => ({ machineId: i + 1 })),
      { maxCandidates: 3 },
    );
    const result = match(engine);
    assert.ok(result.ok);
    assert.equal(result.candidates.length, 3);
    const ranked = result.candidates.map((c) => c.parts[0]!.entry.key);
    assert.deepEqual(ranked, [...ranked].sort());
  });

  it("refuses invalid options naming the key", () => {
    assert.throws(
      () => new MatchingEngine({ weights: { price: -1 } }),
      (e: unknown) => e instanceof InvalidInputError && e.fields[0] === "weights.price",
    );
    assert.throws(
      () => new MatchingEngine({ maxCandidate: 3 } as never),
      (e: unknown) => e instanceof InvalidInputError && e.fields[0] === "maxCandidate",
    );
  });
});

describe("matching: co-location", () => {
  const cluster: OfferSpec[] = [
    { machineId: 1, units: 4, free: 3, onDemand: 1, cluster: 7, price: 500 },
    { machineId: 2, units: 4, free: 4, cluster: 7, price: 510 },
    { machineId: 3, units: 4, free: 4, cluster: 8, model: "H100-80GB-SXM", price: 400 },
    { machineId: 4, units: 4, free: 2, onDemand: 2, price: 300 }, // standalone
  ];

  it("keeps all GPUs on one machine by default", () => {
    assert.equal(removedBy(match(engineWith(cluster), { gpuCount: 6 }), "capacity"), 3);
  });

  it("with colocation cluster, spreads over machines of one cluster and one model only", () => {
    const result = match(engineWith(cluster), { gpuCount: 6, colocation: "cluster" });
    assert.deepEqual(keys(result), ["1x3+2x3"]);
    assert.ok(result.ok);
    const [group] = result.candidates;
    assert.equal(group!.units, 6);
    assert.equal(group!.breakdown.multiMachine, 0.05);
    // 3 units at 500 and 3 at 510 per second: mean 505/s = 1.818 USD/h
    assert.equal(group!.pricePerGpuHour, 505n * 3600n);
  });

  it("prefers one machine over a group at the same price", () => {
    const specs: OfferSpec[] = [
      { machineId: 1, units: 2, free: 2, cluster: 7 },
      { machineId: 2, units: 2, free: 2, cluster: 7 },
      { machineId: 3, units: 4, free: 4 },
    ];
    const result = match(engineWith(specs), { gpuCount: 4, colocation: "cluster" });
    assert.deepEqual(keys(result), ["3x4", "1x2+2x2"]);
  });

  it("fills a group from free units before preempting", () => {
    const specs: OfferSpec[] = [
      { machineId: 1, units: 4, free: 0, interruptible: 4, lowestBid: 10, cluster: 7, price: 100 },
      { machineId: 2, units: 4, free: 2, onDemand: 2, cluster: 7, price: 900 },
    ];
    const result = match(engineWith(specs), { gpuCount: 3, colocation: "cluster" });
    assert.ok(result.ok);
    // Machine 1 alone can serve by preempting 3 units; the group preempts only 1.
    assert.deepEqual(keys(result), ["1x3", "1x1+2x2"]);
    const group = result.candidates[1]!;
    assert.equal(group.preempt, true);
    const byMachine = Object.fromEntries(group.parts.map((p) => [p.entry.machineId, p]));
    assert.equal(byMachine[2]!.units, 2);
    assert.equal(byMachine[2]!.preempt, false);
    assert.equal(byMachine[1]!.units, 1);
    assert.equal(byMachine[1]!.preempt, true);
  });
});

describe("matching: index maintenance", () => {
  it("replaces an entry by key, ignores older seqs, follows price, region and model changes", () => {
    const engine = engineWith([
      { machineId: 1, price: 500 },
      { machineId: 2, price: 600 },
    ]);
    assert.equal(engine.size, 2);
    assert.deepEqual(keys(match(engine)), ["1x1", "2x1"]);
    assert.equal(engine.upsert(entry({ machineId: 1, price: 700, seq: 2 })), true);
    assert.deepEqual(keys(match(engine)), ["2x1", "1x1"]);
    assert.equal(engine.upsert(entry({ machineId: 1, price: 100, seq: 1 })), false, "older seq ignored");
    assert.deepEqual(keys(match(engine)), ["2x1", "1x1"]);
    engine.upsert(entry({ machineId: 1, price: 700, region: "us-east", seq: 3 }));
    assert.deepEqual(keys(match(engine, { region: "eu-west" })), ["2x1"]);
    assert.deepEqual(keys(match(engine, { region: "us-east" })), ["1x1"]);
    engine.upsert(entry({ machineId: 1, model: "H100-80GB-SXM", vramMiB: 81_559, region: "us-east", seq: 4 }));
    assert.deepEqual(keys(match(engine, { gpuType: "H100" })), ["1x1"]);
    assert.deepEqual(keys(match(engine)), ["2x1"]);
    engine.upsert(entry({ machineId: 2, price: 600, free: 0, onDemand: 8, seq: 2 }));
    assert.equal(removedBy(match(engine), "capacity"), 1);
    assert.equal(engine.remove(entry({ machineId: 2 }).key), true);
    assert.equal(engine.remove(entry({ machineId: 2 }).key), false);
    assert.equal(engine.size, 1);
    assert.equal(engine.get(entry({ machineId: 1 }).key)?.machine.model, "H100-80GB-SXM");
  });

  it("after any sequence of upserts and removes answers like an engine built from the final book", () => {
    const change = fc.record({
      machine: fc.integer({ min: 1, max: 25 }),
      remove: fc.boolean(),
      model: fc.constantFrom("A100-80GB", "H100-80GB-SXM"),
      region: fc.constantFrom("eu-west", "us-east"),
      price: fc.integer({ min: 100, max: 1200 }),
      minBid: fc.constantFrom(0, 50, 150, 400),
      free: fc.integer({ min: 0, max: 8 }),
      interruptible: fc.integer({ min: 0, max: 8 }),
      completed: fc.integer({ min: 0, max: 30 }),
      latencyMs: fc.integer({ min: 1, max: 600 }),
      cluster: fc.constantFrom(0, 1, 2),
    });
    const requests = [
      requestInput({ gpuCount: 2 }),
      requestInput({ gpuType: "any 80GB", gpuCount: 4, region: "us-east" }),
      requestInput({ gpuType: "any 80GB", gpuCount: 12, colocation: "cluster" }),
      requestInput({ gpuType: "H100", gpuCount: 3, mode: "interruptible", bidPerGpuHour: "1.08", maxPricePerGpuHour: undefined }),
      requestInput({ gpuCount: 9 }),
    ].map((r) => parseMatchRequest(r));
    const view = (result: MatchResult) =>
      result.ok
        ? result.candidates.map((c) => [c.cost.toFixed(12), c.parts.map((p) => `${p.entry.key}x${p.units}`).join("+")])
        : result.explanation.steps.map((s) => [s.constraint, s.removed, s.remaining]);
    fc.assert(
      fc.property(fc.array(change, { minLength: 1, maxLength: 60, size: "large" }), (changes) => {
        const live = new MatchingEngine({}, { now: () => NOW });
        const last = new Map<number, ReturnType<typeof entry> | null>();
        const seqs = new Map<number, number>();
        for (const c of changes) {
          if (c.remove) {
            live.remove(entry({ machineId: c.machine }).key);
            last.set(c.machine, null);
            continue;
          }
          const seq = (seqs.get(c.machine) ?? 0) + 1;
          seqs.set(c.machine, seq);
          const interruptible = Math.min(c.interruptible, 8 - c.free);
          const e = entry({
            machineId: c.machine,
            model: c.model,
            vramMiB: c.model === "A100-80GB" ? 81_920 : 81_559,
            region: c.region,
            price: c.price,
            minBid: c.minBid,
            units: 8,
            free: c.free,
            interruptible,
            onDemand: 8 - c.free - interruptible,
            lowestBid: interruptible > 0 ? 100 : null,
            completed: c.completed,
            latencyMs: c.latencyMs,
            cluster: c.cluster,
            seq,
          });
          live.upsert(e);
          last.set(c.machine, e);
        }
        const fresh = new MatchingEngine({}, { now: () => NOW });
        for (const e of last.values()) if (e) fresh.upsert(e);
        assert.equal(live.size, fresh.size);
        for (const request of requests) assert.deepEqual(view(live.match(request)), view(fresh.match(request)));
      }),
      { numRuns: 150, seed: 11 },
    );
  });

  it("finds the same best candidates as ranking every offer by brute force", () => {
    const models = ["A100-80GB", "H100-80GB-SXM", "L4-24GB"];
    const regions = ["eu-west", "us-east", "ap-south"];
    const spec = fc.record({
      model: fc.constantFrom(...models),
      region: fc.constantFrom(...regions),
      price: fc.integer({ min: 1, max: 2000 }),
      minBid: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 1000 })),
      units: fc.constantFrom(1, 2, 4, 8),
      used: fc.integer({ min: 0, max: 8 }),
      interruptibleShare: fc.boolean(),
      lowestBid: fc.integer({ min: 1, max: 1000 }),
      completed: fc.integer({ min: 0, max: 50 }),
      faults: fc.integer({ min: 0, max: 5 }),
      attestedAgo: fc.oneof({ arbitrary: fc.constant(null), weight: 1 }, { arbitrary: fc.integer({ min: 0, max: 200_000 }), weight: 4 }),
      latencyMs: fc.oneof(fc.constant(null), fc.integer({ min: 1, max: 900 })),
      cluster: fc.constantFrom(0, 1, 1, 2),
    });
    const requestArb = fc.record({
      gpuType: fc.constantFrom("A100", "H100", "any 80GB", "any"),
      gpuCount: fc.constantFrom(1, 2, 3, 4, 6, 8, 12),
      price: fc.integer({ min: 300, max: 2000 }),
      interruptible: fc.boolean(),
      region: fc.constantFrom(undefined, "eu-west", ["us-east", "ap-south"]),
      minReputation: fc.constantFrom(0, 0, 0.6),
      attestedOnly: fc.boolean(),
      colocation: fc.constantFrom("machine", "cluster", "cluster"),
    });
    fc.assert(
      fc.property(fc.array(spec, { minLength: 0, maxLength: 80, size: "large" }), requestArb, (specs, r) => {
        const engine = new MatchingEngine({ maxCandidates: 5 }, { now: () => NOW });
        const entries = specs.map((s, i) => {
          const used = Math.min(s.used, s.units);
          const e = entry({
            machineId: i + 1,
            model: s.model,
            region: s.region,
            price: s.price,
            minBid: s.minBid,
            units: s.units,
            free: s.units - used,
            onDemand: s.interruptibleShare ? 0 : used,
            interruptible: s.interruptibleShare ? used : 0,
            lowestBid: s.interruptibleShare && used > 0 ? s.lowestBid : null,
            completed: s.completed,
            faults: s.faults,
            attestedAgo: s.attestedAgo,
            latencyMs: s.latencyMs,
            cluster: s.cluster,
            vramMiB: s.model === "L4-24GB" ? 23_034 : 81_920,
          });
          engine.upsert(e);
          return e;
        });
        const usd = ((r.price * 3600) / 1e6).toFixed(6);
        const request = parseMatchRequest({
          gpuType: r.gpuType,
          gpuCount: r.gpuCount,
          duration: 3600,
          ...(r.interruptible ? { mode: "interruptible", bidPerGpuHour: usd } : { maxPricePerGpuHour: usd }),
          ...(r.region ? { region: r.region } : {}),
          minReputation: r.minReputation,
          attestedOnly: r.attestedOnly,
          colocation: r.colocation,
        });
        const result = engine.match(request);
        const expected = bruteForce(entries, request, 5);
        if (expected.length === 0) {
          assert.equal(result.ok, false);
          if (!result.ok) assert.equal(result.explanation.steps.at(-1)!.remaining, 0);
          return;
        }
        assert.ok(result.ok, "engine found nothing; brute force found something");
        assert.equal(result.candidates.length, expected.length);
        result.candidates.forEach((c, i) => assert.ok(Math.abs(c.cost - expected[i]!) < 1e-9, `candidate ${i}: ${c.cost} != ${expected[i]}`));
        for (const candidate of result.candidates) checkCandidate(candidate, request.gpuCount);
      }),
      { numRuns: 300, seed: 4242 },
    );
  });
});

function checkCandidate(candidate: Candidate, count: number): void {
  assert.equal(
    candidate.parts.reduce((n, p) => n + p.units, 0),
    count,
  );
  assert.equal(candidate.units, count);
}

/** Independent reimplementation of the documented rules: eligibility, then cost, top `limit` costs. */
function bruteForce(entries: ReturnType<typeof entry>[], request: ReturnType<typeof parseMatchRequest>, limit: number): number[] {
  const w = { price: 1, reputation: 0.3, freshness: 0.1, latency: 0.1 };
  const bid = request.bidPerUnitSecond;
  const eligible = entries.filter((e) => {
    if (!request.gpuType.models.includes(e.machine.model)) return false;
    if (request.regions && !request.regions.includes(e.machine.region.toLowerCase())) return false;
    if (request.interruptible) {
      if (e.offer.minBidPerUnitSecond === 0n || e.offer.minBidPerUnitSecond > bid!) return false;
    } else if (e.offer.pricePerUnitSecond > request.maxPricePerUnitSecond) return false;
    if (e.offer.expiry < NOW + 60) return false;
    if (request.attestedOnly && !(e.attestationExpiry !== null && e.attestationExpiry > NOW)) return false;
    if (reputationScore(e.reputation) < request.minReputation) return false;
    return true;
  });
  const avail = (e: (typeof entries)[number]) => {
    const canPreempt = !request.interruptible || (e.capacity.lowestInterruptibleBid !== null && bid! > e.capacity.lowestInterruptibleBid);
    return e.capacity.freeUnits + (canPreempt ? e.capacity.interruptibleUnits : 0);
  };
  const singles = eligible.filter((e) => avail(e) >= request.gpuCount);
  const clusters = new Map<string, typeof entries>();
  if (request.colocation === "cluster") {
    for (const e of eligible) {
      if (e.machine.cluster === `0x${"0".repeat(64)}` || avail(e) === 0) continue;
      const k = `${e.machine.model}|${e.machine.cluster}`;
      clusters.set(k, [...(clusters.get(k) ?? []), e]);
    }
    for (const [k, group] of clusters) if (group.length < 2 || group.reduce((n, e) => n + avail(e), 0) < request.gpuCount) clusters.delete(k);
  }
  const usable = [...new Set([...singles, ...[...clusters.values()].flat()])];
  if (usable.length === 0) return [];
  const p0 = request.interruptible ? 0 : Math.min(...usable.map((e) => Number(e.offer.pricePerUnitSecond)));
  const base = (e: (typeof entries)[number]) => {
    const price = request.interruptible ? 0 : (w.price * (Number(e.offer.pricePerUnitSecond) - p0)) / (p0 > 0 ? p0 : 1);
    const rep = w.reputation * (1 - reputationScore(e.reputation));
    const age = e.attestedAt === null ? 1 : Math.min(1, Math.max(0, (NOW - e.attestedAt) / 86_400));
    const lat = w.latency * (Math.min(e.latencyMs ?? 250, 500) / 500);
    return price + rep + w.freshness * age + lat;
  };
  const costs = singles.map((e) => base(e) + (e.capacity.freeUnits >= request.gpuCount ? 0 : PREEMPT_PENALTY));
  for (const group of clusters.values()) {
    const sorted = [...group].sort((a, b) => base(a) - base(b) || (a.key < b.key ? -1 : 1));
    const take = new Map<string, { units: number; preempt: boolean }>();
    let missing = request.gpuCount;
    for (const pass of [0, 1]) {
      for (const e of sorted) {
        const room = pass === 0 ? e.capacity.freeUnits : avail(e) - e.capacity.freeUnits;
        const units = Math.min(room, missing);
        if (units <= 0) continue;
        const held = take.get(e.key);
        take.set(e.key, { units: (held?.units ?? 0) + units, preempt: pass === 1 || (held?.preempt ?? false) });
        missing -= units;
      }
    }
    if (take.size < 2) continue;
    let cost = 0.05;
    let preempt = false;
    for (const e of sorted) {
      const t = take.get(e.key);
      if (!t) continue;
      cost += (t.units / request.gpuCount) * base(e);
      preempt ||= t.preempt;
    }
    costs.push(cost + (preempt ? PREEMPT_PENALTY : 0));
  }
  return costs.sort((a, b) => a - b).slice(0, limit);
}

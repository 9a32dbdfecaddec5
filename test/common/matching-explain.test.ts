import assert from "node:assert/strict";
import { CONSTRAINT_ORDER, MatchingEngine, type MatchingOptionsInput, type NoMatchExplanation, parseMatchRequest } from "../../common/matching/index.js";
import { NOW, type OfferSpec, entry, requestInput } from "../support/matching-fixtures.js";

function explain(specs: OfferSpec[], request: Record<string, unknown>, options: MatchingOptionsInput = {}): NoMatchExplanation {
  const engine = new MatchingEngine(options, { now: () => NOW });
  for (const spec of specs) engine.upsert(entry(spec));
  const result = engine.match(parseMatchRequest(requestInput(request)));
  assert.ok(!result.ok, "expected no match");
  return result.explanation;
}

const steps = (e: NoMatchExplanation) => e.steps.map((s) => [s.constraint, s.removed, s.remaining]);
const miss = (e: NoMatchExplanation, constraint: string) => e.nearMisses.find((m) => m.constraint === constraint);

// The example: scarce A100 machines, one big enough but above the cap, plus one decoy per constraint.
const market: OfferSpec[] = [
  { machineId: 1, units: 8, free: 2, onDemand: 6, price: 400 },
  { machineId: 2, units: 8, free: 2, onDemand: 6, price: 410 },
  { machineId: 3, units: 8, free: 2, onDemand: 6, price: 420 },
  { machineId: 4, units: 8, free: 4, onDemand: 4, price: 1083 }, // 3.8988 USD/GPU-h
  { machineId: 5, model: "H100-80GB-SXM", vramMiB: 81_559, price: 500 },
  { machineId: 6, region: "us-east", price: 520 },
  { machineId: 7, attestedAgo: null, price: 300 },
  { machineId: 8, maxDuration: 1800, price: 300 },
  { machineId: 9, completed: 0, faults: 4, price: 300 },
  { machineId: 10, vramMiB: 40_000, price: 300 },
  { machineId: 11, expiry: NOW + 10, price: 300 },
];
const asked = { gpuCount: 4, maxPricePerGpuHour: "2.00", region: "eu-west", minReputation: 0.5, minVramMiB: 50_000 };

describe("matching: no-match explanations", () => {
  it("lists every constraint in the order applied with how many offers it removed", () => {
    const e = explain(market, asked);
    assert.equal(e.totalOffers, 11);
    assert.deepEqual(steps(e), [
      ["gpuType", 1, 10],
      ["region", 1, 9],
      ["price", 1, 8],
      ["offerExpiry", 1, 7],
      ["duration", 1, 6],
      ["vram", 1, 5],
      ["attestation", 1, 4],
      ["attestFailures", 0, 4],
      ["reputation", 1, 3],
      ["capacity", 3, 0],
    ]);
    const order = e.steps.map((s) => CONSTRAINT_ORDER.indexOf(s.constraint));
    assert.deepEqual(
      order,
      [...order].sort((a, b) => a - b),
    );
    assert.match(e.summary, /^No offer fits 4 × A100-80GB, on demand at most 2\.00 USD\/GPU-h, 3600 s, region eu-west: the last 3 offers failed "4 GPUs available on one machine/);
    assert.match(e.message, /1\. GPU model A100-80GB: removed 1, 10 left/);
    assert.match(e.message, /10\. 4 GPUs available on one machine .*: removed 3, 0 left/);
  });

  it("names the nearest offers: too few free GPUs, above the cap, other models and regions, one check short", () => {
    const e = explain(market, asked);
    assert.equal(miss(e, "capacity")?.count, 3);
    assert.equal(miss(e, "capacity")?.message, "3 A100-80GB machines fit everything else but have only 2 GPUs available (you asked for 4).");
    assert.equal(
      miss(e, "price")?.message,
      "The cheapest A100-80GB machine with 4 GPUs available that fits everything else costs 3.8988 USD/GPU-h, 1.8988 USD/GPU-h above your cap of 2.00.",
    );
    assert.equal(miss(e, "price")?.nearest?.pricePerGpuHour, 3_898_800n);
    assert.equal(miss(e, "gpuType")?.message, "Other GPU models fit everything else: H100-80GB-SXM from 1.80 USD/GPU-h.");
    assert.equal(miss(e, "region")?.message, "Offers fit everything else in other regions: us-east from 1.872 USD/GPU-h.");
    assert.match(miss(e, "duration")!.message, /^1 A100-80GB machine fits everything else but accepts leases of at most 1800 s/);
    assert.match(miss(e, "attestation")!.message, /no current hardware attestation \(set attestedOnly: false/);
    assert.match(miss(e, "reputation")!.message, /reputation is 0\.17 \(you asked for at least 0\.5\)/);
    assert.match(miss(e, "vram")!.message, /only 40000 MiB per GPU \(you asked for 50000\)/);
    assert.match(miss(e, "offerExpiry")!.message, /expires within 60 s/);
    // Near misses follow the order of the constraints, and the text lists them all.
    const order = e.nearMisses.map((m) => CONSTRAINT_ORDER.indexOf(m.constraint));
    assert.deepEqual(
      order,
      [...order].sort((a, b) => a - b),
    );
    for (const m of e.nearMisses) assert.ok(e.message.includes(m.message));
  });

  it("asked for GPU identities verified by NVIDIA-signed evidence: the step after attestation, the near miss with its remedy, and the verified machine when it fits", () => {
    const offers: OfferSpec[] = [
      { machineId: 1, model: "H100-80GB-SXM", vramMiB: 81_559, price: 300 },
      { machineId: 2, model: "H100-80GB-SXM", vramMiB: 81_559, price: 310, ccExpiry: NOW - 1 }, // its CC attestations expired
      { machineId: 3, model: "H100-80GB-SXM", vramMiB: 81_559, price: 900, ccExpiry: NOW + 3_600 },
      { machineId: 4, model: "H100-80GB-SXM", vramMiB: 81_559, price: 250, attestedAgo: null }, // unattested
    ];
    const ask = { gpuType: "H100-80GB-SXM", gpuCount: 1, maxPricePerGpuHour: "2.00", gpuIdentityVerified: true };
    const e = explain(offers, ask);
    assert.deepEqual(steps(e), [
      ["gpuType", 0, 4],
      ["price", 1, 3],
      ["offerExpiry", 0, 3],
      ["duration", 0, 3],
      ["attestation", 1, 2],
      ["attestFailures", 0, 2],
      ["gpuIdentityVerified", 2, 0],
      ["capacity", 0, 0],
    ]);
    assert.match(e.message, /7\. GPU identities verified by NVIDIA-signed evidence: removed 2, 0 left/);
    assert.equal(
      miss(e, "gpuIdentityVerified")?.message,
      "2 H100-80GB-SXM machines fit everything else but their GPUs were not identified by NVIDIA-signed evidence (set gpuIdentityVerified: false to accept GPUs attested without it).",
    );
    // Within the price, the verified machine is chosen over the cheaper ones that are not.
    const engine = new MatchingEngine({}, { now: () => NOW });
    for (const spec of offers) engine.upsert(entry(spec));
    const matched = engine.match(parseMatchRequest(requestInput({ ...ask, maxPricePerGpuHour: "4.00" })));
    assert.ok(matched.ok);
    assert.deepEqual(
      matched.candidates.map((c) => c.parts.map((p) => p.entry.machineId)),
      [[3]],
    );
    // Without the requirement every attested machine is a candidate, the cheapest first.
    const plain = engine.match(parseMatchRequest(requestInput({ ...ask, maxPricePerGpuHour: "4.00", gpuIdentityVerified: false })));
    assert.ok(plain.ok);
    assert.deepEqual(
      plain.candidates.map((c) => c.parts[0]!.entry.machineId),
      [1, 2, 3],
    );
  });

  it("says when no single machine is large enough and points at clusters", () => {
    const e = explain(market, { gpuCount: 16 });
    const capacity = miss(e, "capacity")!;
    assert.match(capacity.message, /No machine that fits everything else has 16 GPUs \(the largest has 8\); set colocation: "cluster"/);
  });

  it("stops listing after no offer is left and says which constraints were not reached", () => {
    const e = explain(market, { gpuType: "L4" });
    assert.deepEqual(steps(e)[0], ["gpuType", 11, 0]);
    assert.match(e.message, /Not reached \(no offer left\): price at most 3\.60 USD\/GPU-h; offer valid/);
    assert.doesNotMatch(e.message, /2\. price/);
  });

  it("explains interruptible requests: machines that sell only on demand, and bids too low", () => {
    const specs: OfferSpec[] = [
      { machineId: 1, minBid: 0, price: 400 },
      { machineId: 2, minBid: 300, price: 600 }, // min bid 1.08 USD/GPU-h
    ];
    const e = explain(specs, { mode: "interruptible", bidPerGpuHour: "0.72", maxPricePerGpuHour: undefined });
    assert.deepEqual(steps(e).slice(0, 3), [
      ["gpuType", 0, 2],
      ["interruptible", 1, 1],
      ["bid", 1, 0],
    ]);
    assert.equal(miss(e, "interruptible")?.message, 'Machines that fit everything else sell only on-demand capacity, from 1.44 USD/GPU-h (use mode "on-demand").');
    assert.equal(miss(e, "bid")?.message, "The lowest minimum bid among machines that fit everything else is 1.08 USD/GPU-h, 0.36 USD/GPU-h above your bid of 0.72.");
  });

  it("explains a cluster request by the GPUs one cluster can give", () => {
    const specs: OfferSpec[] = [
      { machineId: 1, units: 4, free: 2, onDemand: 2, cluster: 3 },
      { machineId: 2, units: 4, free: 3, onDemand: 1, cluster: 3 },
      { machineId: 3, units: 4, free: 4 },
    ];
    const e = explain(specs, { gpuCount: 8, colocation: "cluster" });
    assert.deepEqual(steps(e).at(-1), ["capacity", 3, 0]);
    assert.match(e.message, /The most GPUs available in one cluster is 5\./);
  });

  it("lists the constraint 'already tried' when the allocator excludes machines", () => {
    const engine = new MatchingEngine({}, { now: () => NOW });
    engine.upsert(entry({ machineId: 1 }));
    const result = engine.match(parseMatchRequest(requestInput()), { exclude: new Map([[entry({ machineId: 1 }).key, 1]]) });
    assert.ok(!result.ok);
    assert.deepEqual(steps(result.explanation).at(-1), ["excluded", 1, 0]);
    assert.match(result.explanation.message, /1 A100-80GB machine fits everything else but was already tried by this allocation/);
  });

  it("says plainly when the book is empty", () => {
    const e = explain([], {});
    assert.equal(e.totalOffers, 0);
    assert.match(e.message, /the offer book is empty/);
  });

  it("bounds the search for nearest offers and says so", () => {
    // Above the cap and unattested: every one is read and fails, so the search hits its limit.
    const specs: OfferSpec[] = Array.from({ length: 50 }, (_, i) => ({ machineId: i + 1, price: 2000 + i, attestedAgo: null }));
    const e = explain(specs, { gpuCount: 1 }, { explainScanLimit: 10 });
    assert.equal(e.nearMissSearchTruncated, true);
    assert.match(e.message, /stopped after 10 offers/);
    // Counts stay exact even when the search is cut short.
    assert.deepEqual(
      steps(e).find((s) => s[0] === "price"),
      ["price", 50, 0],
    );
  });
});

/**
 * Host resources a renter can ask for (issue 33, item 4): offers declare CPU cores, memory and
 * disk per unit; a request asks for totals; matching keeps only machines whose units add up to
 * them and says in words why the others missed.
 */
import assert from "node:assert/strict";
import { InvalidInputError } from "../../common/errors.js";
import { MatchingEngine, type NoMatchExplanation, parseMatchRequest } from "../../common/matching/index.js";
import { offerMessageSchema } from "../../common/offers/message.js";
import { NOW, type OfferSpec, entry, offerWire, requestInput } from "../support/matching-fixtures.js";

const GiB = 1024;
const host = (cpuCoresPerUnit: number, memoryGiB: number, diskGiB: number) => ({ cpuCoresPerUnit, memoryMiBPerUnit: memoryGiB * GiB, diskMiBPerUnit: diskGiB * GiB });

function engineOf(specs: OfferSpec[]): MatchingEngine {
  const engine = new MatchingEngine({}, { now: () => NOW });
  for (const spec of specs) engine.upsert(entry(spec));
  return engine;
}
const keysOf = (engine: MatchingEngine, request: Record<string, unknown>) => {
  const result = engine.match(parseMatchRequest(requestInput(request)));
  assert.ok(result.ok, result.ok ? "" : result.explanation.message);
  return result.candidates.map((c) => c.parts.map((p) => p.entry.machineId).join("+"));
};
function explanation(engine: MatchingEngine, request: Record<string, unknown>): NoMatchExplanation {
  const result = engine.match(parseMatchRequest(requestInput(request)));
  assert.ok(!result.ok, "expected no match");
  return result.explanation;
}
function refused(input: Record<string, unknown>): InvalidInputError {
  try {
    parseMatchRequest(requestInput(input));
  } catch (error) {
    assert.ok(error instanceof InvalidInputError, String(error));
    return error;
  }
  assert.fail("expected the request to be refused");
}

describe("matching: host resources (CPU cores, memory, disk)", () => {
  it("requests take totals, validated with the field named and what is accepted", () => {
    const request = parseMatchRequest(requestInput({ gpuCount: 2, cpuCores: 16, memoryGiB: 0.5, diskGiB: 200 }));
    assert.equal(request.cpuCores, 16);
    assert.equal(request.memoryMiB, 512);
    assert.equal(request.diskMiB, 200 * GiB);
    const none = parseMatchRequest(requestInput({}));
    assert.deepEqual([none.cpuCores, none.memoryMiB, none.diskMiB], [0, 0, 0]);

    let error = refused({ cpuCores: 2.5 });
    assert.deepEqual(error.fields, ["cpuCores"]);
    assert.match(error.message, /cpuCores: expected a whole number of CPU cores/);
    error = refused({ cpuCores: 0, memoryGiB: "64", diskGiB: -1 });
    assert.deepEqual([...error.fields].sort(), ["cpuCores", "diskGiB", "memoryGiB"]);
    assert.match(error.message, /cpuCores: must be at least 1/);
    assert.match(error.message, /memoryGiB: expected host memory in GiB, a number above 0/);
    assert.match(error.message, /diskGiB: must be above 0 GiB/);
    assert.match(refused({ memoryGiB: 1e9 }).message, /memoryGiB: must be at most 65536 GiB/);
    assert.match(refused({ cpus: 4 }).message, /cpus/, "an unknown key is named, not ignored");
  });

  it("offer messages carry the declaration per unit; a bad one is refused and an absent one stays absent", () => {
    const wire = offerWire({ machineId: 1, resources: host(8, 64, 200) });
    assert.deepEqual(offerMessageSchema.parse(wire).resources, host(8, 64, 200));
    assert.equal(offerMessageSchema.parse(offerWire({ machineId: 1 })).resources, undefined);
    assert.equal(offerMessageSchema.safeParse({ ...wire, resources: { cpuCoresPerUnit: 0, memoryMiBPerUnit: 1, diskMiBPerUnit: 1 } }).success, false);
    assert.equal(offerMessageSchema.safeParse({ ...wire, resources: { ...host(1, 1, 1), gpus: 2 } }).success, false);
  });

  it("keeps only machines whose units add up to what was asked, and the others when nothing is asked", () => {
    const engine = engineOf([
      { machineId: 1, price: 300, resources: host(4, 32, 100) },
      { machineId: 2, price: 400, resources: host(8, 64, 200) },
      { machineId: 3, price: 200 }, // declares nothing
    ]);
    assert.deepEqual(keysOf(engine, { gpuCount: 2 }), ["3", "1", "2"]);
    // 2 GPUs and 16 cores: 8 per GPU.
    assert.deepEqual(keysOf(engine, { gpuCount: 2, cpuCores: 16 }), ["2"]);
    // 4 GPUs and 16 cores: 4 per GPU, both declaring machines fit.
    assert.deepEqual(keysOf(engine, { gpuCount: 4, cpuCores: 16 }), ["1", "2"]);
    // Rounded up per GPU: 3 GPUs and 13 cores need 5 each.
    assert.deepEqual(keysOf(engine, { gpuCount: 3, cpuCores: 13 }), ["2"]);
    assert.deepEqual(keysOf(engine, { gpuCount: 1, memoryGiB: 33 }), ["2"]);
    assert.deepEqual(keysOf(engine, { gpuCount: 1, diskGiB: 100 }), ["1", "2"]);
    assert.deepEqual(keysOf(engine, { gpuCount: 1, diskGiB: 100.5 }), ["2"]);
  });

  it("a cluster qualifies when its machines' units add up", () => {
    const engine = engineOf([
      { machineId: 1, units: 4, cluster: 7, price: 300, resources: host(8, 64, 100) },
      { machineId: 2, units: 4, cluster: 7, price: 300, resources: host(8, 64, 100) },
      { machineId: 3, units: 4, cluster: 8, price: 300, resources: host(8, 64, 100) },
      { machineId: 4, units: 4, cluster: 8, price: 300, resources: host(2, 64, 100) },
    ]);
    assert.deepEqual(keysOf(engine, { gpuCount: 8, colocation: "cluster", cpuCores: 64 }), ["1+2"]);
  });

  it("explains a miss in words: the most any machine declares per GPU, or that it declares none", () => {
    const engine = engineOf([
      { machineId: 1, price: 300, resources: host(4, 32, 100) },
      { machineId: 2, price: 310, resources: host(6, 16, 100) },
    ]);
    const e = explanation(engine, { gpuCount: 2, cpuCores: 16, memoryGiB: 64 });
    assert.deepEqual(
      e.steps.find((s) => s.constraint === "hostResources"),
      { constraint: "hostResources", label: "host resources of at least 8 CPU cores, 32 GiB memory per GPU", removed: 2, remaining: 0 },
    );
    assert.match(e.summary, /2 × A100-80GB, on demand at most 3\.60 USD\/GPU-h, 3600 s, 16 CPU cores, 64 GiB memory: the last 2 offers failed "host resources/);
    const miss = e.nearMisses.find((m) => m.constraint === "hostResources");
    assert.equal(
      miss?.message,
      "2 A100-80GB machines fit everything else but come with at most 6 CPU cores, 32 GiB memory per GPU; you asked for 16 CPU cores, 64 GiB memory for 2 GPUs, so 8 CPU cores, 32 GiB memory per GPU.",
    );

    const old = engineOf([{ machineId: 1, price: 300 }]);
    assert.equal(
      explanation(old, { gpuCount: 1, diskGiB: 50 }).nearMisses.find((m) => m.constraint === "hostResources")?.message,
      "1 A100-80GB machine fits everything else but declares no CPU cores, memory or disk per GPU (their nodes run without resource bounds or predate them; you asked for 50 GiB disk for 1 GPU, so 50 GiB disk per GPU).",
    );
  });

  it("a machine whose units are leased out does not match, whatever it declares (the CPU goes with the units)", () => {
    const engine = engineOf([{ machineId: 1, units: 8, free: 1, onDemand: 7, resources: host(4, 32, 100) }]);
    const e = explanation(engine, { gpuCount: 2, cpuCores: 8 });
    const step = (id: string) => e.steps.find((s) => s.constraint === id);
    assert.equal(step("hostResources")?.removed, 0);
    assert.equal(step("capacity")?.removed, 1);
  });
});

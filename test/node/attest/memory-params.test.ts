/**
 * Sizing of the memory phase and the calibration table (issue 24, item 2): the buffer follows the
 * declared VRAM per unit, every unit is held to the per-unit rate, the word and walk functions
 * are deterministic and the attestor's recomputation matches the runner's, and a calibrate
 * record turns into a measured table entry.
 */
import assert from "node:assert/strict";
import { hexToBytes } from "viem";
import { CALIBRATION, calibrationFor, calibrationRecordSchema, entryFromRecord } from "../../../common/attest/calibration.js";
import { computeWord, deriveWordKeys, recomputeWalk } from "../../../common/attest/memory.js";
import { memChallengeId } from "../../../common/attest/memory-messages.js";
import { deriveMemoryParams, memoryProfileSchema, walkTimeWithMissingMs } from "../../../common/attest/memory-params.js";
import { parseInput } from "../../../common/validation.js";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { suanliDomain } from "../../../common/eip712.js";
import { CpuMemoryRunner, MemoryResponder, type MemoryRunner } from "../../../node/attest/runner/index.js";

const profile = memoryProfileSchema.parse({});

describe("memory phase sizing and calibration", () => {
  it("sizes the buffer to 90 % of the declared VRAM per unit and keeps the deadline per unit", () => {
    const h100 = deriveMemoryParams(profile, { model: "H100-80GB-SXM", units: 1, vramMiB: 81_559 });
    assert.equal(h100.words, Math.floor(81_559 * 131_072 * 0.9));
    const eight = deriveMemoryParams(profile, { model: "H100-80GB-SXM", units: 8, vramMiB: 81_559 });
    assert.equal(eight.words, h100.words);
    assert.equal(eight.walkDeadlineMs, h100.walkDeadlineMs);
    assert.equal(eight.openPerUnit.length, 8);
    assert.ok(eight.openPerUnit.every((n) => n >= 2));
    const h200 = deriveMemoryParams(profile, { model: "H200-141GB", units: 1, vramMiB: 143_771 });
    assert.ok(h200.words > h100.words * 1.7);
    // A card with the H100's memory misses an H200 walk deadline by far at the H200's own rates.
    assert.ok(walkTimeWithMissingMs(h200, h100.words, h200) > 2 * h200.walkDeadlineMs);
    // MIG slices get their share of the rates.
    const slice = deriveMemoryParams(profile, { model: "A100-80GB/1g.10gb", units: 1, vramMiB: 9_728 });
    assert.ok(Math.abs(slice.randomReadsPerSecond - CALIBRATION["A100-80GB"]!.randomReadsPerSecond / 7) < 1);
  });

  it("names a bad profile key and refuses impossible claims", () => {
    assert.throws(
      () => parseInput(memoryProfileSchema, { fillFraction: 1.5 }, "memory profile"),
      (error: Error & { fields?: string[] }) => {
        assert.deepEqual(error.fields, ["fillFraction"]);
        return true;
      },
    );
    assert.throws(() => parseInput(memoryProfileSchema, { classes: { H100: {} } }, "memory profile"), { name: "InvalidInputError" });
    assert.throws(() => deriveMemoryParams(profile, { model: "A100-80GB", units: 0, vramMiB: 81_920 }), { name: "ChallengeParamsError" });
    assert.throws(() => deriveMemoryParams(profile, { model: "GTX 480", units: 1, vramMiB: 1_536 }), { name: "UnknownGpuModelError" });
  });

  it("the runner's walks are the ones the attestor recomputes from the seed, with or without the words stored", async () => {
    const seed = `0x${"11".repeat(32)}` as const;
    const fields = {
      challengeId: `0x${"22".repeat(32)}` as const,
      seeds: [seed],
      words: 500,
      hashIterations: 8,
      walks: 16,
      steps: 20,
      issuedAtMs: 0,
      fillDeadlineAtMs: 0,
      fillCutoffAtMs: 0,
    };
    const challenge = { v: 1 as const, type: "mem-challenge" as const, ...fields, id: memChallengeId(fields) };
    const nonce = `0x${"33".repeat(32)}` as const;
    const full = await (await new CpuMemoryRunner().fill(challenge)).walk(nonce);
    const partialBuffers = await new CpuMemoryRunner({ capacityWords: () => 100 }).fill(challenge);
    const partial = await partialBuffers.walk(nonce);
    assert.deepEqual(partial.roots, full.roots);
    assert.ok(partialBuffers.work[0]!.recomputedWords > 0 && full.work[0]!.recomputedWords === 0);
    const [opened] = await full.open([{ unit: 0, index: 5 }]);
    assert.equal(opened!.result, `0x${Buffer.from(recomputeWalk(hexToBytes(seed), hexToBytes(nonce), 5, 500, 20, 8)).toString("hex")}`);
    // Word values depend on the iteration count (a cheaper word is another word).
    const keys = deriveWordKeys(hexToBytes(seed));
    const [a, b] = [new Uint32Array(2), new Uint32Array(2)];
    computeWord(keys, 7, 8, a);
    computeWord(keys, 7, 7, b);
    assert.notDeepEqual(a, b);
  });

  it("a provider stops filling once the phase's cutoff has passed (plus clock skew), freeing the device", async () => {
    const fields = {
      challengeId: `0x${"44".repeat(32)}` as const,
      seeds: [`0x${"55".repeat(32)}` as const],
      words: 1_000,
      hashIterations: 40_000,
      walks: 4,
      steps: 4,
      issuedAtMs: 0,
      fillDeadlineAtMs: 1,
      fillCutoffAtMs: 2,
    };
    const challenge = { v: 1 as const, type: "mem-challenge" as const, ...fields, id: memChallengeId(fields) };
    const account = privateKeyToAccount(generatePrivateKey());
    const responderAt = (nowMs: number, runner: MemoryRunner = new CpuMemoryRunner()) =>
      new MemoryResponder({ provider: account.address, signer: account, domain: suanliDomain(31337, account.address), runner, unitsOf: () => 1, now: () => nowMs });
    // 12 ms before the cutoff plus the 30 s skew: the fill (40 million hash iterations) starts and is stopped.
    await assert.rejects(responderAt(30_000 - 10).fill(challenge), /cutoff passed/);
    // Already past it: refused before the runner hears of it (an external program would otherwise be stopped mid-kernel).
    let fills = 0;
    const counting: MemoryRunner = { name: "counting", fill: async (c, o) => (fills++, new CpuMemoryRunner().fill(c, o)) };
    await assert.rejects(responderAt(60_000, counting).fill(challenge), /fill cutoff has passed/);
    assert.equal(fills, 0);
  });

  it("ends a phase whose attestor goes quiet after the fill or the walk, freeing the buffers for the next phase", async () => {
    const account = privateKeyToAccount(generatePrivateKey());
    let released = 0;
    const runner: MemoryRunner = {
      name: "counting",
      fill: async (c, o) => {
        const buffers = await new CpuMemoryRunner().fill(c, o);
        return { ...buffers, walk: buffers.walk, release: async () => (released++, buffers.release()) };
      },
    };
    const responder = new MemoryResponder({ provider: account.address, signer: account, domain: suanliDomain(31337, account.address), runner, unitsOf: () => 1, idleMs: 50 });
    const phase = (tag: string) => {
      const fields = {
        challengeId: `0x${tag.repeat(32)}` as const,
        seeds: [`0x${"55".repeat(32)}` as const],
        words: 64,
        hashIterations: 4,
        walks: 4,
        steps: 4,
        issuedAtMs: Date.now(),
        fillDeadlineAtMs: Date.now() + 60_000,
        fillCutoffAtMs: Date.now() + 60_000,
      };
      return { v: 1 as const, type: "mem-challenge" as const, ...fields, id: memChallengeId(fields) };
    };
    const first = phase("61");
    await responder.fill(first);
    // While its buffers are held, another phase is busy.
    await assert.rejects(responder.fill(phase("62")), /Another memory phase is running/);
    await new Promise((resolve) => setTimeout(resolve, 200));
    assert.equal(released, 1);
    const walk = {
      v: 1 as const,
      type: "mem-walk" as const,
      id: first.id,
      nonce: `0x${"77".repeat(32)}` as const,
      issuedAtMs: Date.now(),
      deadlineAtMs: Date.now() + 60_000,
      cutoffAtMs: Date.now() + 60_000,
    };
    await assert.rejects(responder.walk(walk), /No filled buffers wait for this nonce/);
    // The next phase is taken; after its walk, a missing open ends it too.
    const second = phase("63");
    await responder.fill(second);
    await responder.walk({ ...walk, id: second.id });
    await new Promise((resolve) => setTimeout(resolve, 200));
    assert.equal(released, 2);
    await assert.rejects(responder.open({ v: 1, type: "mem-open", id: second.id, walks: [{ unit: 0, index: 0 }] }), /No committed walks/);
  });

  it("the calibration table states its source, and a calibrate record becomes a measured entry", () => {
    for (const [model, entry] of Object.entries(CALIBRATION)) {
      assert.equal(entry.source, "datasheet-estimate", model);
      assert.ok(entry.int8Efficiency > 0.5 && entry.int8Efficiency <= 1, model);
    }
    assert.equal(calibrationFor("A100-80GB/3g.40gb"), CALIBRATION["A100-80GB"]);
    assert.equal(calibrationFor("GTX 480"), undefined);
    const record = calibrationRecordSchema.parse({
      v: 1,
      model: "H100-80GB-SXM",
      measuredInt8OpsPerSecond: 1.5e15,
      datasheetInt8OpsPerSecond: 1.979e15,
      measuredRandomReadsPerSecond: 9e10,
      measuredHashesPerSecond: 1.8e12,
      runner: "external:./suanli-cuda-runner",
      devices: ["GPU-5e0c"],
      measuredAt: "2026-12-01T00:00:00Z",
    });
    const entry = entryFromRecord(record, 3_350);
    assert.equal(entry.source, "measured");
    assert.ok(Math.abs(entry.int8Efficiency - 1.5 / 1.979) < 1e-9);
    assert.match(entry.note ?? "", /suanli-cuda-runner on GPU-5e0c/);
    assert.throws(() => calibrationRecordSchema.parse({ ...record, measuredInt8OpsPerSecond: -1 }));
  });
});

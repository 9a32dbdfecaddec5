import assert from "node:assert/strict";
import { CALIBRATION } from "../../../common/attest/calibration.js";
import {
  CHALLENGE_PRESETS,
  INT8_DENSE_TOPS,
  challengeProfileSchema,
  deriveChallengeParams,
  fastestClassFor,
  migFraction,
  unitInt8OpsPerSecond,
} from "../../../common/attest/params.js";
import { GPU_MODELS } from "../../../common/gpu.js";
import { parseInput } from "../../../common/validation.js";

const gpu = challengeProfileSchema.parse({});
const devnet = challengeProfileSchema.parse({ preset: "cpu-devnet" });

describe("attest challenge parameters", () => {
  it("knows the int8 rate of every canonical GPU model", () => {
    for (const model of GPU_MODELS) assert.ok(INT8_DENSE_TOPS[model.name]! > 0, model.name);
  });

  it("sizes the gpu preset so compute, not latency, takes the time, for every model", () => {
    for (const model of GPU_MODELS) {
      const params = deriveChallengeParams(gpu, { model: model.name, units: 1 });
      assert.equal(params.cols, CHALLENGE_PRESETS.gpu.cols);
      // Rows are rounded up, so the budget is the target or a little more.
      assert.ok(params.computeBudgetMs >= CHALLENGE_PRESETS.gpu.targetComputeMs, model.name);
      assert.ok(params.computeBudgetMs < CHALLENGE_PRESETS.gpu.targetComputeMs * 1.01, model.name);
      assert.ok(params.computeBudgetMs >= 4 * CHALLENGE_PRESETS.gpu.latencyAllowanceMs);
      assert.equal(params.deadlineMs, params.computeBudgetMs + CHALLENGE_PRESETS.gpu.latencyAllowanceMs);
      assert.equal(params.ops, 2n * BigInt(params.rows) * BigInt(params.cols) ** 2n * BigInt(params.rounds));
    }
  });

  it("gives an H100 claim a deadline an A100 or L40S cannot meet", () => {
    const h100 = deriveChallengeParams(gpu, { model: "H100-80GB-SXM", units: 1 });
    for (const slower of ["A100-80GB", "L40S-48GB", "RTX4090-24GB"]) {
      // Even running at its full datasheet rate, the slower card needs longer than the H100 deadline.
      const bestCaseMs = (Number(h100.ops) / unitInt8OpsPerSecond(slower)) * 1000;
      assert.ok(bestCaseMs > h100.deadlineMs, `${slower}: ${bestCaseMs} ms vs ${h100.deadlineMs} ms`);
    }
    // ...while an H100 a little above its calibrated efficiency (0.7 + 0.1) makes it with a second to spare.
    const honestMs = (Number(h100.ops) / ((CALIBRATION["H100-80GB-SXM"]!.int8Efficiency + 0.1) * unitInt8OpsPerSecond("H100-80GB-SXM"))) * 1000;
    assert.ok(honestMs + 1_000 < h100.deadlineMs);
  });

  it("scales with units and MIG slices", () => {
    const one = deriveChallengeParams(gpu, { model: "A100-80GB", units: 1 });
    const eight = deriveChallengeParams(gpu, { model: "A100-80GB", units: 8 });
    assert.equal(eight.rows, one.rows * 8);
    assert.equal(eight.requiredOpsPerSecond, one.requiredOpsPerSecond * 8);
    assert.equal(eight.computeBudgetMs, one.computeBudgetMs);
    assert.equal(migFraction("A100-80GB/1g.10gb"), 1 / 7);
    assert.equal(migFraction("A100-80GB/3g.40gb"), 3 / 7);
    const slice = deriveChallengeParams(gpu, { model: "A100-80GB/1g.10gb", units: 1 });
    assert.ok(Math.abs(slice.requiredOpsPerSecond - one.requiredOpsPerSecond / 7) < 1);
  });

  it("holds each class to its calibrated efficiency unless the profile sets one", () => {
    const h100 = deriveChallengeParams(gpu, { model: "H100-80GB-SXM", units: 1 });
    assert.equal(h100.requiredOpsPerSecond, 1979e12 * CALIBRATION["H100-80GB-SXM"]!.int8Efficiency);
    const rtx = deriveChallengeParams(gpu, { model: "RTX4090-24GB", units: 1 });
    assert.equal(rtx.requiredOpsPerSecond, 660e12 * CALIBRATION["RTX4090-24GB"]!.int8Efficiency);
    assert.notEqual(CALIBRATION["H100-80GB-SXM"]!.int8Efficiency, CALIBRATION["RTX4090-24GB"]!.int8Efficiency);
    const flat = challengeProfileSchema.parse({ efficiency: 0.5 });
    assert.equal(deriveChallengeParams(flat, { model: "H100-80GB-SXM", units: 1 }).requiredOpsPerSecond, 1979e12 * 0.5);
  });

  it("applies per-class overrides and fixed devnet sizes", () => {
    const profile = challengeProfileSchema.parse({ classes: { "V100-32GB": { efficiency: 0.2, rounds: 4 } } });
    const v100 = deriveChallengeParams(profile, { model: "V100-32GB", units: 1 });
    assert.equal(v100.rounds, 4);
    assert.equal(v100.requiredOpsPerSecond, 62e12 * 0.2);
    assert.equal(deriveChallengeParams(profile, { model: "T4-16GB", units: 1 }).rounds, CHALLENGE_PRESETS.gpu.rounds);
    const d = deriveChallengeParams(devnet, { model: "H100-80GB-SXM", units: 2 });
    assert.deepEqual([d.rows, d.cols, d.rounds, d.openRows], [2048, 64, 2, 32]);
    assert.ok(d.deadlineMs >= 10_000);
    assert.equal(d.cutoffMs, Math.ceil(d.deadlineMs * 4));
  });

  it("refuses unknown models, bad units and impossible sizes with named errors", () => {
    assert.throws(() => deriveChallengeParams(gpu, { model: "GTX 480", units: 1 }), { name: "UnknownGpuModelError" });
    assert.throws(() => deriveChallengeParams(gpu, { model: "A100-80GB", units: 0 }), { name: "ChallengeParamsError" });
    const tiny = challengeProfileSchema.parse({ cols: 16, rounds: 1, targetComputeMs: 600_000 });
    assert.throws(() => deriveChallengeParams(tiny, { model: "H200-141GB", units: 8 }), { name: "ChallengeParamsError" });
  });

  it("names the offending key of a bad profile", () => {
    assert.throws(
      () => parseInput(challengeProfileSchema, { cols: 100 }, "profile"),
      (error: Error & { fields?: string[] }) => {
        assert.equal(error.name, "InvalidInputError");
        assert.deepEqual(error.fields, ["cols"]);
        return true;
      },
    );
    assert.throws(
      () => parseInput(challengeProfileSchema, { classes: { H100: {} } }, "profile"),
      (error: Error & { fields?: string[] }) => {
        assert.deepEqual(error.fields, ["classes.H100"]);
        return true;
      },
    );
    assert.throws(() => parseInput(challengeProfileSchema, { preset: "gpu", speed: 1 }, "profile"), { name: "InvalidInputError" });
  });

  it("tells a slow machine which class its measured rate fits", () => {
    const h100Required = deriveChallengeParams(gpu, { model: "H100-80GB-SXM", units: 1 }).requiredOpsPerSecond;
    const a100Required = deriveChallengeParams(gpu, { model: "A100-80GB", units: 1 }).requiredOpsPerSecond;
    assert.equal(fastestClassFor(gpu, h100Required * 1.01), "H200-141GB");
    assert.equal(fastestClassFor(gpu, a100Required * 1.01), "A100-80GB");
    assert.equal(fastestClassFor(gpu, 1), undefined);
  });
});

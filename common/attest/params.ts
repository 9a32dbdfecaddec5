/**
 * Challenge sizes and deadlines per GPU class. The reasoning behind every default is in
 * docs/attestation.md ("Parameters"); the short version:
 *
 * - The workload is int8 GEMM, so a class's speed is its dense int8 tensor rate (datasheet).
 * - An honest runner must reach `efficiency` of that rate. The compute budget is the challenge's
 *   operations at that speed; the deadline adds `latencyAllowanceMs` (network, runner start,
 *   hashing). A card much slower than the class it claims cannot meet it.
 * - `rowsPerUnit` is sized so the budget is about `targetComputeMs`: long enough that compute,
 *   not latency, decides the outcome on real GPUs; `cols` and `rounds` fix the attestor's cost
 *   (openRows·rounds·cols² multiply-adds per challenge, independent of the class).
 */
import { z } from "zod";
import { GPU_MODELS, canonicalGpuName, findGpuModel, knownGpuNames } from "../gpu.js";
import { MAX_COLS, challengeOps } from "./arithmetic.js";
import { FALLBACK_INT8_EFFICIENCY, calibrationFor } from "./calibration.js";
import { ChallengeParamsError, UnknownGpuModelError } from "./errors.js";
import { MAX_TREE_DEPTH } from "./merkle.js";

/** Most rows a challenge may have (the Merkle tree depth limit). */
export const MAX_ROWS = 2 ** MAX_TREE_DEPTH;
/** Most units one challenge covers (one sub-challenge each; the memory phase has the same limit). */
export const MAX_UNITS = 64;
/**
 * Most rows an attestor may ask to open in one challenge, over all units: the profile's
 * `openRows` (at most MAX_PROFILE_OPEN_ROWS) spread over the units, at least two per unit.
 */
export const MAX_OPEN_ROWS = 2 * MAX_UNITS;
/** Most rows a profile may ask to open (before the per-unit minimum). */
export const MAX_PROFILE_OPEN_ROWS = 64;

/**
 * Dense int8 tensor throughput in TOPS from the vendors' datasheets (without sparsity). V100 has
 * no int8 tensor cores: its figure is DP4A at four times its FP32 rate. Models missing here use
 * twice their FP16 `tflops`, which is the ratio of most data-center parts.
 */
export const INT8_DENSE_TOPS: Readonly<Record<string, number>> = {
  "H200-141GB": 1979,
  "H100-80GB-SXM": 1979,
  "H100-80GB-PCIE": 1513,
  "A100-80GB": 624,
  "A100-40GB": 624,
  "L40S-48GB": 733,
  "L4-24GB": 242,
  "A10-24GB": 250,
  "RTX4090-24GB": 660,
  "RTX3090-24GB": 284,
  "T4-16GB": 130,
  "V100-32GB": 62,
  // AMD: int8 dense (matrix cores / WMMA); MI250 is one GCD, half of the package's 362.1.
  "MI325X-256GB": 2615,
  "MI300X-192GB": 2615,
  "MI250-64GB": 181,
  "MI210-64GB": 181,
  "W7900-48GB": 123,
  "RX7900XTX-24GB": 123,
};

/** Per-model overrides of the profile; any key left out falls back to the profile's value. */
export const challengeClassSchema = z.strictObject({
  rowsPerUnit: z.number().int().min(1).max(MAX_ROWS).optional(),
  cols: z.number().int().min(16).max(MAX_COLS).multipleOf(16).optional(),
  rounds: z.number().int().min(1).max(1024).optional(),
  efficiency: z.number().positive().max(1).optional(),
  /** Dense int8 TOPS of one unit, replacing the built-in table. */
  int8Tops: z.number().positive().max(100_000).optional(),
});
export type ChallengeClassOverrides = z.output<typeof challengeClassSchema>;

export const CHALLENGE_PRESETS = {
  /**
   * Real GPUs. cols 4096 keeps B (16 MiB) in a data-center GPU's L2 and makes each round
   * compute-bound even without a fused epilogue; 16 rounds and 32 opened rows put the attestor's
   * check at 32·16·4096² ≈ 8.6·10⁹ multiply-adds. 32 rows: a machine that computed a fraction f
   * of the answer passes with probability at most f³², ≤ 10⁻⁴ for f ≤ 0.75 (issue 24). Requiring half the int8 datasheet rate means
   * a slower class cannot make the deadline even at its own full datasheet rate (A100 vs H100),
   * while a plain cuBLAS runner on the claimed card clears it; 10 s of compute at that rate
   * dwarfs the 2 s allowance. The efficiency is per class, from the calibration table
   * (calibration.ts: `int8Efficiency`), not one figure for every card: `efficiency` left undefined.
   */
  gpu: {
    cols: 4096,
    rounds: 16,
    openRows: 32,
    requireDevices: true as boolean,
    efficiency: undefined as number | undefined,
    targetComputeMs: 10_000,
    rowsPerUnit: undefined as number | undefined,
    latencyAllowanceMs: 2_000,
    cutoffFactor: 4,
    openTimeoutMs: 30_000,
  },
  /**
   * The devnet and tests: the CPU reference runner stands in for any GPU. Small fixed sizes
   * (1024 rows of 64 columns, 2 rounds: 1.7·10⁷ ops, milliseconds on a CPU) and a 10 s latency
   * allowance, so a loaded CI machine still passes. It cannot tell classes apart: by design.
   */
  "cpu-devnet": {
    cols: 64,
    rounds: 2,
    openRows: 32,
    requireDevices: false as boolean,
    efficiency: 1e-6 as number | undefined,
    targetComputeMs: 100,
    rowsPerUnit: 1024 as number | undefined,
    latencyAllowanceMs: 10_000,
    cutoffFactor: 4,
    openTimeoutMs: 30_000,
  },
} as const;
export type ChallengePresetName = keyof typeof CHALLENGE_PRESETS;

const classesSchema = z.record(z.string(), challengeClassSchema).superRefine((classes, ctx) => {
  for (const name of Object.keys(classes)) {
    if (canonicalGpuName(name) !== name || name.includes("/")) {
      ctx.addIssue({ code: "custom", path: [name], message: `not a canonical GPU model name (accepted: ${knownGpuNames().join(", ")})` });
    }
  }
});

/**
 * The challenge profile an attestor uses (config key `attest.challenge`). Keys left out come from
 * the preset. Parsing yields a ResolvedChallengeProfile.
 */
export const challengeProfileSchema = z
  .strictObject({
    /** `gpu` for real hardware, `cpu-devnet` for the devnet and tests. */
    preset: z.enum(["gpu", "cpu-devnet"]).default("gpu"),
    /** Inner dimension n (B is n×n); a multiple of 16. */
    cols: z.number().int().min(16).max(MAX_COLS).multipleOf(16).optional(),
    /** Rounds R of multiply-and-requantize. */
    rounds: z.number().int().min(1).max(1024).optional(),
    /** Rows the attestor opens and recomputes (k). */
    openRows: z.number().int().min(1).max(MAX_PROFILE_OPEN_ROWS).optional(),
    /**
     * Fail a commit that names no GPU UUID per unit (`duplicate_gpus`). The gpu preset requires
     * them; cpu-devnet does not (the CPU runner names none).
     */
    requireDevices: z.boolean().optional(),
    /**
     * Fraction of the class's dense int8 rate an honest machine must reach, for every class.
     * Left out: each class's calibrated `int8Efficiency` (calibration.ts), FALLBACK_INT8_EFFICIENCY
     * for a model the table lacks.
     */
    efficiency: z.number().positive().max(1).optional(),
    /** Compute time at the required rate that rowsPerUnit is sized for. */
    targetComputeMs: z.number().int().min(1).max(600_000).optional(),
    /** Fixed rows per unit instead of sizing from targetComputeMs. */
    rowsPerUnit: z.number().int().min(1).max(MAX_ROWS).optional(),
    /** Added to the compute budget: network round trip, runner start-up, hashing. */
    latencyAllowanceMs: z.number().int().min(0).max(600_000).optional(),
    /** A commit later than deadline × cutoffFactor is not waited for (late_commit). */
    cutoffFactor: z.number().min(1).max(10_000).optional(),
    /** Time the provider has to answer an open request. */
    openTimeoutMs: z.number().int().min(100).max(600_000).optional(),
    /** Per-model overrides, keyed by canonical model name. */
    classes: classesSchema.default({}),
  })
  .transform((input) => {
    const preset = CHALLENGE_PRESETS[input.preset];
    return {
      preset: input.preset,
      cols: input.cols ?? preset.cols,
      rounds: input.rounds ?? preset.rounds,
      openRows: input.openRows ?? preset.openRows,
      requireDevices: input.requireDevices ?? preset.requireDevices,
      efficiency: input.efficiency ?? preset.efficiency,
      targetComputeMs: input.targetComputeMs ?? preset.targetComputeMs,
      rowsPerUnit: input.rowsPerUnit ?? preset.rowsPerUnit,
      latencyAllowanceMs: input.latencyAllowanceMs ?? preset.latencyAllowanceMs,
      cutoffFactor: input.cutoffFactor ?? preset.cutoffFactor,
      openTimeoutMs: input.openTimeoutMs ?? preset.openTimeoutMs,
      classes: input.classes,
    };
  });
export type ChallengeProfileInput = z.input<typeof challengeProfileSchema>;
export type ResolvedChallengeProfile = z.output<typeof challengeProfileSchema>;

/** What a machine claims to be: the canonical model (MIG slices as MODEL/PROFILE) and its unit count. */
export type CapacityClaim = { model: string; units: number };

/** The numbers one challenge runs with. Times are milliseconds after the challenge is issued. */
export type ChallengeParams = {
  /** Units: one sub-challenge each, all computed at once. */
  units: number;
  /** Rows of each unit's sub-challenge. */
  rowsPerUnit: number;
  /** rowsPerUnit · units. */
  rows: number;
  cols: number;
  rounds: number;
  /** Rows opened in each unit's tree: ⌈openRows / units⌉, at least two (or all of a smaller tree). */
  openRowsPerUnit: number;
  /** openRowsPerUnit · units. */
  openRows: number;
  /** 2·rows·rounds·cols² over all units. */
  ops: bigint;
  /** The claimed machine's required int8 ops per second (all units). */
  requiredOpsPerSecond: number;
  /** One unit's sub-challenge at one unit's required rate: every unit has this long, at the same time. */
  computeBudgetMs: number;
  deadlineMs: number;
  cutoffMs: number;
  openTimeoutMs: number;
};

/** Fraction of a full GPU a MIG profile gets: `Ng.*` has N of the 7 compute slices. */
export function migFraction(model: string): number {
  const slice = model.split("/")[1];
  if (!slice) return 1;
  const match = /^(\d)g\./.exec(slice.trim());
  if (!match) return 1;
  return Math.min(7, Number(match[1])) / 7;
}

/** Dense int8 ops per second of one unit of `model` (MIG slices scaled), before efficiency. */
export function unitInt8OpsPerSecond(model: string, overrides?: ChallengeClassOverrides): number {
  const info = findGpuModel(model);
  if (!info) throw new UnknownGpuModelError(model, knownGpuNames());
  const tops = overrides?.int8Tops ?? INT8_DENSE_TOPS[info.name] ?? info.tflops * 2;
  return tops * 1e12 * migFraction(model);
}

/** Derives a challenge's size and deadlines for a claim under a profile. */
/** The int8 efficiency a class is held to: class override, profile-wide figure, calibration table, fallback. */
export function classEfficiency(profile: ResolvedChallengeProfile, model: string): number {
  const base = (canonicalGpuName(model) ?? model).split("/")[0]!;
  return profile.classes[base]?.efficiency ?? profile.efficiency ?? calibrationFor(base)?.int8Efficiency ?? FALLBACK_INT8_EFFICIENCY;
}

/**
 * `rateShare` < 1 sizes a light check (an in-lease check, docs/attestation.md "In-lease checks"):
 * the rows, and so the required rate, are scaled by the share, the time to answer is the same, so
 * the check needs about that share of each GPU and an honest machine answers it beside a renter's task.
 */
export function deriveChallengeParams(profile: ResolvedChallengeProfile, claim: CapacityClaim, rateShare = 1): ChallengeParams {
  if (!(rateShare > 0 && rateShare <= 1)) throw new ChallengeParamsError(`rateShare must be in (0, 1], got ${rateShare}`);
  const canonical = canonicalGpuName(claim.model);
  if (!canonical) throw new UnknownGpuModelError(claim.model, knownGpuNames());
  if (!Number.isInteger(claim.units) || claim.units < 1 || claim.units > MAX_UNITS) throw new ChallengeParamsError(`units must be 1..${MAX_UNITS}, got ${claim.units}`);
  const overrides = profile.classes[canonical.split("/")[0]!];
  const cols = overrides?.cols ?? profile.cols;
  const rounds = overrides?.rounds ?? profile.rounds;
  const efficiency = classEfficiency(profile, canonical);
  const unitRate = unitInt8OpsPerSecond(canonical, overrides) * efficiency * rateShare;
  const opsPerRow = 2 * rounds * cols * cols;
  const fixedRows = overrides?.rowsPerUnit ?? profile.rowsPerUnit;
  const rowsPerUnit = fixedRows !== undefined ? Math.max(1, Math.ceil(fixedRows * rateShare)) : Math.max(1, Math.ceil(((profile.targetComputeMs / 1000) * unitRate) / opsPerRow));
  if (rowsPerUnit > MAX_ROWS) {
    throw new ChallengeParamsError(`A sub-challenge for one ${canonical} needs ${rowsPerUnit} rows, above the limit of ${MAX_ROWS}.`, {
      metaMessages: ["Raise attest.challenge.cols or rounds, or lower targetComputeMs."],
    });
  }
  const rows = rowsPerUnit * claim.units;
  const ops = challengeOps(rows, cols, rounds);
  const requiredOpsPerSecond = unitRate * claim.units;
  // Per unit: each unit's rows at one unit's rate. Units run at once, so this is the whole challenge's budget too.
  const computeBudgetMs = Math.ceil((Number(challengeOps(rowsPerUnit, cols, rounds)) * 1000) / unitRate);
  const deadlineMs = computeBudgetMs + profile.latencyAllowanceMs;
  const openRowsPerUnit = Math.min(rowsPerUnit, Math.max(2, Math.ceil(profile.openRows / claim.units)));
  return {
    units: claim.units,
    rowsPerUnit,
    rows,
    cols,
    rounds,
    openRowsPerUnit,
    openRows: openRowsPerUnit * claim.units,
    ops,
    requiredOpsPerSecond,
    computeBudgetMs,
    deadlineMs,
    cutoffMs: Math.ceil(deadlineMs * profile.cutoffFactor),
    openTimeoutMs: profile.openTimeoutMs,
  };
}

/**
 * The fastest model (one unit) whose required rate under `profile` a measured throughput meets:
 * what a machine that failed with slow_for_class could honestly claim. Undefined if none.
 */
export function fastestClassFor(profile: ResolvedChallengeProfile, opsPerSecond: number, unitsClaimed = 1): string | undefined {
  let best: { name: string; rate: number } | undefined;
  for (const model of GPU_MODELS) {
    const overrides = profile.classes[model.name];
    const rate = unitInt8OpsPerSecond(model.name, overrides) * classEfficiency(profile, model.name) * unitsClaimed;
    if (rate <= opsPerSecond && (!best || rate > best.rate)) best = { name: model.name, rate };
  }
  return best?.name;
}

/**
 * How far above the datasheet dense int8 rate a measured throughput may lie (boost clocks above
 * the datasheet's, millisecond rounding of short challenges). Beyond it the measurement is not of
 * the claimed class: a faster card sold as a slower one, or an attestor's made-up number.
 */
export const THROUGHPUT_CEILING_HEADROOM = 1.15;

/** The throughput (int8 ops/s over the whole machine) an attestation of `units × model` may carry. */
export type ThroughputBand = { floor: bigint; ceiling: bigint };

/**
 * The band an attested throughput must lie in for `units × model`: at most the datasheet rate
 * times THROUGHPUT_CEILING_HEADROOM (physics: no measurement of that class can be faster) and at
 * least `minEfficiency` of the datasheet rate (the rate an honest runner reaches, docs/attestation.md
 * "Throughput band"). Undefined for a model this table does not know.
 */
export function throughputBand(model: string, units: number, minEfficiency = 0): ThroughputBand | undefined {
  const canonical = canonicalGpuName(model);
  if (!canonical || !Number.isInteger(units) || units < 1) return undefined;
  const peak = unitInt8OpsPerSecond(canonical) * units;
  return { floor: BigInt(Math.floor(peak * minEfficiency)), ceiling: BigInt(Math.ceil(peak * THROUGHPUT_CEILING_HEADROOM)) };
}

/**
 * Sizes and deadlines of the memory phase (memory.ts) per claim: the buffer from the declared
 * VRAM per unit, the deadlines from the claimed class's calibrated random-read and hash rates
 * (calibration.ts). Reasoning and each attack's bound: docs/attestation.md, "Memory phase".
 */
import { z } from "zod";
import { canonicalGpuName, knownGpuNames } from "../gpu.js";
import { CALIBRATION, calibrationFor } from "./calibration.js";
import { ChallengeParamsError, UnknownGpuModelError } from "./errors.js";
import { migFraction } from "./params.js";

/** Most walks a unit may run (its Merkle tree's depth limit). */
export const MAX_WALKS = 2 ** 26;
/** Most walks an attestor may open in one challenge. */
export const MAX_OPEN_WALKS = 256;
/** Most units one challenge covers. */
export const MAX_UNITS = 64;

const classFigures = z.strictObject({
  /** Random word reads per second of one unit (replaces the calibration table's). */
  randomReadsPerSecond: z.number().positive().optional(),
  /** Word-function iterations per second of one unit (replaces the calibration table's). */
  hashesPerSecond: z.number().positive().optional(),
});

export const memoryProfileSchema = z
  .strictObject({
    /** Fraction of the declared VRAM per unit the buffer fills. */
    fillFraction: z.number().positive().max(0.98).default(0.9),
    /** Buffer words per MiB of declared VRAM: 131072 (8-byte words) on real hardware; tests scale it down. */
    wordsPerMiB: z.number().positive().max(131_072).default(131_072),
    /** K: iterations of the word function per word (what a missing word costs to recompute). */
    hashIterations: z
      .number()
      .int()
      .min(1)
      .max(1 << 20)
      .default(512),
    /** W: walks per unit (run in parallel). */
    walksPerUnit: z
      .number()
      .int()
      .min(1)
      .max(MAX_WALKS)
      .default(2 ** 24),
    /** L: steps per walk. */
    stepsPerWalk: z
      .number()
      .int()
      .min(1)
      .max(1 << 20)
      .default(4096),
    /** Walks opened and checked per challenge, spread over the units (at least two per unit). */
    openWalks: z.number().int().min(1).max(MAX_OPEN_WALKS).default(32),
    /** Fraction of the calibrated rates an honest unit must reach. */
    efficiency: z.number().positive().max(1).default(0.5),
    /** Added to each phase's budget (network, kernel launch). */
    latencyAllowanceMs: z.number().int().min(0).max(600_000).default(1_000),
    /** An answer later than deadline × cutoffFactor is not waited for. */
    cutoffFactor: z.number().min(1).max(10_000).default(4),
    /** Time the provider has to open walks. */
    openTimeoutMs: z.number().int().min(100).max(600_000).default(30_000),
    /** Per-model rates replacing the calibration table's (canonical names). */
    classes: z.record(z.string(), classFigures).default({}),
  })
  .superRefine((profile, ctx) => {
    for (const name of Object.keys(profile.classes)) {
      if (canonicalGpuName(name) !== name)
        ctx.addIssue({ code: "custom", path: ["classes", name], message: `not a canonical GPU model name (accepted: ${knownGpuNames().join(", ")})` });
    }
  });
export type MemoryProfileInput = z.input<typeof memoryProfileSchema>;
export type MemoryProfile = z.output<typeof memoryProfileSchema>;

export type MemoryClaim = { model: string; units: number; vramMiB: number };

export type MemoryParams = {
  units: number;
  /** N: words per unit's buffer. */
  words: number;
  hashIterations: number;
  walks: number;
  steps: number;
  /** Walks opened per unit (index = unit). */
  openPerUnit: number[];
  /** The claimed class's per-unit rates the deadlines assume (before efficiency). */
  randomReadsPerSecond: number;
  hashesPerSecond: number;
  fillBudgetMs: number;
  fillDeadlineMs: number;
  fillCutoffMs: number;
  walkBudgetMs: number;
  walkDeadlineMs: number;
  walkCutoffMs: number;
  openTimeoutMs: number;
};

/** Per-unit rates of a claimed model: profile override, else the calibration table (MIG slices scaled). */
export function memoryRates(profile: MemoryProfile, model: string): { randomReadsPerSecond: number; hashesPerSecond: number } {
  const canonical = canonicalGpuName(model);
  if (!canonical) throw new UnknownGpuModelError(model, knownGpuNames());
  const base = canonical.split("/")[0]!;
  const override = profile.classes[base];
  const table = calibrationFor(base, CALIBRATION);
  const reads = override?.randomReadsPerSecond ?? table?.randomReadsPerSecond;
  const hashes = override?.hashesPerSecond ?? table?.hashesPerSecond;
  if (reads === undefined || hashes === undefined) {
    throw new ChallengeParamsError(`No memory-phase calibration for ${base}.`, {
      metaMessages: [`Set attest.memory.classes["${base}"] to its randomReadsPerSecond and hashesPerSecond.`],
    });
  }
  const share = migFraction(canonical);
  return { randomReadsPerSecond: reads * share, hashesPerSecond: hashes * share };
}

/** Derives the memory phase's size and deadlines for a claim (all units run at once, each timed at the per-unit rate). */
export function deriveMemoryParams(profile: MemoryProfile, claim: MemoryClaim): MemoryParams {
  if (!Number.isInteger(claim.units) || claim.units < 1 || claim.units > MAX_UNITS) throw new ChallengeParamsError(`units must be 1..${MAX_UNITS}, got ${claim.units}`);
  if (!Number.isInteger(claim.vramMiB) || claim.vramMiB < 1) throw new ChallengeParamsError(`vramMiB must be a positive integer, got ${claim.vramMiB}`);
  const rates = memoryRates(profile, claim.model);
  const words = Math.floor(claim.vramMiB * profile.wordsPerMiB * profile.fillFraction);
  if (words < 2 || words > Number.MAX_SAFE_INTEGER / 2) throw new ChallengeParamsError(`a buffer of ${words} words is outside what the phase supports`);
  const fillBudgetMs = Math.ceil((words * profile.hashIterations * 1000) / (rates.hashesPerSecond * profile.efficiency));
  const walkBudgetMs = Math.ceil((profile.walksPerUnit * profile.stepsPerWalk * 1000) / (rates.randomReadsPerSecond * profile.efficiency));
  const fillDeadlineMs = fillBudgetMs + profile.latencyAllowanceMs;
  const walkDeadlineMs = walkBudgetMs + profile.latencyAllowanceMs;
  const perUnit = Math.max(Math.min(2, profile.walksPerUnit), Math.ceil(profile.openWalks / claim.units));
  const openPerUnit = Array.from({ length: claim.units }, () => Math.min(profile.walksPerUnit, perUnit));
  return {
    units: claim.units,
    words,
    hashIterations: profile.hashIterations,
    walks: profile.walksPerUnit,
    steps: profile.stepsPerWalk,
    openPerUnit,
    ...rates,
    fillBudgetMs,
    fillDeadlineMs,
    fillCutoffMs: Math.ceil(fillDeadlineMs * profile.cutoffFactor),
    walkBudgetMs,
    walkDeadlineMs,
    walkCutoffMs: Math.ceil(walkDeadlineMs * profile.cutoffFactor),
    openTimeoutMs: profile.openTimeoutMs,
  };
}

/**
 * The walk time (ms) of a unit that holds only `heldWords` of the buffer and recomputes the rest
 * when a walk meets it, at its own rates: what the attack bounds in docs/attestation.md come from.
 */
export function walkTimeWithMissingMs(
  params: Pick<MemoryParams, "words" | "walks" | "steps" | "hashIterations">,
  heldWords: number,
  rates: { randomReadsPerSecond: number; hashesPerSecond: number },
): number {
  const missing = Math.max(0, 1 - heldWords / params.words);
  const reads = params.walks * params.steps;
  return (reads / rates.randomReadsPerSecond + (missing * reads * params.hashIterations) / rates.hashesPerSecond) * 1000;
}

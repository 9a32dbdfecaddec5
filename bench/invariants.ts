/**
 * `npm run bench -- invariants [--json] [--sequences N] [--max-steps M] [--seed S] [--jobs J] [--only I]`:
 * the adversarial invariant suite of the money rules (test/contracts/support/invariants.ts) at
 * scale: by default 10,000 sequences of 4 to 40 random steps (plus the drain that ends every lease
 * and withdraws every stake), each step checked against the exact model, the attacker's bound and
 * liveness. The sequences are spread over J in-process chains run concurrently (default: the
 * number of CPUs, at most 4). Seed: --seed, else SUANLI_PROPERTY_SEED, else the suite's default;
 * --only I (or SUANLI_PROPERTY_SEQUENCE) replays sequence I alone.
 *
 * Summary: {"suite":"invariants","sequences":N,"steps":M,"violations":V,...}; a violation is
 * printed with its seed, sequence and steps (replay it with the CI test's environment variables).
 */
import { availableParallelism } from "node:os";
import { network } from "hardhat";
import { DEFAULT_SEED, KNOWN_OPEN_FINDINGS, describeFailure, runInvariants, type RunResult } from "../test/contracts/support/invariants.js";
import type { MainFigure } from "./_calibration.js";

function option(args: string[], name: string): string | undefined {
  const at = args.indexOf(`--${name}`);
  return at >= 0 ? args[at + 1] : undefined;
}

function positiveInteger(value: string | undefined, fallback: number, name: string): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < 0) throw new Error(`--${name} must be a non-negative integer, got ${value}`);
  return n;
}

/** The figures bench/run.ts divides by the same run's calibration figure (bench/_calibration.ts). */
export const mainFigures: MainFigure[] = [{ field: "stepsPerSecond", per: "keccakPerCpuSec" }];

export async function run(args: string[]): Promise<Record<string, unknown>> {
  const sequences = positiveInteger(option(args, "sequences"), 10_000, "sequences");
  const maxSteps = positiveInteger(option(args, "max-steps"), 40, "max-steps");
  const seed = positiveInteger(option(args, "seed") ?? process.env.SUANLI_PROPERTY_SEED, DEFAULT_SEED, "seed");
  const jobs = Math.max(1, positiveInteger(option(args, "jobs"), Math.min(4, availableParallelism()), "jobs"));
  const onlyOption = option(args, "only") ?? process.env.SUANLI_PROPERTY_SEQUENCE;
  const only = onlyOption === undefined ? undefined : positiveInteger(onlyOption, 0, "only");
  const started = performance.now();
  let done = 0;
  let lastReport = started;
  const progress = () => {
    done++;
    const now = performance.now();
    if (now - lastReport > 30_000) {
      lastReport = now;
      console.log(`  ${done}/${sequences} sequences, ${((now - started) / 1000).toFixed(0)} s`);
    }
  };
  const results: RunResult[] = await Promise.all(
    Array.from({ length: only === undefined ? jobs : 1 }, async (_, index) => {
      const connection = await network.create();
      return runInvariants(connection, {
        sequences,
        minSteps: 4,
        maxSteps,
        seed,
        only,
        shard: only === undefined ? { index, count: jobs } : undefined,
        known: KNOWN_OPEN_FINDINGS,
        progress,
      });
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  const total = { sequences: 0, steps: 0, succeeded: 0, violations: 0 };
  const endings: Record<string, number> = {};
  for (const r of results) {
    total.sequences += r.sequences;
    total.steps += r.steps;
    total.succeeded += r.succeeded;
    total.violations += r.violations;
    for (const [k, v] of Object.entries(r.endings)) endings[k] = (endings[k] ?? 0) + v;
    if (r.failure) console.log(describeFailure(r));
  }
  console.log(
    `invariants: seed ${seed}, ${total.sequences} sequences of 4-${maxSteps} steps (+ drain), ${total.steps} steps (${total.succeeded} succeeded), ${total.violations} violations, ${seconds.toFixed(1)} s on ${jobs} chains`,
  );
  console.log(
    `  leases ended: ${Object.entries(endings)
      .map(([k, v]) => `${k} ${v}`)
      .join(", ")}`,
  );
  return {
    sequences: total.sequences,
    steps: total.steps,
    violations: total.violations,
    seed,
    maxSteps,
    succeeded: total.succeeded,
    knownFindings: KNOWN_OPEN_FINDINGS,
    seconds: Number(seconds.toFixed(1)),
    stepsPerSecond: Math.round(total.steps / seconds),
  };
}

/**
 * `npm run bench -- attest [--json] [--workers N] [--quick]`
 *
 * - The attestor's cost to check one challenge (open rows: Merkle proofs + recomputing the rows),
 *   at the devnet preset and at the gpu preset's real sizes (cols 4096, 16 rounds, 8 rows), single
 *   threaded (what verifyOpening costs inline) and on the CPU runner's worker pool.
 * - The CPU reference runner's throughput in int8 ops per second, with 1 and N workers.
 * - A whole devnet challenge, attestor and provider in one process.
 * - Per GPU class at the gpu preset (1 and 8 units): the provider's work (rows, int8 ops, compute
 *   time at the required rate, the Merkle tree it holds, signing the commit) and the attestor's (the
 *   measured check of the opened rows, the commit-signature recovery, the open response's bytes).
 * - The memory phase per class (bench/_attest-memory.ts): buffer per unit, deadlines, the time
 *   a card with half the memory would need, and the attestor's check of the opened walks.
 * `--quick` skips the gpu-size check (about 2·10⁹ multiply-adds).
 *
 * `npm run bench -- attest calibrate --model <model> [--runner external --command <program>]`
 * measures a runner and prints a calibration record instead (docs/attestation.md, "Calibration").
 */
import { availableParallelism } from "node:os";
import { bytesToHex, type Hex } from "viem";
import { unitSubChallenges } from "../common/attest/units.js";
import { challengeOps } from "../common/attest/arithmetic.js";
import { CHALLENGE_PRESETS, INT8_DENSE_TOPS, challengeProfileSchema, deriveChallengeParams } from "../common/attest/params.js";
import { commitDigest, signCommit, type CommitFields } from "../common/attest/commit.js";
import { maxOpenResponseBytes } from "../common/attest/messages.js";
import { recoverDigestSigner } from "../common/eip712-recover.js";
import { recomputeRowsInline, verifyOpening, type RowRecomputer } from "../common/attest/verify.js";
import { suanliDomain } from "../common/eip712.js";
import { privateKeyToAccount } from "viem/accounts";
import { Attestor, ChallengeResponder } from "../node/attest/challenge/index.js";
import { CpuRunner, type RunnerChallenge } from "../node/attest/runner/index.js";
import type { MainFigure } from "./_calibration.js";
import { calibrate, memoryFigures } from "./_attest-memory.js";

function flag(args: string[], name: string): string | undefined {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
}

function randomChallenge(rows: number, cols: number, rounds: number, units = 1): RunnerChallenge & { seed: Hex } {
  const random = () => bytesToHex(globalThis.crypto.getRandomValues(new Uint8Array(32)));
  const id = random();
  const seed = random();
  return { id, seed, rowsPerUnit: rows, cols, rounds, units: unitSubChallenges(id, seed, units) };
}

/**
 * Milliseconds the attestor spends checking an opened answer: `rows` rows opened in all, spread
 * over `units` sub-challenges (each unit's tree of `rows / units` rows, every row opened).
 */
async function verifyCost(runner: CpuRunner, shape: { rows: number; cols: number; rounds: number; units?: number }, recompute: RowRecomputer, iterations: number): Promise<number> {
  const units = shape.units ?? 1;
  const perUnit = Math.ceil(shape.rows / units);
  const challenge = randomChallenge(perUnit, shape.cols, shape.rounds, units);
  const commitment = await runner.computeCommit(challenge);
  const picks = Array.from({ length: units }, (_, unit) => Array.from({ length: perUnit }, (_, index) => ({ unit, index }))).flat();
  const rows = await commitment.openRows(picks);
  let total = 0;
  for (let i = 0; i < iterations; i++) {
    const started = performance.now();
    const check = await verifyOpening({
      challengeId: challenge.id,
      seed: challenge.seed,
      rowsPerUnit: perUnit,
      cols: shape.cols,
      rounds: shape.rounds,
      roots: commitment.roots,
      picks,
      response: { v: 2, type: "rows", challengeId: challenge.id, rows },
      recompute,
    });
    total += performance.now() - started;
    if (!check.ok) throw new Error(`benchmark answer did not verify: ${check.detail}`);
  }
  return total / iterations;
}

async function runnerThroughput(workers: number, shape: { rows: number; cols: number; rounds: number }): Promise<number> {
  const runner = new CpuRunner({ workers });
  try {
    await runner.computeCommit(randomChallenge(workers * 8, 16, 1)); // start the workers outside the measurement
    const started = performance.now();
    await runner.computeCommit(randomChallenge(shape.rows, shape.cols, shape.rounds));
    const seconds = (performance.now() - started) / 1000;
    return Number(challengeOps(shape.rows, shape.cols, shape.rounds)) / seconds;
  } finally {
    await runner.close();
  }
}

/** The figures bench/run.ts divides by the same run's calibration figure (bench/_calibration.ts). */
export const mainFigures: MainFigure[] = [{ field: "cpuRunnerOpsPerSecond.oneWorker", per: "keccakPerCpuSec" }];

export async function run(args: string[]): Promise<Record<string, unknown>> {
  if (args[0] === "calibrate") return { calibration: await calibrate(args.slice(1)) };
  const workers = Number(flag(args, "--workers") ?? availableParallelism());
  const quick = args.includes("--quick");
  const runner = new CpuRunner({ workers });
  try {
    const devnet = CHALLENGE_PRESETS["cpu-devnet"];
    const gpu = CHALLENGE_PRESETS.gpu;
    const devnetShape = { rows: devnet.openRows, cols: devnet.cols, rounds: devnet.rounds };
    const gpuShape = { rows: gpu.openRows, cols: gpu.cols, rounds: gpu.rounds };

    const devnetVerifyMs = await verifyCost(runner, devnetShape, recomputeRowsInline, 50);
    const gpuVerifyMs = quick ? undefined : await verifyCost(runner, gpuShape, recomputeRowsInline, 1);
    const gpuVerifyWorkersMs = quick ? undefined : await verifyCost(runner, gpuShape, runner.recompute, 1);
    // Eight units: the same 32 rows, four per unit, from eight sub-challenges (eight B matrices to generate).
    const gpuVerify8UnitsMs = quick ? undefined : await verifyCost(runner, { ...gpuShape, units: 8 }, runner.recompute, 1);

    const throughputShape = { rows: 2048, cols: 256, rounds: 2 };
    const oneWorker = await runnerThroughput(1, throughputShape);
    const manyWorkers = workers > 1 ? await runnerThroughput(workers, throughputShape) : oneWorker;

    // A whole devnet challenge in one process: sign, compute, commit, open, verify, sign the attestation.
    const account = privateKeyToAccount("0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d");
    const domain = suanliDomain(31337, "0x5FbDB2315678afecb367f032d93F642f64180aa3");
    const providerWallet = privateKeyToAccount("0x7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6");
    const provider = providerWallet.address;
    const machine = { machineId: 1, model: "H100-80GB-SXM", units: 1, vramMiB: 81_559 };
    const attestor = new Attestor({ account, domain, profile: challengeProfileSchema.parse({ preset: "cpu-devnet" }), recompute: runner.recompute });
    const responder = new ChallengeResponder({ provider, signer: providerWallet, machine: () => machine, runner, domain, isAttestor: () => true });
    const rounds = 5;
    const started = performance.now();
    for (let i = 0; i < rounds; i++) {
      const challenge = await attestor.startChallenge({ provider, ...machine });
      const next = challenge.onCommit(await responder.respond(challenge.message), Date.now());
      if (next.outcome !== "open") throw new Error(`devnet challenge failed: ${next.reason}`);
      const outcome = await challenge.onOpen(await responder.open(next.request), Date.now());
      if (outcome.outcome !== "pass") throw new Error(`devnet challenge failed: ${outcome.outcome === "fail" ? outcome.reason : outcome.outcome}`);
    }
    const devnetChallengeMs = (performance.now() - started) / rounds;

    const fmt = (ms: number | undefined) => (ms === undefined ? "skipped" : `${ms.toFixed(ms < 10 ? 2 : 0)} ms`);
    const macs = (shape: { rows: number; cols: number; rounds: number }) => shape.rows * shape.rounds * shape.cols * shape.cols;
    console.log("attestor: checking one challenge (Merkle proofs + recomputing the opened rows)");
    console.log(`  cpu-devnet  ${devnetShape.rows} rows × ${devnetShape.rounds} rounds × ${devnetShape.cols}²  ${macs(devnetShape).toExponential(2)} MACs  ${fmt(devnetVerifyMs)}`);
    console.log(
      `  gpu         ${gpuShape.rows} rows × ${gpuShape.rounds} rounds × ${gpuShape.cols}²  ${macs(gpuShape).toExponential(2)} MACs  ${fmt(gpuVerifyMs)} (1 thread), ${fmt(gpuVerifyWorkersMs)} (${workers} workers)`,
    );
    console.log(`  gpu, 8 units (4 rows each, 8 sub-challenges)            ${fmt(gpuVerify8UnitsMs)} (${workers} workers)`);
    console.log(`CPU runner throughput (${throughputShape.rows} rows × ${throughputShape.rounds} rounds × ${throughputShape.cols}²)`);
    console.log(`  1 worker    ${(oneWorker / 1e9).toFixed(2)} G int8 ops/s`);
    console.log(`  ${workers} workers   ${(manyWorkers / 1e9).toFixed(2)} G int8 ops/s`);
    console.log(`devnet challenge end to end (one process): ${fmt(devnetChallengeMs)}`);

    // Signing and checking the provider's commit signature (per challenge, any class).
    // One root and one GPU UUID per unit: measured for 1 and 8 units.
    const commitCost = async (units: number) => {
      const fields: CommitFields = {
        challengeId: bytesToHex(new Uint8Array(32).fill(1)),
        rowsPerUnit: 1024,
        roots: Array.from({ length: units }, (_, u) => bytesToHex(new Uint8Array(32).fill(2 + u))),
        devices: Array.from({ length: units }, (_, u) => `GPU-5e0c${String(u).padStart(4, "0")}-0000-0000-0000-000000000000`),
      };
      const signStarted = performance.now();
      let signature = await signCommit(providerWallet, domain, fields);
      for (let i = 1; i < 50; i++) signature = await signCommit(providerWallet, domain, fields);
      const signMs = (performance.now() - signStarted) / 50;
      const recoverStarted = performance.now();
      for (let i = 0; i < 200; i++)
        if (recoverDigestSigner(commitDigest(domain, fields), signature) !== providerWallet.address) throw new Error("commit signature did not recover");
      return { signMs, recoverMs: (performance.now() - recoverStarted) / 200 };
    };
    const commit1 = await commitCost(1);
    const commit8 = await commitCost(8);
    const commitSignMs = commit1.signMs;
    const commitRecoverMs = commit1.recoverMs;

    // Per class at the gpu preset: the provider's work grows with the class and the units; the attestor's check does not.
    const gpuProfile = challengeProfileSchema.parse({ preset: "gpu" });
    const perClass = Object.keys(INT8_DENSE_TOPS).flatMap((model) =>
      [1, 8].map((units) => {
        const params = deriveChallengeParams(gpuProfile, { model, units });
        return {
          model,
          units,
          rows: params.rows,
          rowsPerUnit: params.rowsPerUnit,
          providerOps: Number(params.ops),
          providerComputeMsAtRequiredRate: params.computeBudgetMs,
          deadlineMs: params.deadlineMs,
          // The Merkle tree over the rows (a runner recomputes an opened row rather than keep 4·cols bytes per row).
          providerTreeBytes: params.rows * 64,
          providerCommitSignMs: units === 1 ? commit1.signMs : commit8.signMs,
          attestorVerifyMs: (units === 1 ? gpuVerifyWorkersMs : gpuVerify8UnitsMs) ?? null,
          openRowsPerUnit: params.openRowsPerUnit,
          attestorVerifyMultiplyAdds: params.openRows * params.rounds * params.cols * params.cols,
          // One B per unit to generate (cols² elements each) besides the opened rows.
          attestorMatrixElements: units * params.cols * params.cols,
          attestorCommitRecoverMs: units === 1 ? commit1.recoverMs : commit8.recoverMs,
          openResponseMaxBytes: maxOpenResponseBytes(params.cols, params.openRows),
        };
      }),
    );
    console.log(
      `per class at the gpu preset, one sub-challenge per unit (efficiency per class from the calibration table; commit of 1 / 8 units: provider signs in ${commitSignMs.toFixed(2)} / ${commit8.signMs.toFixed(2)} ms, attestor recovers in ${commitRecoverMs.toFixed(3)} / ${commit8.recoverMs.toFixed(3)} ms)`,
    );
    console.log("  class                units   rows/unit  provider int8 ops  compute at required rate  deadline   trees held    attestor check (opened rows per unit)");
    for (const row of perClass) {
      console.log(
        `  ${row.model.padEnd(20)} ${String(row.units).padStart(5)}  ${String(row.rowsPerUnit).padStart(9)}  ${row.providerOps.toExponential(2).padStart(17)}  ${`${row.providerComputeMsAtRequiredRate} ms`.padStart(24)}  ${`${row.deadlineMs} ms`.padStart(9)}  ${`${(row.providerTreeBytes / 2 ** 20).toFixed(0)} MiB`.padStart(12)}   ${fmt(row.attestorVerifyMs ?? undefined)} (${row.openRowsPerUnit}), ${(row.openResponseMaxBytes / 1024).toFixed(0)} KiB in`,
      );
    }

    const memoryPerClass = memoryFigures();

    return {
      workers,
      perClass,
      memoryPerClass,
      verifyMsPerChallenge: { cpuDevnet: devnetVerifyMs, gpu: gpuVerifyMs ?? null, gpuOnWorkers: gpuVerifyWorkersMs ?? null, gpu8UnitsOnWorkers: gpuVerify8UnitsMs ?? null },
      verifyMultiplyAdds: { cpuDevnet: macs(devnetShape), gpu: macs(gpuShape) },
      cpuRunnerOpsPerSecond: { oneWorker: Math.round(oneWorker), allWorkers: Math.round(manyWorkers) },
      devnetChallengeMs,
    };
  } finally {
    await runner.close();
  }
}

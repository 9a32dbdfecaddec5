/**
 * Part of `npm run bench -- attest`: the memory phase's cost per class (common/attest/memory.ts)
 * and the `calibrate` path.
 *
 * - memoryFigures: per class and unit count at the default memory profile (real sizes), the
 *   provider's work (buffer, hash iterations of the fill, reads of the walks, the deadlines at the
 *   calibrated rates) and the attestor's (hash iterations to recompute the opened walks, measured
 *   here per walk on this CPU and multiplied out).
 * - calibrate (`npm run bench -- attest calibrate --model H100-80GB-SXM [--runner external
 *   --command ./suanli-cuda-runner] [--devices GPU-…,GPU-…] [--words N --walks W --steps L]`): runs a GEMM
 *   challenge on the runner and the memory phase's fill and walks (an external program's own, at
 *   the class's real size; the CPU memory runner's, small), and prints one calibration record
 *   (calibration.ts) to put in the table. With the CPU runners it measures this CPU, which is only useful to check the
 *   path; on a GPU host it is how an operator produces the table's figures.
 */
import { unitSubChallenges } from "../common/attest/units.js";
import { bytesToHex } from "viem";
import { INT8_DENSE_TOPS, unitInt8OpsPerSecond } from "../common/attest/params.js";
import { calibrationRecordSchema, CALIBRATION, type CalibrationRecord } from "../common/attest/calibration.js";
import { deriveMemoryParams, memoryProfileSchema, walkTimeWithMissingMs } from "../common/attest/memory-params.js";
import { memChallengeId, type MemChallenge } from "../common/attest/memory-messages.js";
import { recomputeWalk } from "../common/attest/memory.js";
import { challengeOps } from "../common/attest/arithmetic.js";
import { canonicalGpuName, findGpuModel } from "../common/gpu.js";
import { createRunner } from "../node/attest/create.js";
import { attestRunnerOptionsSchema, CpuMemoryRunner } from "../node/attest/runner/index.js";

const random32 = () => bytesToHex(globalThis.crypto.getRandomValues(new Uint8Array(32)));

function flag(args: string[], name: string): string | undefined {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
}

/** Milliseconds this CPU takes to recompute one walk of `steps` steps at `iterations` per word. */
function walkCheckMs(steps: number, iterations: number): number {
  const seed = globalThis.crypto.getRandomValues(new Uint8Array(32));
  const nonce = globalThis.crypto.getRandomValues(new Uint8Array(32));
  recomputeWalk(seed, nonce, 0, 1e9, Math.min(steps, 64), iterations);
  const rounds = 3;
  const started = performance.now();
  for (let i = 0; i < rounds; i++) recomputeWalk(seed, nonce, i, 1e9, steps, iterations);
  return (performance.now() - started) / rounds;
}

export function memoryFigures(): Record<string, unknown>[] {
  const profile = memoryProfileSchema.parse({});
  const perWalkMs = walkCheckMs(profile.stepsPerWalk, profile.hashIterations);
  const rows = Object.keys(INT8_DENSE_TOPS).flatMap((model) =>
    [1, 8].map((units) => {
      const vramMiB = findGpuModel(model)!.vramMiB;
      const params = deriveMemoryParams(profile, { model, units, vramMiB });
      const opened = params.openPerUnit.reduce((a, b) => a + b, 0);
      // What a card with half the claimed memory would need for the walks, at the claimed class's rates.
      const halfMemoryWalkMs = walkTimeWithMissingMs(params, params.words / 2, params);
      return {
        model,
        units,
        bufferGiBPerUnit: (params.words * 8) / 2 ** 30,
        providerFillHashesPerUnit: params.words * params.hashIterations,
        providerWalkReadsPerUnit: params.walks * params.steps,
        providerWalkResultBytesPerUnit: params.walks * 8,
        fillDeadlineMs: params.fillDeadlineMs,
        walkDeadlineMs: params.walkDeadlineMs,
        halfMemoryWalkMs: Math.round(halfMemoryWalkMs),
        attestorOpenedWalks: opened,
        attestorHashIterations: opened * params.steps * params.hashIterations,
        attestorCheckMs: Math.round(opened * perWalkMs),
      };
    }),
  );
  console.log(
    `memory phase at the default profile (${profile.fillFraction * 100} % of VRAM per unit in 8-byte words, K=${profile.hashIterations}, W=${profile.walksPerUnit}, L=${profile.stepsPerWalk}, efficiency ${profile.efficiency}; one opened walk costs the attestor ${perWalkMs.toFixed(1)} ms here)`,
  );
  console.log("  class                units  buffer/unit  fill deadline  walk deadline  walks at ½ memory  attestor: walks  check");
  for (const r of rows) {
    console.log(
      `  ${String(r.model).padEnd(20)} ${String(r.units).padStart(5)}  ${`${(r.bufferGiBPerUnit as number).toFixed(1)} GiB`.padStart(11)}  ${`${r.fillDeadlineMs} ms`.padStart(13)}  ${`${r.walkDeadlineMs} ms`.padStart(13)}  ${`${r.halfMemoryWalkMs} ms`.padStart(17)}  ${String(r.attestorOpenedWalks).padStart(15)}  ${`${r.attestorCheckMs} ms`.padStart(6)}`,
    );
  }
  return rows;
}

/** `attest calibrate`: measures the configured runners and prints one calibration record. */
export async function calibrate(args: string[]): Promise<CalibrationRecord> {
  const model = canonicalGpuName(flag(args, "--model") ?? "");
  if (!model) throw new Error("attest calibrate needs --model <canonical GPU model>, e.g. --model H100-80GB-SXM");
  const kind = flag(args, "--runner") === "external" ? "external" : "cpu";
  const command = flag(args, "--command");
  if (kind === "external" && !command) throw new Error("--runner external needs --command <program>");
  const workers = flag(args, "--workers");
  const runner = createRunner(attestRunnerOptionsSchema.parse({ kind, command, startTimeoutMs: 120_000, ...(workers ? { workers: Number(workers) } : {}) }));
  try {
    await runner.warm?.();
    const rows = Number(flag(args, "--rows") ?? (kind === "cpu" ? 256 : 65_536));
    const cols = Number(flag(args, "--cols") ?? (kind === "cpu" ? 256 : 4096));
    const rounds = Number(flag(args, "--rounds") ?? (kind === "cpu" ? 2 : 16));
    const started = performance.now();
    const id = random32();
    const commitment = await runner.computeCommit({ id, rowsPerUnit: rows, cols, rounds, units: unitSubChallenges(id, random32(), 1) });
    const gemmSeconds = (performance.now() - started) / 1000;
    const named = commitment.devices ?? [];
    await commitment.release();
    // The memory phase on the runner's own hardware: an external program's `mem-*` requests at the
    // default profile's real size for one unit of the class (90 % of its VRAM, W walks of L steps);
    // the CPU memory runner, with a small buffer, when the runner is the CPU one.
    const memoryRunner = runner.memory ?? new CpuMemoryRunner();
    const shape =
      kind === "external"
        ? deriveMemoryParams(memoryProfileSchema.parse({}), { model, units: 1, vramMiB: findGpuModel(model)!.vramMiB })
        : { words: 1 << 16, hashIterations: 256, walks: 256, steps: 256 };
    const words = Number(flag(args, "--words") ?? shape.words);
    const { hashIterations } = shape;
    const walks = Number(flag(args, "--walks") ?? shape.walks);
    const steps = Number(flag(args, "--steps") ?? shape.steps);
    const fields = { challengeId: random32(), seeds: [random32()], words, hashIterations, walks, steps, issuedAtMs: 0, fillDeadlineAtMs: 0, fillCutoffAtMs: 0 };
    const challenge: MemChallenge = { v: 1, type: "mem-challenge", ...fields, id: memChallengeId(fields) };
    const fillStarted = performance.now();
    const buffers = await memoryRunner.fill(challenge);
    const fillSeconds = (performance.now() - fillStarted) / 1000;
    const walkStarted = performance.now();
    await buffers.walk(random32());
    const walkSeconds = (performance.now() - walkStarted) / 1000;
    await buffers.release();
    const record = calibrationRecordSchema.parse({
      v: 1,
      model,
      measuredInt8OpsPerSecond: Number(challengeOps(rows, cols, rounds)) / gemmSeconds,
      datasheetInt8OpsPerSecond: unitInt8OpsPerSecond(model),
      measuredRandomReadsPerSecond: (walks * steps) / walkSeconds,
      measuredHashesPerSecond: (words * hashIterations) / fillSeconds,
      runner: runner.name,
      // The GPUs the runner named, unless the operator names them.
      devices: flag(args, "--devices")?.split(",").filter(Boolean) ?? [...named],
      measuredAt: new Date().toISOString(),
    });
    const table = CALIBRATION[model];
    console.log(JSON.stringify(record));
    console.log(
      `${model}: int8 efficiency ${(record.measuredInt8OpsPerSecond / record.datasheetInt8OpsPerSecond).toExponential(2)} (table: ${table?.int8Efficiency ?? "none"}, ${table?.source ?? "no entry"}); reads ${record.measuredRandomReadsPerSecond.toExponential(2)}/s; hashes ${record.measuredHashesPerSecond.toExponential(2)}/s`,
    );
    return record;
  } finally {
    await runner.close();
  }
}

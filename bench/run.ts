/**
 * `npm run bench -- <suite> [--json] [suite options]`. Each suite is bench/<suite>.ts exporting
 * `run(args: string[]): Promise<Record<string, unknown>>`; it prints its own human table and
 * returns a summary. With --json the summary is printed as one JSON object on the last line.
 *
 * Every suite but `gas` (gas is exact, whatever the machine) also gets a calibration figure from
 * the same run (bench/_calibration.ts: keccak-256 hashes and signer recoveries per CPU-second,
 * measured before and after the suite), and a suite that exports `mainFigures` gets each of
 * them divided by its calibration figure (`normalized`), the number that compares across
 * machines and across a busy and a quiet hour.
 */
import { readdir } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { stringifyPlain } from "../common/json.js";
import { calibrate, figureOf, type Calibration, type MainFigure } from "./_calibration.js";

const here = path.dirname(fileURLToPath(import.meta.url));
const suites = (await readdir(here)).filter((f) => f.endsWith(".ts") && f !== "run.ts" && !f.startsWith("_")).map((f) => f.slice(0, -3));

const [suite, ...rest] = process.argv.slice(2);
if (!suite || !suites.includes(suite)) {
  console.error(`usage: npm run bench -- <suite> [--json]\nsuites: ${suites.join(", ") || "(none yet)"}`);
  process.exit(2);
}
const json = rest.includes("--json");
const mod = (await import(path.join(here, `${suite}.ts`))) as { run(args: string[]): Promise<Record<string, unknown>>; mainFigures?: MainFigure[] };
const calibrated = suite !== "gas";
const before = calibrated ? await calibrate() : undefined;
let summary = await mod.run(rest.filter((a) => a !== "--json"));
if (before) {
  const after = await calibrate();
  const mean: Calibration = {
    keccakPerCpuSec: Math.round((before.keccakPerCpuSec + after.keccakPerCpuSec) / 2),
    recoverPerCpuSec: Math.round((before.recoverPerCpuSec + after.recoverPerCpuSec) / 2),
  };
  const normalized: Record<string, { value: number; per: keyof Calibration; ratio: number }> = {};
  for (const figure of mod.mainFigures ?? []) {
    const value = figureOf(summary, figure.field);
    if (value !== undefined) normalized[figure.field] = { value, per: figure.per, ratio: Number((value / mean[figure.per]).toPrecision(4)) };
  }
  console.log(
    `calibration (this thread, same run): ${mean.keccakPerCpuSec} keccak-256/CPU-s, ${mean.recoverPerCpuSec} signer recoveries/CPU-s (before ${before.keccakPerCpuSec} / ${before.recoverPerCpuSec}, after ${after.keccakPerCpuSec} / ${after.recoverPerCpuSec})`,
  );
  for (const [field, n] of Object.entries(normalized)) console.log(`normalized: ${field} ${n.value} / ${n.per} ${mean[n.per]} = ${n.ratio}`);
  summary = { ...summary, calibration: { ...mean, before, after }, normalized };
}
if (json) process.stdout.write(`${stringifyPlain({ suite, ...summary })}\n`);
process.exit(0);

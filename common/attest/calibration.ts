/**
 * Per-class calibration: what an honest runner on a card of each class reaches, the figures the
 * attestor's deadlines are derived from (compute efficiency of the int8 GEMM phase, random-read
 * and hash rates of the memory phase, common/attest/memory.ts).
 *
 * SOURCE OF THE BUILT-IN TABLE (read before trusting it): no GPU was measured to produce it. The
 * memory bandwidths are the vendors' datasheet figures; every other number is an estimate derived
 * from datasheets by the rules below, marked `source: "estimate"`:
 *
 * - `int8Efficiency`: the fraction of the datasheet dense int8 rate a cuBLASLt int8 GEMM with
 *   int32 accumulation sustains at n = 4096 (published vendor/community GEMM benchmarks put
 *   Hopper and Ampere data-center parts at 70–80 % and consumer/PCIe parts lower); 0.7 for
 *   data-center parts, 0.6 for the others.
 * - `randomReadsPerSecond`: one 32-byte DRAM sector per random 8-byte read, i.e. bandwidth / 32.
 * - `hashesPerSecond`: iterations of the memory phase's word function (two lowbias32 mixes and
 *   the chaining, about 16 int32 operations) at half the FP32 lane rate (the int32 share):
 *   FP32 TFLOPS · 10¹² / 2 / 16.
 *
 * An operator replaces an entry with measured figures from `npm run bench -- attest calibrate`
 * run on the real card (docs/attestation.md, "Calibration"); the attestor config's
 * `attest.challenge.classes.<model>.efficiency` overrides the compute efficiency at run time.
 *
 * Pure: no Node APIs.
 */
import { z } from "zod";
import { canonicalGpuName } from "../gpu.js";

export const calibrationEntrySchema = z.strictObject({
  /** Fraction of the datasheet dense int8 rate an honest runner sustains on the GEMM phase. */
  int8Efficiency: z.number().positive().max(1),
  /** Random 8-byte word reads per second over the whole device memory. */
  randomReadsPerSecond: z.number().positive(),
  /** Iterations of the memory phase's word function per second (throughput, all SMs). */
  hashesPerSecond: z.number().positive(),
  /** Device memory bandwidth from the datasheet, GB/s (documentation; deadlines use the rates above). */
  bandwidthGBs: z.number().positive(),
  /** `datasheet-estimate` (derived from datasheets as described above) or `measured` (a calibrate run). */
  source: z.enum(["datasheet-estimate", "measured"]),
  /** For measured entries: what ran, where and when (runner name, driver, date). */
  note: z.string().max(500).optional(),
});
export type CalibrationEntry = z.output<typeof calibrationEntrySchema>;

/** [bandwidth GB/s, FP32 TFLOPS, data-center part] from the vendors' datasheets. */
const DATASHEET: Readonly<Record<string, readonly [number, number, boolean]>> = {
  "H200-141GB": [4_800, 67, true],
  "H100-80GB-SXM": [3_350, 67, true],
  "H100-80GB-PCIE": [2_000, 51, true],
  "A100-80GB": [2_039, 19.5, true],
  "A100-40GB": [1_555, 19.5, true],
  "L40S-48GB": [864, 91.6, true],
  "L4-24GB": [300, 30.3, true],
  "A10-24GB": [600, 31.2, true],
  "RTX4090-24GB": [1_008, 82.6, false],
  "RTX3090-24GB": [936, 35.6, false],
  "T4-16GB": [320, 8.1, true],
  "V100-32GB": [900, 15.7, true],
  "MI325X-256GB": [6_000, 163.4, true],
  "MI300X-192GB": [5_300, 163.4, true],
  "MI250-64GB": [1_638, 24, true],
  "MI210-64GB": [1_638, 22.6, true],
  "W7900-48GB": [864, 61.3, false],
  "RX7900XTX-24GB": [960, 61.4, false],
};

/** Bytes of DRAM moved per random 8-byte read (one sector). */
export const SECTOR_BYTES = 32;
/** int32 operations per iteration of the word function (memory.ts). */
export const OPS_PER_HASH = 16;

function estimate([bandwidthGBs, fp32Tflops, dataCenter]: readonly [number, number, boolean]): CalibrationEntry {
  return {
    int8Efficiency: dataCenter ? 0.7 : 0.6,
    randomReadsPerSecond: (bandwidthGBs * 1e9) / SECTOR_BYTES,
    hashesPerSecond: (fp32Tflops * 1e12) / 2 / OPS_PER_HASH,
    bandwidthGBs,
    source: "datasheet-estimate",
  };
}

/** The built-in table (see the file comment for its source). */
export const CALIBRATION: Readonly<Record<string, CalibrationEntry>> = Object.fromEntries(Object.entries(DATASHEET).map(([model, figures]) => [model, estimate(figures)]));

/** Efficiency for a model the table does not know (the old single figure). */
export const FALLBACK_INT8_EFFICIENCY = 0.5;

/** The calibration of a model (MIG slices: the full GPU's entry), or undefined. */
export function calibrationFor(model: string, table: Readonly<Record<string, CalibrationEntry>> = CALIBRATION): CalibrationEntry | undefined {
  const canonical = canonicalGpuName(model);
  if (!canonical) return undefined;
  return table[canonical.split("/")[0]!];
}

/** One line a `calibrate` run prints: the measured figures of one card, to put in the table. */
export const calibrationRecordSchema = z.strictObject({
  v: z.literal(1),
  model: z.string().min(1).max(64),
  /** Measured int8 ops per second of one unit on the GEMM phase. */
  measuredInt8OpsPerSecond: z.number().positive(),
  /** Datasheet dense int8 ops per second of one unit: measured / datasheet is the efficiency. */
  datasheetInt8OpsPerSecond: z.number().positive(),
  measuredRandomReadsPerSecond: z.number().positive(),
  measuredHashesPerSecond: z.number().positive(),
  runner: z.string().max(200),
  devices: z.array(z.string().max(128)).max(64),
  measuredAt: z.string().max(64),
});
export type CalibrationRecord = z.output<typeof calibrationRecordSchema>;

/** Turns a calibrate run's record into a table entry (efficiency capped at 1). */
export function entryFromRecord(record: CalibrationRecord, bandwidthGBs: number): CalibrationEntry {
  const parsed = calibrationRecordSchema.parse(record);
  return calibrationEntrySchema.parse({
    int8Efficiency: Math.min(1, parsed.measuredInt8OpsPerSecond / parsed.datasheetInt8OpsPerSecond),
    randomReadsPerSecond: parsed.measuredRandomReadsPerSecond,
    hashesPerSecond: parsed.measuredHashesPerSecond,
    bandwidthGBs,
    source: "measured",
    note: `${parsed.runner} on ${parsed.devices.join(", ") || "unnamed devices"}, ${parsed.measuredAt}`.slice(0, 500),
  });
}

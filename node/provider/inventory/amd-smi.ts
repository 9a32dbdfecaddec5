/**
 * AMD GPUs: the `amd-smi` (ROCm 6+) and `rocm-smi` (older ROCm, deprecated) commands the
 * provider runs and pure parsers of their JSON outputs, tested on recordings of MI300X, MI250 and
 * Radeon machines (test/node/fixtures/amd-smi/). Both tools give the same per-GPU readings as the
 * NVIDIA path (`GpuReading`), so inventory grouping and metrics are shared.
 *
 * - {@link AMD_SMI_STATIC_ARGS}: identity (market name, device id, PCI address), VRAM size and
 *   the power cap (what idle power management restores).
 * - {@link AMD_SMI_METRIC_ARGS}: utilization, power, temperatures, VRAM in use; every sample.
 * - {@link ROCM_SMI_ARGS}: `rocm-smi --showallinfo --json`, all of the above in one object.
 *
 * amd-smi's JSON changed shape across releases: a top-level array (ROCm 6.0-6.3) or
 * `{"gpu_data": [...]}` (6.4+); a value is a number, `{"value": n, "unit": "..."}`, a string with
 * a unit ("42 C") or "N/A". The parsers take all of them. An MI250/MI250X package appears as two
 * GPUs (one per GCD); only one of them reports the package's power, the other "N/A".
 */
import { SuanliError } from "../../../common/errors.js";
import { canonicalGpuName } from "../../../common/gpu.js";
import type { GpuReading } from "./nvidia-smi.js";

export const AMD_SMI_STATIC_ARGS: readonly string[] = ["static", "--asic", "--bus", "--vram", "--board", "--limit", "--json"];
export const AMD_SMI_METRIC_ARGS: readonly string[] = ["metric", "--usage", "--power", "--temperature", "--mem-usage", "--json"];
export const ROCM_SMI_ARGS: readonly string[] = ["--showallinfo", "--json"];

export class AmdSmiParseError extends SuanliError {
  override name = "AmdSmiParseError";
}

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type JsonObject = { [key: string]: Json };

const isObject = (value: unknown): value is JsonObject => typeof value === "object" && value !== null && !Array.isArray(value);

/** A reading in any of amd-smi's spellings, as a number (null for "N/A" and the like). */
export function amdValue(value: Json | undefined): number | null {
  if (value === undefined || value === null) return null;
  if (typeof value === "number") return Number.isFinite(value) ? value : null;
  if (isObject(value)) return amdValue(value.value);
  if (typeof value === "string") {
    const match = /^\s*(-?\d+(?:\.\d+)?)\s*[A-Za-z%/]*\s*$/.exec(value);
    return match ? Number(match[1]) : null;
  }
  return null;
}

function parseJson(text: string, what: string): Json {
  // amd-smi may print warnings before the JSON ("WARNING: User is missing the following ..."): start at the JSON.
  const start = text.search(/[[{]/);
  if (start < 0) throw new AmdSmiParseError(`Cannot read ${what}: no JSON in the output`, { details: JSON.stringify(text.slice(0, 200)) });
  try {
    return JSON.parse(text.slice(start)) as Json;
  } catch (error) {
    throw new AmdSmiParseError(`Cannot read ${what}: ${(error as Error).message}`, { details: JSON.stringify(text.slice(start, start + 200)) });
  }
}

/** The per-GPU list of an amd-smi JSON output (either shape). */
function gpuList(text: string, what: string): JsonObject[] {
  const parsed = parseJson(text, what);
  const list = Array.isArray(parsed) ? parsed : isObject(parsed) && Array.isArray(parsed.gpu_data) ? parsed.gpu_data : null;
  if (!list) throw new AmdSmiParseError(`Cannot read ${what}: expected a list of GPUs or {"gpu_data": [...]}`);
  return list.map((entry, i) => {
    if (!isObject(entry) || typeof entry.gpu !== "number" || !Number.isInteger(entry.gpu) || entry.gpu < 0) {
      throw new AmdSmiParseError(`Cannot read ${what}: entry ${i} has no GPU index ("gpu")`);
    }
    return entry;
  });
}

const MIB = 1024 * 1024;

/**
 * The canonical model of an AMD GPU from the names the tools report (amd-smi `market_name`, the
 * board's `product_name`, rocm-smi's `Card Series` / `Device Name`), or null when Suanli does not
 * know it. rocm-smi names MI250s by package family ("AMD INSTINCT MI200 (MCM) OAM ...").
 */
export function amdCanonicalName(names: readonly (string | null | undefined)[]): string | null {
  const patterns: [RegExp, string][] = [
    [/MI325X/i, "MI325X-256GB"],
    [/MI300X/i, "MI300X-192GB"],
    [/MI250X?\b|MI200\s*\(MCM\)/i, "MI250-64GB"],
    [/MI210/i, "MI210-64GB"],
    [/W7900\b/i, "W7900-48GB"],
    [/RX\s*7900\s*XTX/i, "RX7900XTX-24GB"],
  ];
  for (const name of names) {
    if (!name) continue;
    const direct = canonicalGpuName(name.split(" / ")[0]!);
    if (direct && !direct.includes("/")) return direct;
    for (const [pattern, canonical] of patterns) if (pattern.test(name)) return canonical;
  }
  return null;
}

const str = (value: Json | undefined): string | null => (typeof value === "string" && value !== "N/A" && value.trim() !== "" ? value.trim() : null);

/**
 * GPUs from `amd-smi static --json` and (optionally) `amd-smi metric --json`, joined by GPU
 * index. The reported name is the market name; the uuid is `amd-<PCI address>` (stable across
 * reboots, unlike the enumeration index).
 */
export function parseAmdSmi(outputs: { static: string; metric?: string | undefined }): GpuReading[] {
  const metrics = new Map((outputs.metric ? gpuList(outputs.metric, "amd-smi metric") : []).map((entry) => [entry.gpu as number, entry]));
  return gpuList(outputs.static, "amd-smi static").map((entry) => {
    const index = entry.gpu as number;
    const asic = isObject(entry.asic) ? entry.asic : {};
    const board = isObject(entry.board) ? entry.board : {};
    const bus = isObject(entry.bus) ? entry.bus : {};
    const vram = isObject(entry.vram) ? entry.vram : {};
    const limit = isObject(entry.limit) ? entry.limit : {};
    const name = str(asic.market_name) ?? str(board.product_name);
    if (!name) throw new AmdSmiParseError(`Cannot read amd-smi static: GPU ${index} has no market name`);
    const memoryTotalMiB = amdValue(vram.size);
    if (memoryTotalMiB === null) throw new AmdSmiParseError(`Cannot read amd-smi static: GPU ${index} has no VRAM size`);
    const metric = metrics.get(index) ?? {};
    const usage = isObject(metric.usage) ? metric.usage : {};
    const power = isObject(metric.power) ? metric.power : {};
    const temperature = isObject(metric.temperature) ? metric.temperature : {};
    const memUsage = isObject(metric.mem_usage) ? metric.mem_usage : {};
    const bdf = str(bus.bdf);
    return {
      index,
      uuid: bdf ? `amd-${bdf.toLowerCase()}` : `amd-gpu-${index}`,
      name,
      memoryTotalMiB: Math.round(memoryTotalMiB),
      memoryUsedMiB: amdValue(memUsage.used_vram),
      utilizationPct: amdValue(usage.gfx_activity),
      // The junction ("hotspot") is what throttles; edge is absent on MI300.
      temperatureC: amdValue(temperature.hotspot) ?? amdValue(temperature.edge),
      powerDrawW: amdValue(power.socket_power) ?? amdValue(power.average_socket_power),
      // The cap in force ("socket_power" under "limit"), else the largest allowed.
      powerLimitW: amdValue(limit.socket_power) ?? amdValue(limit.max_power),
      migMode: "unsupported",
    } satisfies GpuReading;
  });
}

/** GPUs from `rocm-smi --showallinfo --json` (keys `card0`, `card1`, ...; `system` is skipped). */
export function parseRocmSmi(text: string): GpuReading[] {
  const parsed = parseJson(text, "rocm-smi");
  if (!isObject(parsed)) throw new AmdSmiParseError('Cannot read rocm-smi: expected an object of "cardN" entries');
  const out: GpuReading[] = [];
  for (const [key, card] of Object.entries(parsed)) {
    const match = /^card(\d+)$/.exec(key);
    if (!match) continue;
    if (!isObject(card)) throw new AmdSmiParseError(`Cannot read rocm-smi: ${key} is not an object`);
    const index = Number(match[1]);
    const series = str(card["Card Series"]) ?? str(card["Card series"]);
    const deviceName = str(card["Device Name"]);
    const name = series ?? deviceName;
    if (!name) throw new AmdSmiParseError(`Cannot read rocm-smi: ${key} has no Card Series or Device Name`);
    const totalBytes = amdValue(card["VRAM Total Memory (B)"]);
    if (totalBytes === null) throw new AmdSmiParseError(`Cannot read rocm-smi: ${key} has no "VRAM Total Memory (B)"`);
    const usedBytes = amdValue(card["VRAM Total Used Memory (B)"]);
    const bdf = str(card["PCI Bus"]);
    out.push({
      index,
      uuid: bdf ? `amd-${bdf.toLowerCase()}` : `amd-gpu-${index}`,
      // The series names MI250s by family; the device name is the marketing one on newer releases.
      name: amdCanonicalName([series]) || !deviceName ? name : deviceName,
      memoryTotalMiB: Math.round(totalBytes / MIB),
      memoryUsedMiB: usedBytes === null ? null : Math.round(usedBytes / MIB),
      utilizationPct: amdValue(card["GPU use (%)"]),
      temperatureC: amdValue(card["Temperature (Sensor junction) (C)"]) ?? amdValue(card["Temperature (Sensor edge) (C)"]),
      powerDrawW: amdValue(card["Current Socket Graphics Package Power (W)"]) ?? amdValue(card["Average Graphics Package Power (W)"]),
      powerLimitW: amdValue(card["Max Graphics Package Power (W)"]),
      migMode: "unsupported",
    });
  }
  return out.sort((a, b) => a.index - b.index);
}

/**
 * The GPU indices a node started under `ROCR_VISIBLE_DEVICES` / `HIP_VISIBLE_DEVICES` may use,
 * as ROCm applies them: ROCR selects among the physical GPUs (indices, or UUIDs `GPU-<hex>` that
 * this function cannot resolve and refuses), then HIP indexes into what ROCR left. Unset: all.
 * Throws AmdSmiParseError for an entry ROCm would reject, rather than selling the wrong GPUs.
 */
export function visibleAmdGpus(all: readonly number[], env: { ROCR_VISIBLE_DEVICES?: string; HIP_VISIBLE_DEVICES?: string }): number[] {
  let visible = [...all].sort((a, b) => a - b);
  const pick = (value: string | undefined, variable: string) => {
    if (value === undefined) return;
    const entries = value
      .split(",")
      .map((entry) => entry.trim())
      .filter((entry) => entry !== "");
    const picked: number[] = [];
    for (const entry of entries) {
      if (!/^\d{1,4}$/.test(entry))
        throw new AmdSmiParseError(`${variable} entry ${JSON.stringify(entry)} is not a device index; Suanli accepts comma-separated indices (0,1,...)`);
      const gpu = visible[Number(entry)];
      if (gpu === undefined) throw new AmdSmiParseError(`${variable} names device ${entry}, but only ${visible.length} are visible`);
      if (!picked.includes(gpu)) picked.push(gpu);
    }
    visible = picked;
  };
  pick(env.ROCR_VISIBLE_DEVICES, "ROCR_VISIBLE_DEVICES");
  pick(env.HIP_VISIBLE_DEVICES, "HIP_VISIBLE_DEVICES");
  return visible;
}

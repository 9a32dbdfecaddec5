/**
 * The `nvidia-smi` commands the provider runs and pure parsers of their text outputs. Kept free
 * of I/O so that they are tested on outputs recorded from real machines
 * (test/node/fixtures/nvidia-smi/).
 *
 * Three commands, chosen because each is cheap and its format has been stable across drivers:
 * - {@link GPU_QUERY_ARGS}: one CSV line per physical GPU (identity, memory, utilization,
 *   temperature, power, MIG mode). Run for the inventory and for every metrics sample.
 * - {@link LIST_ARGS} (`nvidia-smi -L`): the only output that names each MIG device's profile
 *   (`1g.10gb`) together with its `MIG-` UUID, which is what CUDA_VISIBLE_DEVICES takes.
 * - {@link TABLE_ARGS} (plain `nvidia-smi`): its "MIG devices" section is the only text output
 *   that gives each MIG device's own memory. Only read when a GPU has MIG enabled.
 */
import { NvidiaSmiParseError } from "../errors.js";

/** Fields of the per-GPU query, in output order. */
export const GPU_QUERY_FIELDS = [
  "index",
  "uuid",
  "name",
  "memory.total",
  "memory.used",
  "utilization.gpu",
  "temperature.gpu",
  "power.draw",
  "power.limit",
  "mig.mode.current",
] as const;

/** A `--query-gpu` line split into its fields, once its field count is checked. */
type StringsFor<Fields extends readonly string[]> = { -readonly [K in keyof Fields]: string };
type GpuQueryRow = StringsFor<typeof GPU_QUERY_FIELDS>;

export const GPU_QUERY_ARGS: readonly string[] = [`--query-gpu=${GPU_QUERY_FIELDS.join(",")}`, "--format=csv,noheader,nounits"];
export const LIST_ARGS: readonly string[] = ["-L"];
export const TABLE_ARGS: readonly string[] = [];

export type MigMode = "enabled" | "disabled" | "unsupported";

/** One physical GPU as the CSV query reports it. Missing values (`[N/A]`, `[Not Supported]`) are null. */
export type GpuReading = {
  index: number;
  uuid: string;
  /** The product name exactly as reported (`NVIDIA A100 80GB PCIe`). */
  name: string;
  memoryTotalMiB: number;
  memoryUsedMiB: number | null;
  utilizationPct: number | null;
  temperatureC: number | null;
  powerDrawW: number | null;
  powerLimitW: number | null;
  migMode: MigMode;
};

export type ListedMigDevice = {
  /** The MIG device's index within its GPU (`Device  3`). */
  deviceIndex: number;
  /** Profile name without the `MIG ` prefix: `1g.10gb`, `1c.3g.40gb`, `1g.10gb+me`. */
  profile: string;
  /** `MIG-<uuid>` on current drivers, `MIG-GPU-<uuid>/<gi>/<ci>` on R450/R460. */
  uuid: string;
};

export type ListedGpu = { index: number; name: string; uuid: string; migDevices: ListedMigDevice[] };

/** One row of the table's "MIG devices" section. */
export type MigMemoryRow = {
  gpuIndex: number;
  gpuInstanceId: number;
  computeInstanceId: number;
  /** Same index as `Device N` in `nvidia-smi -L`. */
  deviceIndex: number;
  memoryUsedMiB: number;
  memoryTotalMiB: number;
};

// nvidia-smi prints these (with or without brackets, depending on the driver) when a field has no value.
const MISSING = /^\[?(N\/A|Not Supported|Unknown Error|Insufficient Permissions|GPU is lost|Requested functionality has been deprecated)\]?$/i;

function optionalNumber(raw: string): number | null {
  const text = raw.trim();
  if (text === "" || MISSING.test(text)) return null;
  // Without `nounits` some drivers still append a unit; accept "81920 MiB", "67.03 W", "27 %".
  const match = /^(-?\d+(?:\.\d+)?)(?:\s*(?:MiB|W|%|C))?$/.exec(text);
  return match ? Number(match[1]) : null;
}

function migModeOf(raw: string): MigMode {
  const text = raw.trim().toLowerCase();
  if (text === "enabled") return "enabled";
  if (text === "disabled") return "disabled";
  return "unsupported";
}

/**
 * Parses the output of `nvidia-smi` with {@link GPU_QUERY_ARGS}. Blank lines are skipped; a line
 * whose index, UUID or total memory cannot be read throws NvidiaSmiParseError naming the line.
 * Any other field that is missing or odd (`[N/A]`, `[Not Supported]`) becomes null.
 */
export function parseGpuQuery(text: string): GpuReading[] {
  const out: GpuReading[] = [];
  for (const [i, line] of text.split(/\r?\n/).entries()) {
    if (line.trim() === "") continue;
    let fields = line.split(",").map((field) => field.trim());
    const expected = GPU_QUERY_FIELDS.length;
    if (fields.length > expected) {
      // A product name holding a comma: the name is field 2, so glue the surplus back into it.
      const extra = fields.length - expected;
      fields = [...fields.slice(0, 2), fields.slice(2, 3 + extra).join(", "), ...fields.slice(3 + extra)];
    }
    if (fields.length !== expected) {
      throw new NvidiaSmiParseError("the GPU query", i + 1, line, `expected ${expected} comma-separated fields (${GPU_QUERY_FIELDS.join(", ")}), found ${fields.length}`);
    }
    // One string per query field: the length was checked just above.
    const [index, uuid, name, memTotal, memUsed, util, temp, powerDraw, powerLimit, mig] = fields as GpuQueryRow;
    if (!/^\d+$/.test(index)) throw new NvidiaSmiParseError("the GPU query", i + 1, line, `index "${index}" is not a number`);
    if (!/^GPU-[0-9a-fA-F-]+$/.test(uuid)) throw new NvidiaSmiParseError("the GPU query", i + 1, line, `uuid "${uuid}" is not a GPU UUID`);
    const memoryTotalMiB = optionalNumber(memTotal);
    if (memoryTotalMiB === null) throw new NvidiaSmiParseError("the GPU query", i + 1, line, `memory.total "${memTotal}" is not a number`);
    out.push({
      index: Number(index),
      uuid,
      name,
      memoryTotalMiB,
      memoryUsedMiB: optionalNumber(memUsed),
      utilizationPct: optionalNumber(util),
      temperatureC: optionalNumber(temp),
      powerDrawW: optionalNumber(powerDraw),
      powerLimitW: optionalNumber(powerLimit),
      migMode: migModeOf(mig),
    });
  }
  return out;
}

const GPU_LINE = /^GPU\s+(\d+):\s+(.+?)\s+\(UUID:\s*(GPU-[0-9a-fA-F-]+)\)\s*$/;
const MIG_LINE = /^MIG\s+(\S+)\s+Device\s+(\d+):\s+\(UUID:\s*(MIG-[^)\s]+)\)\s*$/;

/**
 * Parses `nvidia-smi -L`. MIG lines belong to the GPU line above them. Lines that are neither
 * (warnings some drivers print) are ignored; a MIG line before any GPU line throws.
 */
export function parseGpuList(text: string): ListedGpu[] {
  const out: ListedGpu[] = [];
  for (const [i, raw] of text.split(/\r?\n/).entries()) {
    const line = raw.trim();
    if (line === "") continue;
    const gpu = GPU_LINE.exec(line);
    if (gpu) {
      // Every group of GPU_LINE and MIG_LINE is mandatory: a match has them all.
      out.push({ index: Number(gpu[1]), name: gpu[2]!, uuid: gpu[3]!, migDevices: [] });
      continue;
    }
    const mig = MIG_LINE.exec(line);
    if (mig) {
      const parent = out[out.length - 1];
      if (!parent) throw new NvidiaSmiParseError("nvidia-smi -L", i + 1, raw, "a MIG device is listed before any GPU");
      parent.migDevices.push({ profile: mig[1]!, deviceIndex: Number(mig[2]), uuid: mig[3]! });
    }
  }
  return out;
}

const MIG_ROW = /^\|\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+\|\s+(\d+)MiB\s*\/\s*(\d+)MiB\s+/;

/**
 * Reads the "MIG devices:" section of the default `nvidia-smi` table: one row per MIG device
 * with its memory use. The column widths changed between drivers; the row pattern
 * (`| GPU GI CI MIG | usedMiB / totalMiB ...`) did not. Returns [] when there is no such section.
 */
export function parseMigTable(text: string): MigMemoryRow[] {
  const out: MigMemoryRow[] = [];
  let inSection = false;
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.trim();
    if (/^\|\s*MIG devices:/.test(line)) {
      inSection = true;
      continue;
    }
    if (!inSection) continue;
    // The next section ("Processes:") ends this one.
    if (/^\|\s*[A-Za-z][A-Za-z ]*:\s*\|?$/.test(line) && !/MIG devices/.test(line)) break;
    const row = MIG_ROW.exec(line);
    if (row) {
      out.push({
        gpuIndex: Number(row[1]),
        gpuInstanceId: Number(row[2]),
        computeInstanceId: Number(row[3]),
        deviceIndex: Number(row[4]),
        memoryUsedMiB: Number(row[5]),
        memoryTotalMiB: Number(row[6]),
      });
    }
  }
  return out;
}

/**
 * A conservative memory size for a MIG profile when the table does not give one: the `Ngb` in
 * the profile name read as N·10^9 bytes, in MiB, rounded down. Real sizes are a little larger
 * (1g.10gb is 9728 MiB on an A100 80GB, this gives 9536), so an offer never promises more than
 * the slice has. Undefined when the name holds no size.
 */
export function nominalMigMemoryMiB(profile: string): number | undefined {
  const match = /(\d+)gb/i.exec(profile);
  if (!match) return undefined;
  return Math.floor((Number(match[1]) * 1e9) / 2 ** 20);
}

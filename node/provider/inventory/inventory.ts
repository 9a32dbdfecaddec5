/**
 * The machine's sellable units: whole GPUs, or MIG devices of GPUs in MIG mode, each with its
 * canonical model (common/gpu.ts), memory and the id CUDA takes in CUDA_VISIBLE_DEVICES.
 * Read from `nvidia-smi`, or declared in the config on machines without NVIDIA tools (labelled
 * `source: "declared"` until attested). Models `nvidia-smi` reports that Suanli does not know
 * are listed in `problems` and not offered: a wrong model name would put a wrong hash on-chain.
 */
import { keccak256, toBytes } from "viem";
import { execFileText } from "../../process/child.js";
import { z } from "zod";
import { canonicalGpuName, findGpuModel, knownGpuNames } from "../../../common/gpu.js";
import { interconnectSchema, type Interconnect } from "../../../common/offers/message.js";
import { NvidiaSmiFailedError, NvidiaSmiUnavailableError } from "../errors.js";
import {
  GPU_QUERY_ARGS,
  LIST_ARGS,
  TABLE_ARGS,
  nominalMigMemoryMiB,
  parseGpuList,
  parseGpuQuery,
  parseMigTable,
  type GpuReading,
  type ListedGpu,
  type MigMemoryRow,
} from "./nvidia-smi.js";

export type InventorySource = "nvidia-smi" | "amd-smi" | "rocm-smi" | "declared";

export type InventoryUnit = {
  /** Stable id: the GPU or MIG UUID; for declared units `declared:<machine>:<n>`. */
  id: string;
  kind: "gpu" | "mig";
  /** Canonical model (`A100-80GB`, `A100-80GB/1g.10gb`), or null when Suanli does not know it. */
  model: string | null;
  /** The name as the source gave it (`NVIDIA A100 80GB PCIe`). */
  reportedName: string;
  vramMiB: number;
  /** Where vramMiB comes from: measured, derived from the MIG profile name, or declared. */
  vramSource: "nvidia-smi" | "amd-smi" | "rocm-smi" | "profile" | "declared";
  /** The entry for CUDA_VISIBLE_DEVICES (a GPU/MIG UUID, or a declared index); for AMD GPUs the ROCm device index. */
  device: string;
  /** Index of the physical GPU (null for declared units). */
  gpuIndex: number | null;
  migProfile: string | null;
  /** The MIG device's index within its GPU (`Device N` in `nvidia-smi -L`); null for whole GPUs. */
  migDeviceIndex: number | null;
  /** Units sharing a machine key form one on-chain machine (same model, interconnect, region). */
  machineKey: string;
  /** AMD GPUs: the /dev/dri render node a container needs (beside /dev/kfd) to reach this GPU. */
  renderNode?: string;
};

/** One on-chain machine: units of one model on one host (ProviderRegistry.addMachine). */
export type MachineGroup = {
  key: string;
  model: string;
  units: string[];
  /** Smallest memory among the units: what every unit of the machine can promise. */
  vramMiB: number;
  interconnect: Interconnect;
  region: string;
  /** The cluster the machine belongs to (keccak256 of its configured name), for group jobs; absent when standalone. */
  cluster?: `0x${string}`;
};

export type Inventory = {
  source: InventorySource;
  units: InventoryUnit[];
  /** Offerable units grouped per machine; units with an unknown model are left out. */
  machines: MachineGroup[];
  /** Raw per-GPU readings (empty for a declared inventory). */
  gpus: GpuReading[];
  /** One line per thing the operator should know: unknown models, MIG GPUs without devices. */
  problems: string[];
};

const modelNameSchema = z
  .string()
  .min(1)
  .refine((name) => canonicalGpuName(name) !== undefined, {
    error: (issue) => `unknown GPU model "${String(issue.input)}"; known: ${knownGpuNames().join(", ")} (MIG slices as <model>/<profile>)`,
  })
  .transform((name) => canonicalGpuName(name)!);

/** One machine declared in the config (machines without nvidia-smi, or to override detection). */
export const declaredMachineSchema = z
  .strictObject({
    /** Model name or alias (`A100`, `A100-80GB`, a MIG slice `A100-80GB/1g.10gb`). */
    model: modelNameSchema,
    /** Number of units (GPUs or slices) of this model on the machine. */
    count: z.number().int().min(1).max(256),
    /** Memory per unit in MiB; default: the model's memory (required for MIG slices). */
    vramMiB: z.number().int().min(1).optional(),
    interconnect: interconnectSchema.default("none"),
    region: z.string().min(1).max(32).default("unknown"),
    /** CUDA_VISIBLE_DEVICES entry of each unit, in order; default "0", "1", ... */
    devices: z.array(z.string().min(1).max(128)).optional(),
    /**
     * Name of the cluster this machine belongs to (machines on one fast interconnect): renters'
     * multi-machine jobs (`colocation: "cluster"`) span machines of one cluster. Declared on-chain
     * as keccak256 of the name.
     */
    cluster: z.string().min(1).max(64).optional(),
  })
  .superRefine((machine, ctx) => {
    if (machine.model.includes("/") && machine.vramMiB === undefined) {
      ctx.addIssue({ code: "custom", path: ["vramMiB"], message: "required for a MIG slice (the memory of one slice in MiB)" });
    }
    if (machine.devices && machine.devices.length !== machine.count) {
      ctx.addIssue({ code: "custom", path: ["devices"], message: `must list exactly count (${machine.count}) devices` });
    }
  });
export type DeclaredMachine = z.output<typeof declaredMachineSchema>;

/** Runs a command; the default spawns a real child process. Injected so tests can play recordings. */
export type CommandRunner = (file: string, args: readonly string[], options: { timeoutMs: number }) => Promise<{ stdout: string; stderr: string; exitCode: number | null }>;

/** The default runner: execFile with a timeout and a bounded output buffer. */
export const execRunner: CommandRunner = (file, args, { timeoutMs }) =>
  new Promise((resolve, reject) => {
    execFileText(file, [...args], { timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) => {
      if (error && (error as NodeJS.ErrnoException).code === "ENOENT") return reject(new NvidiaSmiUnavailableError(file, error));
      if (error) {
        const code = typeof error.code === "number" ? error.code : null;
        return resolve({ stdout, stderr, exitCode: code });
      }
      resolve({ stdout, stderr, exitCode: 0 });
    });
  });

export type NvidiaSmiOptions = {
  /** Path or name of the binary. */
  nvidiaSmiPath?: string;
  commandTimeoutMs?: number;
  runner?: CommandRunner;
};

async function runSmi(args: readonly string[], options: NvidiaSmiOptions): Promise<string> {
  const runner = options.runner ?? execRunner;
  const file = options.nvidiaSmiPath ?? "nvidia-smi";
  const result = await runner(file, args, { timeoutMs: options.commandTimeoutMs ?? 10_000 });
  if (result.exitCode !== 0) throw new NvidiaSmiFailedError([...args], result.exitCode, `${result.stdout}\n${result.stderr}`);
  return result.stdout;
}

export type NvidiaSmiOutputs = {
  query: string;
  /** `nvidia-smi -L`; needed when a GPU is in MIG mode. */
  list?: string | undefined;
  /** Plain `nvidia-smi`; gives MIG devices' memory. */
  table?: string | undefined;
};

export type MachinePlacement = { interconnect?: Interconnect; region?: string };

export function machineKeyOf(model: string, interconnect: Interconnect, region: string): string {
  return `${model}|${interconnect}|${region}`;
}

/** Builds the inventory from recorded or live `nvidia-smi` outputs (pure). */
export function inventoryFromNvidiaSmi(outputs: NvidiaSmiOutputs, placement: MachinePlacement = {}): Inventory {
  const interconnect = placement.interconnect ?? "none";
  const region = placement.region ?? "unknown";
  const gpus = parseGpuQuery(outputs.query);
  const listed: ListedGpu[] = outputs.list ? parseGpuList(outputs.list) : [];
  const migRows: MigMemoryRow[] = outputs.table ? parseMigTable(outputs.table) : [];
  const units: InventoryUnit[] = [];
  const problems: string[] = [];

  for (const gpu of gpus) {
    const canonical = canonicalGpuName(gpu.name) ?? null;
    if (canonical === null) {
      problems.push(`GPU ${gpu.index} "${gpu.name}" (${gpu.uuid}) is not a model Suanli knows, so it is not offered. Known models: ${knownGpuNames().join(", ")}.`);
    }
    if (gpu.migMode !== "enabled") {
      units.push({
        id: gpu.uuid,
        kind: "gpu",
        model: canonical,
        reportedName: gpu.name,
        vramMiB: gpu.memoryTotalMiB,
        vramSource: "nvidia-smi",
        device: gpu.uuid,
        gpuIndex: gpu.index,
        migProfile: null,
        migDeviceIndex: null,
        machineKey: canonical ? machineKeyOf(canonical, interconnect, region) : "",
      });
      continue;
    }
    const entry = listed.find((item) => item.uuid === gpu.uuid);
    if (!entry || entry.migDevices.length === 0) {
      problems.push(
        `GPU ${gpu.index} "${gpu.name}" has MIG enabled but no MIG devices${outputs.list ? "" : " were listed (nvidia-smi -L missing)"}; create MIG instances or disable MIG to offer it.`,
      );
      continue;
    }
    for (const mig of entry.migDevices) {
      const row = migRows.find((candidate) => candidate.gpuIndex === gpu.index && candidate.deviceIndex === mig.deviceIndex);
      const nominal = nominalMigMemoryMiB(mig.profile);
      const vramMiB = row?.memoryTotalMiB ?? nominal;
      if (vramMiB === undefined) {
        problems.push(`MIG device ${mig.deviceIndex} of GPU ${gpu.index} (profile "${mig.profile}") has no readable memory size; it is not offered.`);
        continue;
      }
      const model = canonical ? `${canonical}/${mig.profile}` : null;
      units.push({
        id: mig.uuid,
        kind: "mig",
        model,
        reportedName: `${gpu.name} MIG ${mig.profile}`,
        vramMiB,
        vramSource: row ? "nvidia-smi" : "profile",
        device: mig.uuid,
        gpuIndex: gpu.index,
        migProfile: mig.profile,
        migDeviceIndex: mig.deviceIndex,
        machineKey: model ? machineKeyOf(model, interconnect, region) : "",
      });
    }
  }
  return { source: "nvidia-smi", units, machines: groupMachines(units, { interconnect, region }), gpus, problems };
}

/** Builds the inventory a config declares (no probing). */
export function inventoryFromDeclared(machines: readonly DeclaredMachine[]): Inventory {
  const units: InventoryUnit[] = [];
  const groups: MachineGroup[] = [];
  machines.forEach((machine, machineIndex) => {
    const info = findGpuModel(machine.model);
    const vramMiB = machine.vramMiB ?? info!.vramMiB;
    const key = `${machineKeyOf(machine.model, machine.interconnect, machine.region)}|${machineIndex}`;
    const ids: string[] = [];
    for (let n = 0; n < machine.count; n++) {
      const id = `declared:${machineIndex}:${n}`;
      ids.push(id);
      units.push({
        id,
        kind: machine.model.includes("/") ? "mig" : "gpu",
        model: machine.model,
        reportedName: machine.model,
        vramMiB,
        vramSource: "declared",
        device: machine.devices?.[n] ?? String(n),
        gpuIndex: null,
        migProfile: machine.model.split("/")[1] ?? null,
        migDeviceIndex: null,
        machineKey: key,
      });
    }
    groups.push({
      key,
      model: machine.model,
      units: ids,
      vramMiB,
      interconnect: machine.interconnect,
      region: machine.region,
      ...(machine.cluster ? { cluster: keccak256(toBytes(machine.cluster)) } : {}),
    });
  });
  return { source: "declared", units, machines: groups, gpus: [], problems: [] };
}

export function groupMachines(units: readonly InventoryUnit[], placement: { interconnect: Interconnect; region: string }): MachineGroup[] {
  const groups = new Map<string, MachineGroup>();
  for (const unit of units) {
    if (unit.model === null) continue;
    const group = groups.get(unit.machineKey);
    if (group) {
      group.units.push(unit.id);
      group.vramMiB = Math.min(group.vramMiB, unit.vramMiB);
    } else {
      groups.set(unit.machineKey, { key: unit.machineKey, model: unit.model, units: [unit.id], vramMiB: unit.vramMiB, ...placement });
    }
  }
  return [...groups.values()];
}

/**
 * Probes the machine with `nvidia-smi`: the GPU query always, `-L` and the table only when a GPU
 * is in MIG mode. A failing table read is not fatal (MIG memory then comes from the profile name).
 */
export async function detectInventory(options: NvidiaSmiOptions & MachinePlacement = {}): Promise<Inventory> {
  const query = await runSmi(GPU_QUERY_ARGS, options);
  const needsMig = parseGpuQuery(query).some((gpu) => gpu.migMode === "enabled");
  let list: string | undefined;
  let table: string | undefined;
  if (needsMig) {
    list = await runSmi(LIST_ARGS, options);
    table = await runSmi(TABLE_ARGS, options).catch(() => undefined);
  }
  return inventoryFromNvidiaSmi({ query, list, table }, options);
}

/** Metrics of one unit at one moment, for heartbeats and the metrics endpoint. */
export type UnitMetrics = {
  unitId: string;
  memoryUsedMiB: number | null;
  memoryTotalMiB: number;
  /** Whole-GPU utilization; null for MIG devices (nvidia-smi does not report it per slice). */
  utilizationPct: number | null;
  /** Temperature and power are per physical GPU, shared by its MIG devices. */
  temperatureC: number | null;
  powerDrawW: number | null;
  powerLimitW: number | null;
};

export type MetricsSample = { at: number; gpus: GpuReading[]; mig: MigMemoryRow[] };

/** Takes one metrics sample: the GPU query, plus the table when a GPU is in MIG mode. */
export async function sampleGpuMetrics(options: NvidiaSmiOptions = {}): Promise<MetricsSample> {
  const query = await runSmi(GPU_QUERY_ARGS, options);
  const gpus = parseGpuQuery(query);
  const mig = gpus.some((gpu) => gpu.migMode === "enabled") ? parseMigTable(await runSmi(TABLE_ARGS, options).catch(() => "")) : [];
  return { at: Date.now(), gpus, mig };
}

/** Maps a sample onto inventory units (by GPU UUID, and by GPU index + MIG device index). */
export function metricsForUnits(sample: MetricsSample, units: readonly InventoryUnit[]): UnitMetrics[] {
  const out: UnitMetrics[] = [];
  for (const unit of units) {
    if (unit.gpuIndex === null) continue;
    const gpu = sample.gpus.find((candidate) => candidate.index === unit.gpuIndex);
    if (!gpu) continue;
    if (unit.kind === "gpu") {
      out.push({
        unitId: unit.id,
        memoryUsedMiB: gpu.memoryUsedMiB,
        memoryTotalMiB: gpu.memoryTotalMiB,
        utilizationPct: gpu.utilizationPct,
        temperatureC: gpu.temperatureC,
        powerDrawW: gpu.powerDrawW,
        powerLimitW: gpu.powerLimitW,
      });
    } else {
      const row = sample.mig.find((candidate) => candidate.gpuIndex === unit.gpuIndex && candidate.deviceIndex === unit.migDeviceIndex);
      out.push({
        unitId: unit.id,
        memoryUsedMiB: row?.memoryUsedMiB ?? null,
        memoryTotalMiB: row?.memoryTotalMiB ?? unit.vramMiB,
        utilizationPct: null,
        temperatureC: gpu.temperatureC,
        powerDrawW: gpu.powerDrawW,
        powerLimitW: gpu.powerLimitW,
      });
    }
  }
  return out;
}

/**
 * The inventory and metrics of AMD machines, from `amd-smi` or `rocm-smi` (parsers in
 * amd-smi.ts). One unit per GPU as ROCm enumerates it (an MI250 package is two units, one per
 * GCD); its device entry is the ROCm index, which tasks get in ROCR_VISIBLE_DEVICES /
 * HIP_VISIBLE_DEVICES and containers as the GPU's /dev/dri render node. A node started under
 * ROCR_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES offers only the GPUs those leave visible.
 */
import { realpathSync } from "node:fs";
import { SuanliError } from "../../../common/errors.js";
import { knownGpuNames } from "../../../common/gpu.js";
import { NvidiaSmiUnavailableError } from "../errors.js";
import { AMD_SMI_METRIC_ARGS, AMD_SMI_STATIC_ARGS, ROCM_SMI_ARGS, amdCanonicalName, parseAmdSmi, parseRocmSmi, visibleAmdGpus } from "./amd-smi.js";
import { execRunner, groupMachines, machineKeyOf, type CommandRunner, type Inventory, type InventoryUnit, type MachinePlacement, type MetricsSample } from "./inventory.js";
import type { GpuReading } from "./nvidia-smi.js";

export type AmdTool = "amd-smi" | "rocm-smi";

/** The AMD tool is missing, failed or timed out. */
export class AmdSmiFailedError extends SuanliError {
  override name = "AmdSmiFailedError";
}

export type AmdSmiOptions = {
  tool: AmdTool;
  /** The binary, by name on PATH or by path. */
  path?: string;
  commandTimeoutMs?: number;
  runner?: CommandRunner;
  /** ROCR_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES of the node (default: its own environment). */
  env?: { ROCR_VISIBLE_DEVICES?: string; HIP_VISIBLE_DEVICES?: string };
};

async function run(options: AmdSmiOptions, args: readonly string[]): Promise<string> {
  const file = options.path ?? options.tool;
  let result;
  try {
    result = await (options.runner ?? execRunner)(file, args, { timeoutMs: options.commandTimeoutMs ?? 10_000 });
  } catch (error) {
    if (error instanceof NvidiaSmiUnavailableError) {
      throw new AmdSmiFailedError(`${options.tool} was not found (tried "${file}")`, {
        cause: error,
        metaMessages: [
          `Install ROCm's ${options.tool}, set provider.inventory.${options.tool === "amd-smi" ? "amdSmiPath" : "rocmSmiPath"},`,
          'or declare the machine: provider.inventory.source = "declared".',
        ],
      });
    }
    throw error;
  }
  if (result.exitCode !== 0) {
    const firstLine = `${result.stdout}\n${result.stderr}`
      .split("\n")
      .find((line) => line.trim() !== "")
      ?.trim();
    throw new AmdSmiFailedError(`${file} ${args.join(" ")} failed${result.exitCode === null ? " (timed out or killed)" : ` with exit code ${result.exitCode}`}`, {
      details: firstLine,
    });
  }
  return result.stdout;
}

/** Reads every GPU once (identity and metrics). */
export async function readAmdGpus(options: AmdSmiOptions, withMetrics = true): Promise<GpuReading[]> {
  if (options.tool === "rocm-smi") return parseRocmSmi(await run(options, ROCM_SMI_ARGS));
  const staticText = await run(options, AMD_SMI_STATIC_ARGS);
  const metric = withMetrics ? await run(options, AMD_SMI_METRIC_ARGS) : undefined;
  return parseAmdSmi({ static: staticText, metric });
}

/**
 * The render node of a GPU from its PCI address: the /dev/dri/by-path link the kernel makes,
 * resolved (containers need the node's own name, which ROCm opens by its minor number). Falls
 * back to renderD<128 + index>, the numbering on hosts whose only DRM devices are these GPUs.
 */
export function renderNodeOf(gpu: GpuReading, resolve: (link: string) => string | undefined = resolveLink): string {
  const bdf = gpu.uuid.startsWith("amd-") && !gpu.uuid.startsWith("amd-gpu-") ? gpu.uuid.slice(4) : undefined;
  return (bdf && resolve(`/dev/dri/by-path/pci-${bdf}-render`)) || `/dev/dri/renderD${128 + gpu.index}`;
}

function resolveLink(link: string): string | undefined {
  try {
    return realpathSync(link);
  } catch {
    return undefined;
  }
}

/** Builds the inventory from AMD readings (pure but for `resolve`): visible GPUs only, unknown models listed as problems. */
export function inventoryFromAmd(
  gpus: readonly GpuReading[],
  tool: AmdTool,
  placement: MachinePlacement & { env?: AmdSmiOptions["env"]; resolve?: (link: string) => string | undefined } = {},
): Inventory {
  const interconnect = placement.interconnect ?? "none";
  const region = placement.region ?? "unknown";
  const visible = new Set(
    visibleAmdGpus(
      gpus.map((gpu) => gpu.index),
      placement.env ?? {},
    ),
  );
  const units: InventoryUnit[] = [];
  const problems: string[] = [];
  for (const gpu of gpus) {
    if (!visible.has(gpu.index)) continue;
    const model = amdCanonicalName([gpu.name]);
    if (model === null)
      problems.push(`GPU ${gpu.index} "${gpu.name}" (${gpu.uuid}) is not a model Suanli knows, so it is not offered. Known models: ${knownGpuNames().join(", ")}.`);
    units.push({
      id: gpu.uuid,
      kind: "gpu",
      model,
      reportedName: gpu.name,
      vramMiB: gpu.memoryTotalMiB,
      vramSource: tool,
      device: String(gpu.index),
      gpuIndex: gpu.index,
      migProfile: null,
      migDeviceIndex: null,
      machineKey: model ? machineKeyOf(model, interconnect, region) : "",
      renderNode: renderNodeOf(gpu, placement.resolve ?? (() => undefined)),
    });
  }
  return { source: tool, units, machines: groupMachines(units, { interconnect, region }), gpus: gpus.filter((gpu) => visible.has(gpu.index)), problems };
}

export async function detectAmdInventory(options: AmdSmiOptions & MachinePlacement): Promise<Inventory> {
  const env = options.env ?? { ROCR_VISIBLE_DEVICES: process.env.ROCR_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES: process.env.HIP_VISIBLE_DEVICES };
  return inventoryFromAmd(await readAmdGpus(options, false), options.tool, { ...options, env, resolve: resolveLink });
}

/** One metrics sample (temperature, power, utilization, VRAM in use) for metricsForUnits. */
export async function sampleAmdMetrics(options: AmdSmiOptions): Promise<MetricsSample> {
  return { at: Date.now(), gpus: await readAmdGpus(options, true), mig: [] };
}

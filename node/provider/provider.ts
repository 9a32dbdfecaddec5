/**
 * The provider's local building blocks put together from its config: the inventory, the task
 * runtime and the capacity manager. The chain and p2p parts (leases, reserve protocol,
 * registration) sit on top of these.
 *
 * @example
 * import { loadInventory, createRuntime, createCapacityManager } from "./provider.js";
 * const inventory = await loadInventory(config.provider);
 * const runtime = createRuntime(config.provider, { dataDir: config.dataDir, logger });
 * const capacity = createCapacityManager(config.provider, inventory, logger);
 * await capacity.start(); // idle workload on every unit
 * await capacity.assign(leaseId, unitIds, "ai"); // idle work stopped
 * const task = await runtime.prepare({ taskId: leaseId, spec, devices, durationMs });
 * capacity.attachTask(leaseId, task);
 * await task.start();
 */
import { homedir } from "node:os";
import path from "node:path";
import type { Logger } from "../log/logger.js";
import { CapacityManager } from "./capacity/capacity-manager.js";
import { detectInventory, inventoryFromDeclared, metricsForUnits, sampleGpuMetrics, type CommandRunner, type Inventory, type UnitMetrics } from "./inventory/inventory.js";
import type { ProviderOptions } from "./options.js";
import { detectAmdInventory, sampleAmdMetrics, type AmdSmiOptions } from "./inventory/amd.js";
import { ContainerRuntime } from "./runtime/container-runtime.js";
import { ProcessRuntime } from "./runtime/process-runtime.js";
import { hostUnits, leasedBoundsOptions } from "./runtime/host-resources.js";
import type { Runtime } from "./runtime/runtime.js";

/** Reads the inventory the config asks for: nvidia-smi, amd-smi, rocm-smi, or the declared machines. */
export async function loadInventory(options: ProviderOptions, runner?: CommandRunner): Promise<Inventory> {
  if (options.inventory.source === "declared") return inventoryFromDeclared(options.inventory.declared);
  if (options.inventory.source === "amd-smi" || options.inventory.source === "rocm-smi") {
    return detectAmdInventory({ ...amdOptions(options, runner), region: options.inventory.region, interconnect: options.inventory.interconnect });
  }
  return detectInventory({
    nvidiaSmiPath: options.inventory.nvidiaSmiPath,
    commandTimeoutMs: options.inventory.commandTimeoutMs,
    runner,
    region: options.inventory.region,
    interconnect: options.inventory.interconnect,
  });
}

function amdOptions(options: ProviderOptions, runner?: CommandRunner): AmdSmiOptions {
  const tool = options.inventory.source as AmdSmiOptions["tool"];
  return { tool, path: tool === "amd-smi" ? options.inventory.amdSmiPath : options.inventory.rocmSmiPath, commandTimeoutMs: options.inventory.commandTimeoutMs, runner };
}

/** A sampler of the leased devices' GPU metrics for task usage (probed inventories only). */
export function gpuSampler(options: ProviderOptions, inventory: Inventory, runner?: CommandRunner): ((devices: string[]) => Promise<UnitMetrics[]>) | undefined {
  if (inventory.source === "amd-smi" || inventory.source === "rocm-smi") {
    return async (devices) =>
      metricsForUnits(
        await sampleAmdMetrics(amdOptions(options, runner)),
        inventory.units.filter((unit) => devices.includes(unit.device)),
      );
  }
  if (inventory.source !== "nvidia-smi") return undefined;
  return async (devices) => {
    const sample = await sampleGpuMetrics({ nvidiaSmiPath: options.inventory.nvidiaSmiPath, commandTimeoutMs: options.inventory.commandTimeoutMs, runner });
    return metricsForUnits(
      sample,
      inventory.units.filter((unit) => devices.includes(unit.device)),
    );
  };
}

/** The runtime the config selects, with the config's limits, sandbox and grace period. */
export function createRuntime(
  options: ProviderOptions,
  context: {
    dataDir: string;
    logger?: Logger;
    sampleGpus?: (devices: string[]) => Promise<UnitMetrics[]>;
    /** More of the node's own files to keep out of the sandbox (the config file); the data dir and home always are. */
    hiddenPaths?: string[];
    inventory?: Inventory;
  },
): Runtime {
  const workspaceRoot = options.workspaceDir ?? path.join(context.dataDir, "workspaces");
  const { limits } = options;
  // Each lease is sized from what the offers declare per unit (host-resources.ts).
  const bounds = leasedBoundsOptions(options.runtime.bounds, hostUnits(context.inventory));
  const common = {
    workspaceRoot,
    network: options.runtime.network,
    limits: {
      memoryBytes: limits.memoryBytes,
      cpuSeconds: limits.cpuSeconds,
      fileSizeBytes: limits.fileSizeBytes,
      processes: limits.processes,
      openFiles: limits.openFiles,
    },
    bundle: { maxBytes: limits.bundleMaxBytes, maxUnpackedBytes: limits.unpackedMaxBytes, maxEntries: limits.bundleMaxEntries, fetchTimeoutMs: limits.bundleFetchTimeoutMs },
    logs: { maxLines: limits.logLines, maxLineChars: limits.logLineChars },
    stopGraceMs: options.grace.taskStopMs,
    sampleGpus: context.sampleGpus,
    logger: context.logger,
  };
  if (options.runtime.kind === "container") {
    const renderNodes = new Map((context.inventory?.units ?? []).filter((unit) => unit.renderNode).map((unit) => [unit.device, unit.renderNode!]));
    const amdRenderNode = renderNodes.size > 0 ? (device: string) => renderNodes.get(device) ?? `/dev/dri/renderD${128 + Number(device)}` : undefined;
    const gpus = options.runtime.containerGpus === "auto";
    return new ContainerRuntime({
      ...common,
      engine: options.runtime.containerEngine,
      ...(options.runtime.ociRuntime === "auto" ? {} : { ociRuntimes: [options.runtime.ociRuntime] }),
      networkAllow: options.runtime.networkAllow,
      perUnit: options.runtime.containerPerUnit,
      bounds,
      extraArgs: options.runtime.containerArgs,
      taskUser: options.runtime.taskUser,
      gpus,
      // The self-test passes every unit's device: one the engine cannot resolve is found at start.
      probeDevices: gpus ? (context.inventory?.units ?? []).map((unit) => unit.device) : [],
      fetchPolicy: options.fetch,
      amdRenderNode,
      images: { cacheBytes: options.runtime.imageCacheBytes, insecureRegistries: options.runtime.insecureRegistries },
    });
  }
  return new ProcessRuntime({
    ...common,
    sandbox: options.runtime.sandbox,
    bwrapPath: options.runtime.bwrapPath,
    readOnlyPaths: options.runtime.readOnlyPaths,
    taskUser: options.runtime.taskUser,
    pastaPath: options.runtime.pastaPath,
    bounds,
    networkAllow: options.runtime.networkAllow,
    fetchPolicy: options.fetch,
    // Other renters' workspaces and kept outputs too, wherever the operator put them (each task's
    // own workspace is bound back over the mask).
    hiddenPaths: [
      path.resolve(context.dataDir),
      homedir(),
      path.resolve(workspaceRoot),
      ...(options.outputs.dir ? [path.resolve(options.outputs.dir)] : []),
      ...(context.hiddenPaths ?? []),
    ],
  });
}

/** A capacity manager over the inventory's offerable units, running the configured idle workload. */
export function createCapacityManager(options: ProviderOptions, inventory: Inventory, logger?: Logger): CapacityManager {
  const offered = new Set(inventory.machines.flatMap((machine) => machine.units));
  return new CapacityManager({
    units: inventory.units.filter((unit) => offered.has(unit.id)).map((unit) => ({ id: unit.id, device: unit.device })),
    idle: options.idle ? { ...options.idle, stopGraceMs: options.grace.idleStopMs } : undefined,
    taskStopGraceMs: options.grace.taskStopMs,
    defaultPreemptionNoticeMs: options.grace.preemptionNoticeMs,
    logger,
  });
}

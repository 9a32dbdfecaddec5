/**
 * Idle power: when a machine's units sit idle and no idle workload is configured, the node lowers
 * each idle GPU's power limit, and raises it back before a task is prepared on it. A GPU is
 * lowered only when every unit on it is idle (MIG slices share their GPU's limit).
 *
 * Commands (pure argv builders below, tested):
 * - NVIDIA: `nvidia-smi -i <index> -pl <watts>`; the limits to restore come from
 *   `nvidia-smi --query-gpu=index,power.limit,power.default_limit,power.min_limit`.
 * - AMD: `amd-smi set --gpu <index> --power-cap <watts>`, or with rocm-smi
 *   `rocm-smi -d <index> --setpoweroverdrive <watts> --autorespond y`; the cap to restore is the
 *   one the GPU had when the node started.
 * Setting a power limit needs root (or the driver's permission); a refused command is logged and
 * counted, the GPU stays at its limit, and nothing else is affected.
 */
import type { Logger } from "../../log/logger.js";
import type { Metrics } from "../../metrics/metrics.js";
import { execRunner, type CommandRunner, type Inventory } from "../inventory/inventory.js";
import type { ProviderOptions } from "../options.js";
import type { Runtime, TaskHandle } from "../runtime/runtime.js";
import type { TaskLaunch } from "../runtime/task.js";

export type PowerTool = "nvidia-smi" | "amd-smi" | "rocm-smi";

export const NVIDIA_POWER_QUERY_ARGS: readonly string[] = ["--query-gpu=index,power.limit,power.default_limit,power.min_limit", "--format=csv,noheader,nounits"];

/** The argv (after the binary) that sets one GPU's power limit. */
export function powerLimitArgs(tool: PowerTool, gpuIndex: number, watts: number): string[] {
  const w = String(Math.round(watts));
  switch (tool) {
    case "nvidia-smi":
      return ["-i", String(gpuIndex), "-pl", w];
    case "amd-smi":
      return ["set", "--gpu", String(gpuIndex), "--power-cap", w];
    case "rocm-smi":
      return ["-d", String(gpuIndex), "--setpoweroverdrive", w, "--autorespond", "y"];
  }
}

export type GpuPowerLimits = { index: number; limitW: number | null; defaultW: number | null; minW: number | null };

/** Parses the NVIDIA power query (CSV, no header, no units); `[N/A]` and `[Not Supported]` are null. */
export function parseNvidiaPowerLimits(csv: string): GpuPowerLimits[] {
  const num = (text: string | undefined) => {
    const value = Number(text?.trim());
    return text === undefined || text.trim() === "" || Number.isNaN(value) ? null : value;
  };
  return csv
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line !== "")
    .map((line) => {
      const [index, limit, def, min] = line.split(",");
      if (!/^\d+$/.test(index!.trim())) throw new Error(`Cannot read nvidia-smi power limits: ${JSON.stringify(line)}`);
      return { index: Number(index), limitW: num(limit), defaultW: num(def), minW: num(min) };
    });
}

/**
 * The idle limit of a GPU: the configured watts, or the percentage of its normal limit, never
 * under its minimum (when known).
 */
export function idleLimitWatts(normalW: number, minW: number | null, config: { idleLimitWatts?: number | undefined; idleLimitPercent: number }): number {
  const wanted = config.idleLimitWatts ?? (normalW * config.idleLimitPercent) / 100;
  return Math.round(minW !== null ? Math.max(wanted, minW) : wanted);
}

export type PowerGpu = {
  index: number;
  /** Units on this GPU (one, or its MIG slices). */
  unitIds: string[];
  /** The device entries tasks get for those units (for the runtime hook). */
  devices: string[];
  normalW: number;
  idleW: number;
};

export type IdlePowerOptions = {
  tool: PowerTool;
  path: string;
  gpus: PowerGpu[];
  runner: CommandRunner;
  commandTimeoutMs: number;
  metrics?: Metrics;
  logger: Logger;
};

type GpuState = "normal" | "idle-limited" | "unmanaged";

/**
 * Follows the units' modes: lowers a GPU whose units are all idle, restores it when one is taken.
 * Changes of one GPU run in order; `restore` resolves once the limit is back (or failed).
 */
export class IdlePowerManager {
  private readonly state = new Map<number, GpuState>();
  private readonly queues = new Map<number, Promise<void>>();

  constructor(private readonly ctx: IdlePowerOptions) {
    for (const gpu of ctx.gpus) this.setState(gpu, "normal");
  }

  /** Applies the units' modes (from the capacity manager). */
  apply(modes: Record<string, { mode: string }>): Promise<void> {
    const work = this.ctx.gpus.map((gpu) => {
      const idle = gpu.unitIds.every((id) => (modes[id]?.mode ?? "idle") === "idle");
      return idle ? this.lower(gpu) : this.restoreGpu(gpu);
    });
    return Promise.all(work).then(() => undefined);
  }

  /** Restores the GPUs of these devices before a task runs on them. */
  restore(devices: readonly string[]): Promise<void> {
    return Promise.all(this.ctx.gpus.filter((gpu) => gpu.devices.some((device) => devices.includes(device))).map((gpu) => this.restoreGpu(gpu))).then(() => undefined);
  }

  /** Puts every GPU back to its normal limit (the node is stopping). */
  restoreAll(): Promise<void> {
    return Promise.all(this.ctx.gpus.map((gpu) => this.restoreGpu(gpu))).then(() => undefined);
  }

  stateOf(gpuIndex: number): GpuState | undefined {
    return this.state.get(gpuIndex);
  }

  private lower(gpu: PowerGpu): Promise<void> {
    return this.enqueue(gpu, async () => {
      if (this.state.get(gpu.index) !== "normal") return;
      if (await this.set(gpu, gpu.idleW, "lower")) this.setState(gpu, "idle-limited");
      else this.setState(gpu, "unmanaged");
    });
  }

  private restoreGpu(gpu: PowerGpu): Promise<void> {
    return this.enqueue(gpu, async () => {
      if (this.state.get(gpu.index) !== "idle-limited") return;
      // A failed restore leaves the GPU slower, not broken: the task still runs.
      if (await this.set(gpu, gpu.normalW, "restore")) this.setState(gpu, "normal");
    });
  }

  private enqueue(gpu: PowerGpu, work: () => Promise<void>): Promise<void> {
    const next = (this.queues.get(gpu.index) ?? Promise.resolve()).then(work);
    this.queues.set(
      gpu.index,
      next.catch(() => undefined),
    );
    return next;
  }

  private async set(gpu: PowerGpu, watts: number, action: "lower" | "restore"): Promise<boolean> {
    const args = powerLimitArgs(this.ctx.tool, gpu.index, watts);
    try {
      const result = await this.ctx.runner(this.ctx.path, args, { timeoutMs: this.ctx.commandTimeoutMs });
      if (result.exitCode === 0) {
        this.ctx.logger.info(action === "lower" ? "GPU power limit lowered while idle" : "GPU power limit restored", { gpu: gpu.index, watts });
        this.ctx.metrics?.providerPowerCommands.inc({ action, outcome: "ok" });
        return true;
      }
      this.ctx.logger.warn("Cannot set a GPU's power limit", {
        gpu: gpu.index,
        watts,
        command: `${this.ctx.path} ${args.join(" ")}`,
        exitCode: result.exitCode,
        output: `${result.stdout}${result.stderr}`.trim().slice(0, 300),
      });
    } catch (error) {
      this.ctx.logger.warn("Cannot set a GPU's power limit", { gpu: gpu.index, watts, command: `${this.ctx.path} ${args.join(" ")}` }, error);
    }
    this.ctx.metrics?.providerPowerCommands.inc({ action, outcome: "failed" });
    return false;
  }

  private setState(gpu: PowerGpu, state: GpuState): void {
    this.state.set(gpu.index, state);
    const metrics = this.ctx.metrics;
    if (!metrics) return;
    for (const candidate of ["normal", "idle-limited", "unmanaged"] as const)
      metrics.providerPowerState.set({ gpu: String(gpu.index), state: candidate }, candidate === state ? 1 : 0);
    metrics.providerPowerLimit.set({ gpu: String(gpu.index) }, state === "idle-limited" ? gpu.idleW : gpu.normalW);
  }
}

/** A runtime whose tasks get their GPUs' power limits back before they are prepared. */
export function withPowerRestore(runtime: Runtime, power: IdlePowerManager): Runtime {
  return {
    kind: runtime.kind,
    reap: (taskId, hints) => runtime.reap(taskId, hints),
    close: async () => runtime.close?.(),
    async prepare(launch: TaskLaunch, options?: { signal?: AbortSignal }): Promise<TaskHandle> {
      await power.restore(launch.devices);
      return runtime.prepare(launch, options);
    },
  };
}

/**
 * The idle power manager a provider's config and inventory call for, or undefined: an idle
 * workload is configured (it uses the GPUs), `provider.power.idleLimit` is off, or the inventory
 * is declared (no tool to set limits with). GPUs whose normal limit cannot be read are left alone.
 */
export async function createIdlePower(
  options: Pick<ProviderOptions, "idle" | "power" | "inventory">,
  inventory: Inventory,
  ctx: { runner?: CommandRunner; metrics?: Metrics; logger: Logger },
): Promise<IdlePowerManager | undefined> {
  if (options.idle || !options.power.idleLimit || inventory.source === "declared") return undefined;
  const tool: PowerTool = inventory.source;
  const runner = ctx.runner ?? execRunner;
  const path = tool === "nvidia-smi" ? options.inventory.nvidiaSmiPath : tool === "amd-smi" ? options.inventory.amdSmiPath : options.inventory.rocmSmiPath;
  const limits = new Map<number, { normalW: number | null; minW: number | null }>();
  if (tool === "nvidia-smi") {
    try {
      const result = await runner(path, NVIDIA_POWER_QUERY_ARGS, { timeoutMs: options.inventory.commandTimeoutMs });
      if (result.exitCode !== 0) throw new Error(`exit code ${result.exitCode}: ${result.stderr.trim().slice(0, 200)}`);
      for (const gpu of parseNvidiaPowerLimits(result.stdout)) limits.set(gpu.index, { normalW: gpu.limitW ?? gpu.defaultW, minW: gpu.minW });
    } catch (error) {
      ctx.logger.warn("Cannot read the GPUs' power limits; idle power management is off", {}, error);
      return undefined;
    }
  } else {
    for (const gpu of inventory.gpus) limits.set(gpu.index, { normalW: gpu.powerLimitW, minW: null });
  }
  const offered = new Set(inventory.machines.flatMap((machine) => machine.units));
  const byGpu = new Map<number, PowerGpu>();
  for (const unit of inventory.units) {
    if (unit.gpuIndex === null || !offered.has(unit.id)) continue;
    const limit = limits.get(unit.gpuIndex);
    if (!limit?.normalW) continue;
    const gpu = byGpu.get(unit.gpuIndex) ?? {
      index: unit.gpuIndex,
      unitIds: [],
      devices: [],
      normalW: limit.normalW,
      idleW: idleLimitWatts(limit.normalW, limit.minW, options.power),
    };
    gpu.unitIds.push(unit.id);
    gpu.devices.push(unit.device);
    byGpu.set(unit.gpuIndex, gpu);
  }
  if (byGpu.size === 0) return undefined;
  return new IdlePowerManager({ tool, path, gpus: [...byGpu.values()], runner, commandTimeoutMs: options.inventory.commandTimeoutMs, metrics: ctx.metrics, logger: ctx.logger });
}

/**
 * The runtime contract and the task handle both runtimes return. A runtime turns a launch (task
 * spec + leased devices + lease time) into a prepared task: everything that can fail before the
 * task runs (bundle fetch and digest, unpacking, a missing command, no container engine) fails in
 * `prepare()` with a typed error. Once started, every outcome is a {@link TaskResult}: success,
 * failure, lease time exceeded, stopped (preempted or cancelled), or an error of the runtime.
 *
 * @example
 * import { ProcessRuntime } from "./process-runtime.js";
 * const runtime = new ProcessRuntime({ workspaceRoot: "/var/lib/suanli/workspaces" });
 * const task = await runtime.prepare({ taskId: "lease-7", spec, devices: ["GPU-..."], durationMs: 3_600_000 });
 * await task.start();
 * for await (const line of task.logs()) console.log(line.seq, line.text);
 * const result = await task.wait(); // { status: "succeeded", exitCode: 0, outputDigest: "0x...", unitSeconds: ... }
 */
import { constants } from "node:os";
import type { Hex } from "viem";
import type { UnitMetrics } from "../inventory/inventory.js";
import type { LogBuffer, LogLine, LogRead } from "./logs.js";
import { ManagedProcess, readGroupMembers, type ProcessExit } from "./process-group.js";
import { StreamDigest } from "./output-digest.js";
import { digestTaskFolder } from "./task-files.js";
import type { Redactor, TaskLaunch } from "./task.js";
import type { TaskImage } from "../../../common/protocols/lease.js";
import { TaskStateError } from "../errors.js";
import type { Logger } from "../../log/logger.js";
import path from "node:path";
import { runDetached } from "../../../common/detached.js";

export type TaskState = "prepared" | "running" | "stopping" | "exited";

export type TaskStatus =
  /** Exit code 0. */
  | "succeeded"
  /** Non-zero exit or killed by a signal the runtime did not send (a crash, an rlimit). */
  | "failed"
  /** The lease time ran out and the runtime stopped the task. */
  | "exceeded"
  /** stop() was called (preemption, cancellation, lease closed early), or the task exited after sendTerm(). */
  | "stopped"
  /** The runtime could not run the command (it does not exist, the engine failed). */
  | "error";

export type TaskResult = {
  taskId: string;
  status: TaskStatus;
  /** The process's exit code; null when it ended by a signal. */
  exitCode: number | null;
  signal: string | null;
  /** The exit code as reported on-chain (int32): the exit code, or 128 + signal number. */
  chainExitCode: number;
  startedAt: number;
  endedAt: number;
  runMs: number;
  /** Leased units × whole seconds run (rounded up): what `complete()` reports. */
  unitSeconds: number;
  /** sha256 over output/ (see output-digest.ts), or over stdout when there is no output/. */
  outputDigest: Hex;
  outputDigestSource: "output-dir" | "stdout";
  /**
   * Present with status "error" (and for other statuses when something went wrong on the way).
   * Redacted. `blame: "provider"`: the node's machinery failed (the container engine), so the
   * lease ends by the rules for a provider failure, never as a normal completion.
   */
  error?: { name: string; message: string; blame?: "provider" | "renter" };
};

export type TaskUsage = {
  state: TaskState;
  startedAt: number | null;
  runMs: number;
  unitSeconds: number;
  /** CPU seconds and resident memory of the task's processes (null for containers or after exit). */
  cpuSeconds: number | null;
  rssBytes: number | null;
  processes: number | null;
  /** Metrics of the leased GPUs, when the runtime was given a sampler. */
  gpus: UnitMetrics[] | null;
};

export interface TaskHandle {
  readonly taskId: string;
  readonly workspace: string;
  /** Whether the task runs inside bubblewrap or a container. */
  readonly sandboxed: boolean;
  /** Whether the resource limits were applied (false when prlimit is missing). */
  readonly limitsApplied: boolean;
  /** The container image the task runs in, and whether it came from the image cache (container runtime only). */
  readonly image?: TaskImage | undefined;
  readonly state: TaskState;
  /** The process id of the task's process group leader while it runs (the engine client for containers). */
  readonly pid: number | undefined;
  start(): Promise<void>;
  /**
   * Sets the time the task may still run, from now (the lease was extended). The task is stopped
   * (SIGTERM, grace, SIGKILL, status "exceeded") when it runs out.
   */
  setRemainingTime(durationMs: number): void;
  /** SIGTERM, up to graceMs, SIGKILL; resolves with the result (status "stopped"). */
  stop(graceMs?: number): Promise<TaskResult>;
  /**
   * SIGTERM only, at once: no wait, no SIGKILL (a preemption notice begins; stop() at its end does
   * the rest). The task may flush and exit, or run on; an exit from then on is status "stopped",
   * whatever its code. Idempotent; a no-op unless the task runs.
   */
  sendTerm(): Promise<void>;
  /** Resolves when the task has ended. */
  wait(): Promise<TaskResult>;
  /** Log lines from `fromSeq`, then live ones until the task ends. */
  logs(fromSeq?: number, signal?: AbortSignal): AsyncIterable<LogLine>;
  /** What the bounded log buffer still holds from `fromSeq`. */
  readLogs(fromSeq?: number): LogRead;
  usage(): Promise<TaskUsage>;
  /**
   * How to run `command` (an argv) inside the running task's environment: the same sandbox or
   * container, user, limits, variables and working directory. Undefined unless the task runs.
   */
  execLaunch(command: readonly string[]): ExecLaunch | undefined;
  /** Process ids of the task's processes while it runs (empty for containers and after exit). */
  processIds(): Promise<number[]>;
  /** Removes the workspace (call after the result is reported). */
  cleanup(): Promise<void>;
}

/** What a runtime verified about the isolation of the tasks it will run. */
export type RuntimeIsolation = {
  sandboxed: boolean;
  /** One line for the operator: "bubblewrap 0.8.0, own network namespace through pasta". */
  description: string;
  /** Said loudly at every start (an unsandboxed runtime). */
  warnings: string[];
};

export interface Runtime {
  readonly kind: "process" | "container";
  /** Checks the isolation works here; throws RuntimeUnavailableError (with what to do) when it does not. */
  verify?(): Promise<RuntimeIsolation>;
  prepare(launch: TaskLaunch, options?: { signal?: AbortSignal }): Promise<TaskHandle>;
  /**
   * Kills whatever is left of a task this node started before it restarted (a crash leaves the
   * task's process group running without anyone reading its output) and removes its workspace.
   * Returns how many processes (or containers) were found and killed.
   */
  reap(taskId: string, hints?: { pid?: number | undefined; startTicks?: number | undefined }): Promise<number>;
  /** Removes what the runtime keeps outside the data dir (the process runtime's staging folders); called when the node stops. */
  close?(): Promise<void>;
}

/** A command to spawn in a task's environment (see TaskHandle.execLaunch). */
export type ExecLaunch = { argv: string[]; cwd: string; env: Record<string, string> };

/** Why a task's process did not run the task's command (see TaskLauncher.classifyExit). */
export type TaskExitError = { name: string; message: string; blame?: "provider" | "renter" };

/** How a runtime starts, stops and judges one task's process. */
export type TaskLauncher = {
  argv: string[];
  cwd: string;
  env: Record<string, string>;
  /** Stops the task; default: SIGTERM/grace/SIGKILL to the process group. */
  stop?: (process: ManagedProcess, graceMs: number) => Promise<void>;
  /** SIGTERM alone (TaskHandle.sendTerm); default: SIGTERM to the process group, sparing `spareFromTerm`. */
  term?: (process: ManagedProcess) => Promise<unknown>;
  /** An exit that means the runtime failed rather than the task (status "error"). */
  classifyExit?: (exit: ProcessExit) => TaskExitError | undefined | Promise<TaskExitError | undefined>;
  /** Extra pipes the process gets at fd 3, 4, ... (see ManagedProcess.pipe). */
  extraPipes?: number;
  /**
   * Runs right after the spawn, before the command is let go (bubblewrap waits on --block-fd):
   * the sandbox's network is connected here. A throw ends the task with status "error".
   */
  afterSpawn?: (process: ManagedProcess) => Promise<void>;
  /** Runs once after the task ended (remove temporary files). */
  afterExit?: () => Promise<void>;
  /** Whether /proc usage of the process group describes the task (false for containers). */
  groupUsage?: boolean;
  /** Process names spared from SIGTERM on stop (see ManagedProcessOptions.spareFromTerm). */
  spareFromTerm?: readonly string[];
  /** The argv that runs a command in the task's environment (exec); absent: exec is not supported. */
  execArgv?: (command: readonly string[]) => string[];
};

export type RunningTaskOptions = {
  launch: TaskLaunch;
  workspace: string;
  launcher: TaskLauncher;
  logs: LogBuffer;
  redactor: Redactor;
  sandboxed: boolean;
  limitsApplied: boolean;
  defaultGraceMs: number;
  removeWorkspace: () => Promise<void>;
  sampleGpus?: ((devices: string[]) => Promise<UnitMetrics[]>) | undefined;
  logger: Logger;
  /** The container image the task runs in (see TaskHandle.image). */
  image?: TaskImage | undefined;
};

function signalNumber(signal: string | null): number {
  if (!signal) return 0;
  return (constants.signals as Record<string, number>)[signal] ?? 0;
}

/** The task handle shared by both runtimes: lifecycle, lease-time limit, logs, result. */
export class RunningTask implements TaskHandle {
  readonly taskId: string;
  readonly workspace: string;
  readonly sandboxed: boolean;
  readonly limitsApplied: boolean;
  readonly image: TaskImage | undefined;
  private stateValue: TaskState = "prepared";
  private process: ManagedProcess | undefined;
  private startedAt: number | null = null;
  private stopReason: "stopped" | "exceeded" | undefined;
  private termSent = false;
  private setupError: TaskExitError | undefined;
  private durationTimer: NodeJS.Timeout | undefined;
  private readonly stdoutDigest = new StreamDigest();
  private readonly result: Promise<TaskResult>;
  private resolveResult!: (result: TaskResult) => void;

  constructor(private readonly options: RunningTaskOptions) {
    this.taskId = options.launch.taskId;
    this.workspace = options.workspace;
    this.sandboxed = options.sandboxed;
    this.limitsApplied = options.limitsApplied;
    this.image = options.image;
    this.result = new Promise((resolve) => (this.resolveResult = resolve));
  }

  get state(): TaskState {
    return this.stateValue;
  }

  get pid(): number | undefined {
    return this.process?.hasExited === false ? this.process.pid : undefined;
  }

  setRemainingTime(durationMs: number): void {
    if (this.stateValue !== "running") return;
    if (this.durationTimer) clearTimeout(this.durationTimer);
    this.armDurationTimer(Math.max(0, durationMs));
  }

  private armDurationTimer(durationMs: number): void {
    this.durationTimer = setTimeout(() => {
      if (this.stateValue !== "running") return;
      this.stopReason = "exceeded";
      this.options.logs.push("system", `Lease time of ${durationMs} ms is over: stopping the task`);
      runDetached(this.halt(this.options.defaultGraceMs), this.options.logger, "Stopping a task whose lease time is over");
    }, durationMs);
  }

  async start(): Promise<void> {
    if (this.stateValue !== "prepared") throw new TaskStateError(this.taskId, "start", this.stateValue);
    const { launcher, logs, redactor, launch } = this.options;
    this.stateValue = "running";
    this.startedAt = Date.now();
    logs.push("system", `Task ${this.taskId} started on ${launch.devices.length} unit(s)${this.sandboxed ? "" : " (unsandboxed)"}`);
    const spawn = () =>
      ManagedProcess.spawn({
        argv: launcher.argv,
        cwd: launcher.cwd,
        env: launcher.env,
        spareFromTerm: launcher.spareFromTerm,
        extraPipes: launcher.extraPipes,
        onStdout: (chunk) => this.stdoutDigest.update(chunk),
        onLine: (stream, line) => logs.push(stream, redactor.redact(line)),
      });
    this.process = spawn();
    if (launcher.afterSpawn) {
      for (let attempt = 1; ; attempt++) {
        try {
          await launcher.afterSpawn(this.process);
          // The setup is the provider's time, not the renter's.
          this.startedAt = Date.now();
          break;
        } catch (error) {
          const err = error as Error;
          // A sandbox whose set-up failed never let the command go (bubblewrap holds it on --block-fd,
          // or exited before its namespaces were ready: "bwrap: loopback: Failed RTM_NEWADDR" on a
          // loaded host). Once, a fresh sandbox, before the provider is blamed (issue #40 item 1).
          if (attempt === 1 && err.name === "SandboxNetworkError" && this.stopReason === undefined) {
            logs.push("system", `The task's sandbox could not be set up (${err.message.split("\n")[0]}): trying once more`);
            this.options.logger.warn("Task sandbox set-up failed: retrying once", { taskId: this.taskId }, error);
            await this.process.terminate(0);
            await this.process.exited;
            await launcher.afterExit?.().catch(() => undefined);
            this.process = spawn();
            continue;
          }
          this.watchExit();
          // The host failed to set the task up: the provider's fault, reported as a runtime error.
          this.setupError = { name: err.name || "Error", message: err.message, blame: "provider" };
          this.options.logger.warn("Task setup failed after the spawn", { taskId: this.taskId }, error);
          await this.process.terminate(0);
          return;
        }
      }
    }
    this.watchExit();
    this.armDurationTimer(launch.durationMs);
  }

  private watchExit(): void {
    const process = this.process!;
    runDetached(
      process.exited.then((exit) => this.finish(exit)),
      this.options.logger,
      "Recording a task's exit",
    );
  }

  async stop(graceMs = this.options.defaultGraceMs): Promise<TaskResult> {
    if (this.stateValue === "prepared") {
      // Never started: nothing to stop, but the caller still gets a result to report.
      this.stopReason = "stopped";
      this.startedAt = Date.now();
      await this.finish({ code: null, signal: null });
      return this.result;
    }
    if (this.stateValue === "running") {
      this.stopReason ??= "stopped";
      this.options.logs.push("system", `Stopping the task (grace ${graceMs} ms)`);
      await this.halt(graceMs);
    }
    return this.result;
  }

  async sendTerm(): Promise<void> {
    if (this.stateValue !== "running" || this.termSent || !this.process) return;
    this.termSent = true;
    // Set first: an exit the signal brings is the notice's doing, never the task's failure or success.
    this.stopReason ??= "stopped";
    this.options.logs.push("system", "SIGTERM sent (a preemption notice began: flush $SUANLI_CHECKPOINT_DIR and exit, or run on until the notice ends)");
    const process = this.process;
    const term = this.options.launcher.term ?? ((group) => group.sendTerm());
    await term(process).catch((error: unknown) => this.options.logger.warn("Cannot send SIGTERM to a task", { taskId: this.taskId }, error));
  }

  wait(): Promise<TaskResult> {
    if (this.stateValue === "prepared") return Promise.reject(new TaskStateError(this.taskId, "wait for", "not started"));
    return this.result;
  }

  logs(fromSeq = 0, signal?: AbortSignal): AsyncIterable<LogLine> {
    return this.options.logs.follow(fromSeq, signal);
  }

  readLogs(fromSeq = 0): LogRead {
    return this.options.logs.read(fromSeq);
  }

  async usage(): Promise<TaskUsage> {
    const runMs = this.startedAt === null ? 0 : Date.now() - this.startedAt;
    const group = this.options.launcher.groupUsage === false ? null : await this.process?.groupUsage();
    const gpus = this.options.sampleGpus && this.stateValue === "running" ? await this.options.sampleGpus(this.options.launch.devices).catch(() => null) : null;
    return {
      state: this.stateValue,
      startedAt: this.startedAt,
      runMs,
      unitSeconds: this.unitSecondsFor(runMs),
      cpuSeconds: group?.cpuSeconds ?? null,
      rssBytes: group?.rssBytes ?? null,
      processes: group?.processes ?? null,
      gpus,
    };
  }

  execLaunch(command: readonly string[]): ExecLaunch | undefined {
    const { launcher } = this.options;
    if (this.stateValue !== "running" || !launcher.execArgv) return undefined;
    return { argv: launcher.execArgv(command), cwd: launcher.cwd, env: { ...launcher.env } };
  }

  async processIds(): Promise<number[]> {
    const pid = this.pid;
    if (pid === undefined || this.options.launcher.groupUsage === false) return [];
    const members = await readGroupMembers(pid);
    return (members ?? []).filter((member) => member.state !== "Z").map((member) => member.pid);
  }

  async cleanup(): Promise<void> {
    if (this.stateValue === "running" || this.stateValue === "stopping") await this.stop();
    await this.options.removeWorkspace();
  }

  private async halt(graceMs: number): Promise<void> {
    if (!this.process || this.stateValue !== "running") return;
    this.stateValue = "stopping";
    const stopper = this.options.launcher.stop ?? ((process, grace) => process.terminate(grace).then(() => undefined));
    try {
      await stopper(this.process, graceMs);
    } catch (error) {
      this.options.logger.warn("Stopping the task failed; killing its process group", { taskId: this.taskId }, error);
      await this.process.terminate(0);
    }
    await this.result;
  }

  private unitSecondsFor(runMs: number): number {
    return this.options.launch.devices.length * Math.ceil(runMs / 1000);
  }

  private async finish(exit: ProcessExit): Promise<void> {
    if (this.durationTimer) clearTimeout(this.durationTimer);
    const { launcher, logs, redactor } = this.options;
    const endedAt = Date.now();
    const startedAt = this.startedAt ?? endedAt;
    const runMs = endedAt - startedAt;
    let error: TaskExitError | undefined;
    if (this.setupError) {
      error = this.setupError;
    } else if (exit.spawnError) {
      error = { name: "CommandNotFoundError", message: `Cannot start ${launcher.argv[0]}: ${exit.spawnError.code ?? exit.spawnError.message}` };
    } else if (!this.stopReason) {
      error = await launcher.classifyExit?.(exit);
    }
    const status: TaskStatus = this.stopReason ?? (error ? "error" : exit.code === 0 ? "succeeded" : "failed");
    let outputDigest: Hex | undefined;
    try {
      // Read without following links: an exec'd process of the task may still be swapping folders.
      outputDigest = await digestTaskFolder(path.join(this.workspace, "output"));
    } catch (digestError) {
      logs.push("system", `Cannot digest output/: ${(digestError as Error).message}; using stdout`);
    }
    await launcher.afterExit?.().catch((cleanupError) => this.options.logger.warn("Task cleanup failed", { taskId: this.taskId }, cleanupError));
    const result: TaskResult = {
      taskId: this.taskId,
      status,
      exitCode: exit.code,
      signal: exit.signal,
      chainExitCode: exit.code ?? (exit.signal ? 128 + signalNumber(exit.signal) : -1),
      startedAt,
      endedAt,
      runMs,
      unitSeconds: this.unitSecondsFor(runMs),
      outputDigest: outputDigest ?? this.stdoutDigest.digest(),
      outputDigestSource: outputDigest ? "output-dir" : "stdout",
      ...(error ? { error: { name: error.name, message: redactor.redact(error.message), ...(error.blame ? { blame: error.blame } : {}) } } : {}),
    };
    logs.push(
      "system",
      `Task ended: ${status}${exit.code !== null ? `, exit code ${exit.code}` : ""}${exit.signal ? `, signal ${exit.signal}` : ""}${result.error ? ` (${result.error.message})` : ""}`,
    );
    logs.close();
    this.stateValue = "exited";
    this.resolveResult(result);
  }
}

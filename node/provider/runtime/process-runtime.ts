/**
 * The process runtime: a task is a workspace bundle (.tar.gz, fetched by URL, sha256 checked,
 * unpacked) and a command run in it as a local process group, with the leased GPUs in
 * CUDA_VISIBLE_DEVICES, rlimits through prlimit, and bubblewrap around it where installed.
 *
 * The child's environment is built from scratch: PATH, HOME (the workspace), LANG, the task's
 * variables and the provider's own (CUDA_VISIBLE_DEVICES, SUANLI_*). Nothing of the node's
 * environment leaks in, because it may hold the node's keys.
 */
import { mkdir, realpath, rm } from "node:fs/promises";
import path from "node:path";
import { InvalidInputError } from "../../../common/errors.js";
import { silentLogger, type Logger } from "../../log/logger.js";
import { CommandNotFoundError, RuntimeUnavailableError } from "../errors.js";
import type { UnitMetrics } from "../inventory/inventory.js";
import { fetchBundle, unpackBundle } from "./bundle.js";
import { clampToHardLimits, findExecutable, hasLimits, prlimitPrefix, type ResourceLimits } from "./limits.js";
import { LogBuffer } from "./logs.js";
import { RunningTask, type Runtime, type TaskHandle } from "./runtime.js";
import { reapTaskProcesses } from "./orphans.js";
import { bubblewrapArgs, detectBubblewrap, nvidiaDeviceNodes, SYSTEM_READ_ONLY_PATHS, type SandboxMode } from "./sandbox.js";
import { childEnv, Redactor, redactError, secretsOf, TASK_ID_PATTERN, type TaskLaunch, type TaskSpec } from "./task.js";

export type BundleLimits = {
  maxBytes: number;
  maxUnpackedBytes: number;
  maxEntries: number;
  fetchTimeoutMs: number;
};

export type ProcessRuntimeOptions = {
  /** Parent of the per-task workspaces. */
  workspaceRoot: string;
  sandbox?: SandboxMode;
  bwrapPath?: string;
  /** Whether sandboxed tasks have network access. */
  network?: boolean;
  /** More host paths to bind read-only into the sandbox (an interpreter outside /usr, datasets). */
  readOnlyPaths?: string[];
  limits?: ResourceLimits;
  bundle?: Partial<BundleLimits>;
  logs?: { maxLines?: number; maxLineChars?: number };
  /** SIGTERM to SIGKILL when a task is stopped or its lease time is over. */
  stopGraceMs?: number;
  /** PATH the task gets unless it sets its own. */
  taskPath?: string;
  /** Reads the leased GPUs' metrics for usage(); the integrator passes the inventory sampler. */
  sampleGpus?: (devices: string[]) => Promise<UnitMetrics[]>;
  logger?: Logger;
};

export const DEFAULT_BUNDLE_LIMITS: BundleLimits = {
  maxBytes: 2 * 1024 ** 3,
  maxUnpackedBytes: 8 * 1024 ** 3,
  maxEntries: 100_000,
  fetchTimeoutMs: 10 * 60_000,
};

const DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/** The variables every task gets; the task's own come on top, the provider's reserved ones last. */
export function taskEnvironment(launch: TaskLaunch, workspace: string, tmpDir: string, taskPath: string): Record<string, string> {
  return {
    PATH: taskPath,
    HOME: workspace,
    TMPDIR: tmpDir,
    LANG: "C.UTF-8",
    ...childEnv(launch.spec),
    // An empty CUDA_VISIBLE_DEVICES hides every GPU: a task without leased units sees none.
    CUDA_VISIBLE_DEVICES: launch.devices.join(","),
    CUDA_DEVICE_ORDER: "PCI_BUS_ID",
    SUANLI_TASK_ID: launch.taskId,
    SUANLI_WORKSPACE: workspace,
    SUANLI_OUTPUT_DIR: path.join(workspace, "output"),
    ...groupEnvironment(launch),
  };
}

/** SUANLI_RANK, SUANLI_WORLD_SIZE, SUANLI_MASTER_ADDR/PORT of a group job's task (none otherwise). */
export function groupEnvironment(launch: TaskLaunch): Record<string, string> {
  const group = launch.spec.group;
  if (!group) return {};
  const master = launch.master ?? { addr: group.masterAddr ?? "", port: group.masterPort ?? 0 };
  return {
    SUANLI_RANK: String(group.rank),
    SUANLI_WORLD_SIZE: String(group.worldSize),
    SUANLI_MASTER_ADDR: group.rank === 0 ? master.addr : (group.masterAddr ?? master.addr),
    SUANLI_MASTER_PORT: String(group.rank === 0 ? master.port : (group.masterPort ?? master.port)),
  };
}

/** PATH entries npm and npx add for their own scripts (`node_modules/.bin`, npx's cache, node-gyp): never the task's. */
function isPackageManagerDir(dir: string): boolean {
  return /(^|\/)node_modules\/\.bin\/?$/.test(dir) || dir.includes("/_npx/") || /\/node-gyp-bin\/?$/.test(dir);
}

function isUnder(file: string, roots: readonly string[]): boolean {
  return roots.some((root) => {
    const base = root.replace(/\/+$/, "") || "/";
    return file === base || file.startsWith(base === "/" ? "/" : `${base}/`);
  });
}

/**
 * The PATH a task gets by default: the node's, without the folders npm/npx put there for their
 * own scripts (a node started by `npx suanli` would otherwise hand its temporary folders to every
 * task) and, in the sandbox, without folders the sandbox does not show (`visibleRoots`).
 */
export function taskSearchPath(hostPath: string, visibleRoots?: readonly string[]): string {
  const dirs = hostPath
    .split(":")
    .filter((dir) => dir !== "" && path.isAbsolute(dir) && !isPackageManagerDir(dir) && (!visibleRoots || isUnder(path.resolve(dir), visibleRoots)));
  const unique = [...new Set(dirs)];
  return unique.length ? unique.join(":") : DEFAULT_PATH;
}

/**
 * Resolves the command to an argv: a string runs through /bin/sh -c, an array must name a program
 * that exists in the task's environment, on the task's PATH. In the sandbox that means a file the
 * sandbox shows (`sandbox.visibleRoots` or the workspace), whatever the host has elsewhere: a
 * program found only outside is a CommandNotFoundError that says where it is and how to show it.
 */
export async function resolveCommand(
  spec: TaskSpec,
  workspace: string,
  envPath: string,
  sandbox?: { visibleRoots: readonly string[]; hostPath: string },
): Promise<string[]> {
  if (typeof spec.command === "string") return ["/bin/sh", "-c", spec.command];
  const [program, ...args] = spec.command;
  const found = await findExecutable(program, envPath, workspace);
  if (found && sandbox) {
    const real = await realpath(found).catch(() => found);
    if (isUnder(path.resolve(found), [...sandbox.visibleRoots, workspace]) && isUnder(real, [...sandbox.visibleRoots, workspace])) return [found, ...args];
    throw new CommandNotFoundError(program, `${found}${real !== found ? ` (${real})` : ""} is outside the task's sandbox; add its folder to provider.runtime.readOnlyPaths to show it`);
  }
  if (found) return [found, ...args];
  if (program.includes("/")) throw new CommandNotFoundError(program, `no executable file at ${program} in the workspace`);
  const onHost = sandbox ? await findExecutable(program, sandbox.hostPath, workspace) : undefined;
  throw new CommandNotFoundError(
    program,
    `not found in the workspace or on the task's PATH (${envPath})${onHost ? `; the host has ${onHost}, outside the task's sandbox (add its folder to provider.runtime.readOnlyPaths to show it)` : ""}`,
  );
}

export class ProcessRuntime implements Runtime {
  readonly kind = "process" as const;
  private readonly logger: Logger;
  private readonly bundleLimits: BundleLimits;
  private warnedUnsandboxed = false;
  private warnedNoPrlimit = false;

  constructor(private readonly options: ProcessRuntimeOptions) {
    this.logger = options.logger ?? silentLogger();
    this.bundleLimits = { ...DEFAULT_BUNDLE_LIMITS, ...options.bundle };
  }

  /** Whether tasks will run in bubblewrap, and why not. */
  async sandboxStatus(): Promise<{ sandboxed: boolean; reason?: string }> {
    const mode = this.options.sandbox ?? "auto";
    if (mode === "none") return { sandboxed: false, reason: 'sandbox is "none" in the config' };
    const status = await detectBubblewrap(this.options.bwrapPath);
    if (status.available) return { sandboxed: true };
    if (mode === "bubblewrap") throw new RuntimeUnavailableError("process", `sandbox "bubblewrap" is required but ${status.reason}`);
    return { sandboxed: false, reason: status.reason };
  }

  async reap(taskId: string, hints: { pid?: number | undefined; startTicks?: number | undefined } = {}): Promise<number> {
    if (!TASK_ID_PATTERN.test(taskId)) return 0;
    const root = path.resolve(this.options.workspaceRoot);
    const workspace = path.join(root, taskId);
    const killed = await reapTaskProcesses(workspace, hints);
    await rm(workspace, { recursive: true, force: true });
    await rm(path.join(root, `.${taskId}.bundle`), { force: true });
    return killed;
  }

  async prepare(launch: TaskLaunch, options: { signal?: AbortSignal } = {}): Promise<TaskHandle> {
    if (!TASK_ID_PATTERN.test(launch.taskId)) {
      throw new InvalidInputError("task launch", [{ path: "taskId", message: "expected 1-128 letters, digits, '.', '_' or '-'" }]);
    }
    const { spec } = launch;
    if (!spec.bundle) throw new InvalidInputError("task", [{ path: "bundle", message: "required by the process runtime (a .tar.gz URL and its sha256)" }]);
    const sandbox = await this.sandboxStatus();
    const root = path.resolve(this.options.workspaceRoot);
    const workspace = path.join(root, launch.taskId);
    const bundleFile = path.join(root, `.${launch.taskId}.bundle`);
    const removeWorkspace = () => rm(workspace, { recursive: true, force: true });

    await mkdir(root, { recursive: true, mode: 0o700 });
    // A workspace left by an earlier attempt (a crash) is not resumed: start clean.
    await removeWorkspace();
    await mkdir(workspace, { mode: 0o700 });
    let argv: string[];
    let prefixArgv: string[] = [];
    let env: Record<string, string>;
    let limitsApplied = false;
    try {
      await fetchBundle({
        url: spec.bundle.url,
        sha256: spec.bundle.sha256,
        destFile: bundleFile,
        maxBytes: this.bundleLimits.maxBytes,
        timeoutMs: this.bundleLimits.fetchTimeoutMs,
        signal: options.signal,
      });
      try {
        await unpackBundle(bundleFile, workspace, this.bundleLimits);
      } finally {
        await rm(bundleFile, { force: true });
      }

      const tmpDir = sandbox.sandboxed ? "/tmp" : path.join(workspace, ".tmp");
      if (!sandbox.sandboxed) await mkdir(tmpDir, { recursive: true });
      const hostPath = this.options.taskPath ?? process.env.PATH ?? DEFAULT_PATH;
      const visibleRoots = sandbox.sandboxed ? [...SYSTEM_READ_ONLY_PATHS, ...(this.options.readOnlyPaths ?? [])] : undefined;
      env = taskEnvironment(launch, workspace, tmpDir, taskSearchPath(hostPath, visibleRoots));
      const command = await resolveCommand(spec, workspace, env.PATH, visibleRoots ? { visibleRoots, hostPath } : undefined);

      const prefix: string[] = [];
      const limits = await clampToHardLimits(this.options.limits ?? {});
      if (hasLimits(limits)) {
        const prlimit = await findExecutable("prlimit", process.env.PATH ?? DEFAULT_PATH);
        if (prlimit) {
          prefix.push(...prlimitPrefix(prlimit, limits));
          limitsApplied = true;
        } else if (!this.warnedNoPrlimit) {
          this.warnedNoPrlimit = true;
          this.logger.warn("prlimit not found: task resource limits are not applied", { limits });
        }
      }
      if (sandbox.sandboxed) {
        prefix.push(
          ...bubblewrapArgs({
            bwrapPath: this.options.bwrapPath ?? "bwrap",
            workspace,
            network: this.options.network ?? true,
            readOnlyPaths: this.options.readOnlyPaths ?? [],
            deviceNodes: launch.devices.length > 0 ? await nvidiaDeviceNodes() : [],
          }),
        );
      } else if (!this.warnedUnsandboxed) {
        this.warnedUnsandboxed = true;
        this.logger.warn("Tasks run unsandboxed", { reason: sandbox.reason, hint: "install bubblewrap (apt-get install bubblewrap) to sandbox tasks" });
      }
      argv = [...prefix, ...command];
      prefixArgv = prefix;
    } catch (error) {
      await removeWorkspace();
      throw redactError(error, new Redactor(secretsOf(spec)));
    }

    const logs = new LogBuffer(this.options.logs);
    if (!sandbox.sandboxed) logs.push("system", `Running unsandboxed: ${sandbox.reason}`);
    const isShell = typeof spec.command === "string";
    return new RunningTask({
      launch,
      workspace,
      launcher: {
        argv,
        cwd: workspace,
        env,
        groupUsage: true,
        spareFromTerm: sandbox.sandboxed ? ["bwrap"] : [],
        // The same prlimit and bubblewrap prefix as the task: same limits, same view of the
        // filesystem, same user. A fresh bubblewrap instance (its own PID namespace): the command
        // sees the task's files, not its processes.
        execArgv: (command) => [...prefixArgv, ...command],
        // sh reports a command it cannot find with 127; bubblewrap with 1 and "execvp" on stderr
        // cannot happen for argv commands, which are resolved before the start.
        classifyExit: (exit) =>
          isShell && exit.code === 127 ? { name: "CommandNotFoundError", message: "The shell could not find the command (exit code 127)" } : undefined,
      },
      logs,
      redactor: new Redactor(secretsOf(spec)),
      sandboxed: sandbox.sandboxed,
      limitsApplied,
      defaultGraceMs: this.options.stopGraceMs ?? 10_000,
      removeWorkspace,
      sampleGpus: this.options.sampleGpus,
      logger: this.logger,
    });
  }
}

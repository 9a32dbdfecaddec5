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
import { TaskIoUnavailableError } from "../agent/errors.js";
import { silentLogger, type Logger } from "../../log/logger.js";
import { CommandNotFoundError, RuntimeUnavailableError, SandboxNetworkError } from "../errors.js";
import type { UnitMetrics } from "../inventory/inventory.js";
import { fetchBundle, unpackBundle } from "./bundle.js";
import { boundedTask, outOfMemory, type BoundedTask } from "./bounded-task.js";
import { mountWorkspaceDisk, unmountWorkspaceDisk } from "./workspace-disk.js";
import type { LeaseBoundsOptions } from "./lease-bounds.js";
import { clampToHardLimits, findExecutable, hasLimits, prlimitPrefix, type ResourceLimits } from "./limits.js";
import { LogBuffer } from "./logs.js";
import { RunningTask, type Runtime, type RuntimeIsolation, type TaskHandle } from "./runtime.js";
import type { ManagedProcess } from "./process-group.js";
import { reapTaskProcesses } from "./orphans.js";
import {
  attachTaskNetwork,
  bubblewrapArgs,
  detectBubblewrap,
  detectNetworkTools,
  maskArgs,
  nvidiaDeviceNodes,
  stopTaskPasta,
  SYSTEM_READ_ONLY_PATHS,
  type NetworkTools,
  type SandboxMode,
  type TaskNetwork,
} from "./sandbox.js";
import { parseCidr, type ParsedCidr } from "./network-policy.js";
import { probeTaskNetwork } from "./network-probe.js";
import type { FetchPolicy } from "./fetch-policy.js";
import { checkReachable, chownTree, DEFAULT_TASK_USER, nodeIsRoot, removeStages, sandboxTaskUser, taskUserPrefix, type SandboxTaskUser as MappedUser } from "./task-user.js";
import { slotUserName, TaskUserPool, type TaskUserSlot } from "./task-user-slots.js";
import { Redactor, redactError, secretsOf, TASK_ID_PATTERN, type TaskLaunch, type TaskSpec } from "./task.js";
import { seedCheckpointDir } from "./checkpoint-dir.js";
import { taskEnvironment } from "./task-env.js";
export { groupEnvironment, taskEnvironment } from "./task-env.js";

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
  /** Whether sandboxed tasks have (policed) outbound network access; off: loopback only. */
  network?: boolean;
  pastaPath?: string;
  /** What a task's network may reach beyond public unicast (see sandbox.ts). */
  networkAllow?: { loopbackPorts?: number[]; networks?: string[] };
  /**
   * The node's own files (data dir, config file, key files, home): masked inside the sandbox
   * wherever a read-only path would show them.
   */
  hiddenPaths?: string[];
  /** Where renter-supplied URLs may be fetched from (file:, private ranges). */
  fetchPolicy?: Partial<FetchPolicy>;
  /** More host paths to bind read-only into the sandbox (an interpreter outside /usr, datasets). */
  readOnlyPaths?: string[];
  /** A root node runs each sandboxed task as its own unprivileged host user `<taskUser>-<slot>` (task-user-slots.ts); default `suanli-task`. */
  taskUser?: string;
  /** The host-wide directory of task slot locks (task-user-slots.ts); default /run/suanli/task-slots. */
  taskSlotLockDir?: string;
  limits?: ResourceLimits;
  /** Per-lease CPU, memory, process and /tmp bounds (lease-bounds.ts); absent: none. */
  bounds?: LeaseBoundsOptions;
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
  const dirs = hostPath.split(":").filter((dir) => dir !== "" && path.isAbsolute(dir) && !isPackageManagerDir(dir) && (!visibleRoots || isUnder(path.resolve(dir), visibleRoots)));
  const unique = [...new Set(dirs)];
  return unique.length ? unique.join(":") : DEFAULT_PATH;
}

/**
 * Resolves the command to an argv: a string runs through /bin/sh -c, an array must name a program
 * that exists in the task's environment, on the task's PATH. In the sandbox that means a file the
 * sandbox shows (`sandbox.visibleRoots` or the workspace), whatever the host has elsewhere: a
 * program found only outside is a CommandNotFoundError that says where it is and how to show it.
 */
export async function resolveCommand(spec: TaskSpec, workspace: string, envPath: string, sandbox?: { visibleRoots: readonly string[]; hostPath: string }): Promise<string[]> {
  if (typeof spec.command === "string") return ["/bin/sh", "-c", spec.command];
  const [program, ...args] = spec.command;
  const found = await findExecutable(program!, envPath, workspace);
  if (found && sandbox) {
    const real = await realpath(found).catch(() => found);
    if (isUnder(path.resolve(found), [...sandbox.visibleRoots, workspace]) && isUnder(real, [...sandbox.visibleRoots, workspace])) return [found, ...args];
    throw new CommandNotFoundError(
      program!,
      `${found}${real !== found ? ` (${real})` : ""} is outside the task's sandbox; add its folder to provider.runtime.readOnlyPaths to show it`,
    );
  }
  if (found) return [found, ...args];
  if (program!.includes("/")) throw new CommandNotFoundError(program!, `no executable file at ${program} in the workspace`);
  const onHost = sandbox ? await findExecutable(program!, sandbox.hostPath, workspace) : undefined;
  throw new CommandNotFoundError(
    program!,
    `not found in the workspace or on the task's PATH (${envPath})${onHost ? `; the host has ${onHost}, outside the task's sandbox (add its folder to provider.runtime.readOnlyPaths to show it)` : ""}`,
  );
}

export const UNSANDBOXED_WARNING =
  "TASKS RUN UNSANDBOXED (provider.runtime.sandbox is \"none\"): renter code runs as this node's user and can read its config, data dir and keys, and reach the host's network. Use only for development or a single-tenant machine you trust.";

export class ProcessRuntime implements Runtime {
  readonly kind = "process" as const;
  private readonly logger: Logger;
  private readonly bundleLimits: BundleLimits;
  private readonly allowNetworks: ParsedCidr[];
  private warnedUnsandboxed = false;
  private warnedNoPrlimit = false;
  private warnedNoNsenter = false;
  private networkTools: Promise<NetworkTools> | undefined;
  /** The start check of the task network, once: why it cannot be attached here, or undefined. */
  private networkUnusable: Promise<string | undefined> | undefined;
  private taskUser: Promise<MappedUser | undefined> | undefined;
  /** A root node's per-task host users (task-user-slots.ts). */
  private readonly slots: TaskUserPool;

  constructor(private readonly options: ProcessRuntimeOptions) {
    this.logger = options.logger ?? silentLogger();
    this.bundleLimits = { ...DEFAULT_BUNDLE_LIMITS, ...options.bundle };
    this.allowNetworks = (options.networkAllow?.networks ?? []).map(parseCidr);
    const readOnlyPaths = options.readOnlyPaths ?? [];
    this.slots = new TaskUserPool({
      base: options.taskUser ?? DEFAULT_TASK_USER,
      lockDir: options.taskSlotLockDir,
      logger: this.logger,
      check: (user) => checkReachable(user, readOnlyPaths),
    });
  }

  /**
   * Verifies the isolation the config asks for works here; throws RuntimeUnavailableError (what
   * is missing and what to do) otherwise. The provider agent calls it at start, before selling.
   */
  async verify(): Promise<RuntimeIsolation> {
    const mode = this.options.sandbox ?? "auto";
    if (mode === "none") return { sandboxed: false, description: 'unsandboxed (sandbox "none")', warnings: [UNSANDBOXED_WARNING] };
    const status = await detectBubblewrap(this.options.bwrapPath);
    if (!status.available) {
      throw new RuntimeUnavailableError("process", `renter tasks need a sandbox and ${status.reason}`, [
        "Install bubblewrap (apt-get install bubblewrap) and allow user namespaces,",
        'or use provider.runtime.kind "container" with Docker or Podman,',
        'or, for development only, set provider.runtime.sandbox "none" (renter code could then read this node\'s keys).',
      ]);
    }
    const mapped = await this.mappedUser(status.path);
    const user = mapped ? `, each task as its own host user (${slotUserName(mapped.user.name, 0)}, -1, …), never root` : "";
    if (!(this.options.network ?? true)) return { sandboxed: true, description: `${status.version}, no network (loopback only)${user}`, warnings: [] };
    const tools = await this.tools();
    this.networkUnusable ??= probeTaskNetwork(tools);
    const unusable = await this.networkUnusable;
    if (unusable) {
      return {
        sandboxed: true,
        description: `${status.version}, NO network for tasks (loopback only): the task network check failed${user}`,
        warnings: [
          `Tasks will run WITHOUT network (loopback only): attaching a task's network through pasta failed here: ${unusable}. ` +
            "A host without a route out (no default route) cannot give tasks one. Give the host a route out and restart the node, or set provider.runtime.network false to run without network on purpose.",
        ],
      };
    }
    return {
      sandboxed: true,
      description: `${status.version}, own network namespace through pasta, checked at start (public addresses only, ${this.allowNetworks.length} allow-listed range(s), ${this.options.networkAllow?.loopbackPorts?.length ?? 0} loopback port(s))${user}`,
      warnings: [],
    };
  }

  /**
   * A root node's task user (created when missing), the tools that switch to it and the staging
   * folder (task-user.ts), checked once by running a sandbox as that user. Undefined for a node
   * that is not root: its tasks run as its own unprivileged uid.
   */
  private mappedUser(bwrapPath: string): Promise<MappedUser | undefined> {
    if (!nodeIsRoot()) return Promise.resolve(undefined);
    this.taskUser ??= sandboxTaskUser({ name: this.options.taskUser ?? DEFAULT_TASK_USER, readOnlyPaths: this.options.readOnlyPaths ?? [], bwrapPath, logger: this.logger });
    this.taskUser.catch(() => (this.taskUser = undefined));
    return this.taskUser;
  }

  /** Removes the task user's staging folders in /tmp (task-user.ts); the agent calls it as it stops. */
  async close(): Promise<void> {
    await removeStages(await this.taskUser?.catch(() => undefined));
    this.taskUser = undefined;
  }

  private tools(): Promise<NetworkTools> {
    this.networkTools ??= detectNetworkTools(this.options.pastaPath).then((found) => {
      if ("tools" in found) return found.tools;
      this.networkTools = undefined;
      throw new RuntimeUnavailableError("process", `provider.runtime.network is on, but the task network tools are ${found.reason}`, [
        "Install them (apt-get install passt iproute2), or set provider.runtime.network false (tasks then have no network).",
      ]);
    });
    return this.networkTools;
  }

  /** Whether tasks will run in bubblewrap (throws when the config needs a sandbox that does not work here). */
  async sandboxStatus(): Promise<{ sandboxed: boolean; reason?: string }> {
    const isolation = await this.verify();
    return isolation.sandboxed ? { sandboxed: true } : { sandboxed: false, reason: isolation.description };
  }

  async reap(taskId: string, hints: { pid?: number | undefined; startTicks?: number | undefined } = {}): Promise<number> {
    if (!TASK_ID_PATTERN.test(taskId)) return 0;
    const root = path.resolve(this.options.workspaceRoot);
    const workspace = path.join(root, taskId);
    const killed = await reapTaskProcesses(workspace, hints);
    // The pasta of a networked task is not in its process group: stop it by its pid file.
    await stopTaskPasta(path.join(root, `.${taskId}.pasta.pid`));
    await unmountWorkspaceDisk(root, taskId);
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
    const inputs = launch.inputs ?? [];
    // Inputs are mounts: without the sandbox's mount namespace there is nowhere to put them (the agent refuses such tasks first).
    if (inputs.length > 0 && !sandbox.sandboxed) throw new RuntimeUnavailableError("process", "task inputs need the bubblewrap sandbox (their mounts)", []);
    // A host whose start check found no usable task network runs tasks on loopback only, as it said at start.
    const networked = sandbox.sandboxed && (this.options.network ?? true) && !(await this.networkUnusable);
    const mapped = sandbox.sandboxed ? await this.mappedUser(this.options.bwrapPath ?? "bwrap") : undefined;
    const root = path.resolve(this.options.workspaceRoot);
    const workspace = path.join(root, launch.taskId);
    const bundleFile = path.join(root, `.${launch.taskId}.bundle`);
    let bounded: BoundedTask | undefined;
    // This task's own host user (a root node): held until the workspace is removed, after its processes.
    let slot: TaskUserSlot | undefined;
    const removeWorkspace = async () => {
      await bounded?.cgroup?.remove();
      await unmountWorkspaceDisk(root, launch.taskId);
      await rm(workspace, { recursive: true, force: true });
      slot?.release();
    };

    await mkdir(root, { recursive: true, mode: 0o700 });
    // A workspace left by an earlier attempt (a crash) is not resumed: start clean.
    await removeWorkspace();
    await mkdir(workspace, { mode: 0o700 });
    let argv: string[];
    let prefixArgv: string[] = [];
    // With a task user: what drops to it, run before nsenter for exec (prefixArgv holds the rest).
    let execUser: string[] = [];
    let execSandboxAt = 0;
    let nsenter: string | undefined;
    let env: Record<string, string>;
    let limitsApplied = false;
    try {
      // The workspace is its own file system of the lease's size (workspace-disk.ts), before the bundle lands in it.
      await mountWorkspaceDisk(this.options.bounds, launch.devices.length, root, launch.taskId);
      await fetchBundle({
        url: spec.bundle.url,
        sha256: spec.bundle.sha256,
        destFile: bundleFile,
        maxBytes: this.bundleLimits.maxBytes,
        timeoutMs: this.bundleLimits.fetchTimeoutMs,
        signal: options.signal,
        policy: this.options.fetchPolicy,
      });
      try {
        await unpackBundle(bundleFile, workspace, this.bundleLimits);
      } finally {
        await rm(bundleFile, { force: true });
      }
      slot = mapped ? await this.slots.acquire(launch.taskId) : undefined;
      const taskUser = slot?.user;
      await seedCheckpointDir(workspace, launch);
      if (taskUser) await chownTree(workspace, taskUser.uid, taskUser.gid);

      const tmpDir = sandbox.sandboxed ? "/tmp" : path.join(workspace, ".tmp");
      if (!sandbox.sandboxed) await mkdir(tmpDir, { recursive: true });
      const hostPath = this.options.taskPath ?? process.env.PATH ?? DEFAULT_PATH;
      const visibleRoots = sandbox.sandboxed ? [...SYSTEM_READ_ONLY_PATHS, ...(this.options.readOnlyPaths ?? [])] : undefined;
      env = taskEnvironment(launch, workspace, tmpDir, taskSearchPath(hostPath, visibleRoots));
      const command = await resolveCommand(spec, workspace, env.PATH!, visibleRoots ? { visibleRoots, hostPath } : undefined);

      const prefix: string[] = [];
      bounded = await boundedTask(this.options.bounds, launch.taskId, launch.devices.length, this.options.limits ?? {});
      prefix.push(...bounded.prefix);
      const limits = await clampToHardLimits(bounded.limits);
      if (hasLimits(limits)) {
        const prlimit = await findExecutable("prlimit", process.env.PATH ?? DEFAULT_PATH);
        if (prlimit) {
          prefix.push(...prlimitPrefix(prlimit, limits));
          limitsApplied = true;
        } else if (bounded.bounds) {
          throw new RuntimeUnavailableError("process", "prlimit (util-linux) is not installed: the lease's memory and process bounds cannot be applied", [
            'Install util-linux, or set provider.runtime.bounds.enforce to "off" to run tasks unbounded.',
          ]);
        } else if (!this.warnedNoPrlimit) {
          this.warnedNoPrlimit = true;
          this.logger.warn("prlimit not found: task resource limits are not applied", { limits });
        }
      }
      prefixArgv = [...prefix];
      if (sandbox.sandboxed) {
        const readOnlyPaths = this.options.readOnlyPaths ?? [];
        const hidden = this.options.hiddenPaths ?? [];
        const bwrapOptions = {
          bwrapPath: this.options.bwrapPath ?? "bwrap",
          workspace,
          readOnlyPaths,
          deviceNodes: launch.devices.length > 0 ? await nvidiaDeviceNodes() : [],
          masks: await maskArgs(hidden, [...SYSTEM_READ_ONLY_PATHS, ...readOnlyPaths], taskUser),
          ...(bounded.bounds ? { tmpBytes: bounded.bounds.tmpBytes } : {}),
          ...(mapped ? { workspaceSource: mapped.stage, namespaceRoot: true } : {}),
          inputs: inputs.map((input, index) => ({ source: mapped ? mapped.inputStages[index]! : input.hostPath, mount: input.mount })),
        };
        // A root node: bubblewrap runs as the task user, the workspace and inputs staged where it can bind them.
        const staged = inputs.map((input, index) => [input.hostPath, mapped?.inputStages[index] ?? ""] as const);
        const asTaskUser = mapped && taskUser ? taskUserPrefix(mapped.tools, taskUser, workspace, mapped.stage, staged) : [];
        // fd 3 always (the sandbox's pid, for exec and port forwarding); fd 4 holds the command
        // until pasta has attached the task's network.
        prefix.push(...asTaskUser, ...bubblewrapArgs({ ...bwrapOptions, infoFd: 3, ...(networked ? { blockFd: 4 } : {}) }));
        // exec: the same filesystem view, run inside the task's user and network namespaces.
        if (mapped) execUser = asTaskUser;
        execSandboxAt = prefixArgv.length;
        prefixArgv.push(...bubblewrapArgs({ ...bwrapOptions, keepNetwork: true }));
        nsenter = await findExecutable("nsenter", process.env.PATH ?? DEFAULT_PATH);
        if (!nsenter && !this.warnedNoNsenter) {
          this.warnedNoNsenter = true;
          this.logger.warn("nsenter (util-linux) not found: exec into sandboxed tasks is unavailable");
        }
      } else if (!this.warnedUnsandboxed) {
        this.warnedUnsandboxed = true;
        this.logger.warn(UNSANDBOXED_WARNING, { reason: sandbox.reason });
      }
      argv = [...prefix, ...command];
      if (!sandbox.sandboxed) prefixArgv = prefix;
    } catch (error) {
      await removeWorkspace();
      throw redactError(error, new Redactor(secretsOf(spec)));
    }

    const logs = new LogBuffer(this.options.logs);
    if (!sandbox.sandboxed) logs.push("system", `Running unsandboxed: ${sandbox.reason}`);
    const isShell = typeof spec.command === "string";
    let network: TaskNetwork | undefined;
    let attaching: Promise<TaskNetwork> | undefined;
    const pastaPidFile = path.join(root, `.${launch.taskId}.pasta.pid`);
    let sandboxPid: number | undefined;
    const networkSetup = networked
      ? {
          extraPipes: 2,
          afterSpawn: async (child: ManagedProcess) => {
            const pid = await readSandboxPid(child);
            sandboxPid = pid;
            attaching = attachTaskNetwork(pid, {
              tools: await this.tools(),
              loopbackPorts: this.options.networkAllow?.loopbackPorts ?? [],
              allow: this.allowNetworks,
              pidFile: pastaPidFile,
              ...(mapped ? { namespaceFds: true } : {}),
            });
            network = await attaching;
            // bwrap reads one byte from --block-fd, then runs the command.
            child.pipe(4)?.end("1");
          },
          afterExit: async () => {
            // The task may end while its network is still being attached: let that finish (it is
            // bounded by its timeouts), then stop pasta, which would otherwise outlive the task.
            await attaching?.catch(() => undefined);
            if (network) await network.stop();
            else await stopTaskPasta(pastaPidFile);
          },
        }
      : sandbox.sandboxed
        ? {
            extraPipes: 1,
            afterSpawn: async (child: ManagedProcess) => {
              sandboxPid = await readSandboxPid(child);
            },
          }
        : {};
    const execArgv = (command: readonly string[]): string[] => {
      if (!sandbox.sandboxed) return [...prefixArgv, ...command];
      if (sandboxPid === undefined) throw new TaskIoUnavailableError("The task's sandbox is still being set up: try again in a moment");
      const enter = [nsenter!, "-t", String(sandboxPid), "-U", "--preserve-credentials", "-n", "--"];
      // As the task user: its cgroup and limits first (joining the cgroup takes root), then the
      // drop to the task user, which owns the task's namespaces and enters them without privilege.
      if (execUser.length > 0) return [...prefixArgv.slice(0, execSandboxAt), ...execUser, ...enter, ...prefixArgv.slice(execSandboxAt), ...command];
      // Inside the task's user and network namespaces (it sees the task's loopback and servers),
      // then the task's limits and a fresh bubblewrap with its filesystem view.
      return [...enter, ...prefixArgv, ...command];
    };
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
        // filesystem, same user, and (through nsenter) the task's own network. A fresh bubblewrap
        // instance (its own PID namespace): the command sees the task's files, not its processes.
        ...(sandbox.sandboxed && !nsenter ? {} : { execArgv }),
        ...networkSetup,
        // sh reports a command it cannot find with 127; bubblewrap with 1 and "execvp" on stderr
        // cannot happen for argv commands, which are resolved before the start.
        classifyExit: (exit) =>
          isShell && exit.code === 127 ? { name: "CommandNotFoundError", message: "The shell could not find the command (exit code 127)" } : outOfMemory(bounded, exit),
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

/** The sandboxed process's pid, from the JSON bwrap writes to --info-fd (fd 3) once its namespaces exist. */
function readSandboxPid(child: ManagedProcess, timeoutMs = 15_000): Promise<number> {
  const info = child.pipe(3);
  if (!info) return Promise.reject(new SandboxNetworkError("bubblewrap's info pipe is missing"));
  return new Promise<number>((resolve, reject) => {
    let text = "";
    const done = (error: Error | undefined, pid?: number) => {
      clearTimeout(timer);
      info.off("data", onData);
      info.off("close", onClose);
      if (error) reject(error);
      else resolve(pid!);
    };
    const onData = (chunk: Buffer) => {
      text += chunk.toString("utf8");
      const match = /"child-pid"\s*:\s*(\d+)/.exec(text);
      if (match) done(undefined, Number(match[1]));
      else if (text.length > 65_536) done(new SandboxNetworkError("bubblewrap's info is not what was expected"));
    };
    const onClose = () => done(new SandboxNetworkError("bubblewrap exited before its sandbox was ready"));
    const timer = setTimeout(() => done(new SandboxNetworkError(`no answer from bubblewrap in ${timeoutMs} ms`)), timeoutMs);
    info.on("data", onData);
    info.once("close", onClose);
  });
}

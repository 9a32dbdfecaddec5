/**
 * The container engine as it behaves on real hosts: which engine answers (`docker info` /
 * `podman info` must reach it), which OCI runtime can actually start a container here (Podman's
 * default crun fails on hosts with hybrid cgroups: "cgroups in hybrid mode not supported"; the
 * next candidate, runc, is taken and the fallback said once), the host's hard rlimits (Podman's
 * default rlimits exceed them: "setrlimit RLIMIT_NOFILE: Operation not permitted"), the
 * self-test container, the containers' state after they end, and the containers a node owns.
 *
 * The self-test needs no image download: an empty image (`localhost/suanli-probe:empty`, made by
 * importing an empty tar) is run with the task flags and a command that does not exist. The OCI
 * runtime answering "command not found" (exit 127) proves that the engine created the container
 * and the runtime set up its namespaces, cgroups, rlimits, devices and mounts: every step that
 * fails on a misconfigured host happens before the exec.
 */
import { execFileText } from "../../process/child.js";
import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { clampToHardLimits, type ResourceLimits } from "./limits.js";

export type EngineKind = "docker" | "podman";
export type ContainerEngine = { kind: EngineKind; path: string; version: string; defaultOciRuntime: string };
export type EngineDetection = { engine: ContainerEngine | null; reasons: string[] };

/** The empty image the self-test runs (imported locally, never pulled). */
export const PROBE_IMAGE = "localhost/suanli-probe:empty";
/** The command the self-test asks for: it does not exist, so the runtime answers "not found". */
export const PROBE_COMMAND = "/suanli-probe-not-a-command";

/** Engine messages that mean the task's own command could not be run (the renter's image or command). */
const COMMAND_NOT_FOUND = /command that was not found|executable file not found|no such file or directory/i;
const COMMAND_NOT_RUNNABLE = /permission denied: OCI permission denied|exec format error|is a directory/i;

export type EngineResult = { code: number | null; stdout: string; stderr: string; missing: boolean };

/** Variables the engine client itself reads (daemon address, auth); the only ones it gets from the node. */
const CLIENT_ENV = [
  "PATH",
  "HOME",
  "DOCKER_HOST",
  "DOCKER_CONTEXT",
  "DOCKER_CONFIG",
  "DOCKER_CERT_PATH",
  "DOCKER_TLS_VERIFY",
  "XDG_RUNTIME_DIR",
  "CONTAINER_HOST",
  "CONTAINERS_CONF",
  "REGISTRY_AUTH_FILE",
];

/** The node's values of CLIENT_ENV: the environment a task's `start --attach` runs in. */
export function engineClientEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const key of CLIENT_ENV) if (process.env[key] !== undefined) env[key] = process.env[key]!;
  return env;
}

/**
 * Runs the engine client (or any tool) and collects its output; never throws. `cwd`: where it
 * runs. Podman's `init`/`start`/`run`/`exec` spawn conmon in the client's working directory, and
 * conmon creates a file named `oom` there (`open("oom", O_CREAT)`, following a symlink) when the
 * kernel OOM-kills in the container: those calls run in the task's engine directory
 * (container-runtime.ts), never the node's own working directory or a folder the task can write.
 */
export function runEngine(file: string, args: string[], timeoutMs: number, input?: string, cwd?: string): Promise<EngineResult> {
  return new Promise((resolve) => {
    const child = execFileText(file, args, { timeout: timeoutMs, maxBuffer: 4 * 1024 * 1024, cwd }, (error, stdout, stderr) => {
      const missing = (error as NodeJS.ErrnoException | null)?.code === "ENOENT";
      resolve({ code: error ? (typeof error.code === "number" ? error.code : null) : 0, stdout, stderr, missing });
    });
    if (input !== undefined) child.stdin?.end(input);
  });
}

/**
 * The host directory the engine client runs in for a task (0700, the node's, never mounted in the
 * container): conmon, spawned by `init` and `exec`, inherits it and creates its `oom` marker there
 * (runEngine). Removed with the workspace.
 */
export function engineDir(root: string, taskId: string): string {
  return path.join(root, `.${taskId}.engine`);
}

/** The engine's last `Error: ...` line (or its last line): what to tell the operator. */
export function engineErrorLine(output: string): string {
  const lines = output
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line !== "");
  const error = [...lines].reverse().find((line) => /^(Error|docker: Error)/.test(line) || /level=error/.test(line));
  return (error ?? lines.at(-1) ?? "").replace(/^(docker: )?Error( response from daemon)?:\s*/, "").slice(0, 500);
}

/** Whether an engine message says the container's command does not exist or cannot be executed (the renter's). */
export function isCommandError(message: string): "not-found" | "not-runnable" | undefined {
  if (COMMAND_NOT_FOUND.test(message)) return "not-found";
  if (COMMAND_NOT_RUNNABLE.test(message)) return "not-runnable";
  return undefined;
}

/**
 * Finds a working engine: `docker info` / `podman info` must succeed, which needs a reachable
 * daemon (Docker) or a usable setup (Podman). Says why each candidate was not taken.
 */
export async function detectContainerEngine(
  preference: "auto" | EngineKind = "auto",
  paths: Partial<Record<EngineKind, string>> = {},
  timeoutMs = 10_000,
): Promise<EngineDetection> {
  const candidates: EngineKind[] = preference === "auto" ? ["docker", "podman"] : [preference];
  const reasons: string[] = [];
  for (const kind of candidates) {
    const file = paths[kind] ?? kind;
    const format = kind === "docker" ? "{{.ServerVersion}} {{.DefaultRuntime}}" : "{{.Version.Version}} {{.Host.OCIRuntime.Name}}";
    const result = await runEngine(file, ["info", "--format", format], timeoutMs);
    if (result.missing) {
      reasons.push(`${kind}: not installed`);
      continue;
    }
    const [version, defaultOciRuntime] = result.stdout.trim().split(/\s+/);
    if (result.code !== 0 || !version) {
      const why = (result.stderr || result.stdout).trim().split("\n")[0] || `exit code ${result.code}`;
      reasons.push(`${kind}: ${kind} info failed (${why})`);
      continue;
    }
    return { engine: { kind, path: file, version, defaultOciRuntime: defaultOciRuntime || (kind === "docker" ? "runc" : "crun") }, reasons };
  }
  return { engine: null, reasons };
}

export type HostHardLimits = { openFiles: number | undefined; processes: number | undefined };

/**
 * The highest RLIMIT_NOFILE and RLIMIT_NPROC a container can be given here: the node's hard limits,
 * and at most the kernel's `fs.nr_open` and `kernel.pid_max` (runc fails with "error setting rlimit
 * type 6: operation not permitted" above pid_max on hosts measured for this project, although the
 * node's own hard limit is higher). Undefined: unlimited or unreadable.
 */
export async function hostHardLimits(procLimits = "/proc/self/limits", procSys = "/proc/sys"): Promise<HostHardLimits> {
  const text = await readFile(procLimits, "utf8").catch(() => "");
  const hard = (label: string): number | undefined => {
    const line = text.split("\n").find((row) => row.startsWith(label));
    const value = line?.slice(label.length).trim().split(/\s+/)[1];
    return value && /^\d+$/.test(value) ? Number(value) : undefined;
  };
  const sysctl = async (name: string): Promise<number | undefined> => {
    const value = (await readFile(`${procSys}/${name}`, "utf8").catch(() => "")).trim();
    return /^\d+$/.test(value) ? Number(value) : undefined;
  };
  const min = (...values: (number | undefined)[]) => {
    const known = values.filter((value): value is number => value !== undefined);
    return known.length > 0 ? Math.min(...known) : undefined;
  };
  return { openFiles: min(hard("Max open files"), await sysctl("fs/nr_open")), processes: min(hard("Max processes"), await sysctl("kernel/pid_max")) };
}

/** The config's rlimits at most the node's hard limits; nofile and nproc always set (the engines' defaults can exceed the host's). */
export async function clampedContainerLimits(configured: ResourceLimits): Promise<ResourceLimits> {
  const hard = await hostHardLimits();
  const clamped = await clampToHardLimits(configured);
  const pick = (value: number | undefined, max: number | undefined) => (value === undefined ? max : max === undefined ? value : Math.min(value, max));
  return { ...clamped, openFiles: pick(configured.openFiles, hard.openFiles), processes: pick(configured.processes, hard.processes) };
}

/** A label value naming the node that owns a container: its workspace root (one node per root). */
export function ownerId(workspaceRoot: string): string {
  return createHash("sha256").update(workspaceRoot).digest("hex").slice(0, 16);
}

export const OWNER_LABEL = "suanli.owner";
export const TASK_LABEL = "suanli.task";

/** Names of the containers labelled as this node's, in any state. */
export async function ownedContainers(engine: ContainerEngine, owner: string): Promise<string[]> {
  const listed = await runEngine(engine.path, ["ps", "--all", "--filter", `label=${OWNER_LABEL}=${owner}`, "--format", "{{.Names}}"], 60_000);
  if (listed.code !== 0) throw new Error(`${engine.kind} ps failed: ${engineErrorLine(listed.stderr || listed.stdout)}`);
  return listed.stdout
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line !== "");
}

/** Removes containers at once (SIGKILL if they run); returns how many existed. */
export async function removeContainers(engine: ContainerEngine, names: readonly string[]): Promise<number> {
  if (names.length === 0) return 0;
  const args = engine.kind === "podman" ? ["rm", "--force", "--time", "0", ...names] : ["rm", "--force", ...names];
  const removed = await runEngine(engine.path, args, 120_000);
  return removed.stdout.split("\n").filter((line) => line.trim() !== "").length;
}

export type ContainerState = {
  status: string;
  exitCode: number;
  /** Whether the container's process was ever started (the task's command ran). */
  started: boolean;
  oomKilled: boolean;
  error: string;
};

/** The container's state, or undefined when it does not exist. */
export async function inspectContainer(engine: ContainerEngine, name: string): Promise<ContainerState | undefined> {
  const inspected = await runEngine(engine.path, ["inspect", "--type", "container", "--format", "{{json .State}}", name], 60_000);
  if (inspected.code !== 0) return undefined;
  try {
    const state = JSON.parse(inspected.stdout.trim()) as { Status?: string; ExitCode?: number; StartedAt?: string; OOMKilled?: boolean; Error?: string; Pid?: number };
    const startedAt = Date.parse(state.StartedAt ?? "");
    return {
      status: state.Status ?? "unknown",
      exitCode: state.ExitCode ?? -1,
      started: Number.isFinite(startedAt) && startedAt > Date.UTC(1971, 0, 1),
      oomKilled: state.OOMKilled === true,
      error: state.Error ?? "",
    };
  } catch {
    return undefined;
  }
}

/** The host process id of the container's init (after `init`/`start`), or undefined. */
export async function containerPid(engine: ContainerEngine, name: string): Promise<number | undefined> {
  const inspected = await runEngine(engine.path, ["inspect", "--type", "container", "--format", "{{.State.Pid}}", name], 60_000);
  const pid = Number(inspected.stdout.trim());
  return inspected.code === 0 && Number.isInteger(pid) && pid > 0 ? pid : undefined;
}

/** Imports the empty self-test image when the engine does not have it yet (no download). */
export async function ensureProbeImage(engine: ContainerEngine): Promise<void> {
  const exists = await runEngine(engine.path, ["image", "inspect", "--format", "{{.Id}}", PROBE_IMAGE], 60_000);
  if (exists.code === 0) return;
  // An empty tar archive: 1024 zero bytes (two end-of-archive blocks).
  const imported = await runEngine("sh", ["-c", 'head -c 1024 /dev/zero | "$1" import - "$2"', "sh", engine.path, PROBE_IMAGE], 120_000);
  if (imported.code !== 0) throw new Error(`${engine.kind} import of the empty self-test image failed: ${engineErrorLine(imported.stderr || imported.stdout)}`);
}

/**
 * Runs the self-test container with `flags` (OCI runtime, rlimits, network, devices, the
 * operator's extra flags). Resolves with undefined when the runtime got as far as the exec
 * ("command not found"), or with the engine's error otherwise.
 */
export async function probeContainer(engine: ContainerEngine, flags: readonly string[], labels: Record<string, string>, timeoutMs = 120_000): Promise<string | undefined> {
  const name = `suanli-probe-${process.pid}-${Date.now().toString(36)}`;
  const labelArgs = Object.entries(labels).flatMap(([key, value]) => ["--label", `${key}=${value}`]);
  const result = await runEngine(engine.path, ["run", "--rm", "--name", name, ...labelArgs, ...flags, PROBE_IMAGE, PROBE_COMMAND], timeoutMs);
  // A container left behind by a failed start (Podman keeps "created" ones on some errors).
  await removeContainers(engine, [name]).catch(() => 0);
  const message = engineErrorLine(result.stderr || result.stdout);
  if (result.code === 127 && isCommandError(message) === "not-found") return undefined;
  if (result.code === 0) return undefined;
  return message || `exit code ${result.code}`;
}

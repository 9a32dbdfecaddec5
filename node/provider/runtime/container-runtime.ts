/**
 * The container runtime: the task's image run by Docker or Podman, where a working engine exists
 * (the client answering is not enough: `info` must reach the daemon). The leased GPUs are passed
 * as devices (`--gpus "device=<uuids>"` for Docker with the NVIDIA Container Toolkit,
 * `--device nvidia.com/gpu=<uuid>` CDI names for Podman), the workspace (with the unpacked bundle,
 * when the task has one) is mounted at /workspace, limits become engine flags, and the engine
 * does the stop: SIGTERM, the grace period, SIGKILL (`stop --time`).
 *
 * Secret env values never appear in the engine's argv (visible in `ps`): they go through a
 * 0600 env file outside the workspace, removed when the task ends. Plain values use `-e`.
 */
import { execFile } from "node:child_process";
import { mkdir, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { InvalidInputError } from "../../../common/errors.js";
import { silentLogger, type Logger } from "../../log/logger.js";
import { RuntimeUnavailableError } from "../errors.js";
import type { UnitMetrics } from "../inventory/inventory.js";
import { fetchBundle, unpackBundle } from "./bundle.js";
import { checkImageReference, compileFetchPolicy, type FetchPolicy } from "./fetch-policy.js";
import { ImageStore, type AcquiredImage } from "./images.js";
import type { ResourceLimits } from "./limits.js";
import { LogBuffer } from "./logs.js";
import { DEFAULT_BUNDLE_LIMITS, type BundleLimits } from "./process-runtime.js";
import { reapTaskProcesses } from "./orphans.js";
import { groupEnvironment } from "./process-runtime.js";
import { RunningTask, type Runtime, type TaskHandle } from "./runtime.js";
import { Redactor, redactError, secretsOf, TASK_ID_PATTERN, type TaskLaunch, type TaskSpec } from "./task.js";

export type EngineKind = "docker" | "podman";
export type ContainerEngine = { kind: EngineKind; path: string; version: string };
export type EngineDetection = { engine: ContainerEngine | null; reasons: string[] };

/** Variables the engine client itself reads (daemon address, auth); the only ones it gets from the node. */
const CLIENT_ENV = ["PATH", "HOME", "DOCKER_HOST", "DOCKER_CONTEXT", "DOCKER_CONFIG", "DOCKER_CERT_PATH", "DOCKER_TLS_VERIFY", "XDG_RUNTIME_DIR", "CONTAINER_HOST", "CONTAINERS_CONF", "REGISTRY_AUTH_FILE"];

function run(file: string, args: string[], timeoutMs: number): Promise<{ code: number | null; stdout: string; stderr: string; missing: boolean }> {
  return new Promise((resolve) => {
    execFile(file, args, { timeout: timeoutMs, encoding: "utf8" }, (error, stdout, stderr) => {
      const missing = (error as NodeJS.ErrnoException | null)?.code === "ENOENT";
      resolve({ code: error ? (typeof error.code === "number" ? error.code : null) : 0, stdout, stderr, missing });
    });
  });
}

/**
 * Finds a working engine: `docker info` / `podman info` must succeed, which needs a reachable
 * daemon (Docker) or a usable rootless setup (Podman). Says why each candidate was not taken.
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
    const format = kind === "docker" ? "{{.ServerVersion}}" : "{{.Version.Version}}";
    const result = await run(file, ["info", "--format", format], timeoutMs);
    if (result.missing) {
      reasons.push(`${kind}: not installed`);
      continue;
    }
    if (result.code !== 0 || result.stdout.trim() === "") {
      const why = (result.stderr || result.stdout).trim().split("\n")[0] || `exit code ${result.code}`;
      reasons.push(`${kind}: ${kind} info failed (${why})`);
      continue;
    }
    return { engine: { kind, path: file, version: result.stdout.trim() }, reasons };
  }
  return { engine: null, reasons };
}

export type ContainerRunOptions = {
  engine: EngineKind;
  name: string;
  taskId: string;
  image: string;
  command: TaskSpec["command"];
  workspace: string;
  devices: readonly string[];
  /**
   * AMD machines: the /dev/dri render node of each device, in order. The container then gets
   * /dev/kfd and exactly these nodes (ROCm sees only the GPUs whose render node it can open)
   * instead of the NVIDIA device flags.
   */
  amdRenderNodes?: readonly string[] | undefined;
  /** Plain variables, passed as `-e NAME=value`. */
  env: Record<string, string>;
  /** Env file with the secret variables, or undefined when there are none. */
  envFile?: string | undefined;
  limits: ResourceLimits;
  network: boolean;
  stopGraceMs: number;
};

/** The engine's `run` arguments (after the binary). Pure, so it is tested without an engine. */
export function buildContainerRunArgs(options: ContainerRunOptions): string[] {
  const args = ["run", "--rm", "--init", "--name", options.name, "--label", `suanli.task=${options.taskId}`];
  args.push("--stop-timeout", String(Math.max(1, Math.ceil(options.stopGraceMs / 1000))));
  args.push("--security-opt", "no-new-privileges");
  if (options.devices.length > 0 && options.amdRenderNodes) {
    args.push("--device", "/dev/kfd");
    for (const node of options.amdRenderNodes) args.push("--device", node);
  } else if (options.devices.length > 0) {
    if (options.engine === "docker") {
      // The quotes are part of the value: Docker splits --gpus on commas otherwise.
      args.push("--gpus", `"device=${options.devices.join(",")}"`);
    } else {
      for (const device of options.devices) args.push("--device", `nvidia.com/gpu=${device}`);
    }
  }
  if (!options.network) args.push("--network", "none");
  const { limits } = options;
  if (limits.memoryBytes !== undefined) args.push("--memory", String(Math.floor(limits.memoryBytes)));
  if (limits.processes !== undefined) args.push("--pids-limit", String(Math.floor(limits.processes)));
  if (limits.cpuSeconds !== undefined) args.push("--ulimit", `cpu=${Math.floor(limits.cpuSeconds)}:${Math.floor(limits.cpuSeconds)}`);
  if (limits.fileSizeBytes !== undefined) args.push("--ulimit", `fsize=${Math.floor(limits.fileSizeBytes)}:${Math.floor(limits.fileSizeBytes)}`);
  if (limits.openFiles !== undefined) args.push("--ulimit", `nofile=${Math.floor(limits.openFiles)}:${Math.floor(limits.openFiles)}`);
  // :Z relabels the mount for SELinux hosts (Podman's usual home); harmless elsewhere.
  args.push("--volume", `${options.workspace}:/workspace${options.engine === "podman" ? ":Z" : ""}`, "--workdir", "/workspace");
  const env: Record<string, string> = {
    HOME: "/workspace",
    ...options.env,
    CUDA_VISIBLE_DEVICES: options.devices.length > 0 ? options.devices.map((_, i) => String(i)).join(",") : "",
    SUANLI_TASK_ID: options.taskId,
    SUANLI_WORKSPACE: "/workspace",
    SUANLI_OUTPUT_DIR: "/workspace/output",
  };
  for (const [name, value] of Object.entries(env)) args.push("--env", `${name}=${value}`);
  if (options.envFile) args.push("--env-file", options.envFile);
  args.push(options.image);
  if (typeof options.command === "string") args.push("/bin/sh", "-c", options.command);
  else args.push(...options.command);
  return args;
}

/** The container's name: found again by it after a restart. */
function containerName(taskId: string): string {
  return `suanli-${taskId}`.replace(/[^A-Za-z0-9_.-]/g, "-");
}

export type ContainerRuntimeOptions = {
  workspaceRoot: string;
  engine?: "auto" | EngineKind;
  enginePaths?: Partial<Record<EngineKind, string>>;
  network?: boolean;
  limits?: ResourceLimits;
  bundle?: Partial<BundleLimits>;
  /** Where renter-supplied bundle URLs may be fetched from. */
  fetchPolicy?: Partial<FetchPolicy>;
  logs?: { maxLines?: number; maxLineChars?: number };
  stopGraceMs?: number;
  sampleGpus?: (devices: string[]) => Promise<UnitMetrics[]>;
  /** AMD inventories: the render node of a device (amd.ts); undefined on NVIDIA machines. */
  amdRenderNode?: ((device: string) => string) | undefined;
  logger?: Logger;
  /** The image cache (images.ts): its size cap and the registries pulled without TLS verification. */
  images?: { cacheBytes?: number; insecureRegistries?: readonly string[]; pullTimeoutMs?: number };
};

/** Default size of the image cache: 100 GiB. */
export const DEFAULT_IMAGE_CACHE_BYTES = 100 * 1024 ** 3;

export class ContainerRuntime implements Runtime {
  readonly kind = "container" as const;
  private readonly logger: Logger;
  private detection: Promise<EngineDetection> | undefined;

  /** Pulled and loaded images, reused by digest and pruned by size. */
  readonly images: ImageStore;

  constructor(private readonly options: ContainerRuntimeOptions) {
    this.logger = options.logger ?? silentLogger();
    const bundle = { ...DEFAULT_BUNDLE_LIMITS, ...options.bundle };
    this.images = new ImageStore({
      engine: async () => (await this.engine()).engine,
      dir: path.join(path.resolve(options.workspaceRoot), ".images"),
      cacheBytes: options.images?.cacheBytes ?? DEFAULT_IMAGE_CACHE_BYTES,
      fetchPolicy: options.fetchPolicy,
      archive: { maxBytes: bundle.maxBytes, fetchTimeoutMs: bundle.fetchTimeoutMs, maxUnpackedBytes: bundle.maxUnpackedBytes },
      insecureRegistries: options.images?.insecureRegistries,
      pullTimeoutMs: options.images?.pullTimeoutMs,
      logger: this.logger,
    });
  }

  /** The engine this runtime uses (detected once). */
  engine(): Promise<EngineDetection> {
    this.detection ??= detectContainerEngine(this.options.engine ?? "auto", this.options.enginePaths);
    return this.detection;
  }

  async reap(taskId: string, hints: { pid?: number | undefined; startTicks?: number | undefined } = {}): Promise<number> {
    if (!TASK_ID_PATTERN.test(taskId)) return 0;
    const root = path.resolve(this.options.workspaceRoot);
    const workspace = path.join(root, taskId);
    // The container belongs to the engine's daemon and outlives the client process: remove it by name.
    let killed = 0;
    const { engine } = await this.engine();
    if (engine) {
      const removed = await run(engine.path, ["rm", "--force", containerName(taskId)], 60_000);
      if (removed.code === 0 && removed.stdout.trim() !== "") killed++;
    }
    killed += await reapTaskProcesses(workspace, hints);
    await rm(path.join(root, `.${taskId}.env`), { force: true });
    await rm(path.join(root, `.${taskId}.bundle`), { force: true });
    await rm(workspace, { recursive: true, force: true });
    return killed;
  }

  async prepare(launch: TaskLaunch, options: { signal?: AbortSignal } = {}): Promise<TaskHandle> {
    if (!TASK_ID_PATTERN.test(launch.taskId)) {
      throw new InvalidInputError("task launch", [{ path: "taskId", message: "expected 1-128 letters, digits, '.', '_' or '-'" }]);
    }
    const { spec } = launch;
    if (!spec.image && !spec.imageArchive) throw new InvalidInputError("task", [{ path: "image", message: "the container runtime needs image (a registry reference) or imageArchive (an archive by URL with its sha256)" }]);
    if (spec.image) checkImageReference(spec.image, compileFetchPolicy(this.options.fetchPolicy));
    const secrets = secretsOf(spec);
    const badSecrets = [...secrets].filter(([, value]) => /[\r\n]/.test(value)).map(([name]) => ({ path: `env.${name}`, message: "a secret for the container runtime cannot contain a line break" }));
    if (badSecrets.length > 0) throw new InvalidInputError("task", badSecrets);
    const { engine, reasons } = await this.engine();
    if (!engine) throw new RuntimeUnavailableError("container", reasons.join("; ") || "no engine found");
    // Pulled or loaded here, before the lease is activated: the renter never pays for it.
    const image: AcquiredImage = await this.images.acquire(
      spec.image ? { kind: "registry", reference: spec.image } : { kind: "archive", url: spec.imageArchive!.url, sha256: spec.imageArchive!.sha256 },
      { signal: options.signal },
    );

    const root = path.resolve(this.options.workspaceRoot);
    const workspace = path.join(root, launch.taskId);
    const envFile = secrets.size > 0 ? path.join(root, `.${launch.taskId}.env`) : undefined;
    const removeWorkspace = async () => {
      image.release();
      await rm(workspace, { recursive: true, force: true });
    };
    const grace = this.options.stopGraceMs ?? 10_000;
    try {
      await mkdir(root, { recursive: true, mode: 0o700 });
      await rm(workspace, { recursive: true, force: true });
      await mkdir(workspace, { mode: 0o700 });
      if (spec.bundle) {
        const limits = { ...DEFAULT_BUNDLE_LIMITS, ...this.options.bundle };
        const bundleFile = path.join(root, `.${launch.taskId}.bundle`);
        await fetchBundle({ url: spec.bundle.url, sha256: spec.bundle.sha256, destFile: bundleFile, maxBytes: limits.maxBytes, timeoutMs: limits.fetchTimeoutMs, signal: options.signal, policy: this.options.fetchPolicy });
        try {
          await unpackBundle(bundleFile, workspace, limits);
        } finally {
          await rm(bundleFile, { force: true });
        }
      }
      if (envFile) await writeFile(envFile, [...secrets].map(([name, value]) => `${name}=${value}\n`).join(""), { mode: 0o600 });
    } catch (error) {
      await removeWorkspace();
      if (envFile) await rm(envFile, { force: true });
      throw redactError(error, new Redactor(secrets));
    }

    const plainEnv: Record<string, string> = {};
    for (const [name, value] of Object.entries(spec.env)) if (typeof value === "string") plainEnv[name] = value;
    const name = containerName(launch.taskId);
    const argv = [
      engine.path,
      ...buildContainerRunArgs({
        engine: engine.kind,
        name,
        taskId: launch.taskId,
        // By id: a name in the engine's store can be re-pointed, the id is what was pulled or checked.
        image: image.id,
        command: spec.command,
        workspace,
        devices: launch.devices,
        amdRenderNodes: this.options.amdRenderNode ? launch.devices.map(this.options.amdRenderNode) : undefined,
        env: { ...plainEnv, ...groupEnvironment(launch) },
        envFile,
        limits: this.options.limits ?? {},
        network: this.options.network ?? true,
        stopGraceMs: grace,
      }),
    ];
    const logs = new LogBuffer(this.options.logs);
    const size = `${(image.sizeBytes / 1024 ** 2).toFixed(1)} MB`;
    logs.push("system", image.cached ? `Image ${image.source}: cached (sha256:${image.id.slice(0, 12)}, ${size}), not pulled again` : `Image ${image.source}: ${spec.image ? "pulled" : "loaded"} in ${(image.ms / 1000).toFixed(1)} s before the lease started (sha256:${image.id.slice(0, 12)}, ${size})`);
    const clientEnv: Record<string, string> = {};
    for (const key of CLIENT_ENV) if (process.env[key] !== undefined) clientEnv[key] = process.env[key]!;

    return new RunningTask({
      launch,
      workspace,
      launcher: {
        argv,
        cwd: workspace,
        env: clientEnv,
        groupUsage: false,
        // Inside the running container: same namespaces, cgroup limits, user and environment.
        execArgv: (command) => [engine.path, "exec", "-i", "--workdir", "/workspace", name, ...command],
        stop: async (proc, graceMs) => {
          const seconds = Math.max(0, Math.ceil(graceMs / 1000));
          const stopped = await run(engine.path, ["stop", "--time", String(seconds), name], graceMs + 30_000);
          if (stopped.code !== 0) await proc.terminate(graceMs);
          else await proc.exited;
        },
        classifyExit: (exit) => {
          // docker/podman run: 125 = the engine failed, 126 = command not runnable, 127 = not found.
          if (exit.code === 125) return { name: "RuntimeUnavailableError", message: "The container engine could not run the container (image missing or engine error, see the log)" };
          if (exit.code === 126) return { name: "CommandNotFoundError", message: "The command in the container cannot be invoked (exit code 126)" };
          if (exit.code === 127) return { name: "CommandNotFoundError", message: "The command was not found in the container (exit code 127)" };
          return undefined;
        },
        afterExit: async () => {
          image.release();
          if (envFile) await rm(envFile, { force: true });
        },
      },
      logs,
      redactor: new Redactor(secrets),
      sandboxed: true,
      limitsApplied: true,
      defaultGraceMs: grace,
      removeWorkspace: async () => {
        if (envFile) await rm(envFile, { force: true });
        await removeWorkspace();
      },
      sampleGpus: this.options.sampleGpus,
      logger: this.logger,
    });
  }
}

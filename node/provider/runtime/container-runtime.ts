/**
 * The container runtime: the task's image run by Podman or Docker (container-engine.ts finds the
 * engine and the OCI runtime that works here; container-args.ts builds the flags).
 *
 * A task's container is created and initialised in `prepare()`, before the lease is activated:
 * an engine or OCI-runtime failure (an rlimit above the host's, an unresolvable CDI device, cgroups
 * the runtime cannot use) is a ContainerEngineError there, the provider's fault, and the renter
 * pays nothing; a command that does not exist in the image is the renter's CommandNotFoundError.
 * With Podman and the network on, the container's namespace gets the same policy routes as the bubblewrap
 * sandbox (public addresses only, the host's own addresses and private ranges prohibited unless
 * allow-listed) and IPv6 off, between `init` and `start`, so the task never runs without them.
 * `start()` attaches to the container (`start --attach`): its output is the task's log. Stop is the
 * engine's `stop --time`: SIGTERM, the grace period, SIGKILL; a preemption notice's SIGTERM alone is
 * `kill --signal TERM` (the container's init forwards both to the task). After the exit the container's
 * state tells whether the command ran (its exit code is the task's) or the engine failed to start it
 * (provider's fault); then the container is removed.
 *
 * Secret env values never reach the engine at all, neither its argv (visible in `ps`) nor its
 * configuration (kept in its state, on disk): container-secrets.ts writes them to a RAM filesystem
 * after the create, mounts them at /run/secrets, and loads them into the task's environment with
 * the image's /bin/sh.
 */
import { hasDefaultRoute, NO_ROUTE_OUT_WARNING } from "./network-probe.js";
import { describeLayerQuota, detectLayerQuota, layerQuotaArgs, type LayerQuota } from "./container-layer-quota.js";
import { mkdir, readdir, rm } from "node:fs/promises";
import path from "node:path";
import { InvalidInputError } from "../../../common/errors.js";
import { silentLogger, type Logger } from "../../log/logger.js";
import { CommandNotFoundError, ContainerEngineError, RuntimeUnavailableError, SandboxNetworkError } from "../errors.js";
import { outOfMemoryError } from "./bounded-task.js";
import { ContainerOom, ContainerOomParent, podmanCgroupfs } from "./container-oom.js";
import { fetchBundle, unpackBundle } from "./bundle.js";
import { buildContainerCreateArgs, deviceArgs, idMapArgs, networkArgs, scratchTmpfsArgs, ulimitArgs } from "./container-args.js";
import { chownTree, DEFAULT_TASK_USER, ensureSubordinateRange, ensureTaskUser, nodeIsRoot, type SubordinateRange } from "./task-user.js";
import { slotUserName, TaskUserPool, type TaskUserSlot } from "./task-user-slots.js";
import {
  clampedContainerLimits,
  containerPid,
  detectContainerEngine,
  engineClientEnv,
  engineDir,
  engineErrorLine,
  ensureProbeImage,
  inspectContainer,
  isCommandError,
  OWNER_LABEL,
  ownedContainers,
  ownerId,
  probeContainer,
  removeContainers,
  runEngine,
  type ContainerEngine,
  type EngineDetection,
} from "./container-engine.js";
import { compileFetchPolicy, qualifiedImageReference } from "./fetch-policy.js";
import { defaultSecretsBases, findSecretsRoot, imageHasShell, removeSecretsDir, TASK_SECRETS_DIR, TaskSecrets, withSecretsLoader } from "./container-secrets.js";
import { ImageStore, type AcquiredImage } from "./images.js";
import type { ContainerRuntimeOptions } from "./container-options.js";
import { checkpointEnvironment, seedCheckpointDir } from "./checkpoint-dir.js";
import { mountWorkspaceDisk, unmountWorkspaceDisk } from "./workspace-disk.js";
import { leaseBounds } from "./lease-bounds.js";
import type { ResourceLimits } from "./limits.js";
import { LogBuffer } from "./logs.js";
import { parseCidr } from "./network-policy.js";
import { reapTaskProcesses } from "./orphans.js";
import { DEFAULT_BUNDLE_LIMITS, groupEnvironment } from "./process-runtime.js";
import { RunningTask, type Runtime, type RuntimeIsolation, type TaskExitError, type TaskHandle } from "./runtime.js";
import { hostIpv4Addresses, taskRoutes, turnOffIpv6 } from "./sandbox.js";
import { livenessEnvironment, Redactor, redactError, secretsOf, TASK_ID_PATTERN, type TaskLaunch } from "./task.js";

export { detectContainerEngine, type ContainerEngine, type EngineDetection, type EngineKind } from "./container-engine.js";
export { buildContainerCreateArgs } from "./container-args.js";
export type { ContainerRuntimeOptions } from "./container-options.js";

/** slirp4netns's gateway in a Podman container's namespace (10.0.2.0/24 is its network). */
const SLIRP_GATEWAY = "10.0.2.2";

/** The container's name: found again by it after a restart. */
export function containerName(taskId: string): string {
  return `suanli-${taskId}`.replace(/[^A-Za-z0-9_.-]/g, "-");
}

/** Default size of the image cache: 100 GiB. */
export const DEFAULT_IMAGE_CACHE_BYTES = 100 * 1024 ** 3;

/** What the runtime settled on at its first use: engine, OCI runtime, rlimits. */
type Selection = {
  engine: ContainerEngine;
  ociRuntime: string | undefined;
  limits: ResourceLimits;
  description: string;
  cgroupfs: "v1" | "v2" | undefined;
  /** The start checks' id range (the base task user's); each task gets its own slot's from `slots`. */
  idMap: SubordinateRange | undefined;
  slots: TaskUserPool | undefined;
  layerQuota: LayerQuota;
};

export class ContainerRuntime implements Runtime {
  readonly kind = "container" as const;
  private readonly logger: Logger;
  private readonly owner: string;
  private readonly root: string;
  private detection: Promise<EngineDetection> | undefined;
  private selection: Promise<Selection> | undefined;
  /** Pulled and loaded images, reused by digest and pruned by size. */
  readonly images: ImageStore;

  constructor(private readonly options: ContainerRuntimeOptions) {
    this.logger = options.logger ?? silentLogger();
    this.root = path.resolve(options.workspaceRoot);
    this.owner = ownerId(this.root);
    const bundle = { ...DEFAULT_BUNDLE_LIMITS, ...options.bundle };
    this.images = new ImageStore({
      engine: async () => (await this.engine()).engine,
      dir: path.join(this.root, ".images"),
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

  /**
   * At the node's start: finds the engine and an OCI runtime that starts the self-test container
   * with the task flags (throws RuntimeUnavailableError saying why when none does), then stops and
   * removes the containers a previous run of this node left behind.
   */
  async verify(): Promise<RuntimeIsolation> {
    const selection = await this.select();
    const orphans = await ownedContainers(selection.engine, this.owner);
    if (orphans.length > 0) {
      const removed = await removeContainers(selection.engine, orphans);
      this.logger.warn("Stopped and removed containers a previous run of this node left behind", { containers: orphans, removed });
    }
    const warnings: string[] = [];
    const secretsRoot = await findSecretsRoot(this.owner, this.secretsBases(), { create: false });
    if (!secretsRoot) warnings.push(`no RAM filesystem (tmpfs) found in ${this.secretsBases().join(", ")}: container tasks with secret env values will be refused`);
    // Secrets a previous run left (it was killed before its tasks ended): nothing of ours runs now.
    else for (const entry of await readdir(secretsRoot).catch(() => [])) await removeSecretsDir(path.join(secretsRoot, entry));
    const weakening = (this.options.extraArgs ?? []).filter((arg) =>
      /^(--privileged|--network|--net|--pid|--ipc|--uts|--userns|--cap-add|-v|--volume|--mount|--device|--security-opt)(=|$)/.test(arg),
    );
    if (weakening.length > 0) warnings.push(`provider.runtime.containerArgs has ${weakening.join(", ")}: these can weaken the isolation of renters' containers from this host`);
    if ((this.options.network ?? true) && !(await hasDefaultRoute())) warnings.push(NO_ROUTE_OUT_WARNING);
    if ((this.options.networkAllow?.loopbackPorts?.length ?? 0) > 0) {
      warnings.push("provider.runtime.networkAllow.loopbackPorts is not supported by the container runtime: containers never reach the host's loopback");
    }
    return { sandboxed: true, description: selection.description, warnings };
  }

  private secretsBases(): readonly string[] {
    return this.options.secretsBases ?? defaultSecretsBases();
  }

  /** Removes this node's containers now (a restarted node's orphans); returns how many there were. */
  async removeOrphans(): Promise<number> {
    const { engine } = await this.select();
    return removeContainers(engine, await ownedContainers(engine, this.owner));
  }

  private select(): Promise<Selection> {
    this.selection ??= this.selectOnce().catch((error: unknown) => {
      this.selection = undefined;
      throw error;
    });
    return this.selection;
  }

  private async selectOnce(): Promise<Selection> {
    const { engine, reasons } = await this.engine();
    if (!engine) {
      throw new RuntimeUnavailableError("container", reasons.join("; ") || "no engine found", [
        "Install Podman (apt-get install podman runc) or Docker, or use the process runtime.",
      ]);
    }
    const limits = await clampedContainerLimits(this.options.limits ?? {});
    const network = this.options.network ?? true;
    // Rootful Podman: the container's root is an unprivileged host id (issue #33 item 5; rootless maps it to the node's uid).
    const base = this.options.taskUser ?? DEFAULT_TASK_USER;
    const idMap = nodeIsRoot() && engine.kind === "podman" ? await ensureSubordinateRange(await ensureTaskUser(base, this.logger), this.logger) : undefined;
    const devices = this.options.gpus === false ? [] : [...new Set(this.options.probeDevices ?? [])];
    const amd = this.options.amdRenderNode;
    const bounds = this.options.bounds;
    const flags = [
      ...idMapArgs(idMap),
      ...(bounds && bounds.enforce !== "off" ? scratchTmpfsArgs(engine.kind, bounds.tmpBytes) : []),
      ...ulimitArgs(limits),
      ...networkArgs(engine.kind, network),
      ...deviceArgs(engine.kind, devices, amd ? devices.map(amd) : undefined),
      ...(this.options.extraArgs ?? []),
    ];
    try {
      await ensureProbeImage(engine);
    } catch (error) {
      throw new RuntimeUnavailableError("container", (error as Error).message);
    }
    const candidates = this.options.ociRuntimes ?? [undefined, "runc", "crun"];
    const tried = new Set<string>();
    const failures: string[] = [];
    for (const candidate of candidates) {
      const label = candidate ?? engine.defaultOciRuntime;
      if (tried.has(label) || (candidate !== undefined && candidate === engine.defaultOciRuntime && tried.has(engine.defaultOciRuntime))) continue;
      tried.add(label);
      const failure = await probeContainer(engine, [...(candidate ? ["--runtime", candidate] : []), ...flags], { [OWNER_LABEL]: this.owner });
      if (failure !== undefined) {
        failures.push(`${label}: ${failure}`);
        continue;
      }
      if (failures.length > 0)
        this.logger.warn(`The OCI runtime ${failures.map((line) => line.split(":")[0]).join(", ")} cannot start a container here; using ${label}`, { failures });
      const networkText = network
        ? engine.kind === "podman"
          ? "own network namespace through slirp4netns (public IPv4 addresses only, no IPv6, no host loopback)"
          : "Docker bridge network"
        : "no network";
      const layerQuota = await detectLayerQuota(engine, [...(candidate ? ["--runtime", candidate] : []), ...flags], { [OWNER_LABEL]: this.owner });
      return {
        engine,
        layerQuota,
        ociRuntime: candidate,
        limits,
        cgroupfs: await podmanCgroupfs(engine),
        idMap,
        slots: idMap ? new TaskUserPool({ base, subordinate: true, lockDir: this.options.taskSlotLockDir, logger: this.logger }) : undefined,
        description: `${engine.kind} ${engine.version} with ${label}, ${networkText}${idMap ? `, each task's container root its own host id range (of ${slotUserName(base, 0)}, -1, …)` : ""}, nofile ${limits.openFiles ?? "default"}, nproc ${limits.processes ?? "default"}, ${describeLayerQuota(layerQuota)}`,
      };
    }
    throw new RuntimeUnavailableError("container", `no OCI runtime could start a container with the task flags (${failures.join("; ")})`, [
      "Install runc (apt-get install runc), or set provider.runtime.ociRuntime to one that works here.",
      'Check that every GPU has a CDI device (nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml), or set provider.runtime.containerGpus "none".',
      "Lower provider.limits.openFiles / processes, or fix provider.runtime.containerArgs.",
    ]);
  }

  async reap(taskId: string, hints: { pid?: number | undefined; startTicks?: number | undefined } = {}): Promise<number> {
    if (!TASK_ID_PATTERN.test(taskId)) return 0;
    const workspace = path.join(this.root, taskId);
    // The container belongs to the engine (conmon / the daemon) and outlives the node: remove it by name.
    let killed = 0;
    const { engine } = await this.engine();
    if (engine) killed += await removeContainers(engine, [containerName(taskId)]).catch(() => 0);
    await ContainerOomParent.forTask(taskId, "v1").remove();
    killed += await reapTaskProcesses(workspace, hints);
    const secretsRoot = await findSecretsRoot(this.owner, this.secretsBases(), { create: false });
    if (secretsRoot) await removeSecretsDir(path.join(secretsRoot, taskId));
    await rm(path.join(this.root, `.${taskId}.bundle`), { force: true });
    await rm(engineDir(this.root, taskId), { recursive: true, force: true });
    await unmountWorkspaceDisk(this.root, taskId);
    await rm(workspace, { recursive: true, force: true });
    return killed;
  }

  async prepare(launch: TaskLaunch, options: { signal?: AbortSignal } = {}): Promise<TaskHandle> {
    if (!TASK_ID_PATTERN.test(launch.taskId)) {
      throw new InvalidInputError("task launch", [{ path: "taskId", message: "expected 1-128 letters, digits, '.', '_' or '-'" }]);
    }
    const { spec } = launch;
    if (!spec.image && !spec.imageArchive)
      throw new InvalidInputError("task", [
        { path: "image", message: "the container runtime needs image (a registry reference) or imageArchive (an archive by URL with its sha256)" },
      ]);
    const reference = spec.image ? qualifiedImageReference(spec.image, compileFetchPolicy(this.options.fetchPolicy)) : undefined;
    const secrets = secretsOf(spec);
    // This node's directory for task secrets on a RAM filesystem, made for the first task with secrets.
    const secretsRoot = secrets.size > 0 ? await findSecretsRoot(this.owner, this.secretsBases()) : undefined;
    if (secrets.size > 0 && !secretsRoot) {
      throw new RuntimeUnavailableError("container", `no RAM filesystem (tmpfs) to hand the task its secrets (looked in ${this.secretsBases().join(", ")})`, [
        "Secrets are never written to a disk: mount a tmpfs at /dev/shm, or run the node with XDG_RUNTIME_DIR on one.",
      ]);
    }
    const selection = await this.select();
    const { engine } = selection;
    const redactor = new Redactor(secrets);
    // Pulled or loaded here, before the lease is activated: the renter never pays for it.
    const image: AcquiredImage = await this.images.acquire(
      reference ? { kind: "registry", reference } : { kind: "archive", url: spec.imageArchive!.url, sha256: spec.imageArchive!.sha256 },
      { signal: options.signal },
    );

    const root = this.root;
    const workspace = path.join(root, launch.taskId);
    const engineCwd = engineDir(root, launch.taskId);
    let taskSecrets: TaskSecrets | undefined;
    const removeSecrets = () => taskSecrets?.remove() ?? Promise.resolve();
    // Whether the secrets are in the task's environment too (the image's /bin/sh loads them): a
    // string command runs under /bin/sh anyway; for an argv command Podman is asked first.
    const secretsInEnv = secrets.size > 0 && (typeof spec.command === "string" || engine.kind !== "podman" || (await imageHasShell(engine, image.id, this.probeFlags(selection))));
    const name = containerName(launch.taskId);
    // This task's own host ids (rootful Podman): held until its container and workspace are gone.
    let slot: TaskUserSlot | undefined;
    const removeWorkspace = async () => {
      await rm(engineCwd, { recursive: true, force: true });
      await unmountWorkspaceDisk(root, launch.taskId);
      await rm(workspace, { recursive: true, force: true });
      slot?.release();
    };
    const grace = this.options.stopGraceMs ?? 10_000;
    const bounds = this.options.bounds && this.options.bounds.enforce !== "off" ? leaseBounds(this.options.bounds, launch.devices.length) : undefined;
    const perUnitMemory = this.options.perUnit?.memoryBytes;
    // The memory bound, and the evidence of an OOM kill where Podman's own flag does not say it (container-oom.ts).
    const oom = new ContainerOom(perUnitMemory !== undefined ? perUnitMemory * Math.max(1, launch.devices.length) : bounds?.memoryBytes, launch.taskId, selection.cgroupfs);
    const removeContainer = () =>
      removeContainers(engine, [name])
        .catch(() => 0)
        .finally(() => oom.remove());
    try {
      await mkdir(root, { recursive: true, mode: 0o700 });
      await removeContainer();
      await removeWorkspace();
      await mkdir(workspace, { mode: 0o700 });
      await mkdir(engineCwd, { mode: 0o700 });
      await mountWorkspaceDisk(this.options.bounds, launch.devices.length, root, launch.taskId);
      if (spec.bundle) {
        const limits = { ...DEFAULT_BUNDLE_LIMITS, ...this.options.bundle };
        const bundleFile = path.join(root, `.${launch.taskId}.bundle`);
        await fetchBundle({
          url: spec.bundle.url,
          sha256: spec.bundle.sha256,
          destFile: bundleFile,
          maxBytes: limits.maxBytes,
          timeoutMs: limits.fetchTimeoutMs,
          signal: options.signal,
          policy: this.options.fetchPolicy,
        });
        try {
          await unpackBundle(bundleFile, workspace, limits);
        } finally {
          await rm(bundleFile, { force: true });
        }
      }
      // The container's root (the first host id of this task's own range) owns its workspace (its checkpoint seed included).
      slot = await selection.slots?.acquire(launch.taskId);
      await seedCheckpointDir(workspace, launch);
      if (slot?.range) await chownTree(workspace, slot.range.start, slot.range.start);
      if (secretsRoot) taskSecrets = await TaskSecrets.create(secretsRoot, launch.taskId, secrets);
      const plainEnv: Record<string, string> = {};
      for (const [key, value] of Object.entries(spec.env)) if (typeof value === "string") plainEnv[key] = value;
      const gpus = this.options.gpus !== false;
      const devices = gpus ? launch.devices : [];
      const createArgs = (loader: boolean) =>
        buildContainerCreateArgs({
          engine: engine.kind,
          name,
          taskId: launch.taskId,
          owner: this.owner,
          // By id: a name in the engine's store can be re-pointed, the id is what was pulled or checked.
          image: image.id,
          command: loader ? withSecretsLoader(spec.command) : spec.command,
          workspace,
          devices,
          units: launch.devices.length,
          amdRenderNodes: gpus && this.options.amdRenderNode ? launch.devices.map(this.options.amdRenderNode) : undefined,
          env: { ...plainEnv, ...livenessEnvironment(launch.spec, "/workspace"), ...groupEnvironment(launch), ...checkpointEnvironment(launch, "/workspace") },
          secretsDir: taskSecrets?.hostDir,
          inputs: launch.inputs,
          limits: selection.limits,
          perUnit: this.options.perUnit,
          bounds,
          network: this.options.network ?? true,
          stopGraceMs: grace,
          ociRuntime: selection.ociRuntime,
          extraArgs: [...oom.args(), ...layerQuotaArgs(selection.layerQuota), ...(this.options.extraArgs ?? [])],
          idMap: slot?.range,
        });
      const created = await runEngine(engine.path, createArgs(secretsInEnv), 600_000);
      if (created.code !== 0) throw new ContainerEngineError("create the task's container", redactor.redact(engineErrorLine(created.stderr || created.stdout)));
      // Only now, with the container recorded by the engine without them.
      await taskSecrets?.write();
      if (engine.kind === "podman") await this.initialise(engine, name, redactor, engineCwd);
    } catch (error) {
      image.release();
      await removeContainer();
      await removeWorkspace();
      await removeSecrets();
      throw redactError(error, redactor);
    }

    const clientEnv = engineClientEnv();
    const logs = new LogBuffer(this.options.logs);
    const size = `${(image.sizeBytes / 1024 ** 2).toFixed(1)} MB`;
    logs.push(
      "system",
      image.cached
        ? `Image ${image.source}: cached (sha256:${image.id.slice(0, 12)}, ${size}), not pulled again`
        : `Image ${image.source}: ${spec.image ? "pulled" : "loaded"} in ${(image.ms / 1000).toFixed(1)} s before the lease started (sha256:${image.id.slice(0, 12)}, ${size})`,
    );
    if (secrets.size > 0 && !secretsInEnv) logs.push("system", `The image has no /bin/sh: the task's secrets are the files in ${TASK_SECRETS_DIR}, not environment variables`);
    const task: RunningTask = new RunningTask({
      launch,
      workspace,
      launcher: {
        argv: [engine.path, "start", "--attach", name],
        // The engine client's (and conmon's) directory, not the task's workspace: see engineDir.
        cwd: engineCwd,
        env: clientEnv,
        groupUsage: false,
        // Inside the running container: same namespaces, cgroup limits, user and environment.
        execArgv: (command) => [engine.path, "exec", "-i", "--workdir", "/workspace", name, ...(secretsInEnv ? withSecretsLoader([...command]) : command)],
        stop: async (proc, graceMs) => {
          const seconds = Math.max(0, Math.ceil(graceMs / 1000));
          const stopped = await runEngine(engine.path, ["stop", "--time", String(seconds), name], graceMs + 30_000);
          if (stopped.code !== 0) {
            await removeContainer();
            await proc.terminate(graceMs);
          } else await proc.exited;
        },
        term: () => runEngine(engine.path, ["kill", "--signal", "TERM", name], 30_000),
        classifyExit: () => this.classify(engine, name, task, oom),
        afterExit: async () => {
          image.release();
          await removeSecrets();
          await removeContainer();
        },
      },
      logs,
      redactor,
      sandboxed: true,
      limitsApplied: true,
      defaultGraceMs: grace,
      removeWorkspace: async () => {
        image.release();
        await removeSecrets();
        await removeContainer();
        await removeWorkspace();
      },
      sampleGpus: this.options.sampleGpus,
      logger: this.logger,
      image: { ref: image.source, digest: `sha256:${image.id}`, cached: image.cached },
    });
    return task;
  }

  /** The flags a throwaway container of this node needs here (OCI runtime, rlimits, owner label). */
  private probeFlags(selection: Selection): string[] {
    return [
      ...(selection.ociRuntime ? ["--runtime", selection.ociRuntime] : []),
      ...idMapArgs(selection.idMap),
      ...ulimitArgs(selection.limits),
      "--label",
      `${OWNER_LABEL}=${this.owner}`,
    ];
  }

  /**
   * `podman init`: the OCI runtime creates the container's namespaces, cgroups, rlimits and
   * devices, and resolves the command, without running it. Then the network policy goes in.
   */
  private async initialise(engine: ContainerEngine, name: string, redactor: Redactor, cwd: string): Promise<void> {
    const init = await runEngine(engine.path, ["init", name], 120_000, undefined, cwd);
    if (init.code !== 0) {
      const message = redactor.redact(engineErrorLine(init.stderr || init.stdout));
      const commandError = isCommandError(message);
      if (commandError)
        throw new CommandNotFoundError(message, commandError === "not-found" ? "the command does not exist in the image" : "the command in the image cannot be executed");
      throw new ContainerEngineError("start the task's container", message);
    }
    if (!(this.options.network ?? true)) return;
    const pid = await containerPid(engine, name);
    if (pid === undefined) throw new ContainerEngineError("start the task's container", "no process id after init");
    const allow = (this.options.networkAllow?.networks ?? []).map(parseCidr);
    const routes = taskRoutes(allow, hostIpv4Addresses(), SLIRP_GATEWAY);
    const configured = await runEngine("nsenter", ["-t", String(pid), "-n", "ip", "-batch", "-"], 30_000, `${routes.join("\n")}\n`);
    if (configured.code !== 0)
      throw new SandboxNetworkError(
        `the container's network policy could not be installed (exit code ${configured.code})`,
        (configured.stderr || configured.stdout).trim().slice(0, 500),
      );
    // The create flags turned IPv6 off (container-args.ts); this checks it, so an engine that
    // ignored them never runs a task with an IPv6 route to the host.
    await turnOffIpv6("nsenter", ["-t", String(pid), "-n"], "ip", 30_000);
  }

  /** After `start --attach` ended without a stop: did the command run (its exit is the task's), or did the engine fail? */
  private async classify(engine: ContainerEngine, name: string, task: RunningTask, oom: ContainerOom): Promise<TaskExitError | undefined> {
    const state = await inspectContainer(engine, name);
    // Killed by the kernel for going past the lease's --memory: the renter's side, as in the process runtime.
    if (state?.started && (await oom.killed(state))) return outOfMemoryError(oom.memoryBytes);
    if (state?.started) return undefined;
    // The command never ran: everything on stderr is the engine's.
    const engineLines = task
      .readLogs(0)
      .lines.filter((line) => line.stream === "stderr")
      .map((line) => line.text)
      .join("\n");
    const message = engineErrorLine(engineLines) || (state ? `the container is ${state.status}` : "the container is gone");
    const commandError = isCommandError(message);
    if (commandError) return { name: "CommandNotFoundError", message: `The command cannot be run in the container: ${message}`, blame: "renter" };
    const error = new ContainerEngineError("start the task's container", message);
    return { name: error.name, message: error.shortMessage, blame: error.blame };
  }
}

/**
 * The engine's `create` arguments for a task: pure, so the argv is unit-tested without an engine.
 *
 * - GPUs: one CDI device per leased unit for Podman (`--device nvidia.com/gpu=<GPU- or MIG- UUID>`),
 *   `--gpus "device=<uuids>"` for Docker with the NVIDIA Container Toolkit, /dev/kfd plus the
 *   render nodes for AMD.
 * - CPU, memory and pids per leased unit (`provider.runtime.perUnit`), times the units.
 * - rlimits: nofile and nproc are always passed, at most the host's hard limits (the engines'
 *   defaults exceed them on some hosts and the OCI runtime then fails before the task runs).
 * - Network: `none`, or (Podman) slirp4netns without the host's loopback; Docker's bridge. With
 *   the network on, IPv6 is off in the container's namespace (no slirp4netns IPv6, and the
 *   disable_ipv6 sysctls), so no IPv6 destination is reachable at all: the policy routes are IPv4.
 * - Writable places (with the lease's bounds): the image's file system is read-only (`--read-only`);
 *   /tmp, /var/tmp and /run are tmpfs of a fixed size (scratchTmpfsArgs), and /workspace (with
 *   output/) is the lease's own disk. Nothing the task writes lands in the engine's storage.
 * - Labels: the owning node and the task, so a restarted node finds its orphans.
 * - Task inputs: bind mounts, read-only, at their paths under /data.
 */
import type { EngineKind } from "./container-engine.js";
import { OWNER_LABEL, TASK_LABEL } from "./container-engine.js";
import { TASK_SECRETS_DIR } from "./container-secrets.js";
import type { LeaseBounds } from "./lease-bounds.js";
import type { ResourceLimits } from "./limits.js";
import type { TaskSpec } from "./task.js";

export type PerUnitLimits = { cpus?: number | undefined; memoryBytes?: number | undefined; pids?: number | undefined };

export type ContainerCreateOptions = {
  engine: EngineKind;
  name: string;
  taskId: string;
  /** The node's owner label value (container-engine.ts ownerId). */
  owner: string;
  image: string;
  command: TaskSpec["command"];
  workspace: string;
  /** Leased units' device ids (GPU-/MIG- UUIDs, or indices); empty when no GPU is passed. */
  devices: readonly string[];
  /** How many units the task leased (per-unit limits are multiplied by it; at least 1). */
  units: number;
  /** AMD machines: the render node of each device, in order (then /dev/kfd + these nodes). */
  amdRenderNodes?: readonly string[] | undefined;
  /** Plain variables, passed as `--env NAME=value`. Never a secret: the engine keeps its configuration. */
  env: Record<string, string>;
  /** The host directory holding the task's secrets (container-secrets.ts), mounted read-only at /run/secrets; undefined when there are none. */
  secretsDir?: string | undefined;
  /** Task inputs (issue 36): each host folder mounted read-only at its path under /data. */
  inputs?: readonly { hostPath: string; mount: string }[] | undefined;
  /** rlimits, already clamped to the host's hard limits. */
  limits: ResourceLimits;
  perUnit?: PerUnitLimits | undefined;
  /** The lease's default bounds (lease-bounds.ts), used where perUnit sets nothing. */
  bounds?: LeaseBounds | undefined;
  network: boolean;
  stopGraceMs: number;
  /** `--runtime` (an OCI runtime name or path), or undefined for the engine's default. */
  ociRuntime?: string | undefined;
  /** The operator's extra engine flags (provider.runtime.containerArgs), before the image. */
  extraArgs?: readonly string[] | undefined;
  /** Rootful Podman: the host ids the container's 0-65535 map to (task-user.ts); undefined: the engine's default. */
  idMap?: { start: number; count: number } | undefined;
};

/** `--uidmap`/`--gidmap`: uid and gid 0 of the container are host id `start`, an unprivileged one. */
export function idMapArgs(idMap: { start: number; count: number } | undefined): string[] {
  if (!idMap) return [];
  const map = `0:${idMap.start}:${idMap.count}`;
  return ["--uidmap", map, "--gidmap", map];
}

/** The sysctls that turn IPv6 off in a container's network namespace (every interface, and any added later). */
export const IPV6_OFF_SYSCTLS = ["net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1"] as const;

/** The network flags: no network, or one that never reaches the host's loopback, IPv4 only. */
export function networkArgs(engine: EngineKind, network: boolean): string[] {
  if (!network) return ["--network", "none"];
  // Issue #33 item 2: slirp4netns enables IPv6 by default and forwards it from the host's own
  // sockets, so a container reached services bound to the host's `::` through its ULA/LAN
  // addresses, past the IPv4-only policy routes. IPv6 is turned off instead, twice over.
  const ipv6Off = IPV6_OFF_SYSCTLS.flatMap((sysctl) => ["--sysctl", sysctl]);
  // slirp4netns gives the container its own namespace and user-mode NAT; with
  // allow_host_loopback=false its gateway (10.0.2.2) does not forward to the host's 127.0.0.1.
  // Docker's default bridge does not route to the host's loopback either.
  return engine === "podman" ? ["--network", "slirp4netns:allow_host_loopback=false,enable_ipv6=false", ...ipv6Off] : ipv6Off;
}

/** /run holds sockets, pid files and the secrets mount point: at most this, whatever `tmpBytes` is. */
export const RUN_TMPFS_MAX_BYTES = 64 * 1024 ** 2;

/**
 * The container's writable scratch places: without them, `--read-only` would leave a task no
 * /tmp. Without `--read-only` a task wrote into its image's own file system, Podman's writable
 * layer in the host's container storage, which nothing bounded: one task could fill the disk that
 * every container and image of the host lives on. /tmp and /var/tmp are each the lease's
 * `tmpBytes`, /run at most RUN_TMPFS_MAX_BYTES; tmpfs pages are charged to the container's memory
 * cgroup, so all three together never take more RAM than `--memory`. Podman's own tmpfs for a
 * read-only container (unsized: half the host's RAM each) is turned off (`--read-only-tmpfs=false`).
 */
export function scratchTmpfsArgs(engine: EngineKind, tmpBytes: number): string[] {
  const size = Math.floor(tmpBytes);
  const mount = (target: string, bytes: number) => ["--tmpfs", `${target}:rw,nosuid,nodev,size=${bytes}`];
  return [
    "--read-only",
    ...(engine === "podman" ? ["--read-only-tmpfs=false"] : []),
    ...mount("/tmp", size),
    ...mount("/var/tmp", size),
    ...mount("/run", Math.min(size, RUN_TMPFS_MAX_BYTES)),
  ];
}

/** The rlimit flags (soft = hard). */
export function ulimitArgs(limits: ResourceLimits): string[] {
  const args: string[] = [];
  const add = (name: string, value: number | undefined) => {
    if (value !== undefined) args.push("--ulimit", `${name}=${Math.floor(value)}:${Math.floor(value)}`);
  };
  add("cpu", limits.cpuSeconds);
  add("fsize", limits.fileSizeBytes);
  add("nofile", limits.openFiles);
  add("nproc", limits.processes);
  return args;
}

/** The device flags for the leased units. */
export function deviceArgs(engine: EngineKind, devices: readonly string[], amdRenderNodes?: readonly string[]): string[] {
  if (devices.length === 0) return [];
  if (amdRenderNodes) return ["--device", "/dev/kfd", ...amdRenderNodes.flatMap((node) => ["--device", node])];
  // The quotes are part of the value: Docker splits --gpus on commas otherwise.
  if (engine === "docker") return ["--gpus", `"device=${devices.join(",")}"`];
  return devices.flatMap((device) => ["--device", `nvidia.com/gpu=${device}`]);
}

export function buildContainerCreateArgs(options: ContainerCreateOptions): string[] {
  const units = Math.max(1, options.units);
  const args = ["create", "--init", "--name", options.name, "--label", `${OWNER_LABEL}=${options.owner}`, "--label", `${TASK_LABEL}=${options.taskId}`];
  if (options.ociRuntime) args.push("--runtime", options.ociRuntime);
  args.push("--stop-timeout", String(Math.max(1, Math.ceil(options.stopGraceMs / 1000))));
  args.push("--security-opt", "no-new-privileges");
  // The node reads the task's output through `start --attach`. The engine's own log file of it
  // (Podman's k8s-file ctr.log, Docker's json-file) lives in its storage, unbounded: 20 MB printed
  // made a 73 MB ctr.log, so one chatty task could fill the disk of every container and image.
  args.push("--log-driver", "none");
  args.push(...idMapArgs(options.idMap));
  args.push(...deviceArgs(options.engine, options.devices, options.amdRenderNodes));
  args.push(...networkArgs(options.engine, options.network));
  const perUnit = options.perUnit ?? {};
  const bounds = options.bounds;
  const cpus = perUnit.cpus !== undefined ? perUnit.cpus * units : bounds?.cpus;
  if (cpus !== undefined) args.push("--cpus", String(Math.round(cpus * 1000) / 1000));
  // nproc inside shows the cores the lease bought (the cpuset), not the host's.
  if (bounds) args.push("--cpuset-cpus", bounds.cpus === 1 ? "0" : `0-${bounds.cpus - 1}`);
  const memory = perUnit.memoryBytes !== undefined ? perUnit.memoryBytes * units : bounds?.memoryBytes;
  // Swap equal to memory: no swap beyond the bound.
  if (memory !== undefined) args.push("--memory", String(Math.floor(memory)), "--memory-swap", String(Math.floor(memory)));
  const pids = perUnit.pids !== undefined ? perUnit.pids * units : (bounds?.pids ?? options.limits.processes);
  if (pids !== undefined) args.push("--pids-limit", String(Math.floor(pids)));
  if (bounds) args.push(...scratchTmpfsArgs(options.engine, bounds.tmpBytes));
  args.push(...ulimitArgs(options.limits));
  // :Z relabels the mount for SELinux hosts (Podman's usual home); harmless elsewhere. The output
  // folder is inside the workspace: the node digests it from the host side after the exit.
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
  if (options.secretsDir) args.push("--volume", `${options.secretsDir}:${TASK_SECRETS_DIR}:ro${options.engine === "podman" ? ",Z" : ""}`);
  // Read-only bind mounts (root in the container cannot write them); relabelled shared (SELinux), never private: one cached input serves many containers.
  for (const input of options.inputs ?? [])
    args.push("--mount", `type=bind,src=${input.hostPath},dst=${input.mount},ro=true${options.engine === "podman" ? ",relabel=shared" : ""}`);
  args.push(...(options.extraArgs ?? []));
  args.push(options.image);
  if (typeof options.command === "string") args.push("/bin/sh", "-c", options.command);
  else args.push(...options.command);
  return args;
}

/**
 * Whether the kernel killed a container task for memory (issue 33, item 3: an OOM kill is the
 * renter's side, as in the process runtime).
 *
 * Podman's own `State.OOMKilled` is used where it works, but on cgroup v1 hosts (conmon + runc,
 * the hybrid hierarchy of this project's CI) it stays false after a memory kill, and the
 * container's cgroup, with its `memory.oom_control`, is removed with the container. So with
 * Podman's cgroupfs manager on cgroup v1 the container is created under a parent cgroup of the
 * node's (`--cgroup-parent`), which outlives it: its `memory.max_usage_in_bytes` (the peak of the
 * whole subtree) reaching the container's `--memory` means the container hit its bound, and a
 * SIGKILL exit (137) then is the kernel's OOM kill. On cgroup v2 the parent's `memory.events`
 * counts the subtree's OOM kills exactly. The parent sets no limit of its own (the container's
 * flags hold the bounds) and is removed, in every hierarchy Podman made it in, after the container.
 */
import { readdir, readFile, rmdir } from "node:fs/promises";
import path from "node:path";
import { runEngine, type ContainerEngine } from "./container-engine.js";

const CGROUP_ROOT = "/sys/fs/cgroup";

/** The host's cgroup layout as Podman sees it, or undefined when the parent cannot be used (Docker, systemd manager). */
export async function podmanCgroupfs(engine: ContainerEngine): Promise<"v1" | "v2" | undefined> {
  if (engine.kind !== "podman") return undefined;
  const info = await runEngine(engine.path, ["info", "--format", "{{.Host.CgroupManager}} {{.Host.CgroupsVersion}}"], 60_000);
  const [manager, version] = info.stdout.trim().split(/\s+/);
  if (info.code !== 0 || manager !== "cgroupfs") return undefined;
  return version === "v1" ? "v1" : version === "v2" ? "v2" : undefined;
}

export class ContainerOomParent {
  private constructor(
    readonly name: string,
    private readonly version: "v1" | "v2",
    private readonly root: string,
  ) {}

  /** A parent for one task's container: `--cgroup-parent=/<name>` (by task id: a restarted node's reap finds it). */
  static forTask(taskId: string, version: "v1" | "v2", root = CGROUP_ROOT): ContainerOomParent {
    return new ContainerOomParent(`suanli-ctr-${taskId}`, version, root);
  }

  args(): string[] {
    return ["--cgroup-parent", `/${this.name}`];
  }

  /** After a SIGKILL exit: whether the container reached its memory bound (v1) or was OOM-killed (v2). */
  async oomKilled(memoryBytes: number | undefined): Promise<boolean> {
    if (this.version === "v2") {
      const events = await readFile(path.join(this.root, this.name, "memory.events"), "utf8").catch(() => "");
      return Number(/^oom_kill (\d+)/m.exec(events)?.[1] ?? 0) > 0;
    }
    if (memoryBytes === undefined) return false;
    const dir = path.join(this.root, "memory", this.name);
    for (const file of ["memory.memsw.max_usage_in_bytes", "memory.max_usage_in_bytes"]) {
      const peak = Number((await readFile(path.join(dir, file), "utf8").catch(() => "")).trim());
      if (Number.isFinite(peak) && peak >= memoryBytes) return true;
    }
    return false;
  }

  /** Removes the parent (and the `conmon` child Podman puts in it) from every hierarchy; once the container is gone they are empty. Either version's call removes both layouts (reap after a restart). */
  async remove(): Promise<void> {
    // v2: <root>/<name>; v1: <root>/<hierarchy>/<name> in each hierarchy (the unified one too).
    const dirs = [path.join(this.root, this.name), ...(await readdir(this.root).catch(() => [])).map((h) => path.join(this.root, h, this.name))];
    for (const dir of dirs) await removeTree(dir);
  }
}

/** rmdir of a cgroup directory and its child cgroups, deepest first (cgroup files are not removed, only directories). */
async function removeTree(dir: string, depth = 0): Promise<void> {
  if (depth > 8) return;
  const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
  for (const entry of entries) if (entry.isDirectory()) await removeTree(path.join(dir, entry.name), depth + 1);
  await rmdir(dir).catch(() => undefined);
}

/** A container task's memory bound and the evidence of its OOM kill: Podman's flag, or the parent's counters where the parent is used. */
export class ContainerOom {
  readonly parent: ContainerOomParent | undefined;
  constructor(
    readonly memoryBytes: number | undefined,
    taskId: string,
    cgroupfs: "v1" | "v2" | undefined,
  ) {
    this.parent = memoryBytes !== undefined && cgroupfs ? ContainerOomParent.forTask(taskId, cgroupfs) : undefined;
  }

  args(): string[] {
    return this.parent?.args() ?? [];
  }

  async remove(): Promise<void> {
    await this.parent?.remove();
  }

  /** Whether a container that ran was ended by the kernel for memory. */
  async killed(state: { oomKilled: boolean; exitCode: number }): Promise<boolean> {
    return state.oomKilled || (state.exitCode === 137 && (await this.parent?.oomKilled(this.memoryBytes)) === true);
  }
}

/**
 * A process-runtime task's own cgroup on a cgroup v2 (unified) host (issue 33, item 3): a child of
 * a subtree delegated to the node (systemd `Delegate=yes` on its unit, or the root cgroup of a
 * node run as root in its own cgroup namespace), with `memory.max`, `memory.swap.max` 0 (memory
 * plus swap stays within the bound, as v1's memsw limit), `pids.max` and `cpu.max` written before
 * the task joins it.
 *
 * The delegated subtree is the node's own cgroup (`0::<path>` in /proc/self/cgroup). cgroup v2
 * lets a cgroup with processes in it hand controllers to its children only at the root ("no
 * internal processes"), so when enabling `+memory +pids +cpu` in its `cgroup.subtree_control` is
 * refused as busy, the node first moves its cgroup's processes (itself included) into a leaf
 * `suanli-node` beside the tasks, the procedure systemd's delegation documentation gives.
 *
 * Joining and ending work as in v1 (task-cgroup.ts): the argv prefix is a shell that writes its
 * own pid into the task's `cgroup.procs` and execs the rest, so nothing the task starts is
 * outside it; `cgroup.kill` ends whatever is left before the cgroup is removed; `memory.events`
 * counts the kernel's OOM kills.
 */
import { readFileSync } from "node:fs";
import { access, constants, mkdir, readFile, rmdir, writeFile } from "node:fs/promises";
import path from "node:path";
import type { LeaseBounds } from "./lease-bounds.js";

export const V2_CONTROLLERS = ["memory", "pids", "cpu"] as const;

export type DelegatedV2 = { ok: true; parent: string } | { ok: false; reason: string };

/** The node's own cgroup v2 path, relative to the hierarchy's root, from /proc/self/cgroup ("0::/a/b"). */
export function ownCgroupV2(procSelfCgroup: string): string | undefined {
  return /^0::(\/.*)$/m.exec(procSelfCgroup)?.[1];
}

const isBusy = (error: unknown) => ["EBUSY", "EOPNOTSUPP", "ENOTSUP"].includes((error as NodeJS.ErrnoException).code ?? "");

/**
 * Whether the node may make task cgroups under its own v2 cgroup, enabling memory, pids and cpu
 * for its children (moving its own processes into a leaf first when the kernel requires it).
 */
export async function delegateV2(root: string, procSelfCgroup: string): Promise<DelegatedV2> {
  const own = ownCgroupV2(procSelfCgroup);
  if (own === undefined) return { ok: false, reason: "no cgroup v2 entry (0::) in /proc/self/cgroup" };
  const parent = path.join(root, own);
  const available = (await readFile(path.join(parent, "cgroup.controllers"), "utf8").catch(() => "")).trim().split(/\s+/);
  const missing = V2_CONTROLLERS.filter((c) => !available.includes(c));
  if (missing.length > 0) return { ok: false, reason: `cgroup v2: ${missing.join(", ")} not available in ${parent} (not delegated, or bound to a v1 hierarchy)` };
  const writable = await access(path.join(parent, "cgroup.subtree_control"), constants.W_OK).then(
    () => access(parent, constants.W_OK).then(() => true),
    () => false,
  );
  if (!writable) return { ok: false, reason: `cgroup v2: ${parent} is not delegated to the node (its cgroup.subtree_control is not writable)` };
  const enabled = async () => (await readFile(path.join(parent, "cgroup.subtree_control"), "utf8")).trim().split(/\s+/);
  const current = await enabled();
  if (V2_CONTROLLERS.every((c) => current.includes(c))) return { ok: true, parent };
  const request = V2_CONTROLLERS.map((c) => `+${c}`).join(" ");
  try {
    await writeFile(path.join(parent, "cgroup.subtree_control"), request);
  } catch (error) {
    if (!isBusy(error)) return { ok: false, reason: `cgroup v2: cannot enable ${request} in ${parent}: ${(error as Error).message}` };
    // No internal processes: move this cgroup's processes (the node's) into a leaf, then retry.
    try {
      const leaf = path.join(parent, "suanli-node");
      await mkdir(leaf, { recursive: true });
      const procs = (await readFile(path.join(parent, "cgroup.procs"), "utf8")).split("\n").filter((line) => /^\d+$/.test(line));
      for (const pid of procs) await writeFile(path.join(leaf, "cgroup.procs"), pid).catch(() => undefined);
      await writeFile(path.join(parent, "cgroup.subtree_control"), request);
    } catch (retry) {
      return { ok: false, reason: `cgroup v2: cannot enable ${request} in ${parent} after moving the node into a leaf: ${(retry as Error).message}` };
    }
  }
  return { ok: true, parent };
}

/** Writes a task cgroup's bounds (memory + swap, pids, CPU quota over a 100 ms period). */
export async function writeV2Limits(dir: string, bounds: LeaseBounds): Promise<void> {
  await writeFile(path.join(dir, "memory.max"), String(bounds.memoryBytes));
  // No swap beyond the bound; absent where the kernel does not account swap (no swap at all).
  await writeFile(path.join(dir, "memory.swap.max"), "0").catch((error: NodeJS.ErrnoException) => {
    if (error.code !== "ENOENT") throw error;
  });
  await writeFile(path.join(dir, "pids.max"), String(bounds.pids));
  await writeFile(path.join(dir, "cpu.max"), `${Math.round(bounds.cpus * 100_000)} 100000`);
}

export class TaskCgroupV2 {
  private constructor(
    readonly dir: string,
    readonly bounds: LeaseBounds,
  ) {}

  /** Creates `suanli-task-<taskId>-…` under the delegated parent with the lease's bounds written (`limits` is the writer; tests of the kernel's own tree operations on a hierarchy without these controllers pass their own). */
  static async create(parent: string, taskId: string, bounds: LeaseBounds, limits: (dir: string, bounds: LeaseBounds) => Promise<void> = writeV2Limits): Promise<TaskCgroupV2> {
    const dir = path.join(parent, `suanli-task-${taskId}-${process.pid}-${Date.now().toString(36)}`);
    await mkdir(dir);
    const group = new TaskCgroupV2(dir, bounds);
    try {
      await limits(dir, bounds);
    } catch (error) {
      await group.remove();
      throw error;
    }
    return group;
  }

  /** `sh -c` that moves itself into the cgroup, then execs the rest of the argv. */
  prefix(shell = "/bin/sh"): string[] {
    return [shell, "-c", 'echo $$ > "$1" || exit 125; shift; exec "$@"', "suanli-cgroup", path.join(this.dir, "cgroup.procs")];
  }

  /** Whether the kernel's OOM killer ended a process of this cgroup. */
  oomKilled(): boolean {
    try {
      return Number(/^oom_kill (\d+)/m.exec(readFileSync(path.join(this.dir, "memory.events"), "utf8"))?.[1] ?? 0) > 0;
    } catch {
      return false;
    }
  }

  /** Kills what is left in the cgroup (cgroup.kill, Linux 5.14+), then removes it (retried briefly while processes exit). */
  async remove(): Promise<void> {
    await writeFile(path.join(this.dir, "cgroup.kill"), "1").catch(() => undefined);
    for (let attempt = 0; attempt < 20; attempt++) {
      const done = await rmdir(this.dir).then(
        () => true,
        (error: NodeJS.ErrnoException) => error.code === "ENOENT",
      );
      if (done) return;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
}

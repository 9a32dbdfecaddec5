/**
 * A process-runtime task's own cgroup (docs/provider.md, "Resource bounds"): memory, pids and a
 * CPU quota the kernel enforces for every process the task starts, whatever uid it runs as.
 *
 * Supported: cgroup v1 hierarchies the node may write (`/sys/fs/cgroup/{memory,pids,cpu}`, a
 * node run as root on a v1 host), and on a cgroup v2 host a subtree delegated to the node
 * (task-cgroup-v2.ts). Elsewhere the runtime bounds the task with rlimits instead
 * (bounded-task.ts), or refuses where those cannot hold (root: RLIMIT_NPROC is not enforced for
 * uid 0).
 *
 * The task joins its cgroup before anything else runs: the argv prefix is a shell that writes
 * its own pid into each `cgroup.procs` and then execs the rest, so no process escapes the bound.
 */
import { readFileSync } from "node:fs";
import { access, constants, mkdir, readFile, rmdir, statfs, writeFile } from "node:fs/promises";
import path from "node:path";
import type { LeaseBounds } from "./lease-bounds.js";
import { delegateV2 } from "./task-cgroup-v2.js";

const CGROUP_SUPER_MAGIC = 0x27e0eb;
const CGROUP2_SUPER_MAGIC = 0x63677270;

export type CgroupSupport = { kind: "v1"; root: string } | { kind: "v2"; parent: string } | { kind: "none"; reason: string };

/** What this host offers: a writable cgroup v1 memory + pids + cpu hierarchy, a delegated cgroup v2 subtree (task-cgroup-v2.ts), or why not. */
export async function detectCgroups(root = "/sys/fs/cgroup", procSelfCgroup = "/proc/self/cgroup"): Promise<CgroupSupport> {
  const type = await statfs(root).then(
    (s) => s.type,
    () => undefined,
  );
  if (type === CGROUP2_SUPER_MAGIC) {
    const delegated = await delegateV2(root, await readFile(procSelfCgroup, "utf8").catch(() => ""));
    return delegated.ok ? { kind: "v2", parent: delegated.parent } : { kind: "none", reason: delegated.reason };
  }
  for (const controller of ["memory", "pids", "cpu"]) {
    const dir = path.join(root, controller);
    const sub = await statfs(dir).then(
      (s) => s.type,
      () => undefined,
    );
    if (sub !== CGROUP_SUPER_MAGIC) return { kind: "none", reason: `no cgroup v1 ${controller} hierarchy at ${dir}` };
    if (
      !(await access(dir, constants.W_OK).then(
        () => true,
        () => false,
      ))
    )
      return { kind: "none", reason: `${dir} is not writable by the node` };
  }
  return { kind: "v1", root };
}

export class TaskCgroup {
  private constructor(
    private readonly dirs: { memory: string; pids: string; cpu: string },
    readonly bounds: LeaseBounds,
  ) {}

  /** Creates `suanli-task-<taskId>` in each hierarchy with the lease's bounds written. */
  static async create(root: string, taskId: string, bounds: LeaseBounds): Promise<TaskCgroup> {
    const name = `suanli-task-${taskId}-${process.pid}-${Date.now().toString(36)}`;
    const dirs = { memory: path.join(root, "memory", name), pids: path.join(root, "pids", name), cpu: path.join(root, "cpu", name) };
    for (const dir of Object.values(dirs)) await mkdir(dir, { recursive: true });
    const group = new TaskCgroup(dirs, bounds);
    try {
      await writeFile(path.join(dirs.memory, "memory.limit_in_bytes"), String(bounds.memoryBytes));
      // Memory + swap where the kernel accounts swap: the bound cannot be dodged into swap.
      await writeFile(path.join(dirs.memory, "memory.memsw.limit_in_bytes"), String(bounds.memoryBytes)).catch(() => undefined);
      await writeFile(path.join(dirs.pids, "pids.max"), String(bounds.pids));
      await writeFile(path.join(dirs.cpu, "cpu.cfs_period_us"), "100000");
      await writeFile(path.join(dirs.cpu, "cpu.cfs_quota_us"), String(Math.round(bounds.cpus * 100_000)));
    } catch (error) {
      await group.remove();
      throw error;
    }
    return group;
  }

  /** `sh -c` that moves itself into the cgroup, then execs the rest of the argv. */
  prefix(shell = "/bin/sh"): string[] {
    const script = 'for p in "$1" "$2" "$3"; do echo $$ > "$p" || exit 125; done; shift 3; exec "$@"';
    return [shell, "-c", script, "suanli-cgroup", ...Object.values(this.dirs).map((dir) => path.join(dir, "cgroup.procs"))];
  }

  /** Whether the kernel's OOM killer ended a process of this cgroup (memory.oom_control's oom_kill). */
  oomKilled(): boolean {
    try {
      const text = readFileSync(path.join(this.dirs.memory, "memory.oom_control"), "utf8");
      const kills = /^oom_kill (\d+)/m.exec(text);
      if (kills) return Number(kills[1]) > 0;
      return Number(readFileSync(path.join(this.dirs.memory, "memory.failcnt"), "utf8").trim()) > 0;
    } catch {
      return false;
    }
  }

  /** Removes the cgroups (empty once the task's processes are gone; retried briefly while they exit). */
  async remove(): Promise<void> {
    for (const dir of Object.values(this.dirs)) {
      for (let attempt = 0; attempt < 20; attempt++) {
        const done = await rmdir(dir).then(
          () => true,
          (error: NodeJS.ErrnoException) => error.code === "ENOENT",
        );
        if (done) break;
        const procs = await readFile(path.join(dir, "cgroup.procs"), "utf8").catch(() => "");
        if (procs.trim() === "" && attempt > 2) break;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
  }
}

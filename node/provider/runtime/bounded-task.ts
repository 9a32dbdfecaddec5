/**
 * Applies a lease's bounds (lease-bounds.ts) to a process-runtime task. Where the node may write
 * a cgroup v1 hierarchy (task-cgroup.ts) or has a delegated cgroup v2 subtree (task-cgroup-v2.ts)
 * the kernel bounds memory (OOM kill), pids and CPU time for the whole task; elsewhere rlimits through prlimit: memory as RLIMIT_AS, processes as
 * RLIMIT_NPROC (the node user's live threads plus the bound). RLIMIT_NPROC does not hold for
 * uid 0, so a root node without a usable cgroup refuses to start tasks unless the operator sets
 * `bounds.enforce: "off"`. The CPU count a task sees (`nproc`) comes from taskset; /tmp's size
 * goes to bubblewrap (sandbox.ts).
 */
import { RuntimeUnavailableError } from "../errors.js";
import { leaseBounds, tasksetPrefix, userThreadCount, type LeaseBounds, type LeaseBoundsOptions } from "./lease-bounds.js";
import { findExecutable, type ResourceLimits } from "./limits.js";
import { detectCgroups, TaskCgroup, type CgroupSupport } from "./task-cgroup.js";
import { TaskCgroupV2 } from "./task-cgroup-v2.js";

const DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin";
const OPT_OUT = 'Set provider.runtime.bounds.enforce to "off" to run tasks without these bounds (any renter can then exhaust the host).';

export type BoundedTask = { bounds?: LeaseBounds; prefix: string[]; limits: ResourceLimits; cgroup?: TaskCgroup | TaskCgroupV2 };

let support: Promise<CgroupSupport> | undefined;

export async function boundedTask(options: LeaseBoundsOptions | undefined, taskId: string, units: number, limits: ResourceLimits): Promise<BoundedTask> {
  if (!options || options.enforce === "off") return { prefix: [], limits };
  const bounds = leaseBounds(options, units);
  const taskset = await findExecutable("taskset", process.env.PATH ?? DEFAULT_PATH);
  if (!taskset) throw new RuntimeUnavailableError("process", "taskset (util-linux) is not installed: the lease's CPU bound cannot be applied", [OPT_OUT]);
  const cpus = tasksetPrefix(taskset, bounds.cpus);
  support ??= detectCgroups();
  const found = await support;
  if (found.kind === "v1") {
    const cgroup = await TaskCgroup.create(found.root, taskId, bounds);
    return { bounds, cgroup, prefix: [...cgroup.prefix(), ...cpus], limits };
  }
  if (found.kind === "v2") {
    const cgroup = await TaskCgroupV2.create(found.parent, taskId, bounds);
    return { bounds, cgroup, prefix: [...cgroup.prefix(), ...cpus], limits };
  }
  if (process.getuid?.() === 0) {
    throw new RuntimeUnavailableError("process", `no usable cgroup (${found.reason}) and the node runs as root, where RLIMIT_NPROC does not hold`, [
      "Run the node as an unprivileged user (rlimits then bound memory and processes), on a host with a writable cgroup v1 hierarchy, or with a delegated cgroup v2 subtree (systemd Delegate=yes).",
      OPT_OUT,
    ]);
  }
  return {
    bounds,
    prefix: cpus,
    limits: {
      ...limits,
      memoryBytes: Math.min(limits.memoryBytes ?? Number.MAX_SAFE_INTEGER, bounds.memoryBytes),
      processes: Math.min(limits.processes ?? Number.MAX_SAFE_INTEGER, (await userThreadCount()) + bounds.pids),
    },
  };
}

/** The renter's task went past its memory bound: the kernel killed it (the renter's side, not the provider's). */
export function outOfMemory(task: BoundedTask | undefined, exit: { code: number | null; signal: string | null }): { name: string; message: string; blame: "renter" } | undefined {
  // bubblewrap reports a killed child as exit code 128 + 9.
  if (!task?.cgroup || (exit.signal !== "SIGKILL" && exit.code !== 137) || !task.cgroup.oomKilled()) return undefined;
  return outOfMemoryError(task.cgroup.bounds.memoryBytes);
}

/** The error of a task the kernel killed for memory (both runtimes): the renter's side. */
export function outOfMemoryError(memoryBytes: number | undefined): { name: string; message: string; blame: "renter" } {
  const bound = memoryBytes === undefined ? "its memory bound" : `its ${memoryBytes} bytes of memory`;
  return { name: "TaskOutOfMemoryError", message: `The task used more than ${bound} and was killed`, blame: "renter" };
}

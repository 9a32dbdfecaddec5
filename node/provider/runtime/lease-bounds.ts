/**
 * Resource bounds every lease gets by default (docs/provider.md, "Security model"): CPU cores,
 * memory, processes and scratch space, sized per leased unit so that one renter cannot take the
 * machine down for every other lease.
 *
 * | bound | process runtime (bubblewrap) | container runtime |
 * |---|---|---|
 * | cpus | `taskset` to the first N cores (`nproc` shows N), cgroup CPU quota | `--cpus`, `--cpuset-cpus` |
 * | memoryBytes | cgroup (v1, or a delegated v2 subtree), else RLIMIT_AS through prlimit | `--memory` (cgroup; the kernel's OOM killer) |
 * | pids | cgroup `pids.max`, else RLIMIT_NPROC: the node user's live threads plus the bound | `--pids-limit` |
 * | tmpBytes | `/tmp` is a tmpfs of this size; the sandbox root is read-only | `/tmp` is a tmpfs of this size |
 * | workspaceBytes | the workspace is a loop-mounted ext4 image of this size (workspace-disk.ts) | the same, bound into the container |
 *
 * RLIMIT_AS counts address space, not resident memory: CUDA reserves large virtual ranges, so a
 * GPU host sets `memoryBytesPerUnit` generously (or `enforce: "off"` and bounds memory outside).
 */
import { availableParallelism } from "node:os";
import { readdir, readFile } from "node:fs/promises";
import { z } from "zod";

const GiB = 1024 ** 3;
const positiveInt = (max: number) => z.number().int().positive().max(max);

/** `provider.runtime.bounds`: the operator's per-lease defaults. */
export const leaseBoundsSchema = z
  .strictObject({
    /** CPU cores per leased unit (a task with no unit counts as one), never more than the host has. */
    cpusPerUnit: z.number().int().positive().max(4_096).default(4),
    /** Memory per leased unit, bytes (RLIMIT_AS in the process runtime, `--memory` in containers). */
    memoryBytesPerUnit: positiveInt(Number.MAX_SAFE_INTEGER).default(32 * GiB),
    /** Processes and threads per lease (fork bombs stop here). */
    pidsPerLease: positiveInt(10_000_000).default(4_096),
    /** Size of the task's `/tmp` tmpfs, bytes (RAM-backed: counted against the host's memory). */
    tmpBytes: positiveInt(Number.MAX_SAFE_INTEGER).default(1 * GiB),
    /**
     * The task's workspace disk per leased unit, bytes, as offers declare it (host-resources.ts):
     * the workspace of a lease of N units is a file system of N times this (workspace-disk.ts), so
     * a task writing past it gets ENOSPC and the host's disk is untouched.
     */
    diskBytesPerUnit: z
      .number()
      .int()
      .min(8 * 1024 ** 2)
      .max(Number.MAX_SAFE_INTEGER)
      .default(100 * GiB),
    /**
     * `required`: a task whose bounds cannot be applied (prlimit or taskset missing) is refused;
     * `off`: tasks run without these bounds (the node warns at every start).
     */
    enforce: z.enum(["required", "off"]).default("required"),
  })
  .prefault({});

export type LeaseBoundsOptions = z.output<typeof leaseBoundsSchema>;

/** What one task gets. */
export type LeaseBounds = { cpus: number; memoryBytes: number; pids: number; tmpBytes: number; workspaceBytes: number };

/** The bounds of a task on `units` leased units: per-unit values times the units, CPUs capped at the host's. */
export function leaseBounds(options: LeaseBoundsOptions, units: number, hostCpus = availableParallelism()): LeaseBounds {
  const n = Math.max(1, units);
  return {
    cpus: Math.max(1, Math.min(hostCpus, options.cpusPerUnit * n)),
    memoryBytes: Math.min(Number.MAX_SAFE_INTEGER, options.memoryBytesPerUnit * n),
    pids: options.pidsPerLease,
    tmpBytes: options.tmpBytes,
    workspaceBytes: Math.min(Number.MAX_SAFE_INTEGER, options.diskBytesPerUnit * n),
  };
}

/** `taskset -c 0-(N-1)`: the task runs on N cores, and `nproc` inside it says N. */
export function tasksetPrefix(tasksetPath: string, cpus: number): string[] {
  return [tasksetPath, "-c", cpus === 1 ? "0" : `0-${cpus - 1}`];
}

/**
 * Threads the node's user runs now: RLIMIT_NPROC counts every process and thread of the real uid,
 * so a task's bound is this plus its own share (the node's own and other leases' count too).
 */
export async function userThreadCount(uid = process.getuid?.() ?? 0): Promise<number> {
  let count = 0;
  for (const entry of await readdir("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const status = await readFile(`/proc/${entry}/status`, "utf8").catch(() => "");
    const uidLine = /^Uid:\s+(\d+)/m.exec(status);
    if (!uidLine || Number(uidLine[1]) !== uid) continue;
    const threads = /^Threads:\s+(\d+)/m.exec(status);
    count += threads ? Number(threads[1]) : 1;
  }
  return count;
}

/**
 * Resource limits for a task, applied with `prlimit` (util-linux) as a wrapper around the command:
 * POSIX rlimits, inherited by every process the task starts.
 *
 * | limit | rlimit | note |
 * |---|---|---|
 * | memoryBytes | RLIMIT_AS | address space, not resident memory. CUDA reserves very large virtual ranges, so leave it unset for GPU tasks |
 * | cpuSeconds | RLIMIT_CPU | CPU time per process; SIGXCPU at the limit |
 * | fileSizeBytes | RLIMIT_FSIZE | largest file a process may write; SIGXFSZ beyond |
 * | processes | RLIMIT_NPROC | counted per user id, not per task; not enforced for root |
 * | openFiles | RLIMIT_NOFILE | open file descriptors per process |
 *
 * Wall-clock time is not an rlimit: the runtime stops a task when its lease time is over.
 */
import { access, constants, readFile, stat } from "node:fs/promises";
import path from "node:path";

export type ResourceLimits = {
  memoryBytes?: number | undefined;
  cpuSeconds?: number | undefined;
  fileSizeBytes?: number | undefined;
  processes?: number | undefined;
  openFiles?: number | undefined;
};

export function hasLimits(limits: ResourceLimits): boolean {
  return Object.values(limits).some((value) => value !== undefined);
}

/** The argv prefix that applies the limits, e.g. `["/usr/bin/prlimit", "--fsize=1048576", "--"]`. */
export function prlimitPrefix(prlimitPath: string, limits: ResourceLimits): string[] {
  const args: string[] = [prlimitPath];
  const add = (flag: string, value: number | undefined) => {
    if (value !== undefined) args.push(`--${flag}=${Math.floor(value)}`);
  };
  add("as", limits.memoryBytes);
  add("cpu", limits.cpuSeconds);
  add("fsize", limits.fileSizeBytes);
  add("nproc", limits.processes);
  add("nofile", limits.openFiles);
  args.push("--");
  return args;
}

/** Finds an executable by name on a PATH string (or checks a path that has a slash). */
export async function findExecutable(name: string, searchPath: string | undefined, cwd = process.cwd()): Promise<string | undefined> {
  const candidates = name.includes("/")
    ? [path.resolve(cwd, name)]
    : (searchPath ?? "")
        .split(":")
        .filter((dir) => dir !== "")
        .map((dir) => path.join(dir, name));
  for (const candidate of candidates) {
    try {
      await access(candidate, constants.X_OK);
      if ((await stat(candidate)).isFile()) return candidate;
    } catch {
      // not here; try the next directory
    }
  }
  return undefined;
}

const PROC_LIMIT_NAMES: Record<keyof ResourceLimits, string> = {
  memoryBytes: "Max address space",
  cpuSeconds: "Max cpu time",
  fileSizeBytes: "Max file size",
  processes: "Max processes",
  openFiles: "Max open files",
};

/**
 * Lowers each limit to the node's own hard limit: prlimit sets soft and hard together, and an
 * unprivileged process cannot raise a hard limit (a task never gets more than its node has
 * anyway). Reads /proc/self/limits; elsewhere the limits are returned unchanged.
 */
export async function clampToHardLimits(limits: ResourceLimits, procLimits = "/proc/self/limits"): Promise<ResourceLimits> {
  const text = await readFile(procLimits, "utf8").catch(() => undefined);
  if (!text) return limits;
  const out: ResourceLimits = { ...limits };
  for (const [key, label] of Object.entries(PROC_LIMIT_NAMES) as [keyof ResourceLimits, string][]) {
    const value = out[key];
    if (value === undefined) continue;
    const line = text.split("\n").find((row) => row.startsWith(label));
    // Columns: name (padded), soft, hard, units.
    const hard = line?.slice(label.length).trim().split(/\s+/)[1];
    if (hard && /^\d+$/.test(hard)) out[key] = Math.min(value, Number(hard));
  }
  return out;
}

/**
 * Finding and killing what a crashed node left running. A task's processes outlive the node that
 * started them (they lead their own process group), but once the node is gone nobody reads their
 * output, enforces the lease time or reports the result, so a restarted node kills them rather
 * than adopting them (docs/provider.md, "Restart").
 *
 * Two ways to find them, both Linux /proc reads of the node user's own processes:
 * - every process of a task inherits `SUANLI_WORKSPACE=<workspace>` from its environment at
 *   exec time, and the workspace path is unique per node and task;
 * - the recorded process group id, trusted only while its leader is the same process (its start
 *   time, in clock ticks since boot, matches the one recorded), so a reused pid is never hit.
 */
import { readFile, readdir } from "node:fs/promises";
import { setTimeout as sleep } from "node:timers/promises";

type ProcEntry = { pid: number; pgid: number; state: string; startTicks: number };

async function readStat(pid: number): Promise<ProcEntry | undefined> {
  const stat = await readFile(`/proc/${pid}/stat`, "utf8").catch(() => undefined);
  if (!stat) return undefined;
  // The fields after the command name (in parentheses, may contain spaces): state is field 3.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return { pid, state: fields[0]!, pgid: Number(fields[2]), startTicks: Number(fields[19]) };
}

/** The start time of a process in clock ticks since boot (stat field 22), to recognise it later. */
export async function processStartTicks(pid: number): Promise<number | undefined> {
  return (await readStat(pid))?.startTicks;
}

/** Live (non-zombie) processes whose environment holds `SUANLI_WORKSPACE=<workspace>`. */
export async function findWorkspaceProcesses(workspace: string): Promise<number[]> {
  const entries = await readdir("/proc").catch(() => [] as string[]);
  const needle = Buffer.from(`SUANLI_WORKSPACE=${workspace}\0`);
  const out: number[] = [];
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    const pid = Number(entry);
    if (pid === process.pid) continue;
    const environ = await readFile(`/proc/${entry}/environ`).catch(() => undefined);
    if (!environ || environ.indexOf(needle) === -1) continue;
    const stat = await readStat(pid);
    if (stat && stat.state !== "Z") out.push(pid);
  }
  return out;
}

function kill(pid: number, signal: NodeJS.Signals): boolean {
  try {
    process.kill(pid, signal);
    return true;
  } catch {
    return false;
  }
}

/**
 * SIGKILLs every process of a task found by its workspace or by its recorded process group, and
 * waits (up to `timeoutMs`) until they are gone. Returns how many processes were killed.
 */
export async function reapTaskProcesses(workspace: string, hints: { pid?: number | undefined; startTicks?: number | undefined } = {}, timeoutMs = 5_000): Promise<number> {
  const targets = new Set(await findWorkspaceProcesses(workspace));
  if (hints.pid !== undefined && hints.startTicks !== undefined) {
    const leader = await readStat(hints.pid);
    if (leader && leader.state !== "Z" && leader.startTicks === hints.startTicks) {
      kill(-hints.pid, "SIGKILL");
      targets.add(hints.pid);
    }
  }
  for (const pid of targets) kill(pid, "SIGKILL");
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const alive: number[] = [];
    for (const pid of targets) {
      const stat = await readStat(pid);
      if (stat && stat.state !== "Z") alive.push(pid);
    }
    if (alive.length === 0 || Date.now() > deadline) break;
    await sleep(25);
  }
  return targets.size;
}

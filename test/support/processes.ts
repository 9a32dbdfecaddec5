import { readFile } from "node:fs/promises";

/**
 * Whether a process runs: it exists and is not a zombie. An orphan's zombie waits for an init
 * the test does not control, so `kill(pid, 0)` alone would call it alive.
 */
export async function isRunning(pid: number): Promise<boolean> {
  const stat = await readFile(`/proc/${pid}/stat`, "utf8").catch(() => undefined);
  return stat !== undefined && stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z";
}

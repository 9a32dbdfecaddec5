/**
 * Host-wide exclusive locks between the node processes of one host (task-user-slots.ts): two
 * provider nodes that share a base task user must never hand the same slot user to two tasks,
 * and must not give two slot users the same subordinate id range.
 *
 * A lock is a file that holds its owner (`{ pid, startTicks, nonce, holder }`). It is taken
 * atomically: the owner is written to a private temporary file first and then `link(2)`ed to the
 * lock's name, which fails with EEXIST when the lock exists, so a lock file is never seen empty
 * or half-written. Nothing but its owner removes a lock, except a stale one: its owner process is
 * gone, or its PID now names another process (a different start time in /proc/<pid>/stat), or is
 * a zombie. Stale locks are reclaimed under a second lock (`<name>.reclaim`, taken the same way),
 * so two processes that both find one stale lock cannot both remove it and then each remove the
 * other's fresh lock. A reclaimer that died holding `.reclaim` (between two file operations)
 * leaves it stale too; it is removed when found and that lock is tried again on the next call.
 *
 * Every process of the host that takes these locks must see one /run and one PID namespace (the
 * host's): a node in its own PID namespace would see its peers' PIDs as dead.
 */
import { randomBytes } from "node:crypto";
import { readFileSync, unlinkSync } from "node:fs";
import { link, mkdir, readFile, unlink, writeFile } from "node:fs/promises";
import { setTimeout as sleep } from "node:timers/promises";
import { z } from "zod";

/** Where the nodes of one host keep their task slot locks (tmpfs: a reboot, which ends every task, clears them). */
export const TASK_SLOT_LOCK_DIR = "/run/suanli/task-slots";

const ownerSchema = z.strictObject({
  pid: z.number().int().positive(),
  /** The process's start time in clock ticks since boot (field 22 of /proc/<pid>/stat): tells a reused PID. */
  startTicks: z.number().int().nonnegative().nullable(),
  /** Tells this process's own locks apart (two pools in one process). */
  nonce: z.string(),
  /** What holds it (a task id), for an operator reading the file. */
  holder: z.string(),
});
export type LockOwner = z.infer<typeof ownerSchema>;

/** Field 22 (starttime) of /proc/<pid>/stat and whether the process is a zombie; undefined: no such process. */
async function processStart(pid: number): Promise<{ startTicks: number; zombie: boolean } | undefined> {
  const stat = await readFile(`/proc/${pid}/stat`, "utf8").catch(() => undefined);
  if (stat === undefined) return undefined;
  // The command name (field 2) is in parentheses and may hold spaces or parentheses itself.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return { startTicks: Number(fields[19]), zombie: fields[0] === "Z" };
}

let self: Promise<number | null> | undefined;
function selfStartTicks(): Promise<number | null> {
  self ??= processStart(process.pid).then((found) => found?.startTicks ?? null);
  return self;
}

/** Whether a lock's owner still runs (the same process, not a later one with its PID). */
export async function ownerAlive(owner: LockOwner): Promise<boolean> {
  const found = await processStart(owner.pid);
  if (!found || found.zombie) return false;
  return owner.startTicks === null || owner.startTicks === found.startTicks;
}

async function readOwner(file: string): Promise<{ text: string; owner: LockOwner | undefined } | undefined> {
  const text = await readFile(file, "utf8").catch((error: NodeJS.ErrnoException) => {
    if (error.code === "ENOENT") return undefined;
    throw error;
  });
  if (text === undefined) return undefined;
  return { text, owner: parseOwner(text) };
}

/** The owner a lock file names; undefined for anything else (no process of ours wrote it: stale). */
function parseOwner(text: string): LockOwner | undefined {
  try {
    const parsed = ownerSchema.safeParse(JSON.parse(text) as unknown);
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/** Links a file holding `owner` to `file`; false when `file` exists. */
async function linkOwner(file: string, owner: LockOwner): Promise<boolean> {
  const temporary = `${file}.${process.pid}.${randomBytes(6).toString("hex")}.tmp`;
  await writeFile(temporary, `${JSON.stringify(owner)}\n`, { flag: "wx", mode: 0o600 });
  try {
    await link(temporary, file);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "EEXIST") return false;
    throw error;
  } finally {
    await unlink(temporary).catch(() => undefined);
  }
}

/** One exclusive lock file; `take` does not wait. */
export class HostLock {
  private readonly nonce = randomBytes(8).toString("hex");
  private held = false;

  constructor(
    readonly file: string,
    private readonly holder: string,
  ) {}

  /** Takes the lock now if it is free or stale; false while another live process holds it. */
  async take(): Promise<boolean> {
    if (this.held) return true;
    const owner: LockOwner = { pid: process.pid, startTicks: await selfStartTicks(), nonce: this.nonce, holder: this.holder };
    for (let attempt = 0; attempt < 2; attempt++) {
      if (await linkOwner(this.file, owner)) return (this.held = true);
      const found = await readOwner(this.file);
      if (found === undefined) continue; // released meanwhile
      if (found.owner && (await ownerAlive(found.owner))) return false;
      if (!(await this.reclaim(found.text, owner))) return false;
    }
    return false;
  }

  /** Removes a stale lock whose content is `stale`, under `<file>.reclaim`. True when the lock is gone. */
  private async reclaim(stale: string, owner: LockOwner): Promise<boolean> {
    const guard = `${this.file}.reclaim`;
    if (!(await linkOwner(guard, owner))) {
      const other = await readOwner(guard);
      // A reclaimer that died mid-way: remove its guard; the lock is tried again on the next call.
      if (other && !(other.owner && (await ownerAlive(other.owner)))) await unlink(guard).catch(() => undefined);
      return false;
    }
    try {
      const now = await readOwner(this.file);
      if (now === undefined) return true;
      if (now.text !== stale) return false; // taken afresh by another reclaimer before this one
      await unlink(this.file);
      return true;
    } finally {
      await unlink(guard).catch(() => undefined);
    }
  }

  /** Releases the lock if this object holds it (and the file is still its own); safe to call twice. */
  release(): void {
    if (!this.held) return;
    this.held = false;
    try {
      const owner = parseOwner(readFileSync(this.file, "utf8"));
      if (owner?.pid === process.pid && owner.nonce === this.nonce) unlinkSync(this.file);
    } catch {
      // Gone already (an operator cleared the directory): nothing to release.
    }
  }
}

/** Creates the lock directory (root's, 0700) when missing. */
export async function ensureLockDir(dir: string): Promise<void> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
}

/** Runs `fn` holding `file`, waiting for it (at most `waitMs`) while another live process holds it. */
export async function withHostLock<T>(file: string, holder: string, waitMs: number, fn: () => Promise<T>): Promise<T> {
  const lock = new HostLock(file, holder);
  const until = Date.now() + waitMs;
  while (!(await lock.take())) {
    if (Date.now() > until) throw new Error(`${file} stayed locked by another process for ${waitMs} ms`);
    await sleep(25);
  }
  try {
    return await fn();
  } finally {
    lock.release();
  }
}

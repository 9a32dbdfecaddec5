/**
 * One host user per running task (issue #33 item 5, its last limit): with one shared task user,
 * two leases on one host were the same host uid, so one task could signal another lease's
 * processes or read what it could reach of the other's files. A root node now hands every task a
 * slot of a pool:
 *
 * - slot `i` is the system user `<provider.runtime.taskUser>-<i>` (`suanli-task-0`, `-1`, …,
 *   created with useradd when first needed: a slot is made only when every lower one is taken),
 *   and for rootful Podman that user's own 65,536-id subordinate range (task-user.ts);
 * - a task holds its slot from its preparation until its workspace is removed (cleanup, or a
 *   failed preparation), so no two live tasks of this node ever share a host id;
 * - a slot whose ids still own a process is skipped, whatever this node remembers: after a
 *   restart (an empty pool) the processes or containers an earlier run left keep their slot until
 *   the node reaps them, and a second node on the host using the same users is not handed a
 *   slot one of its tasks runs in;
 * - a slot is claimed host-wide before it is used: an exclusive lock file per slot user in
 *   `lockDir` (default /run/suanli/task-slots, host-lock.ts) names the process that holds it, so
 *   two nodes sharing a base task user never pick the same free slot at once (the process check
 *   alone left the window between one node choosing a slot and its task starting). A lock whose
 *   process is gone (a node that crashed or was killed) is reclaimed. Slot users and their
 *   subordinate ranges are created under one host-wide lock (`ids.lock`), so two nodes never
 *   allocate the same range to two users.
 *
 * The base task user itself (`suanli-task`) runs no task: it is the user of the start checks only.
 */
import { readFile, readdir } from "node:fs/promises";
import path from "node:path";
import type { Logger } from "../../log/logger.js";
import { RuntimeUnavailableError } from "../errors.js";
import { ensureLockDir, HostLock, TASK_SLOT_LOCK_DIR, withHostLock } from "./host-lock.js";
import { ensureSubordinateRange, ensureTaskUser, type IdFiles, type SubordinateRange, type TaskUser } from "./task-user.js";

/** At most this many tasks hold a slot at once (users `<base>-0` … `<base>-255`). */
export const MAX_TASK_USER_SLOTS = 256;

/** The user name of slot `index` (the base is at most 28 characters: the name stays within useradd's 32). */
export function slotUserName(base: string, index: number): string {
  return `${base}-${index}`;
}

export type TaskUserSlot = {
  index: number;
  user: TaskUser;
  /** Rootful Podman: the host ids the container's 0-65535 map to. */
  range: SubordinateRange | undefined;
  /** Frees the slot (once its task's processes are gone); calling it again does nothing. */
  release: () => void;
};

export type TaskUserPoolOptions = {
  /** provider.runtime.taskUser: slot users are named `<base>-<index>`. */
  base: string;
  /** Give each slot user a subordinate range too (rootful Podman). */
  subordinate?: boolean;
  /** Checks a slot user before its first task (the process runtime: it reaches every readOnlyPath). */
  check?: (user: TaskUser) => Promise<void>;
  maxSlots?: number;
  logger?: Logger;
  passwdFile?: string;
  idFiles?: IdFiles;
  /** The host uids processes run as now; default: every real, effective, saved and fs uid in /proc. */
  uidsInUse?: () => Promise<Set<number>>;
  /** The host-wide directory of slot locks, shared by every node of the host (default TASK_SLOT_LOCK_DIR). */
  lockDir?: string;
};

/** How long a slot acquisition waits for another node creating slot users or ranges. */
const ID_LOCK_WAIT_MS = 30_000;

/** Every uid (real, effective, saved, file system) of every live process on the host, from /proc/<pid>/status. */
export async function processUids(): Promise<Set<number>> {
  const uids = new Set<number>();
  const entries = await readdir("/proc").catch(() => [] as string[]);
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    const status = await readFile(`/proc/${entry}/status`, "utf8").catch(() => "");
    // A zombie holds nothing and can do nothing: its uid is free.
    if (/^State:\s+Z/m.test(status)) continue;
    const line = /^Uid:\s+(.*)$/m.exec(status)?.[1];
    for (const uid of line?.trim().split(/\s+/) ?? []) if (/^\d+$/.test(uid)) uids.add(Number(uid));
  }
  return uids;
}

/** The pool of per-task host users of one runtime (see the file comment). */
export class TaskUserPool {
  private readonly held = new Map<number, string>();
  private queue: Promise<unknown> = Promise.resolve();
  private readonly checked = new Set<number>();

  constructor(private readonly options: TaskUserPoolOptions) {}

  /** The task ids holding a slot now, by slot index. */
  holders(): ReadonlyMap<number, string> {
    return this.held;
  }

  /** A free slot for `taskId`, its user (and range) created when missing. One acquisition at a time. */
  acquire(taskId: string): Promise<TaskUserSlot> {
    const next = this.queue.then(() => this.acquireNow(taskId));
    this.queue = next.catch(() => undefined);
    return next;
  }

  private async acquireNow(taskId: string): Promise<TaskUserSlot> {
    const max = this.options.maxSlots ?? MAX_TASK_USER_SLOTS;
    const lockDir = this.options.lockDir ?? TASK_SLOT_LOCK_DIR;
    await ensureLockDir(lockDir).catch((error: unknown) => {
      throw new RuntimeUnavailableError(
        this.options.subordinate ? "container" : "process",
        `the task slot lock directory ${lockDir} cannot be created (${(error as Error).message})`,
        ["Run the node as root (per-task users are a root node's), with /run writable."],
      );
    });
    const inUse = await (this.options.uidsInUse ?? processUids)();
    let skipped = 0;
    let lockedElsewhere = 0;
    for (let index = 0; index < max; index++) {
      if (this.held.has(index)) continue;
      const name = slotUserName(this.options.base, index);
      const lock = new HostLock(path.join(lockDir, `${name}.lock`), taskId);
      if (!(await lock.take())) {
        lockedElsewhere++;
        continue;
      }
      let user: TaskUser;
      let range: SubordinateRange | undefined;
      try {
        ({ user, range } = await withHostLock(path.join(lockDir, "ids.lock"), taskId, ID_LOCK_WAIT_MS, async () => {
          const made = await ensureTaskUser(name, this.options.logger, this.options.passwdFile);
          return { user: made, range: this.options.subordinate ? await ensureSubordinateRange(made, this.options.logger, this.options.idFiles) : undefined };
        }));
        const ids = range;
        const busy = inUse.has(user.uid) || (ids !== undefined && [...inUse].some((uid) => uid >= ids.start && uid < ids.start + ids.count));
        if (busy) {
          // Processes an earlier run (or another node) left: the slot waits until they are reaped.
          lock.release();
          skipped++;
          continue;
        }
        if (!this.checked.has(index)) {
          await this.options.check?.(user);
          this.checked.add(index);
        }
      } catch (error) {
        lock.release();
        throw error;
      }
      this.held.set(index, taskId);
      if (skipped > 0) this.options.logger?.warn("Skipped task user slots whose ids still run processes (left by an earlier run, or another node)", { skipped, taskId });
      let released = false;
      const release = () => {
        if (released) return;
        released = true;
        if (this.held.get(index) === taskId) this.held.delete(index);
        lock.release();
      };
      return { index, user, range, release };
    }
    throw new RuntimeUnavailableError(
      this.options.subordinate ? "container" : "process",
      `every one of the ${max} task user slots is taken (${skipped} by processes this node does not run, ${lockedElsewhere} claimed by another node of this host)`,
      [
        `At most ${max} tasks run at once on one host, each as its own user (${slotUserName(this.options.base, 0)} …); end the processes of ${this.options.base}-* users that no task of this node runs.`,
        `A lock in ${lockDir} names the process (pid) holding each slot; one of a process that is gone is reclaimed by itself.`,
      ],
    );
  }
}

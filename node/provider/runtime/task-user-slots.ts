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
 *   slot one of its tasks runs in.
 *
 * The base task user itself (`suanli-task`) runs no task: it is the user of the start checks only.
 */
import { readFile, readdir } from "node:fs/promises";
import type { Logger } from "../../log/logger.js";
import { RuntimeUnavailableError } from "../errors.js";
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
};

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
    const inUse = await (this.options.uidsInUse ?? processUids)();
    let skipped = 0;
    for (let index = 0; index < max; index++) {
      if (this.held.has(index)) continue;
      const user = await ensureTaskUser(slotUserName(this.options.base, index), this.options.logger, this.options.passwdFile);
      const range = this.options.subordinate ? await ensureSubordinateRange(user, this.options.logger, this.options.idFiles) : undefined;
      const busy = inUse.has(user.uid) || (range !== undefined && [...inUse].some((uid) => uid >= range.start && uid < range.start + range.count));
      if (busy) {
        // Processes an earlier run (or another node) left: the slot waits until they are reaped.
        skipped++;
        continue;
      }
      if (!this.checked.has(index)) {
        await this.options.check?.(user);
        this.checked.add(index);
      }
      this.held.set(index, taskId);
      if (skipped > 0) this.options.logger?.warn("Skipped task user slots whose ids still run processes (left by an earlier run, or another node)", { skipped, taskId });
      let released = false;
      const release = () => {
        if (released) return;
        released = true;
        if (this.held.get(index) === taskId) this.held.delete(index);
      };
      return { index, user, range, release };
    }
    throw new RuntimeUnavailableError(
      this.options.subordinate ? "container" : "process",
      `every one of the ${max} task user slots is taken (${skipped} by processes this node does not run)`,
      [
        `At most ${max} tasks run at once on one host, each as its own user (${slotUserName(this.options.base, 0)} …); end the processes of ${this.options.base}-* users that no task of this node runs.`,
      ],
    );
  }
}

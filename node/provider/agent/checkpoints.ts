/**
 * Checkpoints on the provider (issue 36, docs/data.md). A task writes to $SUANLI_CHECKPOINT_DIR
 * (`checkpoint/` in its workspace); the node snapshots that folder into UnixFS through its data
 * plane on the renter's period, as a preemption notice begins, and at the task's end (a stopped task
 * has had SIGTERM and the grace period to flush, a preempted one SIGTERM at the notice's start and
 * the notice), and signs a record {leaseId, seq, cid, bytes, time} of
 * each with its provider key. Records live in level under `<dataDir>/data/checkpoints` and are
 * served with the task's status.
 *
 * The folder is read only through the fd-relative O_NOFOLLOW reader (runtime/task-files.ts): a
 * task that swaps a folder for a link to the node's data dir gets it skipped, never read. It is
 * copied (bounded) into a staging folder the node owns, imported from there and the copy removed.
 * A folder over `data.checkpointMaxBytes` is not snapshotted: CheckpointQuotaError in the log and
 * the status, and the previous checkpoint stays the newest.
 */
import { randomBytes } from "node:crypto";
import { mkdir, rm } from "node:fs/promises";
import path from "node:path";
import type { TypedDataDomain } from "viem";
import { Level } from "level";
import { signCheckpoint, type SignedCheckpoint } from "../../../common/attest/checkpoint.js";
import type { TypedDataSigner } from "../../../common/chain/sign.js";
import { runDetached } from "../../../common/detached.js";
import { SuanliError } from "../../../common/errors.js";
import { parseTagged, stringifyTagged } from "../../../common/json.js";
import type { DataStore } from "../../data/store.js";
import type { Logger } from "../../log/logger.js";
import { CHECKPOINT_FOLDER } from "../runtime/checkpoint-dir.js";
import { copyTaskFiles, listTaskFiles, TaskFileError } from "../runtime/task-files.js";

/** Checkpoints of a lease kept pinned: the newest and the one before (a snapshot cut mid-write still leaves one to fall back on). */
const PINNED_PER_LEASE = 2;
/** Most files in a checkpoint folder. */
const MAX_CHECKPOINT_FILES = 100_000;

/** A checkpoint folder over the provider's quota (data.checkpointMaxBytes): not snapshotted; the previous checkpoint stays. */
export class CheckpointQuotaError extends SuanliError {
  override name = "CheckpointQuotaError";
}

export type CheckpointError = { name: string; message: string };

export type CheckpointBookOptions = {
  data: DataStore;
  dataDir: string;
  maxBytes: number;
  /** How long a lease's records and pinned CIDs stay after its task ended (data.checkpointRetentionSeconds). */
  retentionSeconds: number;
  /** How often the retention sweep runs (default every 5 minutes). */
  sweepIntervalMs?: number;
  logger: Logger;
};

/** Keys `ended/<lease>/` → the unix ms its task ended: where the retention sweep looks. */
const ENDED = "ended/";

type Signer = { account: TypedDataSigner; domain: TypedDataDomain };

function keyOf(leaseId: bigint, seq?: bigint): string {
  const lease = leaseId.toString().padStart(78, "0");
  return seq === undefined ? `${lease}/` : `${lease}/${seq.toString().padStart(20, "0")}`;
}

export class CheckpointBook {
  private readonly db: Level<string, string>;
  private opened: Promise<void> | undefined;
  private closed = false;
  private readonly errors = new Map<bigint, CheckpointError>();
  private readonly queues = new Map<bigint, Promise<unknown>>();
  private readonly timers = new Map<bigint, NodeJS.Timeout>();
  /** Running tasks' workspaces, for the snapshot at a preemption notice; `notice`: that snapshot was started. */
  private readonly running = new Map<bigint, { workspace: string; signer: Signer; notice: boolean }>();

  private readonly sweepTimer: NodeJS.Timeout;

  constructor(private readonly options: CheckpointBookOptions) {
    this.db = new Level<string, string>(path.join(options.dataDir, "data", "checkpoints"));
    options.data.onStop.push(() => this.close());
    this.sweepTimer = setInterval(() => runDetached(this.sweep(), options.logger, "Sweeping checkpoints past their retention"), options.sweepIntervalMs ?? 300_000);
    this.sweepTimer.unref();
  }

  get retentionSeconds(): number {
    return this.options.retentionSeconds;
  }

  /** The lease's task ended (after its end snapshot): its checkpoints go `retentionSeconds` after `at`. */
  async ended(leaseId: bigint, at = Date.now()): Promise<void> {
    await this.open();
    await this.db.put(`${ENDED}${keyOf(leaseId)}`, String(at));
  }

  /**
   * Removes the checkpoints of every lease whose task ended `retentionSeconds` or more before `now`:
   * its records (no longer served) and its pinned CIDs (unpinned: the blocks go at the data plane's
   * next garbage collection unless something else pins them). Returns the leases swept.
   */
  async sweep(now = Date.now()): Promise<bigint[]> {
    if (this.closed) return [];
    await this.open();
    const due: bigint[] = [];
    for await (const [key, value] of this.db.iterator({ gte: ENDED, lt: `${ENDED.slice(0, -1)}0` })) {
      if (Number(value) + this.options.retentionSeconds * 1000 <= now) due.push(BigInt(key.slice(ENDED.length, -1)));
    }
    for (const leaseId of due) {
      const all = await this.records(leaseId);
      // The older ones were unpinned as newer ones came (unpinOlder).
      for (const signed of all.slice(-PINNED_PER_LEASE)) {
        await this.options.data.unpin(signed.record.cid).catch((error: unknown) => {
          this.options.logger.debug("Cannot unpin a checkpoint past its retention", { leaseId, cid: signed.record.cid, error: String(error) });
        });
      }
      await this.db.batch([...all.map((signed) => ({ type: "del" as const, key: keyOf(leaseId, signed.record.seq) })), { type: "del" as const, key: `${ENDED}${keyOf(leaseId)}` }]);
      this.errors.delete(leaseId);
      this.options.logger.info("Checkpoints past their retention removed", { leaseId, records: all.length, retentionSeconds: this.options.retentionSeconds });
    }
    return due;
  }

  private async open(): Promise<void> {
    this.opened ??= mkdir(path.join(this.options.dataDir, "data"), { recursive: true, mode: 0o700 }).then(() => this.db.open());
    await this.opened;
  }

  /** The lease's records, oldest first. */
  async records(leaseId: bigint): Promise<SignedCheckpoint[]> {
    await this.open();
    const out: SignedCheckpoint[] = [];
    const prefix = keyOf(leaseId);
    for await (const value of this.db.values({ gte: prefix, lt: `${prefix.slice(0, -1)}0` })) out.push(parseTagged<SignedCheckpoint>(value));
    return out;
  }

  /** Why the lease's latest snapshot was not taken; undefined once one succeeds. */
  lastError(leaseId: bigint): CheckpointError | undefined {
    return this.errors.get(leaseId);
  }

  /** A task started: its workspace is where snapshotAtNotice looks until untrack (its end). */
  track(leaseId: bigint, workspace: string, signer: Signer): void {
    this.running.set(leaseId, { workspace, signer, notice: false });
  }

  untrack(leaseId: bigint): void {
    this.running.delete(leaseId);
  }

  /**
   * At the start of a preemption notice: one snapshot of the running task's checkpoint folder, so
   * the task's state as the notice began is saved even when the end snapshot never comes (the
   * provider dies during the notice). Queued behind a snapshot in progress. The task gets SIGTERM at
   * the same moment (CapacityManager.preempt) and may flush and exit, or run on until the notice
   * ends; its end snapshot, after its exit, holds what it flushed. Called again for the same lease (every
   * pass of the lease loop sees the notice), it takes no second one; a lease with no running task
   * gets none.
   */
  snapshotAtNotice(leaseId: bigint): void {
    const task = this.running.get(leaseId);
    if (!task || task.notice) return;
    task.notice = true;
    this.options.logger.info("A checkpoint at the preemption notice", { leaseId });
    runDetached(this.snapshot(leaseId, task.workspace, task.signer, "notice"), this.options.logger, "A checkpoint at the preemption notice", { leaseId });
  }

  /** Snapshots every `periodMs` until stopPeriodic (or the lease's final snapshot). */
  startPeriodic(leaseId: bigint, workspace: string, signer: Signer, periodMs: number): void {
    this.stopPeriodic(leaseId);
    const timer = setInterval(() => {
      void this.snapshot(leaseId, workspace, signer, "period").catch(() => undefined);
    }, periodMs);
    timer.unref();
    this.timers.set(leaseId, timer);
  }

  stopPeriodic(leaseId: bigint): void {
    const timer = this.timers.get(leaseId);
    if (timer) clearInterval(timer);
    this.timers.delete(leaseId);
  }

  /**
   * Snapshots the task's checkpoint folder, one at a time per lease. Returns the new signed
   * record; undefined when there is nothing new (no folder, empty, the same CID as the newest) or
   * the snapshot failed (the error is logged and kept for the status; the previous record stays).
   */
  snapshot(leaseId: bigint, workspace: string, signer: Signer, reason: "period" | "notice" | "end"): Promise<SignedCheckpoint | undefined> {
    const previous = this.queues.get(leaseId) ?? Promise.resolve();
    const next = previous.catch(() => undefined).then(() => this.take(leaseId, workspace, signer, reason));
    this.queues.set(leaseId, next);
    void next
      .catch(() => undefined)
      .finally(() => {
        if (this.queues.get(leaseId) === next) this.queues.delete(leaseId);
      });
    return next;
  }

  private async take(leaseId: bigint, workspace: string, signer: Signer, reason: string): Promise<SignedCheckpoint | undefined> {
    const { data, maxBytes, logger } = this.options;
    const folder = path.join(workspace, CHECKPOINT_FOLDER);
    const staging = path.join(this.options.dataDir, "data", "staging", `checkpoint-${leaseId}-${randomBytes(4).toString("hex")}`);
    try {
      const files = await listTaskFiles(folder, MAX_CHECKPOINT_FILES);
      if (!files || files.length === 0) return undefined;
      const listed = files.reduce((sum, file) => sum + file.size, 0);
      if (listed > maxBytes) throw quotaError(listed, maxBytes);
      await mkdir(staging, { recursive: true, mode: 0o700 });
      await copyTaskFiles(folder, staging, maxBytes).catch((error: unknown) => {
        throw error instanceof TaskFileError && /more than \d+ bytes/.test(error.message) ? quotaError(maxBytes + 1, maxBytes) : error;
      });
      const all = await this.records(leaseId);
      const newest = all[all.length - 1];
      const seq = (newest?.record.seq ?? 0n) + 1n;
      const entry = await data.add(staging, { name: `checkpoint-${leaseId}-${seq}` });
      this.errors.delete(leaseId);
      if (newest && newest.record.cid === entry.cid) return undefined; // unchanged since the last one
      const signed = await signCheckpoint(signer.account, signer.domain, { leaseId, seq, cid: entry.cid, bytes: BigInt(entry.bytes), time: BigInt(Date.now()) });
      await this.open();
      await this.db.put(keyOf(leaseId, seq), stringifyTagged(signed));
      logger.info("Checkpoint taken", { leaseId, seq, cid: entry.cid, bytes: entry.bytes, reason });
      await this.unpinOlder(leaseId, [...all, signed]);
      return signed;
    } catch (error) {
      const e = error as { name?: string; shortMessage?: string; message?: string };
      const kept: CheckpointError = { name: e?.name ?? "Error", message: String(e?.shortMessage ?? e?.message ?? error).slice(0, 2000) };
      this.errors.set(leaseId, kept);
      logger.warn("Checkpoint not taken: the previous one stays the newest", { leaseId, reason, error: kept.name, message: kept.message });
      return undefined;
    } finally {
      await rm(staging, { recursive: true, force: true });
    }
  }

  private async unpinOlder(leaseId: bigint, all: SignedCheckpoint[]): Promise<void> {
    const keep = new Set(all.slice(-PINNED_PER_LEASE).map((signed) => signed.record.cid));
    const older = all.slice(0, -PINNED_PER_LEASE).filter((signed) => !keep.has(signed.record.cid));
    const last = older[older.length - 1];
    // Only the one that just fell out of the window: the rest were unpinned before.
    if (!last) return;
    await this.options.data.unpin(last.record.cid).catch((error: unknown) => {
      this.options.logger.debug("Cannot unpin an old checkpoint", { leaseId, cid: last.record.cid, error: String(error) });
    });
  }

  /** Forgets a lease's timers and error (its records stay). */
  forget(leaseId: bigint): void {
    this.stopPeriodic(leaseId);
    this.running.delete(leaseId);
    this.errors.delete(leaseId);
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.sweepTimer);
    for (const leaseId of [...this.timers.keys()]) this.stopPeriodic(leaseId);
    await Promise.allSettled([...this.queues.values()]);
    if (this.opened) await this.db.close();
  }
}

function quotaError(bytes: number, maxBytes: number): CheckpointQuotaError {
  return new CheckpointQuotaError(`The checkpoint folder holds ${bytes} bytes, over this provider's data.checkpointMaxBytes (${maxBytes}): not snapshotted`, {
    metaMessages: ["The previous checkpoint stays the newest. Keep fewer or smaller files in $SUANLI_CHECKPOINT_DIR."],
  });
}

/**
 * The outputs a provider keeps after tasks end, for their renters to download: each lease's
 * `output/` folder is moved out of the workspace (which is removed) into `<outputs>/lease-<id>/files`
 * with a small `meta.json`, kept for `retentionSeconds`, refused over `maxBytes`, and evicted
 * oldest first when all kept outputs together would pass `quotaBytes`.
 *
 * The files are moved, not rewritten: what stays is exactly what the completion report's
 * digest covers (the digest is taken over the same folder just before).
 */
import { mkdir, readdir, readFile, rename, rm, writeFile, type FileHandle } from "node:fs/promises";
import path from "node:path";
import { copyTaskFiles, listTaskFiles, openTaskFile, TaskFileError, type TaskFile } from "../runtime/task-files.js";
import { OUTPUT_MAX_FILES, type OutputPolicy } from "../../../common/protocols/task-io.js";
import type { Logger } from "../../log/logger.js";
import { runDetached } from "../../../common/detached.js";

export type OutputStoreOptions = {
  dir: string;
  retentionSeconds: number;
  maxBytes: number;
  quotaBytes: number;
  logger: Logger;
  now?: () => number;
};

type Meta = {
  leaseId: string;
  /** Unix ms. */
  keptAt: number;
  expiresAt: number;
  bytes: number;
  /** Why the files are not there (too large, no output/): the renter's download says so. */
  refused: string | null;
  /** The output's CID when the data plane pinned it (issue 36): unpinned when the output goes. */
  cid?: string;
};

/** What a download serves: the folder and its files in digest order. */
export type OutputSnapshot = { root: string; files: TaskFile[]; totalBytes: number };

/** An output that exceeds what can be served or kept. */
export class OutputLimitError extends Error {
  override name = "OutputLimitError";
}

/**
 * Lists a folder for download: regular files only, under the caps. Nothing is followed: the walk
 * opens each folder relative to the one before it with O_NOFOLLOW (runtime/task-files.ts), so a
 * running task that swaps a folder for a link to the node's data dir gets that folder skipped,
 * never listed through the link.
 */
export async function snapshotOutputDir(root: string, maxBytes: number): Promise<OutputSnapshot | undefined> {
  let files: TaskFile[] | undefined;
  try {
    files = await listTaskFiles(root, OUTPUT_MAX_FILES * 10);
  } catch (error) {
    if (error instanceof TaskFileError) throw new OutputLimitError(error.message);
    throw error;
  }
  if (!files) return undefined;
  if (files.length > OUTPUT_MAX_FILES) throw new OutputLimitError(`The output holds ${files.length} files; at most ${OUTPUT_MAX_FILES} can be downloaded`);
  const totalBytes = files.reduce((sum, file) => sum + file.size, 0);
  if (totalBytes > maxBytes) throw new OutputLimitError(`The output is ${totalBytes} bytes, over this provider's outputs.maxBytes (${maxBytes})`);
  return { root, files, totalBytes };
}

/**
 * Opens a listed file for reading without following links: a running task may swap a folder for
 * a link between the listing and the read, and must never make the node read a host file. Each
 * component is opened relative to the folder before it (O_NOFOLLOW); a link, a special file or a
 * file that is gone is an OutputLimitError naming it.
 */
export async function openOutputFile(root: string, rel: string): Promise<FileHandle> {
  try {
    return await openTaskFile(root, rel);
  } catch (error) {
    if (error instanceof TaskFileError) throw new OutputLimitError(error.message);
    throw error;
  }
}

export class OutputStore {
  private readonly metas = new Map<string, Meta>();
  private sweepTimer: NodeJS.Timeout | undefined;
  private releaseCid: ((cid: string) => Promise<unknown>) | undefined;
  /** CIDs of outputs removed before a release hook was set (the sweep at start): released when it is. */
  private readonly unreleased: string[] = [];

  constructor(private readonly options: OutputStoreOptions) {}

  get policy(): OutputPolicy {
    return { retentionSeconds: this.options.retentionSeconds, maxBytes: this.options.maxBytes };
  }

  private now(): number {
    return this.options.now?.() ?? Date.now();
  }

  private leaseDir(leaseId: bigint | string): string {
    return path.join(this.options.dir, `lease-${leaseId}`);
  }

  /**
   * Sets what is done with an output's CID when the output goes (retention over, evicted): the
   * data plane's unpin. CIDs of outputs that went before it was set are released now.
   */
  async onRelease(release: (cid: string) => Promise<unknown>): Promise<void> {
    this.releaseCid = release;
    for (const cid of this.unreleased.splice(0)) await this.release(cid);
  }

  private async release(cid: string): Promise<void> {
    if (!this.releaseCid) {
      this.unreleased.push(cid);
      return;
    }
    await this.releaseCid(cid).catch((error: unknown) => this.options.logger.warn("Cannot unpin an output's CID", { cid }, error));
  }

  /** A folder on the outputs' filesystem to stage an output in before keep() (removed at start when left over). */
  stagingDir(leaseId: bigint): string {
    return path.join(this.options.dir, `staging-lease-${leaseId}`);
  }

  /** Reads what was kept before a restart and starts the retention sweep. */
  async start(sweepIntervalMs = 60_000): Promise<void> {
    await mkdir(this.options.dir, { recursive: true, mode: 0o700 });
    for (const entry of await readdir(this.options.dir)) {
      if (/^staging-lease-\d+$/.test(entry)) await rm(path.join(this.options.dir, entry), { recursive: true, force: true });
      if (!/^lease-\d+$/.test(entry)) continue;
      const meta = await readFile(path.join(this.options.dir, entry, "meta.json"), "utf8")
        .then((text) => JSON.parse(text) as Meta)
        .catch(() => undefined);
      if (meta) this.metas.set(meta.leaseId, meta);
      else await rm(path.join(this.options.dir, entry), { recursive: true, force: true });
    }
    await this.sweep();
    this.sweepTimer = setInterval(() => runDetached(this.sweep(), undefined, "Sweeping expired outputs"), sweepIntervalMs);
    this.sweepTimer.unref();
  }

  stop(): void {
    if (this.sweepTimer) clearInterval(this.sweepTimer);
  }

  /** Deletes outputs past their retention. */
  async sweep(): Promise<void> {
    const now = this.now();
    for (const meta of [...this.metas.values()]) if (meta.expiresAt <= now) await this.remove(meta.leaseId);
  }

  private async remove(leaseId: string): Promise<void> {
    const cid = this.metas.get(leaseId)?.cid;
    this.metas.delete(leaseId);
    await rm(this.leaseDir(leaseId), { recursive: true, force: true });
    if (cid) await this.release(cid);
  }

  private usedBytes(): number {
    let sum = 0;
    for (const meta of this.metas.values()) sum += meta.bytes;
    return sum;
  }

  /**
   * Moves a finished task's `output/` folder into the store (call before the workspace is removed).
   * Never throws: an output that cannot be kept is recorded with the reason. `cid`: the output's
   * pinned CID, released (unpinned) when the output goes, kept or refused alike.
   */
  async keep(leaseId: bigint, outputDir: string, cid?: string): Promise<void> {
    const id = leaseId.toString();
    const dir = this.leaseDir(id);
    const keptAt = this.now();
    const meta: Meta = { leaseId: id, keptAt, expiresAt: keptAt + this.options.retentionSeconds * 1000, bytes: 0, refused: null, ...(cid ? { cid } : {}) };
    try {
      await rm(dir, { recursive: true, force: true });
      await mkdir(dir, { recursive: true, mode: 0o700 });
      let snapshot: OutputSnapshot | undefined;
      try {
        snapshot = await snapshotOutputDir(outputDir, this.options.maxBytes);
      } catch (error) {
        meta.refused = error instanceof OutputLimitError ? error.message : `The output cannot be read: ${(error as Error).message}`;
      }
      if (!snapshot && !meta.refused) meta.refused = "The task wrote no output/ folder (its completion digest covers its stdout)";
      if (snapshot && this.options.retentionSeconds === 0) meta.refused = "This provider keeps no outputs after a task ends (outputs.retentionSeconds is 0)";
      if (snapshot && !meta.refused) {
        if (snapshot.totalBytes > this.options.quotaBytes) {
          meta.refused = `The output is ${snapshot.totalBytes} bytes, over this provider's outputs.quotaBytes (${this.options.quotaBytes})`;
        } else {
          // Oldest first until the new output fits the quota.
          const byAge = [...this.metas.values()].sort((a, b) => a.keptAt - b.keptAt);
          while (this.usedBytes() + snapshot.totalBytes > this.options.quotaBytes && byAge.length > 0) {
            const oldest = byAge.shift()!;
            this.options.logger.info("Output evicted to make room (outputs.quotaBytes)", { leaseId: oldest.leaseId, bytes: oldest.bytes });
            await this.remove(oldest.leaseId);
          }
          const target = path.join(dir, "files");
          try {
            await rename(outputDir, target);
          } catch (error) {
            if ((error as NodeJS.ErrnoException).code !== "EXDEV") throw error;
            // Another filesystem: copy the regular files, each read without following a link.
            await mkdir(target, { mode: 0o700 });
            await copyTaskFiles(outputDir, target);
          }
          meta.bytes = snapshot.totalBytes;
        }
      }
      await writeFile(path.join(dir, "meta.json"), JSON.stringify(meta), { mode: 0o600 });
      this.metas.set(id, meta);
    } catch (error) {
      this.options.logger.warn("Cannot keep a task's output", { leaseId }, error);
      await rm(dir, { recursive: true, force: true }).catch(() => undefined);
      this.metas.set(id, { ...meta, bytes: 0, refused: `The provider could not keep the output: ${(error as Error).message}` });
    }
  }

  /** What is kept for a lease: the files, or why not; undefined when nothing was kept (or it expired). */
  async get(leaseId: bigint): Promise<{ snapshot: OutputSnapshot; expiresAt: number } | { refused: string } | undefined> {
    const meta = this.metas.get(leaseId.toString());
    if (!meta) return undefined;
    if (meta.expiresAt <= this.now()) {
      await this.remove(meta.leaseId);
      return undefined;
    }
    if (meta.refused) return { refused: meta.refused };
    const snapshot = await snapshotOutputDir(path.join(this.leaseDir(meta.leaseId), "files"), Number.MAX_SAFE_INTEGER);
    if (!snapshot) return { refused: "The kept output is gone from the provider's disk" };
    return { snapshot, expiresAt: meta.expiresAt };
  }
}

/**
 * Task inputs on the provider: a CID fetched through the node's Helia, written out once as a
 * read-only folder under `<dataDir>/data/inputs/<cid>` and reused by every later lease that names
 * the same CID (no second fetch). The folder leaves with its blocks when the data cache evicts the
 * root. The runtimes bind it read-only at the input's mount (docs/data.md).
 */
import { randomBytes } from "node:crypto";
import { chmod, lstat, mkdir, readdir, rename, rm, stat } from "node:fs/promises";
import path from "node:path";
import { taskInputsSchema, type TaskInput } from "../../common/protocols/task-inputs.js";
import { parseInput } from "../../common/validation.js";
import type { DataStore } from "./store.js";
import { parseCid } from "./verify.js";

export { taskInputSchema, taskInputsSchema, type TaskInput } from "../../common/protocols/task-inputs.js";

/** Parses a task's inputs (common/protocols/task-inputs.ts): valid CIDs, distinct mounts, none inside another. */
export function parseTaskInputs(value: unknown): TaskInput[] {
  return parseInput(taskInputsSchema, value, "task inputs", ["Each input is { cid, mount: /data/<name>, bytes? }; at most 16."]);
}

export type PreparedInput = { cid: string; path: string; bytes: number; fetched: boolean };

export class InputCache {
  private readonly inFlight = new Map<string, Promise<PreparedInput>>();
  private readonly dir: string;

  constructor(
    private readonly data: DataStore,
    dataDir: string,
  ) {
    this.dir = path.join(dataDir, "data", "inputs");
    data.onDropped.push(async (cid) => {
      const target = path.join(this.dir, cid);
      await writable(target).catch(() => undefined);
      await rm(target, { recursive: true, force: true });
    });
  }

  /**
   * The read-only folder (or file) holding `cid`, fetched and written out on first use. Throws
   * DataNotFoundError (blame: renter) when it cannot be had within `timeoutMs`, DataQuotaError
   * over `maxBytes`.
   */
  async prepare(cidString: string, options: { providers?: string[]; timeoutMs?: number; maxBytes?: number } = {}): Promise<PreparedInput> {
    const cid = parseCid(cidString).toString();
    const pending = this.inFlight.get(cid);
    if (pending) return pending;
    const work = this.materialize(cid, options).finally(() => this.inFlight.delete(cid));
    this.inFlight.set(cid, work);
    return work;
  }

  private async materialize(cid: string, options: { providers?: string[]; timeoutMs?: number; maxBytes?: number }): Promise<PreparedInput> {
    const target = path.join(this.dir, cid);
    const fetch = await this.data.fetch(cid, options);
    const ready = await stat(target).catch(() => undefined);
    if (ready) return { cid, path: target, bytes: fetch.bytes, fetched: fetch.fetched };
    await mkdir(this.dir, { recursive: true, mode: 0o755 });
    const temporary = path.join(this.dir, `.partial-${cid}-${randomBytes(4).toString("hex")}`);
    try {
      await this.data.get(cid, temporary, { timeoutMs: options.timeoutMs, maxBytes: options.maxBytes });
      await readOnly(temporary);
      await rename(temporary, target);
    } catch (error) {
      await rm(temporary, { recursive: true, force: true });
      throw error;
    }
    return { cid, path: target, bytes: fetch.bytes, fetched: fetch.fetched };
  }
}

/** chmod u+w, top down, so that a non-root owner can delete the tree. */
async function writable(at: string): Promise<void> {
  const info = await lstat(at);
  if (!info.isDirectory()) return;
  await chmod(at, 0o755);
  for (const name of await readdir(at)) await writable(path.join(at, name));
}

/** chmod a-w, depth first (folders 0555, files 0444). */
async function readOnly(at: string): Promise<void> {
  const info = await lstat(at);
  if (info.isDirectory()) {
    for (const name of await readdir(at)) await readOnly(path.join(at, name));
    await chmod(at, 0o555);
  } else {
    await chmod(at, 0o444);
  }
}

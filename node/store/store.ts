import { mkdir, statfs } from "node:fs/promises";
import { Level } from "level";
import { describeBinding, sameBinding, type DeploymentBinding } from "../../common/deployment.js";
import { SuanliError } from "../../common/errors.js";
import { parseTagged, stringifyTagged } from "../../common/json.js";
import { Bucket } from "./buckets.js";

export class StoreError extends SuanliError {
  override name = "StoreError";
}

/** Keys are `<bucket as 2 hex digits>/<key>`; a bucket spans ["xx/", "xx0"). */
function prefixOf(bucket: Bucket): string {
  return `${bucket.toString(16).padStart(2, "0")}/`;
}

/**
 * The database holds data of one deployment and the node was started against another (a devnet
 * restarted under an old data dir: same chain id and addresses, lease ids starting at 1 again).
 */
export class DeploymentMismatchError extends StoreError {
  override name = "DeploymentMismatchError";
}

const STORE_SCHEMA_VERSION = 1;

type RawOp = { type: "put"; key: string; value: string } | { type: "del"; key: string };

/** A write the filesystem refused for lack of space (ENOSPC) or quota (EDQUOT). */
export class StoreFullError extends StoreError {
  override name = "StoreFullError";
}

/** Whether an error from a write is the disk (or the user's quota) being full. */
export function isDiskFull(error: unknown): boolean {
  for (let e = error as { code?: unknown; message?: unknown; cause?: unknown } | undefined, depth = 0; e && depth < 5; e = e.cause as typeof e, depth++) {
    if (e instanceof StoreFullError) return true;
    if (e.code === "ENOSPC" || e.code === "EDQUOT") return true;
    if (typeof e.message === "string" && /no space left on device|disk quota exceeded|ENOSPC|EDQUOT/i.test(e.message)) return true;
  }
  return false;
}

/** Free space needed on the data dir's filesystem before a database that hit a full disk is reopened. */
const REPAIR_MIN_FREE_BYTES = 4 * 1024 * 1024;

/**
 * A controller over one level database: opens it, hands out typed repositories per bucket and
 * applies atomic batches that span buckets ("write everything that must not be forgotten in one
 * step, then act").
 *
 * @example
 * const store = await Store.open(path.join(dataDir, "db"));
 * const leases = store.repository<LeaseRecord>(Bucket.leases);
 * await store.batch([leases.putOp("7", record), reservations.delOp("r1")]);
 */
export class Store {
  /**
   * A write was refused for lack of space. Level's log may end in a torn record then (the part of
   * it that fit), and records appended after it would be dropped with it when the database is
   * next opened. So no write goes to that log again: the next write first reopens the database
   * (which recovers the log up to the torn record and starts a new one), once there is space.
   */
  private tainted = false;
  private repairing: Promise<void> | undefined;

  private constructor(
    private readonly db: Level<string, string>,
    readonly location: string,
  ) {}

  /** Opens (creating if needed) the database in `dir`. */
  static async open(dir: string): Promise<Store> {
    await mkdir(dir, { recursive: true });
    const db = new Level<string, string>(dir, { keyEncoding: "utf8", valueEncoding: "utf8" });
    try {
      await db.open();
    } catch (error) {
      throw new StoreError(`Cannot open the database at ${dir}`, {
        cause: error,
        metaMessages: ["Another process may hold it open: stop it, or choose another data dir."],
      });
    }
    const store = new Store(db, dir);
    const meta = store.repository<{ version: number }>(Bucket.meta);
    const current = await meta.get("schema");
    if (!current) await meta.put("schema", { version: STORE_SCHEMA_VERSION });
    else if (current.version !== STORE_SCHEMA_VERSION) {
      throw new StoreError(`Database at ${dir} has schema version ${current.version}; this build reads ${STORE_SCHEMA_VERSION}`);
    }
    return store;
  }

  /**
   * Binds the database to the deployment it holds data of, on first use, and refuses any other
   * one afterwards (DeploymentMismatchError, with the fix). A database written before bindings
   * existed is bound to the deployment it is first opened with.
   *
   * @example
   * await store.bindDeployment(await readDeploymentBinding(publicClient, deployment), dataDir);
   */
  async bindDeployment(binding: DeploymentBinding, dataDir: string): Promise<void> {
    const meta = this.repository<DeploymentBinding>(Bucket.meta);
    const stored = await meta.get("deployment");
    if (!stored) {
      await meta.put("deployment", binding);
      return;
    }
    if (sameBinding(stored, binding)) return;
    throw new DeploymentMismatchError(`The data dir ${dataDir} holds another deployment's data; refusing to mix it with this chain's`, {
      metaMessages: [
        `Stored:  ${describeBinding(stored)}`,
        `Chain:   ${describeBinding(binding)}`,
        "Its leases, offers and cursors would be read as this chain's (a restarted devnet reuses lease ids and addresses).",
        `Fix: start with another data dir (dataDir in the config, or --dataDir <dir>), or, if the old chain is gone for good, delete ${this.location} (the node's peer identity beside it is kept).`,
      ],
    });
  }

  /** A typed repository over one bucket. Values are JSON with bigints preserved. */
  repository<T>(bucket: Bucket): Repository<T> {
    return new Repository<T>(this.db, prefixOf(bucket), this);
  }

  /** Applies operations from any repositories atomically. */
  async batch(ops: RawOp[]): Promise<void> {
    if (ops.length) await this.write(() => this.db.batch(ops));
  }

  /**
   * Runs a database write. A refusal for lack of space becomes a StoreFullError naming the
   * database and what to do; the write was not applied (level applies a write to its tables only
   * after its log took it), and the database is reopened before the next write (see `tainted`).
   */
  async write(write: () => Promise<void>): Promise<void> {
    if (this.tainted) await this.repair();
    try {
      await write();
    } catch (error) {
      if (!isDiskFull(error)) throw error;
      this.tainted = true;
      throw new StoreFullError(`Cannot write to the database at ${this.location}: no space left on its disk; the write was not applied`, {
        cause: error,
        metaMessages: ["Free space on the data dir's filesystem (or raise its quota); the node retries what it must keep."],
      });
    }
  }

  /** Waits for a reopen in progress (reads wait it out rather than meet a closed database). */
  async settled(): Promise<void> {
    if (this.repairing) await this.repairing.catch(() => undefined);
  }

  /** Reopens the database after a write refused for lack of space, once there is room to. */
  private repair(): Promise<void> {
    this.repairing ??= (async () => {
      const { bavail, bsize } = await statfs(this.location);
      const free = bavail * bsize;
      if (free < REPAIR_MIN_FREE_BYTES) {
        throw new StoreFullError(
          `Cannot write to the database at ${this.location}: its disk is still full (${free} bytes free, ${REPAIR_MIN_FREE_BYTES} needed to reopen it after a refused write)`,
          {
            metaMessages: ["Free space on the data dir's filesystem; the node retries what it must keep."],
          },
        );
      }
      if (this.db.status === "open") await this.db.close();
      await this.db.open();
      this.tainted = false;
    })().finally(() => {
      this.repairing = undefined;
    });
    return this.repairing;
  }

  get isOpen(): boolean {
    return this.db.status === "open";
  }

  async close(): Promise<void> {
    if (this.db.status === "open" || this.db.status === "opening") await this.db.close();
  }
}

export type RangeOptions = { gte?: string; lt?: string; limit?: number; reverse?: boolean };

export class Repository<T> {
  constructor(
    private readonly db: Level<string, string>,
    private readonly prefix: string,
    private readonly store: Store,
  ) {}

  private key(key: string): string {
    return this.prefix + key;
  }

  async get(key: string): Promise<T | undefined> {
    await this.store.settled();
    const raw = await this.db.get(this.key(key));
    return raw === undefined ? undefined : parseTagged<T>(raw);
  }

  async put(key: string, value: T): Promise<void> {
    await this.store.write(() => this.db.put(this.key(key), stringifyTagged(value)));
  }

  async del(key: string): Promise<void> {
    await this.store.write(() => this.db.del(this.key(key)));
  }

  putOp(key: string, value: T): RawOp {
    return { type: "put", key: this.key(key), value: stringifyTagged(value) };
  }

  delOp(key: string): RawOp {
    return { type: "del", key: this.key(key) };
  }

  /** Entries in key order (within the bucket); `gte`/`lt` are keys without the bucket prefix. */
  async *entries(options: RangeOptions = {}): AsyncGenerator<[string, T]> {
    await this.store.settled();
    const end = this.prefix.slice(0, -1) + "0";
    const iterator = this.db.iterator({
      gte: this.prefix + (options.gte ?? ""),
      lt: options.lt !== undefined ? this.prefix + options.lt : end,
      limit: options.limit ?? -1,
      reverse: options.reverse ?? false,
    });
    try {
      for await (const [key, value] of iterator) yield [key.slice(this.prefix.length), parseTagged<T>(value)];
    } finally {
      await iterator.close();
    }
  }

  async values(options: RangeOptions = {}): Promise<T[]> {
    const out: T[] = [];
    for await (const [, value] of this.entries(options)) out.push(value);
    return out;
  }

  async count(): Promise<number> {
    let n = 0;
    for await (const _ of this.entries()) n++;
    return n;
  }

  /** Deletes every entry of the bucket. */
  async clear(): Promise<void> {
    const ops: RawOp[] = [];
    for await (const [key] of this.entries()) ops.push(this.delOp(key));
    if (ops.length) await this.store.batch(ops);
  }
}

/**
 * The node's data plane: Helia with bitswap on the node's own libp2p host (one peer id, one
 * connection manager), blocks and pins in level under `<dataDir>/data`. Data a renter adds is
 * pinned; data the node fetches for a task is cached, bounded by `data.cacheBytes`, least recently
 * used out first. Every block is verified against its CID: by Helia and bitswap on arrival, and here
 * when it is read back from the local store to be written out as files.
 */
import { createReadStream } from "node:fs";
import { lstat, mkdir, readdir } from "node:fs/promises";
import path from "node:path";
import { withBitswap } from "@helia/bitswap";
import { unixfs } from "@helia/unixfs";
import type { Libp2p } from "@libp2p/interface";
import { multiaddr, type Multiaddr } from "@multiformats/multiaddr";
import { LevelDatastore } from "datastore-level";
import { createHeliaLight, type Helia } from "helia";
import { Level } from "level";
import type { CID } from "multiformats/cid";
import type { Logger } from "../log/logger.js";
import type { Metrics } from "../metrics/metrics.js";
import { DataNotFoundError, DataQuotaError, DataSourceError } from "./errors.js";
import { dataOptionsSchema, type DataOptions, type DataOptionsInput } from "./options.js";
import { announceProtocols } from "../../common/p2p/host.js";
import { countingBlockstore, DataBlockstore, dagSize, leafSkippingWalker } from "./blocks.js";
import { ServingLimits } from "./serving.js";
import { parseCid, verifyingBlockstore } from "./verify.js";
import { writeDag, type Progress } from "./write.js";

/** Bytes read from a file at a time when it is imported: the importer's 256 KiB chunks fill from 1 MiB reads (64 KiB reads made 4x the buffers and promises). */
const READ_CHUNK_BYTES = 1024 * 1024;

/** One root this node holds: pinned (added or pinned by hand) or cached (fetched for a task). */
export type DataEntry = {
  cid: string;
  name: string;
  /** Bytes of the DAG's blocks. */
  bytes: number;
  pinned: boolean;
  addedAt: number;
  lastUsed: number;
};

export type FetchOptions = {
  /** Multiaddrs (ending in /p2p/<peer id>) of nodes known to have the data. */
  providers?: string[];
  timeoutMs?: number;
  onProgress?: Progress;
  /** Refuse data whose files total more than this many bytes (DataQuotaError). */
  maxBytes?: number;
};

type CacheRecord = { bytes: number; lastUsed: number; addedAt: number; name: string };

const MAX_IMPORT_ENTRIES = 1_000_000;

export class DataStore {
  /** Blocks fetched from the network since start, and roots served from the cache without a fetch. */
  readonly counters = { fetchedBlocks: 0, fetchedBytes: 0, cacheHits: 0 };
  /** Called with each cached root the store forgets (evicted or dropped), e.g. to remove its files. */
  readonly onDropped: Array<(cid: string) => Promise<void>> = [];
  /** Called first by stop() (the checkpoint records' level database closes here). */
  readonly onStop: Array<() => Promise<void>> = [];
  private constructor(
    readonly helia: Helia,
    private readonly blocks: DataBlockstore,
    private readonly meta: LevelDatastore,
    /** Cache records (`c!<cid>`) and block references of cached roots (`r!<block>!<root>`, `b!<root>!<block>`). */
    private readonly index: Level<string, string>,
    readonly options: DataOptions,
    private readonly logger: Logger | undefined,
    private readonly metrics: Metrics | undefined,
    /** Per-peer bounds on what this node serves (data.serving). */
    readonly serving: ServingLimits,
  ) {}

  /**
   * Opens the stores under `<dataDir>/data` and starts Helia with bitswap on `libp2p`, which must
   * already be started (identify must run on it: bitswap learns peers' protocols from it).
   * `metrics` gets the data plane's counters (bytes served and received, cache hits, fetch times).
   */
  static async open(parameters: { dataDir: string; libp2p: Libp2p; options?: DataOptionsInput; logger?: Logger; metrics?: Metrics }): Promise<DataStore> {
    const options = dataOptionsSchema.parse(parameters.options ?? {});
    const root = path.join(parameters.dataDir, "data");
    await mkdir(root, { recursive: true, mode: 0o700 });
    const blocks = new DataBlockstore(path.join(root, "blocks"));
    const meta = new LevelDatastore(path.join(root, "meta"));
    const index = new Level<string, string>(path.join(root, "index"), { valueEncoding: "utf8" });
    await blocks.open();
    await meta.open();
    await index.open();
    try {
      const helia = createHeliaLight({ blockstore: blocks, datastore: meta });
      // Helia on the node's own host: no second libp2p, no HTTP gateways, no delegated routing.
      // It sees the host through the serving limits (node/data/serving.ts): bitswap itself has no per-peer budget.
      const serving = new ServingLimits(options.serving, parameters.metrics);
      Object.defineProperty(helia, "libp2p", { value: serving.wrap(parameters.libp2p), enumerable: true });
      withBitswap(helia as Helia & { libp2p: Libp2p });
      await helia.start();
      // Peers that identified this host before bitswap was handled learn of it now.
      await announceProtocols(parameters.libp2p);
      return new DataStore(helia, blocks, meta, index, options, parameters.logger, parameters.metrics, serving);
    } catch (error) {
      await Promise.allSettled([blocks.close(), meta.close(), index.close()]);
      throw error;
    }
  }

  /** This node's libp2p peer id and multiaddrs (each ending in /p2p/<peer id>): where other nodes fetch what it holds. */
  identity(): { peerId: string; addrs: string[] } {
    const host = (this.helia as Helia & { libp2p: Libp2p }).libp2p;
    return { peerId: host.peerId.toString(), addrs: host.getMultiaddrs().map(String) };
  }

  async stop(): Promise<void> {
    for (const listener of this.onStop) await listener().catch(() => undefined);
    await this.helia.stop();
    await Promise.allSettled([this.blocks.close(), this.meta.close(), this.index.close()]);
  }

  /**
   * Imports a local file or folder as UnixFS (streamed: files are read in chunks, never whole),
   * pins it and returns its entry. Symlinks and special files are refused.
   */
  async add(localPath: string, parameters: { name?: string; onProgress?: Progress } = {}): Promise<DataEntry> {
    const source = path.resolve(localPath);
    const info = await lstat(source).catch((error: unknown) => {
      throw new DataSourceError(source, "it does not exist or cannot be read", error);
    });
    let read = 0;
    const count = (stream: AsyncIterable<Uint8Array>) =>
      (async function* () {
        for await (const chunk of stream) {
          read += chunk.length;
          parameters.onProgress?.(read);
          yield chunk as Uint8Array;
        }
      })();
    // The import's own puts give the sizes of the new DAG's leaves: its size without reading them again.
    const written = new Map<string, number>();
    const fs = unixfs({ blockstore: countingBlockstore(this.helia.blockstore, written) });
    let cid: CID;
    if (info.isFile()) {
      cid = await fs.addFile({ path: path.basename(source), content: count(createReadStream(source, { highWaterMark: READ_CHUNK_BYTES })) }, { rawLeaves: true, cidVersion: 1 });
    } else if (info.isDirectory()) {
      let last: CID | undefined;
      const candidates = walkFolder(source, count);
      for await (const entry of fs.addAll(candidates, { wrapWithDirectory: true, rawLeaves: true, cidVersion: 1 })) last = entry.cid;
      if (!last) throw new DataSourceError(source, "empty folder");
      cid = last;
    } else {
      throw new DataSourceError(source, "not a regular file or folder");
    }
    const bytes = await dagSize(this.blocks, cid, written);
    const pinned = await this.pinnedTotal();
    if (!(await this.isRootPinned(cid)) && pinned + bytes > this.options.pinnedBytes) {
      await this.dropBlocks(cid);
      throw new DataQuotaError("Pinned data would exceed data.pinnedBytes", pinned + bytes, this.options.pinnedBytes);
    }
    const name = parameters.name ?? path.basename(source);
    return this.pinLocal(cid, name, bytes);
  }

  /**
   * Fetches every block of `cid` (from `providers` or any connected peer) and pins it. Past
   * data.pinnedBytes it throws DataQuotaError and what was fetched stays only as a cached copy.
   */
  async pin(cidString: string, parameters: FetchOptions & { name?: string } = {}): Promise<DataEntry> {
    const cid = parseCid(cidString);
    const { bytes } = await this.fetch(cidString, parameters);
    if (!(await this.isRootPinned(cid))) {
      const pinned = await this.pinnedTotal();
      if (pinned + bytes > this.options.pinnedBytes) throw new DataQuotaError("Pinned data would exceed data.pinnedBytes", pinned + bytes, this.options.pinnedBytes);
    }
    const entry = await this.pinLocal(cid, parameters.name ?? cid.toString(), bytes);
    // Pinned now: no longer counted in the cache (its blocks stay, pinned).
    if ((await this.index.get(`c!${cid.toString()}`)) !== undefined) await this.dropCached(cid.toString());
    return entry;
  }

  /** Unpins `cid` and deletes its blocks that nothing else pins or caches. False when not pinned. */
  async unpin(cidString: string): Promise<boolean> {
    const cid = parseCid(cidString);
    if (!(await this.isRootPinned(cid))) return false;
    const children: CID[] = [];
    for await (const child of this.helia.pins.rm(cid, { walker: leafSkippingWalker })) children.push(child);
    for (const child of children) await this.deleteIfUnused(child);
    return true;
  }

  /** Pinned and cached roots, newest first. */
  async list(): Promise<DataEntry[]> {
    const entries: DataEntry[] = [];
    for await (const pin of this.helia.pins.ls()) {
      const meta = pin.metadata as { name?: string; bytes?: number; addedAt?: number };
      entries.push({
        cid: pin.cid.toString(),
        name: String(meta.name ?? ""),
        bytes: Number(meta.bytes ?? 0),
        pinned: true,
        addedAt: Number(meta.addedAt ?? 0),
        lastUsed: Number(meta.addedAt ?? 0),
      });
    }
    for await (const [key, value] of this.index.iterator({ gt: "c!", lt: "c!\xff" })) {
      const cid = key.slice(2);
      if (entries.some((entry) => entry.cid === cid)) continue;
      const record = JSON.parse(value) as CacheRecord;
      entries.push({ cid, name: record.name, bytes: record.bytes, pinned: false, addedAt: record.addedAt, lastUsed: record.lastUsed });
    }
    return entries.sort((a, b) => b.addedAt - a.addedAt);
  }

  /**
   * Makes every block of `cid` local, verified, and records it in the cache (unless pinned).
   * `fetched` is false when every block was already here (a cache hit: nothing asked of the
   * network). Throws DataNotFoundError when the blocks do not come in time.
   */
  async fetch(cidString: string, parameters: FetchOptions = {}): Promise<{ cid: string; bytes: number; fetched: boolean }> {
    const cid = parseCid(cidString);
    const key = `c!${cid.toString()}`;
    const pinned = await this.isRootPinned(cid);
    const cached = pinned ? undefined : await this.index.get(key);
    if (pinned || cached !== undefined) {
      this.counters.cacheHits += 1;
      this.metrics?.dataCacheLookups.inc({ result: "hit" });
      if (cached !== undefined) await this.index.put(key, JSON.stringify({ ...(JSON.parse(cached) as CacheRecord), lastUsed: Date.now() }));
      return { cid: cid.toString(), bytes: pinned ? await this.dagBytes(cid) : (JSON.parse(cached!) as CacheRecord).bytes, fetched: false };
    }
    this.metrics?.dataCacheLookups.inc({ result: "miss" });
    const seen = new Map<string, number>();
    const endTimer = this.metrics?.dataFetchSeconds.startTimer();
    try {
      await this.walk(cid, seen, parameters, undefined);
      endTimer?.({ outcome: "ok" });
    } catch (error) {
      endTimer?.({ outcome: error instanceof DataNotFoundError ? "not_found" : "error" });
      throw error;
    }
    const bytes = [...seen.values()].reduce((sum, size) => sum + size, 0);
    if (bytes > this.options.cacheBytes) {
      await this.dropBlocks(cid);
      throw new DataQuotaError(`The data ${cid.toString()} is larger than data.cacheBytes`, bytes, this.options.cacheBytes);
    }
    const batch = this.index.batch();
    const now = Date.now();
    batch.put(key, JSON.stringify({ bytes, lastUsed: now, addedAt: now, name: cid.toString() } satisfies CacheRecord));
    for (const block of seen.keys()) {
      batch.put(`b!${cid.toString()}!${block}`, "");
      batch.put(`r!${block}!${cid.toString()}`, "");
    }
    await batch.write();
    await this.evict(cid.toString());
    return { cid: cid.toString(), bytes, fetched: true };
  }

  /**
   * Writes `cid` as files to `target` (a file, or a folder it creates), fetching missing blocks
   * and verifying every block it writes from. Entry names that would leave `target` are refused.
   */
  async get(cidString: string, target: string, parameters: FetchOptions = {}): Promise<{ cid: string; bytes: number }> {
    const cid = parseCid(cidString);
    const seen = new Map<string, number>();
    const bytes = await this.walk(cid, seen, parameters, path.resolve(target));
    return { cid: cid.toString(), bytes };
  }

  /** True when every block of `cid` is local (no network asked). */
  async has(cidString: string): Promise<boolean> {
    const cid = parseCid(cidString);
    try {
      await this.walk(cid, new Map(), { timeoutMs: 60_000 }, undefined, true);
      return true;
    } catch {
      return false;
    }
  }

  /** Deletes the least recently used cached roots until the cache fits `data.cacheBytes`. */
  async evict(keep?: string): Promise<string[]> {
    const records: Array<{ cid: string } & CacheRecord> = [];
    for await (const [key, value] of this.index.iterator({ gt: "c!", lt: "c!\xff" })) records.push({ cid: key.slice(2), ...(JSON.parse(value) as CacheRecord) });
    let total = records.reduce((sum, record) => sum + record.bytes, 0);
    const evicted: string[] = [];
    for (const record of records.sort((a, b) => a.lastUsed - b.lastUsed)) {
      if (total <= this.options.cacheBytes) break;
      if (record.cid === keep) continue;
      await this.dropCached(record.cid);
      total -= record.bytes;
      evicted.push(record.cid);
    }
    if (evicted.length) this.logger?.info("Data cache evicted", { evicted, cacheBytes: total });
    return evicted;
  }

  /** Forgets a cached root and deletes its blocks that nothing else pins or caches. */
  async dropCached(cidString: string): Promise<void> {
    const root = parseCid(cidString).toString();
    const blocks: string[] = [];
    for await (const key of this.index.keys({ gt: `b!${root}!`, lt: `b!${root}!\xff` })) blocks.push(key.slice(root.length + 3));
    await this.index.batch([
      { type: "del", key: `c!${root}` },
      ...blocks.flatMap((block) => [
        { type: "del" as const, key: `b!${root}!${block}` },
        { type: "del" as const, key: `r!${block}!${root}` },
      ]),
    ]);
    for (const block of blocks) await this.deleteIfUnused(parseCid(block));
    for (const listener of this.onDropped) await listener(root);
  }

  private async walk(cid: CID, seen: Map<string, number>, parameters: FetchOptions, target: string | undefined, offline = false): Promise<number> {
    const timeoutMs = parameters.timeoutMs ?? this.options.fetchTimeoutMs;
    const signal = AbortSignal.timeout(timeoutMs);
    // Hints only (the spec's schema checks their shape; the browser SDK cannot parse multiaddrs): one this node cannot parse is skipped.
    const providers: Multiaddr[] = (parameters.providers ?? []).flatMap((address) => {
      try {
        return [multiaddr(address)];
      } catch {
        this.logger?.warn("A data provider hint is not a multiaddr this node can dial; skipped", { address });
        return [];
      }
    });
    const before = new Set(seen.keys());
    const onFetched = (size: number) => {
      this.metrics?.dataReceivedBlocks.inc();
      this.metrics?.dataReceivedBytes.inc(size);
    };
    const fs = unixfs({ blockstore: verifyingBlockstore(this.helia.blockstore, seen, onFetched) });
    try {
      return await writeDag(fs, cid, target, {
        signal,
        offline,
        providers: providers.length ? providers : undefined,
        onProgress: parameters.onProgress,
        maxBytes: parameters.maxBytes,
      });
    } catch (error) {
      if (signal.aborted) throw new DataNotFoundError(cid.toString(), timeoutMs, error);
      throw error;
    } finally {
      for (const [block, size] of seen) {
        if (before.has(block)) continue;
        this.counters.fetchedBlocks += 1;
        this.counters.fetchedBytes += size;
      }
    }
  }

  private async pinLocal(cid: CID, name: string, bytes: number): Promise<DataEntry> {
    const addedAt = Date.now();
    if (!(await this.isRootPinned(cid))) {
      for await (const _ of this.helia.pins.add(cid, { metadata: { name: name.slice(0, 200), bytes, addedAt }, walker: leafSkippingWalker }));
    }
    return { cid: cid.toString(), name, bytes, pinned: true, addedAt, lastUsed: addedAt };
  }

  private async isRootPinned(cid: CID): Promise<boolean> {
    try {
      await this.helia.pins.get(cid);
      return true;
    } catch {
      return false;
    }
  }

  private async dagBytes(cid: CID): Promise<number> {
    const seen = new Map<string, number>();
    await this.walk(cid, seen, { timeoutMs: 60_000 }, undefined, true);
    return [...seen.values()].reduce((sum, size) => sum + size, 0);
  }

  private async pinnedTotal(): Promise<number> {
    let total = 0;
    for await (const pin of this.helia.pins.ls()) total += Number((pin.metadata as { bytes?: number }).bytes ?? 0);
    return total;
  }

  /** Deletes the (unpinned, uncached) blocks of a DAG that is local. */
  private async dropBlocks(cid: CID): Promise<void> {
    const seen = new Map<string, number>();
    await this.walk(cid, seen, { timeoutMs: 60_000 }, undefined, true).catch(() => 0);
    for (const block of seen.keys()) await this.deleteIfUnused(parseCid(block));
  }

  private async deleteIfUnused(block: CID): Promise<void> {
    if (await this.helia.pins.isPinned(block)) return;
    for await (const _ of this.index.keys({ gt: `r!${block.toString()}!`, lt: `r!${block.toString()}!\xff`, limit: 1 })) return;
    await this.blocks.delete(block);
  }
}

/** Yields a folder's regular files (relative paths, streamed content), refusing symlinks and devices. */
async function* walkFolder(root: string, count: (stream: AsyncIterable<Uint8Array>) => AsyncIterable<Uint8Array>) {
  const stack = [""];
  let entries = 0;
  while (stack.length) {
    const relative = stack.pop()!;
    const names = (await readdir(path.join(root, relative))).sort();
    for (const name of names) {
      if (++entries > MAX_IMPORT_ENTRIES) throw new DataSourceError(root, `more than ${MAX_IMPORT_ENTRIES} entries`);
      const child = path.join(relative, name);
      const info = await lstat(path.join(root, child));
      if (info.isDirectory()) {
        yield { path: child.split(path.sep).join("/") };
        stack.push(child);
      } else if (info.isFile()) {
        yield { path: child.split(path.sep).join("/"), content: count(createReadStream(path.join(root, child), { highWaterMark: READ_CHUNK_BYTES })) };
      } else {
        throw new DataSourceError(path.join(root, child), "symlinks and special files are not imported");
      }
    }
  }
}

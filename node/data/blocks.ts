/**
 * The data plane's block storage tuned for UnixFS blocks of up to 1 MiB (docs/data.md,
 * "Throughput"): the level blockstore with a larger write buffer and a `has` that does not read
 * the block, a counting view for imports (the DAG's size without walking it again) and a pin
 * walker that does not read raw leaves (they have no links).
 */
import * as dagPb from "@ipld/dag-pb";
import type { GraphNode, GraphWalker, GraphWalkerComponents, GraphWalkerFactory } from "helia";
import type { AbortOptions } from "@libp2p/interface";
import { LevelBlockstore } from "blockstore-level";
import type { Blockstore } from "interface-blockstore";
import { base32upper } from "multiformats/bases/base32";
import { createUnsafe } from "multiformats/block";
import type { CID } from "multiformats/cid";
import * as raw from "multiformats/codecs/raw";
import { readBlock } from "./verify.js";

/**
 * LevelDB's memtable size for the block store. Its default (4 MiB) holds four 1 MiB blocks: every
 * few blocks a flush and soon a compaction rewrote them; 32 MiB made 256 MB of puts 3x faster at
 * half the CPU (2026-12-07). Native memory, at most two such tables at a time.
 */
export const BLOCKS_WRITE_BUFFER_BYTES = 32 * 1024 * 1024;

/**
 * blockstore-level's store with `has` answered by LevelDB's own `has` (the key only): the library's
 * reads the whole value, and Helia asks `has` before every block it gets.
 */
export class DataBlockstore extends LevelBlockstore {
  constructor(location: string) {
    super(location, { writeBufferSize: BLOCKS_WRITE_BUFFER_BYTES });
  }

  override async has(key: CID, options?: AbortOptions): Promise<boolean> {
    options?.signal?.throwIfAborted();
    // blockstore-level's key: `/` + the multihash in base32upper (its default `base`, which the node keeps).
    return this.db.has(`/${base32upper.encoder.encode(key.multihash.bytes)}`);
  }
}

/**
 * A view of `inner` for an import: every block put is recorded in `seen` (CID -> bytes, each
 * block once). Not all of them end in the DAG (the importer puts an empty folder's node before its
 * entries): dagSize keeps those that do.
 */
export function countingBlockstore(inner: Blockstore, seen: Map<string, number>): Blockstore {
  const view = {
    put: async (cid: CID, bytes: Uint8Array, options?: AbortOptions) => {
      const put = await inner.put(cid, bytes, options);
      seen.set(cid.toString(), bytes.length);
      return put;
    },
    get: (cid: CID, options?: AbortOptions) => inner.get(cid, options),
    has: (cid: CID, options?: AbortOptions) => inner.has(cid, options),
  };
  return view as unknown as Blockstore;
}

/**
 * A depth-first walker for Helia's pins (`pins.add` / `pins.rm` take one) that reads the blocks
 * with links and, for a raw leaf that is local, only asks `has`: Helia's default walker reads
 * every block, so a pin re-read the whole DAG it had just imported or fetched. A raw leaf that is
 * not local is read (fetched) as the default walker would. A block met twice is walked once.
 */
export const leafSkippingWalker: GraphWalkerFactory = (components: GraphWalkerComponents) => new LeafSkippingWalker(components);

const EMPTY = new Uint8Array(0);

class LeafSkippingWalker implements GraphWalker {
  constructor(private readonly components: GraphWalkerComponents) {}

  async *walk<T = unknown>(root: CID, options: AbortOptions & { depth?: number } = {}): AsyncGenerator<GraphNode<T>> {
    const maxDepth = options.depth ?? Infinity;
    const stack: Array<{ cid: CID; depth: number; path: CID[] }> = [{ cid: root, depth: 0, path: [root] }];
    // Each block once (a file's repeated chunk is one block): Helia's pins.rm counts a block down
    // once per time it is walked, and a record counted below zero is written back, pinned forever.
    const walked = new Set<string>();
    while (stack.length) {
      const { cid, depth, path } = stack.pop()!;
      if (maxDepth === Infinity) {
        if (walked.has(cid.toString())) continue;
        walked.add(cid.toString());
      }
      const local = cid.code === raw.code && (await this.components.blockstore.has(cid, options));
      const bytes = local ? EMPTY : await readBlock(this.components.blockstore, cid, options);
      const block = createUnsafe({ cid, bytes, codec: await this.components.getCodec(cid.code) });
      if (depth < maxDepth) {
        const children = [...block.links()].map(([, child]) => child);
        for (const child of children.reverse()) stack.push({ cid: child, depth: depth + 1, path: [...path, child] });
      }
      yield { block, depth, path } as unknown as GraphNode<T>;
    }
  }
}

/**
 * The bytes of the DAG under `root`, each block once (what a walk of it counts): nodes with links
 * are read, raw leaves whose size `known` holds (an import's puts) are not.
 */
export async function dagSize(store: Blockstore, root: CID, known: Map<string, number>, options?: AbortOptions): Promise<number> {
  const seen = new Map<string, number>();
  const stack = [root];
  while (stack.length) {
    const cid = stack.pop()!;
    const key = cid.toString();
    if (seen.has(key)) continue;
    const size = cid.code === raw.code ? known.get(key) : undefined;
    if (size !== undefined) {
      seen.set(key, size);
      continue;
    }
    const bytes = await readBlock(store, cid, options);
    seen.set(key, bytes.length);
    if (cid.code === dagPb.code) for (const link of dagPb.decode(bytes).Links) stack.push(link.Hash);
  }
  return [...seen.values()].reduce((sum, size) => sum + size, 0);
}

import { z } from "zod";
import { MAX_OUTPUT_RETENTION_SECONDS } from "../../common/offers/message.js";

const MiB = 1024 ** 2;
const GiB = 1024 ** 3;

/**
 * What one peer may take of this node's bitswap serving (docs/data.md, "Serving limits"). Blocks
 * this node sends to a peer are charged to that peer; a message over its budget waits (throttled)
 * and, past `maxThrottleMs`, goes without its blocks (refused). The node's own wants are never held.
 */
export const dataServingOptionsSchema = z.strictObject({
  /**
   * Block bytes served to one peer per second. 32 MiB/s is about a quarter of a 1 Gbit/s uplink:
   * one greedy peer cannot take the node's whole upload.
   */
  bytesPerSecondPerPeer: z
    .number()
    .int()
    .min(64 * 1024)
    .default(32 * MiB),
  /** Blocks served to one peer per second (bounds the store reads and hashing of tiny blocks). */
  blocksPerSecondPerPeer: z.number().int().min(1).max(1_000_000).default(512),
  /**
   * Bitswap streams one peer may have open to this node at once (across its connections); one more
   * is reset. libp2p's own per-connection cap (bitswap's 32) stays the backstop above it.
   */
  maxStreamsPerPeer: z.number().int().min(1).max(32).default(8),
  /**
   * Longest a message of blocks waits for its peer's budget; past it the blocks are dropped from the
   * message (the peer must ask again). Under bitswap's 10 s send timeout.
   */
  maxThrottleMs: z.number().int().min(0).max(10_000).default(5_000),
});
export type DataServingOptions = z.output<typeof dataServingOptionsSchema>;

/**
 * The node's data plane (docs/data.md): content-addressed data served by Helia on the node's own
 * libp2p host, stored in level under `<dataDir>/data`.
 */
export const dataOptionsSchema = z.strictObject({
  /**
   * Run the data plane (Helia with bitswap on the node's libp2p host). Off by default until tasks,
   * the API, the SDK and the CLI use it (docs/data.md): until then it would only cost every node memory.
   */
  enabled: z.boolean().default(false),
  /** Bytes of unpinned data (fetched task inputs) kept as a cache; least recently used first out. */
  cacheBytes: z
    .number()
    .int()
    .min(1024 * 1024)
    .default(20 * GiB),
  /** Bytes of pinned data (`suanli data add`) this node accepts in all. */
  pinnedBytes: z
    .number()
    .int()
    .min(1024 * 1024)
    .default(100 * GiB),
  /**
   * Largest checkpoint folder of one task the provider snapshots (docs/data.md); one over it is
   * not snapshotted (CheckpointQuotaError in the log and the task's status), the previous stays.
   */
  checkpointMaxBytes: z
    .number()
    .int()
    .min(1024)
    .default(10 * GiB),
  /**
   * How long a lease's checkpoints stay after its task ends (docs/data.md, "Retention"): its signed
   * records served and its newest two CIDs pinned; then both go (the records from level, the CIDs
   * unpinned). Every offer of a node whose tasks can checkpoint states it (`retention.checkpointSeconds`).
   */
  checkpointRetentionSeconds: z
    .number()
    .int()
    .min(0)
    .max(MAX_OUTPUT_RETENTION_SECONDS, "at most 7776000 seconds (90 days)")
    .default(7 * 86_400),
  /** How long a fetch waits for a CID's blocks before giving up (DataNotFoundError). */
  fetchTimeoutMs: z.number().int().min(100).max(86_400_000).default(300_000),
  /** Per-peer bounds on what this node serves over bitswap. */
  serving: dataServingOptionsSchema.prefault({}),
});
export type DataOptionsInput = z.input<typeof dataOptionsSchema>;
export type DataOptions = z.output<typeof dataOptionsSchema>;

import { z } from "zod";

const GiB = 1024 ** 3;

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
  /** How long a fetch waits for a CID's blocks before giving up (DataNotFoundError). */
  fetchTimeoutMs: z.number().int().min(100).max(86_400_000).default(300_000),
});
export type DataOptionsInput = z.input<typeof dataOptionsSchema>;
export type DataOptions = z.output<typeof dataOptionsSchema>;

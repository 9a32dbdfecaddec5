import { z } from "zod";
import { OFFERS_SYNC_MAX_PAGE } from "../../common/offers/sync.js";

/** The node's `offers` configuration. Documented in docs/configuration.md and docs/p2p.md. */
export const offersOptionsSchema = z.strictObject({
  /** Lifetime of the Offers this node signs for its machines; re-signed when half is left. */
  ttlSec: z.number().int().min(60).max(86_400).default(3_600),
  /** Re-announce interval of this node's own offers (peers that missed one catch up). */
  reannounceIntervalMs: z.number().int().min(1_000).max(3_600_000).default(30_000),
  /** Offers expiring further ahead than this are refused: an offer must not outlive its provider by days. */
  maxTtlSec: z
    .number()
    .int()
    .min(60)
    .max(30 * 86_400)
    .default(86_400),
  /** How far ahead of this node's clock a message's publishedAt may be. */
  maxClockSkewSec: z.number().int().min(0).max(3_600).default(30),
  /** Most offers held; new machines beyond it are ignored until others leave. */
  maxBookSize: z.number().int().min(1).max(1_000_000).default(100_000),
  /** How often expired offers are removed. */
  sweepIntervalMs: z.number().int().min(100).max(60_000).default(1_000),
  /** Free stake (token base units) a provider needs beyond the collateral of its smallest lease. */
  minFreeStake: z
    .union([z.bigint(), z.string().regex(/^\d{1,30}$/), z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER)])
    .transform((value) => BigInt(value))
    .default(1n),
  /** Entries of each signature-verification cache. */
  signatureCacheSize: z.number().int().min(16).max(1_000_000).default(50_000),
  chainCache: z
    .strictObject({
      /** Cached records per kind (providers, machines, attestors, nonces). */
      maxEntries: z.number().int().min(16).max(1_000_000).default(10_000),
      /** How long a record is trusted without an event saying it changed. */
      ttlMs: z.number().int().min(100).max(3_600_000).default(60_000),
    })
    .prefault({}),
  sync: z
    .strictObject({
      /** Peers a node fetches the book from after it starts. 0 disables. */
      peers: z.number().int().min(0).max(32).default(3),
      pageSize: z.number().int().min(1).max(OFFERS_SYNC_MAX_PAGE).default(OFFERS_SYNC_MAX_PAGE),
      timeoutMs: z.number().int().min(100).max(120_000).default(10_000),
    })
    .prefault({}),
});
export type OffersOptions = z.output<typeof offersOptionsSchema>;
export type OffersOptionsInput = z.input<typeof offersOptionsSchema>;

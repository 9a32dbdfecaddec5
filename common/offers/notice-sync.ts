/**
 * Fetching a peer's failure notices over offers-sync (`notices: true`, common/offers/sync.ts), the
 * same way on a node (node/offers/gossip.ts) and in a renter's libp2p offer feed
 * (sdk/internal/feed.ts): oldest first, a page at a time, each notice handed to `ingest` (which
 * checks it like a gossiped one). A peer that sends mostly invalid notices is left. A peer of a
 * version before notices refuses the request (its request schema does not know `notices`): that
 * is `unsupported`, not a failure, and the caller syncs the offers anyway.
 */
import type { Libp2p, PeerId } from "@libp2p/interface";
import { OFFERS_SYNC_PROTOCOL } from "../p2p/protocols.js";
import { request } from "../p2p/reqresp.js";
import { OFFERS_SYNC_MAX_MESSAGE_BYTES, OFFERS_SYNC_MAX_PAGE, offersSyncRequestSchema, offersSyncResponseSchema } from "./sync.js";

export type FetchNoticesOptions = {
  chainId: number;
  /** Notices per page (at most OFFERS_SYNC_MAX_PAGE). */
  pageSize: number;
  timeoutMs: number;
  /** Most pages fetched (what the holder can keep, plus one page). */
  maxPages: number;
  /** Checks and keeps one notice. */
  ingest: (raw: string) => Promise<{ ok: boolean; action?: "reject" | "ignore" }>;
  /** False stops between pages (the node or feed is stopping). */
  running?: () => boolean;
};

export type FetchedNotices = {
  /** Notices kept (valid and new). */
  kept: number;
  /** The peer refused the request: a version that does not serve notices. */
  unsupported: boolean;
  /** Stopped early: most of a page was invalid. */
  leftForInvalid: boolean;
};

/**
 * @example
 * const fetched = await fetchNotices(host, peer, { chainId, pageSize: 64, timeoutMs: 10_000, maxPages: 800, ingest: (raw) => intake.ingest(raw) });
 * if (fetched.unsupported) logger.info("The peer does not serve failure notices");
 */
export async function fetchNotices(host: Pick<Libp2p, "dialProtocol">, peer: PeerId, options: FetchNoticesOptions): Promise<FetchedNotices> {
  let after: string | undefined;
  let kept = 0;
  const limit = Math.min(options.pageSize, OFFERS_SYNC_MAX_PAGE);
  for (let pages = 0; pages < options.maxPages && (options.running?.() ?? true); pages++) {
    let page;
    try {
      page = await request(
        host,
        peer,
        OFFERS_SYNC_PROTOCOL,
        { chainId: options.chainId, after, limit, notices: true },
        {
          requestSchema: offersSyncRequestSchema,
          responseSchema: offersSyncResponseSchema,
          timeoutMs: options.timeoutMs,
          maxMessageBytes: OFFERS_SYNC_MAX_MESSAGE_BYTES,
        },
      );
    } catch (error) {
      // An older peer answers InvalidMessageError naming the field it does not know.
      if (pages === 0 && (error as Error)?.name === "InvalidMessageError") return { kept, unsupported: true, leftForInvalid: false };
      throw error;
    }
    const raws = page.notices ?? [];
    let rejected = 0;
    for (const raw of raws) {
      const result = await options.ingest(raw);
      if (result.ok) kept++;
      else if (result.action === "reject") rejected++;
    }
    if (rejected * 2 > raws.length && raws.length > 0) return { kept, unsupported: false, leftForInvalid: true };
    if (!page.next || !raws.length) break;
    after = page.next;
  }
  return { kept, unsupported: false, leftForInvalid: false };
}

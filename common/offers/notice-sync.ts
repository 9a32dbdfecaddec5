/**
 * Fetching a peer's failure notices over offers-sync (`notices: true`, common/offers/sync.ts), the
 * same way on a node (node/offers/gossip.ts) and in a renter's libp2p offer feed
 * (sdk/internal/feed.ts): in the order the peer received them, a page at a time, each notice
 * handed to `ingest` (which checks it like a gossiped one). The answer's `cursor`, passed as
 * `since` to the next pull from the same peer, makes that pull carry only the notices the peer
 * received since (a client without gossip re-pulls every 15 s). A peer that sends mostly invalid
 * notices is left. A peer of a version before cursors refuses `since` and is asked the old way
 * (oldest first, every notice); one before notices refuses the request (its request schema does
 * not know `notices`): that is `unsupported`, not a failure, and the caller syncs the offers anyway.
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
  /**
   * The `cursor` an earlier pull from this peer returned: only the notices the peer received
   * since come. Absent: every notice (asked as `start`, so the answer carries a cursor).
   */
  since?: string;
};

export type FetchedNotices = {
  /** Notices kept (valid and new). */
  kept: number;
  /** The peer refused the request: a version that does not serve notices. */
  unsupported: boolean;
  /** Stopped early: most of a page was invalid. */
  leftForInvalid: boolean;
  /** Notices the peer sent (kept or not). */
  received: number;
  /** Where the next pull from this peer starts (`since`); absent when the peer gives none (a version before cursors). */
  cursor?: string;
};

/**
 * @example
 * const fetched = await fetchNotices(host, peer, { chainId, pageSize: 64, timeoutMs: 10_000, maxPages: 800, ingest: (raw) => intake.ingest(raw) });
 * if (fetched.unsupported) logger.info("The peer does not serve failure notices");
 */
export async function fetchNotices(host: Pick<Libp2p, "dialProtocol">, peer: PeerId, options: FetchNoticesOptions): Promise<FetchedNotices> {
  let after: string | undefined;
  // Arrival order from a cursor (`since`); a peer of a version before cursors refuses the field, and is asked the old way.
  let since: string | undefined = options.since ?? "start";
  let cursor: string | undefined;
  let kept = 0;
  let received = 0;
  const done = (leftForInvalid: boolean): FetchedNotices => ({ kept, unsupported: false, leftForInvalid, received, ...(cursor ? { cursor } : {}) });
  const limit = Math.min(options.pageSize, OFFERS_SYNC_MAX_PAGE);
  for (let pages = 0; pages < options.maxPages && (options.running?.() ?? true); pages++) {
    let page;
    try {
      page = await request(
        host,
        peer,
        OFFERS_SYNC_PROTOCOL,
        { chainId: options.chainId, limit, notices: true, ...(since === undefined ? { after } : { since }) },
        {
          requestSchema: offersSyncRequestSchema,
          responseSchema: offersSyncResponseSchema,
          timeoutMs: options.timeoutMs,
          maxMessageBytes: OFFERS_SYNC_MAX_MESSAGE_BYTES,
        },
      );
    } catch (error) {
      // An older peer answers InvalidMessageError naming the field it does not know: `since`, then `notices`.
      if (pages === 0 && (error as Error)?.name === "InvalidMessageError") {
        if (since === undefined) return { kept, unsupported: true, leftForInvalid: false, received };
        since = undefined;
        pages--;
        continue;
      }
      throw error;
    }
    // The cursor of the first page: a notice the peer receives while the pull pages on comes again next time (a duplicate, dropped).
    if (pages === 0 && since !== undefined) cursor = page.cursor;
    const raws = page.notices ?? [];
    received += raws.length;
    let rejected = 0;
    for (const raw of raws) {
      const result = await options.ingest(raw);
      if (result.ok) kept++;
      else if (result.action === "reject") rejected++;
    }
    if (rejected * 2 > raws.length && raws.length > 0) return done(true);
    if (!page.next || !raws.length) break;
    if (since === undefined) after = page.next;
    else since = page.next;
  }
  return done(false);
}

/**
 * The offers-sync protocol (`/suanli/offers-sync/1.0.0`): a node that just joined asks a peer
 * for the offers it holds, a page at a time in key order, instead of waiting for providers to
 * re-announce. Offers travel as the original signed messages, and the asking node validates
 * every one exactly like a gossiped message: a peer can withhold offers but never forge one.
 *
 * With `notices: true` the same pages carry the attestors' failure notices the peer holds
 * (common/attest/failure-notice.ts), oldest first, each checked like a gossiped notice: a node
 * that joins revokes what the network revoked before it came. A client that pulls again asks
 * with the `cursor` of its last pull (`since`) and gets only the notices the peer received since.
 */
import { z } from "zod";
import { FAILURE_NOTICE_MAX_BYTES } from "../attest/failure-notice.js";
import { OFFER_MESSAGE_MAX_BYTES } from "./message.js";

/** Most offers in one page. */
export const OFFERS_SYNC_MAX_PAGE = 64;
/** A full page of maximum-size messages plus the envelope. */
export const OFFERS_SYNC_MAX_MESSAGE_BYTES = OFFERS_SYNC_MAX_PAGE * (OFFER_MESSAGE_MAX_BYTES + 64) + 4_096;

export const offersSyncRequestSchema = z.strictObject({
  /** The chain whose offers are wanted; a node on another chain answers WrongChainError. */
  chainId: z.number().int().positive(),
  /** The `next` of the previous page; absent for the first. */
  after: z.string().min(1).max(128).optional(),
  limit: z.number().int().min(1).max(OFFERS_SYNC_MAX_PAGE),
  /** True: page through the failure notices instead of the offers (`offers` comes back empty). */
  notices: z.boolean().optional(),
  /**
   * With `notices`: only the notices the peer received after this cursor (the `cursor` it returned
   * to an earlier pull), in the order it received them, the next page asked with `since: next`.
   * A cursor the peer does not know (`start`, or one from before it restarted) gets every notice.
   * A client that pulls again sends its last cursor, so a re-pull carries only new notices.
   */
  since: z.string().min(1).max(128).optional(),
});
export type OffersSyncRequest = z.output<typeof offersSyncRequestSchema>;

export const offersSyncResponseSchema = z.strictObject({
  /** Offer messages exactly as the serving node received them. */
  offers: z.array(z.string().max(OFFER_MESSAGE_MAX_BYTES)).max(OFFERS_SYNC_MAX_PAGE),
  /** Failure notices exactly as the serving node received them (a `notices: true` request). */
  notices: z.array(z.string().max(FAILURE_NOTICE_MAX_BYTES)).max(OFFERS_SYNC_MAX_PAGE).optional(),
  /** Where the next page starts; null after the last page. */
  next: z.string().min(1).max(128).nullable(),
  /** Answering a request with `since`: where the next pull starts (send it as `since`). */
  cursor: z.string().min(1).max(128).optional(),
});
export type OffersSyncResponse = z.output<typeof offersSyncResponseSchema>;

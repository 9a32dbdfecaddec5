/**
 * The offers topic on a node: every message a peer gossips runs through the validation
 * pipeline inside gossipsub's topic validator, so gossipsub forwards only valid offers and
 * scores down the peers that send invalid ones; valid offers go into the book. The same
 * service serves and uses the offers-sync protocol, so a node that joins gets the current book
 * from its first peers instead of waiting for re-announcements.
 */
import { EventEmitter } from "node:events";
import { TopicValidatorResult } from "@libp2p/gossipsub";
import type { IdentifyResult, PeerId } from "@libp2p/interface";
import { SuanliError } from "../../common/errors.js";
import { encodeOfferMessage, offersTopic, type OfferMessage } from "../../common/offers/message.js";
import { OFFERS_SYNC_MAX_MESSAGE_BYTES, OFFERS_SYNC_MAX_PAGE, offersSyncRequestSchema, offersSyncResponseSchema } from "../../common/offers/sync.js";
import { offerFailure, type OfferRejectReason, type OfferValidation, type OfferValidator } from "../../common/offers/validate.js";
import type { GossipSubInspect, SuanliHost } from "../../common/p2p/host.js";
import { OFFERS_SYNC_PROTOCOL } from "../../common/p2p/protocols.js";
import { handleProtocol, request } from "../../common/p2p/reqresp.js";
import { MAX_NOTICES } from "../../common/attest/notice-index.js";
import { fetchNotices } from "../../common/offers/notice-sync.js";
import type { Logger } from "../log/logger.js";
import type { Metrics, OfferSource } from "../metrics/metrics.js";
import type { OfferBook } from "./book.js";
import { runDetached } from "../../common/detached.js";

/** A node refused to publish its own offer: the network would refuse it too. */
export class OfferRejectedError extends SuanliError {
  override name = "OfferRejectedError";
  readonly reason: OfferRejectReason;
  constructor(reason: OfferRejectReason, detail: string) {
    super(`The offer would be refused by the network: ${reason}`, {
      details: detail,
      metaMessages: hintFor(reason),
    });
    this.reason = reason;
  }
}

function hintFor(reason: OfferRejectReason): string[] | undefined {
  switch (reason) {
    case "unregistered":
      return ["Register the provider on-chain first (`npx suanli provider register`)."];
    case "peer_id_mismatch":
      return ["The peer id registered on-chain differs from this node's: update the profile, or restore the node's peer key file."];
    case "understaked":
      return ["Stake more, or lower the offer's price, minDuration or collateral ratio."];
    case "machine_undeclared":
    case "machine_mismatch":
      return ["Declare the machine on-chain exactly as the offer describes it."];
    default:
      return undefined;
  }
}

/** A peer answered an offers-sync request for another chain. */
export class WrongChainError extends SuanliError {
  override name = "WrongChainError";
}

export type OffersSyncOptions = {
  /** Peers to fetch the book from after start (the first ones that speak the protocol). */
  peers: number;
  pageSize: number;
  timeoutMs: number;
};

export type OffersGossipEvents = {
  /** Every message validated, accepted or not (for tests, logs and benchmarks). */
  validated: [result: OfferValidation, source: OfferSource, from: string | undefined];
};

/** The failure notices a node holds and checks (failure-notices.ts), served and fetched over offers-sync. */
export type SyncedNotices = {
  page(after: string | undefined, limit: number): { raw: string[]; next: string | null };
  pageSince(since: string, limit: number): { raw: string[]; next: string | null; cursor: string };
  ingest(raw: string, source: OfferSource, from?: string): Promise<{ ok: boolean; action?: "reject" | "ignore" }>;
};

export type OffersGossipOptions = {
  host: SuanliHost;
  /** Failure notices to serve and fetch with the offers. */
  notices?: SyncedNotices;
  book: OfferBook;
  validator: OfferValidator;
  chainId: number;
  metrics: Metrics;
  logger: Logger;
  sync: OffersSyncOptions;
};

/**
 * @example
 * const gossip = new OffersGossip({ host, book, validator, chainId, metrics, logger, sync: { peers: 3, pageSize: 64, timeoutMs: 10_000 } });
 * await gossip.start();
 */
export class OffersGossip extends EventEmitter<OffersGossipEvents> {
  readonly topic: string;
  private readonly host: SuanliHost;
  private readonly book: OfferBook;
  private readonly validator: OfferValidator;
  private readonly metrics: Metrics;
  private readonly logger: Logger;
  private readonly syncOptions: OffersSyncOptions;
  private readonly chainId: number;
  private readonly notices: SyncedNotices | undefined;
  private unhandleSync: (() => Promise<void>) | undefined;
  private readonly synced = new Set<string>();
  private syncsInFlight = 0;
  private syncsDone = 0;
  private running = false;
  private readonly onIdentify = (event: CustomEvent<IdentifyResult>) => {
    const { peerId, protocols } = event.detail;
    if (protocols.includes(OFFERS_SYNC_PROTOCOL)) runDetached(this.maybeSync(peerId), this.logger, "Syncing offers from a peer");
  };

  constructor(options: OffersGossipOptions) {
    super();
    this.host = options.host;
    this.book = options.book;
    this.validator = options.validator;
    this.metrics = options.metrics;
    this.logger = options.logger;
    this.syncOptions = options.sync;
    this.chainId = options.chainId;
    this.notices = options.notices;
    this.topic = offersTopic(options.chainId);
  }

  private get pubsub() {
    const pubsub = this.host.services.pubsub;
    if (!pubsub) throw new SuanliError("The offers service needs gossip: enable p2p.gossip.enabled");
    return pubsub;
  }

  async start(): Promise<void> {
    const pubsub = this.pubsub;
    if (!(pubsub as GossipSubInspect).score?.params?.topics?.[this.topic]) {
      // Without score parameters for the topic, rejected messages cost their sender nothing.
      this.logger.warn("The offers topic has no peer-score parameters: create the host with topics: offersTopics(chainId)", {
        topic: this.topic,
      });
    }
    pubsub.topicValidators.set(this.topic, async (peer, message) => {
      try {
        const result = await this.ingest(message.data, "gossip", peer.toString());
        if (result.ok) return TopicValidatorResult.Accept;
        return result.action === "reject" ? TopicValidatorResult.Reject : TopicValidatorResult.Ignore;
      } catch (error) {
        // A failure of ours, not the peer's: drop the message without blaming anyone.
        this.logger.error("Offer validation failed unexpectedly", { from: peer.toString() }, error);
        return TopicValidatorResult.Ignore;
      }
    });
    pubsub.subscribe(this.topic);
    this.unhandleSync = await handleProtocol(this.host, OFFERS_SYNC_PROTOCOL, {
      requestSchema: offersSyncRequestSchema,
      responseSchema: offersSyncResponseSchema,
      maxMessageBytes: 1_024,
      timeoutMs: this.syncOptions.timeoutMs,
      maxInboundStreamsPerPeer: 2,
      handler: async (req) => {
        if (req.chainId !== this.chainId) {
          throw new WrongChainError(`This node serves offers of chain ${this.chainId}, not ${req.chainId}`);
        }
        if (req.notices && req.since !== undefined) {
          const page = this.notices?.pageSince(req.since, req.limit);
          return page ? { offers: [], notices: page.raw, next: page.next, cursor: page.cursor } : { offers: [], notices: [], next: null };
        }
        if (req.notices) {
          const page = this.notices?.page(req.after, req.limit) ?? { raw: [], next: null };
          return { offers: [], notices: page.raw, next: page.next };
        }
        const entries = await this.book.pageByKey(req.after, req.limit);
        this.metrics.offersSynced.inc({ role: "server", outcome: "ok" });
        return {
          offers: entries.map((entry) => entry.raw),
          next: entries.length === req.limit ? entries[entries.length - 1]!.key : null,
        };
      },
      onError: (error) => this.metrics.p2pRequestErrors.inc({ protocol: OFFERS_SYNC_PROTOCOL, name: error.name }),
    });
    this.running = true;
    this.host.addEventListener("peer:identify", this.onIdentify);
    // Peers identified before we started listening.
    for (const peer of this.host.getPeers()) {
      const protocols = await this.host.peerStore
        .get(peer)
        .then((p) => p.protocols)
        .catch(() => [] as string[]);
      if (protocols.includes(OFFERS_SYNC_PROTOCOL)) runDetached(this.maybeSync(peer), this.logger, "Syncing offers from a peer");
    }
  }

  async stop(): Promise<void> {
    this.running = false;
    this.host.removeEventListener("peer:identify", this.onIdentify);
    // The topic stays subscribed: leaving it would PRUNE our mesh peers with a backoff, and a
    // node restarting with the same peer id would then find no mesh for a while. Messages still
    // arriving are ignored (never forwarded unvalidated) until the host itself stops.
    this.host.services.pubsub?.topicValidators.set(this.topic, () => TopicValidatorResult.Ignore);
    await this.unhandleSync?.();
    this.unhandleSync = undefined;
  }

  /**
   * Validates one message and, when valid and newer than what the book holds, puts it in the
   * book. Counts the outcome in the metrics.
   */
  async ingest(data: Uint8Array | string, source: OfferSource, from?: string): Promise<OfferValidation> {
    const started = performance.now();
    let result = await this.validator.validate(data, (key) => this.book.heldSeq(key));
    if (result.ok) {
      const outcome = this.book.upsert(result.offer);
      if (outcome === "stale") result = offerFailure("stale_seq", "a newer copy arrived during validation");
      else if (outcome === "full") result = offerFailure("book_full", "the book holds its maximum number of offers");
    }
    this.metrics.offerValidation.observe((performance.now() - started) / 1_000);
    if (result.ok) {
      this.metrics.offersAccepted.labels(source).inc();
      this.metrics.bookOffers.set(this.book.size);
    } else {
      this.metrics.offersRejected.labels(source, result.reason, result.action).inc();
      if (source !== "local") this.logger.debug("Offer message refused", { source, from, reason: result.reason, detail: result.detail });
    }
    this.emit("validated", result, source, from);
    return result;
  }

  /**
   * Publishes one of this node's own offers: validates it as any receiver would (throws
   * OfferRejectedError with the reason when the network would refuse it), puts it in the
   * local book and gossips it.
   */
  async publish(message: OfferMessage): Promise<void> {
    const bytes = encodeOfferMessage(message);
    const result = await this.ingest(bytes, "local");
    if (!result.ok) throw new OfferRejectedError(result.reason, result.detail);
    await this.pubsub.publish(this.topic, bytes);
  }

  /**
   * Fetches a peer's book through offers-sync and ingests every offer. Stops early when the
   * peer sends mostly invalid offers. Returns how many were accepted.
   */
  async syncFrom(peer: PeerId): Promise<{ accepted: number; refused: number; pages: number; notices?: number }> {
    // Failure notices first: the offers that follow are then checked against them.
    const notices = this.notices ? await this.syncNoticesFrom(peer) : undefined;
    let after: string | undefined;
    let accepted = 0;
    let refused = 0;
    let pages = 0;
    const pageSize = Math.min(this.syncOptions.pageSize, OFFERS_SYNC_MAX_PAGE);
    // Bounded by what a book can hold, plus one page.
    const maxPages = Math.ceil(this.book.capacity / pageSize) + 1;
    while (pages < maxPages && this.running) {
      const page = await request(
        this.host,
        peer,
        OFFERS_SYNC_PROTOCOL,
        { chainId: this.chainId, after, limit: pageSize },
        {
          requestSchema: offersSyncRequestSchema,
          responseSchema: offersSyncResponseSchema,
          timeoutMs: this.syncOptions.timeoutMs,
          maxMessageBytes: OFFERS_SYNC_MAX_MESSAGE_BYTES,
        },
      );
      pages++;
      let pageRejected = 0;
      for (const raw of page.offers) {
        const result = await this.ingest(raw, "sync", peer.toString());
        if (result.ok) accepted++;
        else {
          refused++;
          if (result.action === "reject") pageRejected++;
        }
      }
      if (pageRejected * 2 > page.offers.length && page.offers.length > 0) {
        this.logger.warn("Stopped syncing offers from a peer that sent invalid ones", { peer: peer.toString(), pageRejected });
        break;
      }
      if (!page.next || !page.offers.length) break;
      after = page.next;
    }
    return { accepted, refused, pages, ...(notices === undefined ? {} : { notices }) };
  }

  /**
   * Fetches a peer's failure notices through offers-sync (common/offers/notice-sync.ts); returns
   * how many were kept. A peer that cannot serve them (a version before notices refuses the
   * request, or the request fails) costs nothing but the notices: the offers are synced anyway,
   * and this is said once at info (then at debug).
   */
  async syncNoticesFrom(peer: PeerId): Promise<number> {
    try {
      const fetched = await fetchNotices(this.host, peer, {
        chainId: this.chainId,
        pageSize: this.syncOptions.pageSize,
        timeoutMs: this.syncOptions.timeoutMs,
        // Bounded by what a notice book holds (MAX_NOTICES), plus one page.
        maxPages: Math.ceil(MAX_NOTICES / Math.min(this.syncOptions.pageSize, OFFERS_SYNC_MAX_PAGE)) + 1,
        ingest: (raw) => this.notices!.ingest(raw, "sync", peer.toString()),
        running: () => this.running,
      });
      if (fetched.leftForInvalid) this.logger.warn("Stopped syncing failure notices from a peer that sent invalid ones", { peer: peer.toString() });
      if (fetched.unsupported) this.noNotices(peer, "the peer does not serve failure notices (a version before them)");
      return fetched.kept;
    } catch (error) {
      this.noNotices(peer, `${(error as Error)?.name ?? "Error"}: ${(error as Error)?.message ?? String(error)}`);
      return 0;
    }
  }

  private saidNoNotices = false;
  private noNotices(peer: PeerId, reason: string): void {
    const log = this.saidNoNotices ? this.logger.debug.bind(this.logger) : this.logger.info.bind(this.logger);
    this.saidNoNotices = true;
    log("Synced offers without failure notices from a peer", { peer: peer.toString(), reason });
  }

  private async maybeSync(peer: PeerId): Promise<void> {
    const id = peer.toString();
    if (!this.running || this.synced.has(id) || this.syncsDone + this.syncsInFlight >= this.syncOptions.peers) return;
    this.synced.add(id);
    this.syncsInFlight++;
    try {
      const outcome = await this.syncFrom(peer);
      this.syncsDone++;
      this.metrics.offersSynced.inc({ role: "client", outcome: "ok" });
      this.logger.info("Offers synced from a peer", { peer: id, ...outcome });
    } catch (error) {
      this.metrics.offersSynced.inc({ role: "client", outcome: "error" });
      this.logger.debug("Offers sync failed", { peer: id, err: (error as Error)?.name, detail: (error as Error)?.message });
    } finally {
      this.syncsInFlight--;
    }
  }
}

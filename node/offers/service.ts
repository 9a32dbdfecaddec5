/**
 * The offers concern of a node, composed: the book, the validation pipeline with its cached
 * chain view, the gossip service, eviction and, on a provider node, the publisher. The
 * composition root builds it after the p2p host and hands the chain follower its `on*` hooks.
 */
import type { TopicScoreParams } from "@libp2p/gossipsub/score";
import type { PrivateKey } from "@libp2p/interface";
import type { Address } from "viem";
import { CachedChainView, type ChainView } from "../../common/offers/chain-view.js";
import { offersTopic } from "../../common/offers/message.js";
import { attestFailuresTopic } from "../../common/attest/failure-notice.js";
import type { LocalSigner } from "../../common/chain/sign.js";
import { OfferValidator } from "../../common/offers/validate.js";
import type { SuanliHost } from "../../common/p2p/host.js";
import type { Logger } from "../log/logger.js";
import type { Metrics } from "../metrics/metrics.js";
import type { Store } from "../store/store.js";
import { OfferBook } from "./book.js";
import { OfferEviction } from "./eviction.js";
import { OffersGossip } from "./gossip.js";
import { FailureNotices } from "./failure-notices.js";
import { NoticeBook } from "./notice-book.js";
import type { OffersOptions } from "./options.js";
import { OfferPublisher } from "./publisher.js";

/**
 * Peer-score parameters of the offers topic. Invalid messages weigh (count² × −1): an honest
 * relay whose chain view lags by a block loses a point or two and recovers within seconds,
 * while a peer that keeps sending junk falls below the graylist threshold (−80) after about
 * ten messages and is ignored from then on. Offers are bursty, so a quiet mesh peer is not
 * penalised (mesh-delivery weights are off).
 */
export const OFFERS_TOPIC_SCORE: Partial<TopicScoreParams> = {
  topicWeight: 1,
  timeInMeshWeight: 0.01,
  timeInMeshQuantum: 1_000,
  timeInMeshCap: 600,
  firstMessageDeliveriesWeight: 0.5,
  firstMessageDeliveriesDecay: 0.9,
  firstMessageDeliveriesCap: 20,
  meshMessageDeliveriesWeight: 0,
  meshFailurePenaltyWeight: 0,
  invalidMessageDeliveriesWeight: -1,
  invalidMessageDeliveriesDecay: 0.9,
};

/** The gossip topics a node of `chainId` carries, with their score parameters, for createHost. */
export function offersTopics(chainId: number): Record<string, Partial<TopicScoreParams>> {
  return { [offersTopic(chainId)]: OFFERS_TOPIC_SCORE, [attestFailuresTopic(chainId)]: OFFERS_TOPIC_SCORE };
}

export type OfferService = {
  book: OfferBook;
  validator: OfferValidator;
  chain: CachedChainView;
  gossip: OffersGossip;
  /** Attestors' failure notices: held, gossiped, and revoking attestations in the book (issue 35 item 9). */
  notices: NoticeBook;
  failures: FailureNotices;
  eviction: OfferEviction;
  /** Present on a provider node. */
  publisher: OfferPublisher | undefined;
  /** Chain follower hooks (see OfferEviction). */
  onProviderChanged(provider: Address): Promise<number>;
  onMachineRemoved(machineId: number): Promise<number>;
  onMachineChanged(machineId: number): Promise<number>;
  onAttestorsChanged(): Promise<void>;
  stop(): Promise<void>;
};

export type StartOfferServiceParameters = {
  host: SuanliHost;
  store: Store;
  /** The chain as the contracts see it (cached here). */
  chain: ChainView;
  chainId: number;
  /** LeaseMarket address (EIP-712 verifying contract). */
  market: Address;
  options: OffersOptions;
  metrics: Metrics;
  logger: Logger;
  /** On a provider node: the wallet that signs Offers and the node's libp2p key. */
  provider?: { account: LocalSigner; peerKey: PrivateKey } | undefined;
  /** Unix seconds now (tests). */
  now?: () => number;
};

/**
 * Starts the offers concern on a running host.
 *
 * @example
 * const offers = await startOfferService({ host, store, chain: registryView, chainId, market,
 *   options: config.offers, metrics, logger, provider: { account, peerKey } });
 * await follower.subscribe("offers", (event) => offers.onProviderChanged(event.args.provider));
 * await offers.publisher?.set({ machine, terms, capacity: { freeUnits: 8 } });
 */
export async function startOfferService(parameters: StartOfferServiceParameters): Promise<OfferService> {
  const { host, store, options, metrics, chainId, market, now } = parameters;
  const logger = parameters.logger.child({ module: "offers" });
  const chain = parameters.chain instanceof CachedChainView ? parameters.chain : new CachedChainView(parameters.chain, options.chainCache);
  const book = await OfferBook.open(store, { maxOffers: options.maxBookSize, now, logger });
  metrics.bookOffers.set(book.size);
  const notices = await NoticeBook.open(store, { now });
  const validator = new OfferValidator({
    chainId,
    market,
    chain,
    now,
    maxTtlSec: options.maxTtlSec,
    maxClockSkewSec: options.maxClockSkewSec,
    minFreeStake: options.minFreeStake,
    cacheSize: options.signatureCacheSize,
    notices,
  });
  const failures = new FailureNotices({ host, notices, book, validator, chain, chainId, market, logger, now });
  const gossip = new OffersGossip({
    host,
    book,
    validator,
    chainId,
    metrics,
    logger,
    sync: options.sync,
    notices: {
      page: (after, limit) => notices.page(after, limit),
      pageSince: (since, limit) => notices.pageSince(since, limit),
      ingest: (raw, source, from) => failures.ingest(raw, source, from),
    },
  });
  const eviction = new OfferEviction({ book, validator, chain, metrics, logger, sweepIntervalMs: options.sweepIntervalMs });
  await failures.start();
  await gossip.start();
  eviction.start();
  if (book.size) {
    // The chain moved while the node was down: re-check what was loaded, in the background.
    // Attestor roles may have changed too (the daemon's offer subscription starts at the head).
    void eviction
      .recheckAll()
      .then(async (removed) => {
        await eviction.onAttestorsChanged();
        return removed;
      })
      .then(
        (removed) => logger.info("Offer book reloaded", { offers: book.size, evicted: removed }),
        (error: unknown) => logger.warn("Cannot re-check the reloaded offer book", {}, error),
      );
  }

  let publisher: OfferPublisher | undefined;
  if (parameters.provider) {
    publisher = new OfferPublisher({
      gossip,
      store,
      account: parameters.provider.account,
      peerKey: parameters.provider.peerKey,
      peerId: host.peerId.toString(),
      chainId,
      market,
      addrs: () => host.getMultiaddrs().map(String),
      heldSeq: (key) => book.heldSeq(key),
      ttlSec: options.ttlSec,
      reannounceIntervalMs: options.reannounceIntervalMs,
      metrics,
      logger,
      now,
    });
    publisher.start();
  }

  return {
    book,
    validator,
    chain,
    gossip,
    notices,
    failures,
    eviction,
    publisher,
    onProviderChanged: (provider) => eviction.onProviderChanged(provider),
    onMachineRemoved: (machineId) => eviction.onMachineRemoved(machineId),
    onMachineChanged: (machineId) => eviction.onMachineChanged(machineId),
    onAttestorsChanged: () => eviction.onAttestorsChanged(),
    async stop() {
      await publisher?.stop();
      eviction.stop();
      await gossip.stop();
      await failures.stop();
      await book.close();
    },
  };
}

/**
 * The client's view of the market: validated offers kept in a local matching engine. In Node
 * the feed joins the offers topic over libp2p (and pulls the current book from its bootstrap
 * peers with offers-sync); every message goes through the same validation pipeline as on a node.
 * It follows the attestors' failure notices the same way (gossip and offers-sync, checked by the
 * node's own code, common/attest/notice-intake.ts): a notice revokes that attestor's earlier
 * attestations of the machine and counts toward `maxAttestFailures`.
 */
import type { IdentifyResult, PeerId } from "@libp2p/interface";
import { peerIdFromString } from "@libp2p/peer-id";
import { multiaddr } from "@multiformats/multiaddr";
import { TopicValidatorResult } from "@libp2p/gossipsub";
import type { Address, Chain, PublicClient, Transport } from "viem";
import { readProvider } from "../../common/chain/market.js";
import { RegistryChainView } from "../../common/chain/registry-view.js";
import type { MatchingEngine } from "../../common/matching/engine.js";
import { OfferEngineIndex, ReputationCache } from "../../common/matching/offer-index.js";
import type { MatchingOptionsInput } from "../../common/matching/options.js";
import { CachedChainView } from "../../common/offers/chain-view.js";
import { messageKey, offersTopic, type OfferMessage } from "../../common/offers/message.js";
import { attestFailuresTopic } from "../../common/attest/failure-notice.js";
import { MAX_NOTICES, NoticeIndex } from "../../common/attest/notice-index.js";
import { NoticeIntake, noticeTopicValidator } from "../../common/attest/notice-intake.js";
import { failuresUntilOf } from "../../common/offers/attestation-state.js";
import { fetchNotices } from "../../common/offers/notice-sync.js";
import { OFFERS_SYNC_MAX_MESSAGE_BYTES, OFFERS_SYNC_MAX_PAGE, offersSyncRequestSchema, offersSyncResponseSchema } from "../../common/offers/sync.js";
import { engineAttestation, OfferValidator, type ValidatedOffer } from "../../common/offers/validate.js";
import { createHost, type SuanliHost } from "../../common/p2p/host.js";
import { OFFERS_SYNC_PROTOCOL } from "../../common/p2p/protocols.js";
import { request } from "../../common/p2p/reqresp.js";
import { runDetached } from "../../common/detached.js";
import { NetworkUnreachableError } from "../errors.js";

/** One line on why a dial failed: libp2p's own words, without its stack. */
function dialFailure(error: unknown): string {
  if (error instanceof AggregateError && error.errors.length) return error.errors.map(dialFailure).join("; ");
  const err = error as { name?: string; message?: string };
  if (err?.name === "TimeoutError" || err?.name === "AbortError") return "no answer (timed out)";
  return err?.message ? `${err.message}${err.name && err.name !== "Error" ? ` (${err.name})` : ""}` : String(error);
}

export type OfferFeed = {
  readonly engine: MatchingEngine;
  /**
   * Resolves once the current book was pulled from the bootstrap peers (or `timeoutMs` passed
   * while connected to one). Rejects with NetworkUnreachableError when no bootstrap peer could be
   * reached at all (each refused or unreachable), naming each and why. A feed without gossip
   * pulls the book again when its last pull is older than `resyncAfterMs`.
   */
  ready(timeoutMs?: number): Promise<void>;
  /**
   * Pulls the current offers of one peer (a provider the client already deals with, known by its
   * peer id and addresses) even when it was not a bootstrap peer. HTTP feeds refresh instead.
   */
  syncPeer(peerId: string, addrs: string[], timeoutMs?: number): Promise<void>;
  /** The newest validated message of a machine's offer. */
  message(key: string): OfferMessage | undefined;
  /** Every validated, unexpired offer message. */
  messages(): OfferMessage[];
  /** Forget a provider's offers for a while (after a fault or a failed start). */
  avoid(provider: Address, seconds: number): void;
  /** The libp2p host (Node feeds only): providers are reached through it. */
  readonly host: SuanliHost | undefined;
  close(): Promise<void>;
};

export type P2pFeedOptions = {
  chainId: number;
  market: Address;
  registry: Address;
  publicClient: PublicClient<Transport, Chain>;
  /** Multiaddrs of nodes to join through, each ending in /p2p/<peer id>. */
  bootstrap: string[];
  matching?: MatchingOptionsInput;
  /** Keep loopback/private addresses (devnets, LANs). */
  allowPrivateAddresses?: boolean;
  /**
   * Follow live offers over gossip (default true). False: the client is never a gossip peer and
   * pulls the book with offers-sync when it needs offers (at most every `resyncAfterMs`): what a
   * short-lived client such as one CLI command should do, since nodes score every gossip peer and
   * dozens of short-lived peers from one address read as a Sybil attack (issue #40 item 12).
   */
  gossip?: boolean;
  /** Without gossip: how old a pulled book may be before `ready()` pulls it again (default 15 s). */
  resyncAfterMs?: number;
  now?: () => number;
};

/** Starts a light libp2p client that follows the offers topic (or, without gossip, pulls the book when asked). */
export async function startP2pFeed(options: P2pFeedOptions): Promise<OfferFeed> {
  const now = options.now ?? (() => Math.floor(Date.now() / 1000));
  const topic = offersTopic(options.chainId);
  const gossip = options.gossip ?? true;
  const resyncAfterMs = options.resyncAfterMs ?? 15_000;
  const host = await createHost({
    listen: [],
    bootstrap: options.bootstrap,
    dht: { enabled: false },
    allowPrivateAddresses: options.allowPrivateAddresses ?? true,
    gossip: { enabled: gossip, heartbeatIntervalMs: 500, ipColocationWhitelist: ["127.0.0.1"] },
    topics: gossip ? { [topic]: {}, [attestFailuresTopic(options.chainId)]: {} } : {},
  });
  const chain = new CachedChainView(new RegistryChainView(options.publicClient, options.registry), { ttlMs: 30_000 });
  const notices = new NoticeIndex({ now });
  const intake = new NoticeIntake({ chainId: options.chainId, market: options.market, isAttestor: (address) => chain.isAttestor(address), holder: notices, now });
  const validator = new OfferValidator({ chainId: options.chainId, market: options.market, chain, now, notices });
  const reputations = new ReputationCache((provider) => readProvider(options.publicClient, options.registry, provider), { ttlSeconds: 60, now });
  const offers = new OfferEngineIndex({ matching: options.matching, reputations, now });
  const { engine } = offers;

  async function ingest(data: Uint8Array | string): Promise<boolean> {
    const result = await validator.validate(data, (key) => offers.message(key)?.seq);
    if (!result.ok) return false;
    await index(result.offer);
    return true;
  }

  async function index(offer: ValidatedOffer): Promise<void> {
    await offers.put(offer.key, offer.message, engineAttestation(offer.attestation, now()), null, failuresUntilOf(offer.attestation));
  }

  /** Checks a failure notice as a node does; a new one re-checks the machine's offers (revocation, failure count). */
  async function ingestNotice(data: Uint8Array | string): Promise<Awaited<ReturnType<NoticeIntake["ingest"]>>> {
    const result = await intake.ingest(data);
    if (result.ok && result.kept) {
      const { provider, machineId } = result.notice.failure;
      for (const message of offers.messages()) {
        if (message.offer.provider.toLowerCase() !== provider.toLowerCase() || message.offer.machineId !== machineId) continue;
        const state = await validator.attestationState(message);
        await offers.put(messageKey(message), message, engineAttestation(state, now()), null, failuresUntilOf(state));
      }
    }
    return result;
  }

  const pubsub = host.services.pubsub;
  if (gossip && pubsub) {
    pubsub.topicValidators.set(topic, async (_peer, message) => {
      try {
        return (await ingest(message.data)) ? TopicValidatorResult.Accept : TopicValidatorResult.Ignore;
      } catch {
        return TopicValidatorResult.Ignore;
      }
    });
    pubsub.subscribe(topic);
    pubsub.topicValidators.set(
      intake.topic,
      noticeTopicValidator((data) => ingestNotice(data)),
    );
    pubsub.subscribe(intake.topic);
  }

  // Pull the current book from every peer that serves offers-sync, once (again later without gossip).
  const synced = new Set<string>();
  /** Peers seen serving offers-sync, for a re-pull without gossip. */
  const servers = new Map<string, PeerId>();
  /** Each peer's notice cursor: a re-pull fetches only the notices it received since the last one. */
  const noticeCursors = new Map<string, string>();
  let lastSyncAt = 0;
  let firstSync: () => void = () => {};
  const firstSyncDone = new Promise<void>((resolve) => (firstSync = resolve));
  async function syncFrom(peer: PeerId): Promise<void> {
    const id = peer.toString();
    if (synced.has(id)) return;
    synced.add(id);
    servers.set(id, peer);
    lastSyncAt = Date.now();
    // Failure notices first, so the offers that follow are checked against them. A peer that does
    // not serve them (an older version) still serves its offers.
    const since = noticeCursors.get(id);
    const fetched = await fetchNotices(host, peer, {
      chainId: options.chainId,
      pageSize: OFFERS_SYNC_MAX_PAGE,
      timeoutMs: 10_000,
      maxPages: Math.ceil(MAX_NOTICES / OFFERS_SYNC_MAX_PAGE) + 1,
      ingest: (raw) => ingestNotice(raw).catch(() => ({ ok: false as const })),
      ...(since ? { since } : {}),
    }).catch(() => undefined);
    if (fetched?.cursor && !fetched.leftForInvalid) noticeCursors.set(id, fetched.cursor);
    let after: string | undefined;
    for (let page = 0; page < 1_000; page++) {
      const answer = await request(
        host,
        peer,
        OFFERS_SYNC_PROTOCOL,
        { chainId: options.chainId, after, limit: OFFERS_SYNC_MAX_PAGE },
        {
          requestSchema: offersSyncRequestSchema,
          responseSchema: offersSyncResponseSchema,
          maxMessageBytes: OFFERS_SYNC_MAX_MESSAGE_BYTES,
          timeoutMs: 10_000,
        },
      );
      for (const raw of answer.offers) await ingest(raw).catch(() => false);
      if (!answer.next || !answer.offers.length) break;
      after = answer.next;
    }
  }
  const onIdentify = (event: CustomEvent<IdentifyResult>) => {
    if (!event.detail.protocols.includes(OFFERS_SYNC_PROTOCOL)) return;
    runDetached(
      syncFrom(event.detail.peerId).finally(() => firstSync()),
      undefined,
      "Syncing offers from a peer",
    );
  };
  host.addEventListener("peer:identify", onIdentify);

  // Offers expire: drop them from the engine so they are never matched.
  const sweep = setInterval(() => offers.sweepExpired(), 1_000);
  sweep.unref();

  /** Dials each bootstrap address itself, for the reason none answered; resolves when one did. */
  async function diagnoseBootstrap(timeoutMs: number): Promise<void> {
    const attempts: { addr: string; reason: string }[] = [];
    for (const addr of options.bootstrap) {
      try {
        await host.dial(multiaddr(addr), { signal: AbortSignal.timeout(timeoutMs) });
        return;
      } catch (error) {
        attempts.push({ addr, reason: dialFailure(error) });
      }
    }
    throw new NetworkUnreachableError(attempts);
  }

  return {
    engine,
    host,
    async ready(timeoutMs = 5_000) {
      if (!options.bootstrap.length) return;
      if (!gossip && lastSyncAt > 0 && Date.now() - lastSyncAt > resyncAfterMs) {
        synced.clear();
        await Promise.all([...servers.values()].map((peer) => syncFrom(peer).catch(() => undefined)));
        return;
      }
      let timer: NodeJS.Timeout | undefined;
      const pulled = await Promise.race([firstSyncDone.then(() => true), new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), timeoutMs)))]).finally(() =>
        clearTimeout(timer),
      );
      if (pulled || host.getConnections().length > 0) return;
      // Not one connection: say why (refused, unreachable) instead of an empty book.
      await diagnoseBootstrap(timeoutMs);
      await Promise.race([firstSyncDone, new Promise((resolve) => setTimeout(resolve, timeoutMs).unref())]);
    },
    async syncPeer(peerId, addrs, timeoutMs = 10_000) {
      const peer = peerIdFromString(peerId);
      const multiaddrs = addrs.flatMap((addr) => {
        try {
          return [multiaddr(addr)];
        } catch {
          return [];
        }
      });
      if (multiaddrs.length) await host.peerStore.merge(peer, { multiaddrs });
      await host.dial(peer, { signal: AbortSignal.timeout(timeoutMs) });
      synced.delete(peerId);
      await syncFrom(peer);
    },
    message: (key) => offers.message(key),
    messages: () => offers.messages(),
    avoid: (provider, seconds) => offers.avoid(provider, seconds),
    async close() {
      clearInterval(sweep);
      host.removeEventListener("peer:identify", onIdentify);
      await host.stop();
    },
  };
}

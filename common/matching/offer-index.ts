/**
 * The one layer that turns offers into matching-engine entries, shared by every feed: the SDK's
 * libp2p feed, its HTTP feed and the API node's source. A feed says what it knows of an offer (its
 * message and the attestation that counts); this layer adds the provider's reputation from one
 * cache, keeps the message beside the entry, skips providers the client avoids, drops expired
 * offers and keeps offers that cannot be matched (renter-bound, a snapshot that does not fit) out
 * of the engine.
 */
import type { Address } from "viem";
import type { OfferMessage } from "../offers/message.js";
import { MatchingEngine } from "./engine.js";
import { offerEntryFromMessage, type OfferKnowledge, type Reputation } from "./entry.js";
import type { ReputationCounters } from "./knowledge.js";
import type { MatchingOptionsInput } from "./options.js";

/** What a provider without known counters is ranked as: a new provider. */
export const NO_REPUTATION: Reputation = { leasesCompleted: 0, faults: 0, unitSecondsDelivered: 0n };

export type ReputationCacheOptions = {
  /** How long a provider's counters are reused, in seconds (default: until invalidated). */
  ttlSeconds?: number;
  /** Clock, unix seconds. */
  now: () => number;
};

/**
 * Providers' reputation counters behind one cache: a value is reused until its TTL passes or it
 * is invalidated, and concurrent reads of one provider share a single load.
 *
 * @example
 * const reputations = new ReputationCache((provider) => readProvider(publicClient, registry, provider), { ttlSeconds: 60, now });
 * const counters = await reputations.get(provider);
 */
export class ReputationCache {
  private readonly known = new Map<string, { value: Reputation; at: number }>();
  private readonly loading = new Map<string, Promise<Reputation>>();

  constructor(
    private readonly load: (provider: Address) => Promise<ReputationCounters>,
    private readonly options: ReputationCacheOptions,
  ) {}

  /** The counters held and still fresh, without loading. */
  peek(provider: Address): Reputation | undefined {
    const held = this.known.get(provider.toLowerCase());
    if (!held) return undefined;
    if (this.options.ttlSeconds !== undefined && held.at <= this.options.now() - this.options.ttlSeconds) return undefined;
    return held.value;
  }

  /** True when the provider's counters were ever loaded (fresh or not). */
  has(provider: Address): boolean {
    return this.known.has(provider.toLowerCase());
  }

  /** The provider's counters, loaded when not held fresh. */
  get(provider: Address): Promise<Reputation> {
    const fresh = this.peek(provider);
    if (fresh) return Promise.resolve(fresh);
    return this.reload(provider);
  }

  /** Loads the provider's counters now (one load at a time per provider). */
  reload(provider: Address): Promise<Reputation> {
    const key = provider.toLowerCase();
    const inFlight = this.loading.get(key);
    if (inFlight) return inFlight;
    const run = this.load(provider)
      .then((counters) => {
        const value: Reputation = {
          leasesCompleted: Number(counters.leasesCompleted),
          faults: Number(counters.faults),
          unitSecondsDelivered: BigInt(counters.unitSecondsDelivered),
        };
        this.known.set(key, { value, at: this.options.now() });
        return value;
      })
      .finally(() => this.loading.delete(key));
    this.loading.set(key, run);
    return run;
  }

  invalidate(provider: Address): void {
    this.known.delete(provider.toLowerCase());
  }
}

export type OfferEngineIndexOptions = {
  /** The engine to fill, or its options to build one. */
  engine?: MatchingEngine;
  matching?: MatchingOptionsInput;
  reputations: ReputationCache;
  /** Clock, unix seconds. */
  now: () => number;
  /** Told when an offer is kept out of the engine (not matchable) and why. */
  onUnindexable?: (key: string, error: unknown) => void;
  /** Told when a background read of a provider's counters failed (its offers stay ranked as new). */
  onReputationError?: (provider: Address, error: unknown) => void;
};

type Held = { message: OfferMessage; attestation: OfferKnowledge["attestation"]; latencyMs: number | null; attestFailuresUntil: readonly number[] };

/**
 * A matching engine plus the messages behind its entries.
 *
 * @example
 * const index = new OfferEngineIndex({ matching, reputations, now });
 * await index.put(offer.key, offer.message, engineAttestation(offer.attestation, now()));
 * const result = index.engine.match(request);
 */
export class OfferEngineIndex {
  readonly engine: MatchingEngine;
  private readonly held = new Map<string, Held>();
  private readonly avoided = new Map<string, number>();
  /** The latest put or remove of each held or pending key, so a put that awaited a reputation never undoes a later change. */
  private readonly versions = new Map<string, number>();
  private changes = 0;

  constructor(private readonly options: OfferEngineIndexOptions) {
    this.engine = options.engine ?? new MatchingEngine(options.matching ?? {}, { now: options.now });
  }

  /**
   * Indexes an offer with its provider's reputation (loaded when not cached). False when the
   * provider is avoided, its counters cannot be read, the offer cannot be matched, or a later put
   * or remove of the key won.
   */
  async put(
    key: string,
    message: OfferMessage,
    attestation: OfferKnowledge["attestation"],
    latencyMs: number | null = null,
    attestFailuresUntil: readonly number[] = [],
  ): Promise<boolean> {
    if (this.isAvoided(message.offer.provider)) return false;
    const version = this.bump(key);
    let reputation: Reputation;
    try {
      reputation = await this.options.reputations.get(message.offer.provider);
    } catch (error) {
      // Without its provider's counters the offer cannot be ranked: it waits for its next version.
      if (this.versions.get(key) === version && !this.held.has(key)) this.versions.delete(key);
      this.options.onUnindexable?.(key, error);
      return false;
    }
    if (this.versions.get(key) !== version) return false;
    return this.index(key, { message, attestation, latencyMs, attestFailuresUntil }, reputation);
  }

  /**
   * Indexes an offer at once with what is known of its provider; a provider not known yet is
   * ranked as new, its counters are loaded in the background and its offers re-ranked with them
   * (a node's book events are handled synchronously). `attestFailuresUntil`: until when each of
   * the machine's signed failures counts (AttestationState.failuresUntil), which `maxAttestFailures`
   * bounds at match time.
   */
  putNow(key: string, message: OfferMessage, attestation: OfferKnowledge["attestation"], latencyMs: number | null = null, attestFailuresUntil: readonly number[] = []): boolean {
    if (this.isAvoided(message.offer.provider)) return false;
    this.bump(key);
    const provider = message.offer.provider;
    const known = this.options.reputations.peek(provider);
    const indexed = this.index(key, { message, attestation, latencyMs, attestFailuresUntil }, known ?? NO_REPUTATION);
    if (!known) this.refreshProvider(provider).catch((error: unknown) => this.options.onReputationError?.(provider, error));
    return indexed;
  }

  /** Reloads a provider's counters and re-ranks its offers; a failed read leaves them as they were. */
  async refreshProvider(provider: Address): Promise<void> {
    const reputation = await this.options.reputations.reload(provider);
    for (const [key, held] of this.byProvider(provider)) this.index(key, held, reputation);
  }

  /** Removes an offer from the engine (a no-op when it is not there). */
  remove(key: string): void {
    this.versions.delete(key);
    this.held.delete(key);
    this.engine.remove(key);
  }

  /** Forgets a provider's offers for `seconds` (after a fault or a failed start); its new offers are skipped meanwhile. */
  avoid(provider: Address, seconds: number): void {
    this.avoided.set(provider.toLowerCase(), this.options.now() + seconds);
    for (const [key] of this.byProvider(provider)) this.remove(key);
  }

  /** Drops offers whose expiry passed. */
  sweepExpired(): void {
    const now = this.options.now();
    for (const [key, held] of this.held) if (held.message.offer.expiry <= now) this.remove(key);
  }

  /** The message behind an indexed offer. */
  message(key: string): OfferMessage | undefined {
    return this.held.get(key)?.message;
  }

  /** Every indexed, unexpired offer message. */
  messages(): OfferMessage[] {
    const now = this.options.now();
    return [...this.held.values()].map((held) => held.message).filter((message) => message.offer.expiry > now);
  }

  /** Keys of the indexed offers. */
  keys(): string[] {
    return [...this.held.keys()];
  }

  private isAvoided(provider: Address): boolean {
    return (this.avoided.get(provider.toLowerCase()) ?? 0) > this.options.now();
  }

  private bump(key: string): number {
    const version = ++this.changes;
    this.versions.set(key, version);
    return version;
  }

  private byProvider(provider: Address): [string, Held][] {
    const who = provider.toLowerCase();
    return [...this.held.entries()].filter(([, held]) => held.message.offer.provider.toLowerCase() === who);
  }

  private index(key: string, held: Held, reputation: Reputation): boolean {
    try {
      this.engine.upsert(
        offerEntryFromMessage(held.message, { attestation: held.attestation, reputation, latencyMs: held.latencyMs, attestFailuresUntil: [...held.attestFailuresUntil] }),
      );
    } catch (error) {
      // Not matchable (a renter-bound offer, a snapshot that does not fit): keep it out of the engine.
      this.held.delete(key);
      this.versions.delete(key);
      this.engine.remove(key);
      this.options.onUnindexable?.(key, error);
      return false;
    }
    this.held.set(key, held);
    return true;
  }
}

/**
 * The HTTP API's data source on a real node: offers from the node's offer book (with the
 * attestation state the book verified under the on-chain attestor quorum), providers, machines
 * and leases read from the contracts (cached, invalidated by the chain follower's events, listed
 * from the market index in level), statistics recorded from the book's changes with utilization
 * from the chain's CapacityChanged events, match dry-runs on a MatchingEngine kept in sync with
 * the book, and a change stream of offers and leases.
 */
import type { Address, Chain, PublicClient, Transport } from "viem";
import { getAddress } from "viem";
import type { LeaseRole, LeaseStatus, LeaseView, MachineFilter, MachineView, ProviderListQuery, ProviderView } from "../../common/api/chain.js";
import type { HealthCheck, MarketStats, MatchRequest, MatchResult, StatsWindow } from "../../common/api/market.js";
import type { OfferFilter } from "../../common/api/offers.js";
import { readLease, readMachine, readProvider, type LeaseView as ChainLease } from "../../common/chain/market.js";
import type { Deployment } from "../../common/deployment.js";
import { TypedDataRecoverer } from "../../common/eip712-recover.js";
import type { MatchingEngine } from "../../common/matching/engine.js";
import type { OfferKnowledge, Reputation as MatchingReputation } from "../../common/matching/entry.js";
import { OfferEngineIndex, ReputationCache } from "../../common/matching/offer-index.js";
import type { MatchingOptionsInput } from "../../common/matching/options.js";
import { ReadCache, type CachedChainView } from "../../common/offers/chain-view.js";
import { offerKey, type OfferMessage } from "../../common/offers/message.js";
import { engineAttestation } from "../../common/offers/validate.js";
import { failuresUntilOf } from "../../common/offers/attestation-state.js";
import type { SuanliHost } from "../../common/p2p/host.js";
import type { ChainFollower } from "../chain/follower.js";
import type { Logger } from "../log/logger.js";
import type { BookEntry, OfferBook, RemovalReason } from "../offers/book.js";
import type { Store } from "../store/store.js";
import { bookComparator, bookEntryMatches, compareBigint, removedReason } from "./book-query.js";
import { mapBounded, paginate, READ_CONCURRENCY, toLeaseView, toMachineView, toProviderView, type ChainMachine, type ChainProvider } from "./chain-views.js";
import { MarketIndex } from "./market-index.js";
import { toMatchResult } from "./match-view.js";
import { failuresView, toAttestationView } from "./offer-view.js";
import type { MarketChange, MarketDataSource, MarketListener, OfferEntry, Page, PageOf, VerifiedAttestation } from "./source.js";
import { StatsRecorder, type StatsRecorderOptions } from "./stats.js";
import { runDetached } from "../../common/detached.js";

const ZERO_ADDRESS = "0x0000000000000000000000000000000000000000";

export type NodeMarketSourceDeps = {
  book: OfferBook;
  store: Store;
  publicClient: PublicClient<Transport, Chain>;
  deployment: Deployment;
  market: Address;
  registry: Address;
  /** The node's cached registry view: the attestor quorum (the daemon invalidates it from events). */
  chainView: CachedChainView;
  /** The node's chain follower; the market index subscribes to it. */
  follower: ChainFollower;
  host: SuanliHost;
  /** `matching.*` of the node's configuration. */
  matching?: MatchingOptionsInput;
  /** Bounds of the provider and machine read caches (`offers.chainCache`). */
  cache?: { maxEntries: number; ttlMs: number };
  stats?: StatsRecorderOptions;
  logger: Logger;
  /** Clock in milliseconds (tests). */
  now?: () => number;
};

function errorLine(error: unknown): string {
  return error instanceof Error ? (error.message.split("\n")[0] ?? error.name) : String(error);
}

/**
 * @example
 * const source = await NodeMarketSource.start({ book: daemon.offers.book, store: daemon.store, ... });
 * const api = await createApiServer({ source, deployment, options: config.api });
 * // on shutdown
 * await api.close();
 * await source.stop();
 */
export class NodeMarketSource implements MarketDataSource {
  readonly index: MarketIndex;
  readonly engine: MatchingEngine;
  readonly stats: StatsRecorder;
  private readonly listeners = new Set<MarketListener>();
  private readonly providerReads: ReadCache<string, ChainProvider>;
  private readonly machineReads: ReadCache<string, ChainMachine>;
  private readonly recoverer: TypedDataRecoverer;
  /** Attestations of a message with their recovered signers (a message never changes). */
  private readonly signers = new WeakMap<OfferMessage, VerifiedAttestation[]>();
  /** Reputation counters of providers with offers, for the engine's ranking. */
  private readonly reputations: ReputationCache;
  /** The book's offers as engine entries (the one offer-to-engine layer, common/matching). */
  private readonly offerIndex: OfferEngineIndex;
  /** On-chain leased units per machine, from CapacityChanged events and machine reads. */
  private readonly usedUnits = new Map<number, number>();
  private readonly usedLoads = new Set<number>();
  private quorum = 1;
  /**
   * Resolves once the market index has read the contracts' past events. Offers, leases by id,
   * statistics and matching work before; lists of providers, machines and an address's leases are
   * complete after (GET /v1/health reports `index` degraded until then).
   */
  ready: Promise<void> = Promise.resolve();
  private readonly clock: () => number;
  private stopped = false;
  private readonly unhook: (() => void)[] = [];

  private constructor(
    private readonly deps: NodeMarketSourceDeps,
    index: MarketIndex,
  ) {
    this.index = index;
    this.clock = deps.now ?? Date.now;
    this.reputations = new ReputationCache((provider) => this.providerReads.get(getAddress(provider)), { now: () => this.nowSeconds() });
    this.offerIndex = new OfferEngineIndex({
      matching: deps.matching,
      reputations: this.reputations,
      now: () => this.nowSeconds(),
      // A private offer or a non-canonical model name: valid for the book, not matchable.
      onUnindexable: (key, error) => this.deps.logger.debug("Offer not indexed for matching", { key, reason: errorLine(error) }),
      onReputationError: (provider, error) => this.deps.logger.debug("Cannot read a provider's reputation; ranked as new", { provider, reason: errorLine(error) }),
    });
    this.engine = this.offerIndex.engine;
    this.stats = new StatsRecorder({ ...deps.stats, usedUnits: (entry) => this.usedUnits.get(entry.message.offer.machineId) });
    const cache = { maxEntries: deps.cache?.maxEntries ?? 10_000, ttlMs: deps.cache?.ttlMs ?? 60_000 };
    this.providerReads = new ReadCache((address) => readProvider(deps.publicClient, deps.registry, address as Address), cache);
    this.machineReads = new ReadCache((id) => readMachine(deps.publicClient, deps.registry, Number(id)), cache);
    this.recoverer = new TypedDataRecoverer(deps.deployment.chainId, deps.market);
  }

  /** Opens the market index, starts its backfill from the chain in the background (see `ready`) and follows the book. */
  static async start(deps: NodeMarketSourceDeps): Promise<NodeMarketSource> {
    const index = await MarketIndex.open({
      store: deps.store,
      publicClient: deps.publicClient,
      deployment: deps.deployment,
      market: deps.market,
      follower: deps.follower,
      logger: deps.logger.child({ module: "api-index" }),
    });
    const source = new NodeMarketSource(deps, index);
    await source.begin();
    return source;
  }

  private async begin(): Promise<void> {
    const { book } = this.deps;
    this.quorum = await this.deps.chainView.attestationQuorum().catch(() => 1);
    const onOffer = (entry: BookEntry) => this.onOffer(entry);
    const onRemoved = (entry: BookEntry, reason: RemovalReason) => this.onRemoved(entry, reason);
    // A revoked attestation or a new failure (failure notices) changes what the engine matches.
    const onAttestation = (entry: BookEntry) => this.upsertEngine(entry);
    book.on("offer", onOffer);
    book.on("removed", onRemoved);
    book.on("attestation", onAttestation);
    this.unhook.push(() => {
      book.off("offer", onOffer);
      book.off("removed", onRemoved);
      book.off("attestation", onAttestation);
    });
    const now = this.nowSeconds();
    for (const entry of book.all()) {
      this.upsertEngine(entry);
      this.stats.recordOffer(this.toEntry(entry), Math.min(now, Math.floor(entry.receivedAt / 1000)));
      this.watchCapacity(entry.machineId);
    }

    const { index } = this;
    const onProvider = (provider: Address) => this.providerChanged(provider);
    const onMachine = (machineId: number) => this.machineChanged(machineId);
    const onCapacity = (machineId: number, used: number) => this.capacityChanged(machineId, used);
    const onAttestors = () => runDetached(this.attestorsChanged(), this.deps.logger, "Reloading the attestors");
    const onLease = (lease: ChainLease) => this.leaseChanged(lease);
    index.on("provider", onProvider);
    index.on("machine", onMachine);
    index.on("capacity", onCapacity);
    index.on("attestors", onAttestors);
    index.on("lease", onLease);
    this.unhook.push(() => index.removeAllListeners());
    this.ready = index.start();
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    for (const unhook of this.unhook.splice(0)) unhook();
    this.listeners.clear();
    await this.index.stop();
  }

  private nowSeconds(): number {
    return Math.floor(this.clock() / 1000);
  }

  private emit(change: MarketChange): void {
    for (const listener of [...this.listeners]) {
      try {
        listener(change);
      } catch (error) {
        // a failing subscriber must not stop the others nor the book
        this.deps.logger.warn("Market change listener failed", { type: change.type }, error);
      }
    }
  }

  // ---- offers ----

  /** The attestations of a message with the address that signed each (cached per message). */
  private attestationSigners(message: OfferMessage): VerifiedAttestation[] {
    let signed = this.signers.get(message);
    if (!signed) {
      signed = [];
      for (const { attestation, signature } of message.attestations) {
        const signer = this.recoverer.recover(this.recoverer.digest("Attestation", attestation), signature);
        if (signer) signed.push({ attestor: signer, attestation });
      }
      this.signers.set(message, signed);
    }
    return signed;
  }

  /**
   * A book entry as the API's OfferEntry. The book verified every attestation of the message and
   * lists the attestors whose attestations were valid and current when it did; those are the ones
   * shown (they may have expired since: the view says so).
   */
  private toEntry(entry: BookEntry): OfferEntry {
    const verified = new Set(entry.attestation.attestors.map((address) => address.toLowerCase()));
    return {
      message: entry.message,
      verifiedAttestations: this.attestationSigners(entry.message).filter((signed) => verified.has(signed.attestor.toLowerCase())),
      attestedUntil: entry.attestation.attestedUntil,
      ccUntil: entry.attestation.ccUntil ?? null,
      attestFailuresUntil: failuresUntilOf(entry.attestation),
      ...(entry.attestation.lastFailureAt !== undefined ? { lastAttestFailureAt: entry.attestation.lastFailureAt } : {}),
      receivedAt: Math.floor(entry.receivedAt / 1000),
    };
  }

  private onOffer(entry: BookEntry): void {
    this.upsertEngine(entry);
    const view = this.toEntry(entry);
    this.stats.recordOffer(view, this.nowSeconds());
    this.watchCapacity(entry.machineId);
    this.emit({ type: "offer", entry: view });
  }

  private onRemoved(entry: BookEntry, reason: RemovalReason): void {
    // A removal of a version the engine no longer holds (replaced meanwhile) must not drop the newer one.
    const held = this.engine.get(entry.key);
    if (held && held.seq === entry.seq) this.offerIndex.remove(entry.key);
    const at = this.nowSeconds();
    this.stats.recordRemoval(entry.key, at);
    this.emit({ type: "offer-removed", key: entry.key, reason: removedReason(reason), at });
  }

  async queryOffers(filter: OfferFilter, page: Page): Promise<PageOf<OfferEntry>> {
    const now = this.nowSeconds();
    const { book } = this.deps;
    const candidates = filter.provider !== undefined ? book.byProvider(filter.provider) : book.all();
    const matching = candidates.filter((entry) => bookEntryMatches(entry, filter, now)).sort(bookComparator(filter.sort));
    const slice = paginate(matching, page);
    return { items: slice.items.map((entry) => this.toEntry(entry)), total: slice.total };
  }

  async getOffer(key: string): Promise<OfferEntry | undefined> {
    const entry = this.deps.book.get(key.toLowerCase());
    return entry && entry.expiry > this.nowSeconds() ? this.toEntry(entry) : undefined;
  }

  // ---- matching ----

  /** The attestation the engine ranks by: the quorum's, with the quorum-th most recent issue time. */
  private attestationKnowledge(entry: BookEntry): OfferKnowledge["attestation"] {
    return engineAttestation(entry.attestation, this.nowSeconds());
  }

  private upsertEngine(entry: BookEntry): void {
    if (this.stopped) return;
    this.offerIndex.putNow(entry.key, entry.message, this.attestationKnowledge(entry), null, failuresUntilOf(entry.attestation));
  }

  async matchDryRun(request: MatchRequest, limit?: number): Promise<MatchResult> {
    return toMatchResult(this.engine.match(request, limit === undefined ? {} : { limit }), this.nowSeconds());
  }

  // ---- chain changes ----

  private providerChanged(provider: Address): void {
    this.providerReads.delete(getAddress(provider));
    if (this.reputations.has(provider) && !this.stopped) {
      this.offerIndex.refreshProvider(provider).catch((error: unknown) => this.deps.logger.debug("Cannot read a provider's reputation", { provider, reason: errorLine(error) }));
    }
  }

  private machineChanged(machineId: number): void {
    this.machineReads.delete(String(machineId));
    this.usedUnits.delete(machineId);
    this.watchCapacity(machineId);
  }

  private capacityChanged(machineId: number, used: number): void {
    this.machineReads.delete(String(machineId));
    this.usedUnits.set(machineId, used);
    this.recordMachine(machineId);
  }

  private async attestorsChanged(): Promise<void> {
    // The daemon's handler ran first (the follower calls subscribers in order): the book's states are current.
    this.quorum = await this.deps.chainView.attestationQuorum().catch(() => this.quorum);
    for (const entry of this.deps.book.all()) this.upsertEngine(entry);
  }

  private leaseChanged(lease: ChainLease): void {
    // Opening, ending and claiming move the provider's collateral and counters, and the machine's units.
    this.providerChanged(lease.provider);
    this.machineReads.delete(String(lease.machineId));
    const view = toLeaseView(lease);
    if (view) this.emit({ type: "lease", lease: view });
  }

  /** Records a sample for the live offer of a machine (its utilization changed). */
  private recordMachine(machineId: number): void {
    const now = this.nowSeconds();
    for (const entry of this.deps.book.byMachine(machineId)) if (entry.expiry > now) this.stats.recordOffer(this.toEntry(entry), now);
  }

  /** Learns a machine's on-chain use once; CapacityChanged events keep it current after that. */
  private watchCapacity(machineId: number): void {
    if (this.usedUnits.has(machineId) || this.usedLoads.has(machineId) || this.stopped) return;
    this.usedLoads.add(machineId);
    this.machineReads
      .get(String(machineId))
      .then((machine) => {
        if (machine.owner === ZERO_ADDRESS || this.usedUnits.has(machineId)) return;
        this.usedUnits.set(machineId, machine.onDemandUnits + machine.interruptibleUnits);
        this.recordMachine(machineId);
      })
      .catch((error: unknown) => this.deps.logger.debug("Cannot read a machine's use", { machineId, reason: errorLine(error) }))
      .finally(() => this.usedLoads.delete(machineId));
  }

  // ---- providers and machines ----

  private async chainProvider(address: Address): Promise<ChainProvider | undefined> {
    const record = await this.providerReads.get(getAddress(address));
    // The registry answers zeros for an address that never registered.
    if (!record.registered && record.stake === 0n && record.peerId === "") return undefined;
    return record;
  }

  private async machineView(machineId: number, now: number): Promise<MachineView | undefined> {
    const machine = await this.machineReads.get(String(machineId));
    if (machine.owner === ZERO_ADDRESS) return undefined;
    const key = offerKey(machine.owner, machineId);
    const live = this.deps.book.get(key);
    const current = live && live.expiry > now ? live : undefined;
    const offer = current && { key, model: current.message.offer.model, modelName: current.message.machine.model };
    const entry = current && this.toEntry(current);
    const attestations = entry ? entry.verifiedAttestations.map((signed) => toAttestationView(signed, now)) : [];
    const { attestFailures, lastAttestFailureAt } = entry ? failuresView(entry, now) : { attestFailures: 0, lastAttestFailureAt: null };
    return toMachineView(machine, offer, attestations, { attestFailures, lastAttestFailureAt });
  }

  private async providerView(address: Address, record: ChainProvider, now: number): Promise<ProviderView> {
    const machines = await mapBounded(this.index.machinesOf(address), READ_CONCURRENCY, (id) => this.machineView(id, now));
    return toProviderView(address, record, machines);
  }

  async getProvider(address: Address): Promise<ProviderView | undefined> {
    const record = await this.chainProvider(address);
    return record && this.providerView(address, record, this.nowSeconds());
  }

  async listProviders(query: Pick<ProviderListQuery, "sort">, page: Page): Promise<PageOf<ProviderView>> {
    const now = this.nowSeconds();
    const addresses = this.index.providers();
    const records = await mapBounded(addresses, READ_CONCURRENCY, async (address) => ({ address, record: await this.chainProvider(address) }));
    const known = records.filter((item): item is { address: Address; record: ChainProvider } => item.record !== undefined);
    const byAddress = (a: { address: Address }, b: { address: Address }) => (a.address.toLowerCase() < b.address.toLowerCase() ? -1 : 1);
    known.sort((a, b) => {
      if (query.sort === "reputation") return compareBigint(b.record.leasesCompleted, a.record.leasesCompleted) || byAddress(a, b);
      if (query.sort === "machines") return this.index.machinesOf(b.address).length - this.index.machinesOf(a.address).length || byAddress(a, b);
      return compareBigint(b.record.stake, a.record.stake) || byAddress(a, b);
    });
    const slice = paginate(known, page);
    return { items: await mapBounded(slice.items, READ_CONCURRENCY, (item) => this.providerView(item.address, item.record, now)), total: slice.total };
  }

  async listMachines(filter: MachineFilter, page: Page): Promise<PageOf<MachineView>> {
    const now = this.nowSeconds();
    const ids = filter.provider !== undefined ? this.index.machinesOf(filter.provider) : this.index.machineIds();
    const machines = await mapBounded(ids, READ_CONCURRENCY, (id) => this.machineView(id, now));
    const matching = machines.filter(
      (machine): machine is MachineView =>
        machine !== undefined &&
        (filter.model === undefined || machine.model === filter.model) &&
        (filter.region === undefined || machine.region.toLowerCase() === filter.region.toLowerCase()) &&
        (filter.minUnits === undefined || machine.units >= filter.minUnits),
    );
    return paginate(matching, page);
  }

  reputationOf(provider: Address): MatchingReputation | undefined {
    return this.reputations.peek(provider);
  }

  getMachine(machineId: number): Promise<MachineView | undefined> {
    return this.machineView(machineId, this.nowSeconds());
  }

  // ---- leases ----

  async getLease(id: bigint): Promise<LeaseView | undefined> {
    return toLeaseView(await readLease(this.deps.publicClient, this.deps.market, id));
  }

  async leasesByAddress(address: Address, role: LeaseRole, status: LeaseStatus | undefined, page: Page): Promise<PageOf<LeaseView>> {
    let ids = await this.index.leaseIdsOf(address, role);
    if (status !== undefined) {
      const summaries = await mapBounded(ids, READ_CONCURRENCY, (id) => this.index.lease(id));
      ids = ids.filter((_, i) => summaries[i]?.status === status);
    }
    const slice = paginate(ids, page);
    const leases = await mapBounded(slice.items, READ_CONCURRENCY, (id) => this.getLease(id));
    return { items: leases.filter((lease): lease is LeaseView => lease !== undefined), total: slice.total };
  }

  // ---- statistics, changes, health ----

  async marketStats(window: StatsWindow): Promise<MarketStats> {
    const now = this.nowSeconds();
    const live = this.deps.book.all().filter((entry) => entry.expiry > now);
    return this.stats.compute(
      window,
      live.map((entry) => this.toEntry(entry)),
      now,
    );
  }

  subscribe(listener: MarketListener): () => void {
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
    };
  }

  async health(): Promise<HealthCheck[]> {
    const checks: HealthCheck[] = [];
    try {
      const block = await this.deps.publicClient.getBlockNumber({ cacheTime: 0 });
      checks.push({ name: "chain", status: "ok", detail: `chain ${this.deps.deployment.chainId} at block ${block}; events read to block ${this.deps.follower.head}` });
    } catch (error) {
      checks.push({ name: "chain", status: "down", detail: errorLine(error) });
    }
    const indexError = this.index.lastError;
    checks.push(
      this.index.ready
        ? { name: "index", status: "ok", detail: `providers, machines and leases indexed to block ${this.index.nextBlock - 1n}` }
        : {
            name: "index",
            status: "degraded",
            detail: `reading the contracts' past events (at block ${this.index.nextBlock}); provider, machine and lease lists are incomplete until done${indexError ? `; last attempt failed: ${errorLine(indexError)}` : ""}`,
          },
    );
    const peers = this.deps.host.getPeers().length;
    checks.push(
      peers > 0
        ? { name: "p2p", status: "ok", detail: `${peers} peer${peers === 1 ? "" : "s"}` }
        : { name: "p2p", status: "degraded", detail: "no peers: offers published elsewhere cannot arrive (check p2p.bootstrap)" },
    );
    const { book } = this.deps;
    checks.push(
      book.size < book.capacity
        ? { name: "offers", status: "ok", detail: `${book.size} offers in the book, ${this.engine.size} matchable` }
        : { name: "offers", status: "degraded", detail: `the book is full (${book.capacity} offers): new machines are ignored (offers.maxBookSize)` },
    );
    return checks;
  }
}

/**
 * A MarketDataSource held in memory: the fixture the API's route tests serve from, so that they
 * can set up exact market states (offers at given times, providers with given records, leases in
 * every status) and move the clock. The caller feeds it (putOffer, putProvider, putLease); it
 * filters, pages and records statistics with the API's own helpers and matches with the real
 * MatchingEngine. A node serves NodeMarketSource (node/api/node-source.ts) instead.
 */
import type { Address, PublicClient } from "viem";
import type { LeaseRole, LeaseStatus, LeaseView, MachineFilter, MachineView, ProviderListQuery, ProviderView } from "../../common/api/chain.js";
import type { OfferRemovedReason } from "../../common/api/events.js";
import type { HealthCheck, MarketStats, MatchRequest, MatchResult, StatsWindow } from "../../common/api/market.js";
import type { OfferFilter } from "../../common/api/offers.js";
import { MatchingEngine } from "../../common/matching/engine.js";
import { offerEntryFromMessage } from "../../common/matching/entry.js";
import { offerKey } from "../../common/offers/message.js";
import { toMatchResult } from "../../node/api/match-view.js";
import { attestationCovers, entryKey, offerComparator, offerMatchesFilter } from "../../node/api/offer-view.js";
import type { MarketChange, MarketDataSource, MarketListener, OfferEntry, Page, PageOf } from "../../node/api/source.js";
import { StatsRecorder, type StatsRecorderOptions } from "../../node/api/stats.js";

export type InMemoryMarketSourceOptions = {
  /** Clock in milliseconds (tests move it). Default Date.now. */
  now?: () => number;
  /** When given, health() checks that the chain answers. */
  publicClient?: PublicClient;
  stats?: StatsRecorderOptions;
};

function paginate<T>(items: T[], page: Page): PageOf<T> {
  return { items: items.slice(page.offset, page.offset + page.limit), total: items.length };
}

export class InMemoryMarketSource implements MarketDataSource {
  private readonly offers = new Map<string, OfferEntry>();
  private readonly providers = new Map<string, ProviderView>();
  private readonly leases = new Map<bigint, LeaseView>();
  private readonly listeners = new Set<MarketListener>();
  private readonly clock: () => number;
  readonly stats: StatsRecorder;
  readonly engine: MatchingEngine;

  constructor(private readonly options: InMemoryMarketSourceOptions = {}) {
    this.clock = options.now ?? Date.now;
    this.stats = new StatsRecorder(options.stats);
    this.engine = new MatchingEngine({}, { now: () => this.nowSeconds() });
  }

  /** Indexes an offer for matching with what this source knows: its verified attestations and the provider's record. */
  private index(entry: OfferEntry): void {
    const now = this.nowSeconds();
    const current = entry.verifiedAttestations.filter((verified) => attestationCovers(entry, verified, now)).map((verified) => verified.attestation);
    const held = this.providers.get(entry.message.offer.provider.toLowerCase())?.reputation;
    // The matching engine takes the chain's counters; uptimePercent is derived from them for the API.
    const reputation = held
      ? { leasesCompleted: held.leasesCompleted, faults: held.faults, unitSecondsDelivered: held.unitSecondsDelivered }
      : { leasesCompleted: 0, faults: 0, unitSecondsDelivered: 0n };
    this.engine.upsert(
      offerEntryFromMessage(entry.message, {
        attestation: current.length ? { attestedAt: Math.max(...current.map((a) => a.issuedAt)), expiry: Math.max(...current.map((a) => a.expiry)) } : null,
        reputation,
        latencyMs: null,
      }),
    );
  }

  private nowSeconds(): number {
    return Math.floor(this.clock() / 1000);
  }

  private emit(change: MarketChange): void {
    for (const listener of [...this.listeners]) {
      try {
        listener(change);
      } catch {
        // a failing subscriber must not stop the others nor the writer
      }
    }
  }

  // ---- feeding ----

  /**
   * Adds or replaces the offer of a provider machine. Like the book, it keeps only the newest
   * version: a message whose seq is not above the held one is ignored (returns false).
   */
  putOffer(entry: OfferEntry): boolean {
    const key = entryKey(entry);
    const held = this.offers.get(key);
    if (held && held.message.seq >= entry.message.seq) return false;
    this.offers.set(key, entry);
    this.index(entry);
    this.stats.recordOffer(entry, entry.receivedAt);
    this.emit({ type: "offer", entry });
    return true;
  }

  removeOffer(key: string, reason: OfferRemovedReason): boolean {
    const normalized = key.toLowerCase();
    if (!this.offers.delete(normalized)) return false;
    this.engine.remove(normalized);
    const at = this.nowSeconds();
    this.stats.recordRemoval(normalized, at);
    this.emit({ type: "offer-removed", key: normalized, reason, at });
    return true;
  }

  putProvider(provider: ProviderView): void {
    this.providers.set(provider.address.toLowerCase(), provider);
    for (const entry of this.offers.values()) if (entry.message.offer.provider.toLowerCase() === provider.address.toLowerCase()) this.index(entry);
  }

  putLease(lease: LeaseView): void {
    this.leases.set(lease.id, lease);
    this.emit({ type: "lease", lease });
  }

  // ---- MarketDataSource ----

  async queryOffers(filter: OfferFilter, page: Page): Promise<PageOf<OfferEntry>> {
    const now = this.nowSeconds();
    const matching = [...this.offers.values()].filter((entry) => offerMatchesFilter(entry, filter, now));
    matching.sort(offerComparator(filter.sort));
    return paginate(matching, page);
  }

  async getOffer(key: string): Promise<OfferEntry | undefined> {
    const entry = this.offers.get(key.toLowerCase());
    return entry && entry.message.offer.expiry > this.nowSeconds() ? entry : undefined;
  }

  private withLiveOffers(provider: ProviderView): ProviderView {
    return { ...provider, machines: provider.machines.map((machine) => this.withLiveOffer(machine)) };
  }

  private withLiveOffer(machine: MachineView): MachineView {
    const key = offerKey(machine.provider, machine.machineId);
    const entry = this.offers.get(key);
    return { ...machine, offerKey: entry && entry.message.offer.expiry > this.nowSeconds() ? key : null };
  }

  async listProviders(query: Pick<ProviderListQuery, "sort">, page: Page): Promise<PageOf<ProviderView>> {
    const all = [...this.providers.values()].map((provider) => this.withLiveOffers(provider));
    const byAddress = (a: ProviderView, b: ProviderView) => (a.address.toLowerCase() < b.address.toLowerCase() ? -1 : 1);
    all.sort((a, b) => {
      if (query.sort === "reputation") return b.reputation.leasesCompleted - a.reputation.leasesCompleted || byAddress(a, b);
      if (query.sort === "machines") return b.machines.length - a.machines.length || byAddress(a, b);
      return a.stake === b.stake ? byAddress(a, b) : a.stake > b.stake ? -1 : 1;
    });
    return paginate(all, page);
  }

  async getProvider(address: Address): Promise<ProviderView | undefined> {
    const provider = this.providers.get(address.toLowerCase());
    return provider && this.withLiveOffers(provider);
  }

  private allMachines(): MachineView[] {
    return [...this.providers.values()].flatMap((provider) => provider.machines.map((machine) => this.withLiveOffer(machine)));
  }

  async listMachines(filter: MachineFilter, page: Page): Promise<PageOf<MachineView>> {
    const machines = this.allMachines()
      .filter(
        (machine) =>
          (filter.provider === undefined || machine.provider.toLowerCase() === filter.provider.toLowerCase()) &&
          (filter.model === undefined || machine.model === filter.model) &&
          (filter.region === undefined || machine.region.toLowerCase() === filter.region.toLowerCase()) &&
          (filter.minUnits === undefined || machine.units >= filter.minUnits),
      )
      .sort((a, b) => a.machineId - b.machineId);
    return paginate(machines, page);
  }

  async getMachine(machineId: number): Promise<MachineView | undefined> {
    return this.allMachines().find((machine) => machine.machineId === machineId);
  }

  async getLease(id: bigint): Promise<LeaseView | undefined> {
    return this.leases.get(id);
  }

  async leasesByAddress(address: Address, role: LeaseRole, status: LeaseStatus | undefined, page: Page): Promise<PageOf<LeaseView>> {
    const who = address.toLowerCase();
    const leases = [...this.leases.values()]
      .filter((lease) => {
        const asRenter = lease.renter.toLowerCase() === who;
        const asProvider = lease.provider.toLowerCase() === who;
        const roleOk = role === "renter" ? asRenter : role === "provider" ? asProvider : asRenter || asProvider;
        return roleOk && (status === undefined || lease.status === status);
      })
      .sort((a, b) => (a.id === b.id ? 0 : a.id > b.id ? -1 : 1));
    return paginate(leases, page);
  }

  async marketStats(window: StatsWindow): Promise<MarketStats> {
    return this.stats.compute(window, [...this.offers.values()], this.nowSeconds());
  }

  async matchDryRun(request: MatchRequest, limit?: number): Promise<MatchResult> {
    return toMatchResult(this.engine.match(request, limit === undefined ? {} : { limit }));
  }

  subscribe(listener: MarketListener): () => void {
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
    };
  }

  /** Number of current subscribers (tests check that disconnects unsubscribe). */
  get subscriberCount(): number {
    return this.listeners.size;
  }

  async health(): Promise<HealthCheck[]> {
    const now = this.nowSeconds();
    const live = [...this.offers.values()].filter((entry) => entry.message.offer.expiry > now).length;
    const checks: HealthCheck[] = [{ name: "offers", status: "ok", detail: `${live} live offers (in-memory source)` }];
    const client = this.options.publicClient;
    if (client) {
      try {
        const [chainId, block] = await Promise.all([client.getChainId(), client.getBlockNumber({ cacheTime: 0 })]);
        checks.push({ name: "chain", status: "ok", detail: `chain ${chainId} at block ${block}` });
      } catch (error) {
        checks.push({ name: "chain", status: "down", detail: error instanceof Error ? error.message.split("\n")[0]! : String(error) });
      }
    }
    return checks;
  }
}

/**
 * A MarketDataSource held in memory: what tests and the devnet demo serve the API from, and a
 * reference for adapters over the real offer book, chain reader and matcher. The caller feeds it
 * (putOffer, putProvider, putLease); it filters, pages, records statistics, matches with the
 * reference matcher and signs reservation acceptances for the providers whose keys it was given.
 */
import type { Address, Hex, LocalAccount, PublicClient } from "viem";
import type { LeaseRole, LeaseStatus, LeaseView, MachineFilter, MachineView, ProviderListQuery, ProviderView } from "../../common/api/chain.js";
import type { OfferRemovedReason } from "../../common/api/events.js";
import type { HealthCheck, MarketStats, MatchRequest, MatchResult, ReservationAnswer, StatsWindow } from "../../common/api/market.js";
import type { OfferFilter } from "../../common/api/offers.js";
import { suanliTypes, type Offer, type ReserveRequest } from "../../common/eip712.js";
import { offerKey } from "../../common/offers/message.js";
import { entryKey, offerComparator, offerMatchesFilter } from "./offer-view.js";
import { referenceMatch } from "./reference-match.js";
import type { MarketChange, MarketDataSource, MarketListener, OfferEntry, Page, PageOf } from "./source.js";
import { StatsRecorder, type StatsRecorderOptions } from "./stats.js";

export type InMemoryMarketSourceOptions = {
  /** Clock in milliseconds (tests move it). Default Date.now. */
  now?: () => number;
  /** When given, health() checks that the chain answers. */
  publicClient?: PublicClient;
  /** EIP-712 domain of reservation acceptances (chain id and LeaseMarket). */
  domain?: { chainId: number; verifyingContract: Address };
  /** How long a provider holds reserved units, seconds (default 120). */
  holdSeconds?: number;
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
  private readonly signers = new Map<string, LocalAccount>();
  private readonly clock: () => number;
  readonly stats: StatsRecorder;

  constructor(private readonly options: InMemoryMarketSourceOptions = {}) {
    this.clock = options.now ?? Date.now;
    this.stats = new StatsRecorder(options.stats);
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
    this.stats.recordOffer(entry, entry.receivedAt);
    this.emit({ type: "offer", entry });
    return true;
  }

  removeOffer(key: string, reason: OfferRemovedReason): boolean {
    const normalized = key.toLowerCase();
    if (!this.offers.delete(normalized)) return false;
    const at = this.nowSeconds();
    this.stats.recordRemoval(normalized, at);
    this.emit({ type: "offer-removed", key: normalized, reason, at });
    return true;
  }

  putProvider(provider: ProviderView): void {
    this.providers.set(provider.address.toLowerCase(), provider);
  }

  putLease(lease: LeaseView): void {
    this.leases.set(lease.id, lease);
    this.emit({ type: "lease", lease });
  }

  /** Lets the source sign reservation acceptances for this provider (the devnet demo's providers). */
  addProviderSigner(account: LocalAccount): void {
    this.signers.set(account.address.toLowerCase(), account);
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

  async matchDryRun(request: MatchRequest): Promise<MatchResult> {
    return referenceMatch(
      [...this.offers.values()],
      (provider) => this.providers.get(provider.toLowerCase())?.reputation,
      request,
      this.nowSeconds(),
    );
  }

  async reserve(request: ReserveRequest, _signature: Hex): Promise<ReservationAnswer> {
    const entry = await this.getOffer(offerKey(request.provider, request.machineId));
    if (!entry) return { accepted: false, reason: "no-such-offer", message: `No live offer for machine ${request.machineId} of ${request.provider}` };
    const { offer, capacity } = entry.message;
    if (request.duration < offer.minDuration || request.duration > offer.maxDuration) {
      return { accepted: false, reason: "duration-out-of-range", message: `The offer accepts ${offer.minDuration}..${offer.maxDuration} s` };
    }
    if (request.interruptible && offer.minBidPerUnitSecond === 0n) {
      return { accepted: false, reason: "interruptible-not-offered", message: "The machine sells no interruptible capacity" };
    }
    if (request.interruptible && request.bidPerUnitSecond < offer.minBidPerUnitSecond) {
      return { accepted: false, reason: "bid-too-low", message: `The minimum bid is ${offer.minBidPerUnitSecond} per unit-second` };
    }
    if (request.units > capacity.freeUnits) {
      return { accepted: false, reason: "insufficient-capacity", message: `${capacity.freeUnits} units are free` };
    }
    const signer = this.signers.get(request.provider.toLowerCase());
    if (!signer || !this.options.domain) {
      return { accepted: false, reason: "provider-unreachable", message: "The provider did not answer the reservation" };
    }
    const holdUntil = this.nowSeconds() + (this.options.holdSeconds ?? 120);
    const acceptance: Offer = { ...offer, renter: request.renter, expiry: holdUntil };
    const signature = await signer.signTypedData({
      domain: { name: "Suanli", version: "1", ...this.options.domain },
      types: { Offer: suanliTypes.Offer },
      primaryType: "Offer",
      message: acceptance,
    });
    return { accepted: true, acceptance: { offer: acceptance, signature }, holdUntil };
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
        checks.push({ name: "chain", status: "down", detail: error instanceof Error ? error.message.split("\n")[0] : String(error) });
      }
    }
    return checks;
  }
}

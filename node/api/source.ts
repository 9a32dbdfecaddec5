/**
 * What the HTTP API reads from: the node's offer book, its chain reader and its matching engine,
 * behind one interface so the API does not depend on how they are built. The node's composition
 * root passes an adapter over the real parts; tests and the devnet demo pass InMemoryMarketSource
 * (node/api/memory-source.ts).
 *
 * Offers are the gossiped messages themselves (common/offers/message.ts) plus what the book
 * verified; providers, machines and leases are in the API's shapes (common/api/chain.ts), which
 * mirror the contracts. Amounts are bigints.
 */
import type { Address, Hex } from "viem";
import type { LeaseRole, LeaseStatus, LeaseView, MachineFilter, MachineView, ProviderListQuery, ProviderView } from "../../common/api/chain.js";
import type { OfferRemovedReason } from "../../common/api/events.js";
import type { HealthCheck, MarketStats, MatchRequest, MatchResult, ReservationAnswer, StatsWindow } from "../../common/api/market.js";
import type { OfferFilter } from "../../common/api/offers.js";
import type { Attestation, ReserveRequest } from "../../common/eip712.js";
import type { OfferMessage } from "../../common/offers/message.js";

/** An attestation whose signature the node checked: the signer holds ATTESTOR_ROLE. */
export type VerifiedAttestation = { attestor: Address; attestation: Attestation };

/** An offer in the book: the message as gossiped plus what the node verified about it. */
export type OfferEntry = {
  /** The message as received (its offer signature verified, the provider registered and staked). */
  message: OfferMessage;
  /** The message's attestations whose signers the node verified; expired ones may be included. */
  verifiedAttestations: VerifiedAttestation[];
  /** When the node received this version, unix seconds. */
  receivedAt: number;
};

export type Page = { limit: number; offset: number };
export type PageOf<T> = { items: T[]; total: number };

/** A change in the market, pushed to subscribers as it happens. */
export type MarketChange =
  | { type: "offer"; entry: OfferEntry }
  | { type: "offer-removed"; key: string; reason: OfferRemovedReason; at: number }
  | { type: "lease"; lease: LeaseView };

export type MarketListener = (change: MarketChange) => void;

export interface MarketDataSource {
  /**
   * Live (unexpired) offers matching every given filter, sorted by `filter.sort`, one page of
   * them plus the total. `attested` means: a verified attestation whose expiry is in the future.
   */
  queryOffers(filter: OfferFilter, page: Page): Promise<PageOf<OfferEntry>>;
  /** The live offer of a book key (`offerKey(provider, machineId)`), or undefined. */
  getOffer(key: string): Promise<OfferEntry | undefined>;
  listProviders(query: Pick<ProviderListQuery, "sort">, page: Page): Promise<PageOf<ProviderView>>;
  /** A provider's registry record, or undefined when the address never registered. */
  getProvider(address: Address): Promise<ProviderView | undefined>;
  listMachines(filter: MachineFilter, page: Page): Promise<PageOf<MachineView>>;
  getMachine(machineId: number): Promise<MachineView | undefined>;
  getLease(id: bigint): Promise<LeaseView | undefined>;
  /** Leases of an address as renter, provider or either, newest first. */
  leasesByAddress(address: Address, role: LeaseRole, status: LeaseStatus | undefined, page: Page): Promise<PageOf<LeaseView>>;
  /** Price percentiles and utilization by model over a window (node/api/stats.ts computes them from samples). */
  marketStats(window: StatsWindow): Promise<MarketStats>;
  /** Runs the matching engine without reserving anything: ranked candidates, or why nothing matched. */
  matchDryRun(request: MatchRequest): Promise<MatchResult>;
  /**
   * Forwards a renter's reservation to the provider (reserve protocol) and returns its answer.
   * The API has already checked the renter's signature, freshness and replay.
   */
  reserve(request: ReserveRequest, signature: Hex): Promise<ReservationAnswer>;
  /** Pushes every offer and lease change to `listener` until the returned function is called. */
  subscribe(listener: MarketListener): () => void;
  /** The state of what the source depends on (chain, offer book, p2p). */
  health(): Promise<HealthCheck[]>;
}

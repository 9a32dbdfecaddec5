/**
 * What the HTTP API reads from: the node's offer book, its chain reader and its matching engine,
 * behind one interface so the API does not depend on how they are built. A node serves
 * NodeMarketSource (node/api/node-source.ts, over the daemon's book, chain and p2p host); route
 * tests use an in-memory fixture (test/support/memory-source.ts).
 *
 * Offers are the gossiped messages themselves (common/offers/message.ts) plus what the book
 * verified; providers, machines and leases are in the API's shapes (common/api/chain.ts), which
 * mirror the contracts. Amounts are bigints.
 */
import type { Address, Hex } from "viem";
import type { LeaseRole, LeaseStatus, LeaseView, MachineFilter, MachineView, ProviderListQuery, ProviderView } from "../../common/api/chain.js";
import type { OfferRemovedReason } from "../../common/api/events.js";
import type { HealthCheck, MarketStats, MatchRequest, MatchResult, ReservationBody, StatsWindow } from "../../common/api/market.js";
import type { OfferFilter } from "../../common/api/offers.js";
import type { OutputRelayBody, RelayAction, RelayBody } from "../../common/api/relay.js";
import type { OutputManifest } from "../../common/protocols/task-io.js";
import type { Attestation, ReserveRequest } from "../../common/eip712.js";
import type { ReserveReply } from "../../common/matching/handshake.js";
import type { Reputation as MatchingReputation } from "../../common/matching/entry.js";
import type { OfferMessage } from "../../common/offers/message.js";

/** An attestation whose signature the node checked: the signer holds ATTESTOR_ROLE. */
export type VerifiedAttestation = { attestor: Address; attestation: Attestation };

/** An offer in the book: the message as gossiped plus what the node verified about it. */
export type OfferEntry = {
  /** The message as received (its offer signature verified, the provider registered and staked). */
  message: OfferMessage;
  /** The message's attestations whose signers the node verified; expired ones may be included. */
  verifiedAttestations: VerifiedAttestation[];
  /**
   * Until when the offer counts as attested under the on-chain attestor quorum (null: it does not).
   * Absent: any current verified attestation counts (a quorum of one).
   */
  attestedUntil?: number | null;
  /**
   * Until when a quorum of its attestations verified the GPUs by confidential-computing evidence
   * (null: they did not). Absent: any current verified attestation with a non-zero `cc` counts.
   */
  ccUntil?: number | null;
  /**
   * Until when each of the machine's signed failures counts (attestations' `failures` and
   * attestors' failure notices; AttestationState.failuresUntil), ascending. Absent: none.
   */
  attestFailuresUntil?: readonly number[];
  /** The latest of those failures (unix seconds); absent with none. */
  lastAttestFailureAt?: number;
  /** When the node received this version, unix seconds. */
  receivedAt: number;
};

export type Page = { limit: number; offset: number };
export type PageOf<T> = { items: T[]; total: number };

/** A change in the market, pushed to subscribers as it happens. */
export type MarketChange =
  { type: "offer"; entry: OfferEntry } | { type: "offer-removed"; key: string; reason: OfferRemovedReason; at: number } | { type: "lease"; lease: LeaseView };

export type MarketListener = (change: MarketChange) => void;

export interface MarketDataSource {
  /**
   * Live (unexpired) offers matching every given filter, sorted by `filter.sort`, one page of
   * them plus the total. `attested` means: a verified attestation whose expiry is in the future.
   */
  queryOffers(filter: OfferFilter, page: Page): Promise<PageOf<OfferEntry>>;
  /** The live offer of a book key (`offerKey(provider, machineId)`), or undefined. */
  getOffer(key: string): Promise<OfferEntry | undefined>;
  /**
   * The provider's on-chain reputation counters when the source already holds them (no chain read:
   * offers are listed by the page), or undefined; offer views show them beside each offer.
   */
  reputationOf?(provider: Address): MatchingReputation | undefined;
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
  /**
   * Runs the matching engine without reserving anything: ranked candidates (at most `limit`,
   * default the engine's maxCandidates), or why nothing matched.
   */
  matchDryRun(request: MatchRequest, limit?: number): Promise<MatchResult>;
  /** Pushes every offer and lease change to `listener` until the returned function is called. */
  subscribe(listener: MarketListener): () => void;
  /** The state of what the source depends on (chain, offer book, p2p). */
  health(): Promise<HealthCheck[]>;
}

/**
 * Forwards renters' signed requests to providers over the lease protocols, for clients without
 * libp2p. The API has checked the body's schema first; the relay checks what needs the chain
 * (the lease, its renter's signature) and finds the provider's peer.
 */
export interface ProviderRelay {
  /**
   * Forwards a reservation (reserve protocol) and returns the provider's answer. The API has
   * already checked the renter's signature, freshness and replay.
   */
  reserve(request: ReserveRequest, signature: Hex, delegation?: ReservationBody["delegation"]): Promise<ReserveReply>;
  /**
   * Forwards a renter-signed lease request unchanged (`raw`: the body as received) to the lease's
   * provider and returns its answer, parsed with the protocol's answer schema. Throws the API
   * error to answer with (unknown lease, bad signature, provider unreachable, provider's error).
   */
  forward(action: RelayAction, leaseId: bigint, body: RelayBody, raw: unknown): Promise<unknown>;
  /**
   * Opens an output download (list or read) at the lease's provider with the renter's body
   * unchanged, after the same checks as `forward`. Absent on relays that cannot stream.
   */
  openOutput?(leaseId: bigint, body: OutputRelayBody, raw: unknown, signal?: AbortSignal): Promise<OutputRead>;
}

/** An output download opened at a provider: its manifest and the bytes from the requested start. */
export type OutputRead = {
  manifest: OutputManifest;
  /** Bytes `bytes` will yield (0 for a list). */
  remaining: number;
  /** The file bytes in manifest order; acknowledged to the provider as they are consumed. */
  bytes: AsyncGenerator<Uint8Array>;
  /** Stops the provider's stream (the HTTP client went away). */
  abort(reason: Error): void;
};

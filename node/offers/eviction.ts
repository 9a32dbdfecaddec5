/**
 * Keeps the book honest over time: offers leave when they expire, and when the chain says
 * their provider or machine changed (the chain follower calls the `on*` hooks on registry
 * events). A hook invalidates the cached chain records, re-reads them and re-checks every
 * affected offer; one that would no longer pass validation is evicted.
 */
import type { Address } from "viem";
import type { CachedChainView } from "../../common/offers/chain-view.js";
import type { OfferRejectReason, OfferValidator } from "../../common/offers/validate.js";
import type { Logger } from "../log/logger.js";
import type { Metrics } from "../metrics/metrics.js";
import type { BookEntry, OfferBook, RemovalReason } from "./book.js";

const REMOVAL_FOR: Partial<Record<OfferRejectReason, RemovalReason>> = {
  unregistered: "unregistered",
  peer_id_mismatch: "peer_id_mismatch",
  understaked: "understaked",
  nonce_revoked: "nonce_revoked",
  machine_undeclared: "machine_removed",
  machine_not_owned: "machine_changed",
  machine_mismatch: "machine_changed",
};

export type OfferEvictionOptions = {
  book: OfferBook;
  validator: OfferValidator;
  chain: CachedChainView;
  metrics: Metrics;
  logger: Logger;
  /** How often expired offers are swept. */
  sweepIntervalMs: number;
};

/**
 * @example
 * const eviction = new OfferEviction({ book, validator, chain, metrics, logger, sweepIntervalMs: 1_000 });
 * eviction.start();
 * await follower.subscribe("offers", (event) => eviction.onProviderChanged(event.args.provider));
 */
export class OfferEviction {
  private timer: ReturnType<typeof setInterval> | undefined;

  constructor(private readonly options: OfferEvictionOptions) {}

  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => this.sweep(), this.options.sweepIntervalMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Removes expired offers now; returns how many. */
  sweep(): number {
    const removed = this.options.book.sweepExpired();
    if (removed.length) {
      this.options.metrics.offersEvicted.inc({ reason: "expired" }, removed.length);
      this.options.metrics.bookOffers.set(this.options.book.size);
    }
    return removed.length;
  }

  /**
   * The provider's registration, stake, peer id or revoked nonces changed on-chain
   * (Registered, Deregistered, Staked, UnstakeRequested, collateral locked or released,
   * ProfileUpdated, NonceRevoked). Returns how many of its offers were evicted.
   */
  async onProviderChanged(provider: Address): Promise<number> {
    this.options.chain.invalidateProvider(provider);
    return this.recheck(this.options.book.byProvider(provider));
  }

  /** A machine was removed from the registry: its offers go at once. */
  async onMachineRemoved(machineId: number): Promise<number> {
    this.options.chain.invalidateMachine(machineId);
    let removed = 0;
    for (const entry of this.options.book.byMachine(machineId)) {
      if (this.options.book.remove(entry.key, "machine_removed")) removed++;
    }
    this.count("machine_removed", removed);
    return removed;
  }

  /** A machine's declaration changed: offers describing it otherwise are evicted. */
  async onMachineChanged(machineId: number): Promise<number> {
    this.options.chain.invalidateMachine(machineId);
    return this.recheck(this.options.book.byMachine(machineId));
  }

  /** The attestor set or quorum changed: every offer's attestation state is recomputed. */
  async onAttestorsChanged(): Promise<void> {
    this.options.chain.invalidateAttestors();
    for (const entry of this.options.book.all()) {
      try {
        this.options.book.setAttestation(entry.key, await this.options.validator.attestationState(entry.message), entry.seq);
      } catch (error) {
        this.options.logger.warn("Cannot recompute an offer's attestation state", { key: entry.key }, error);
      }
    }
  }

  /** Re-checks every offer against the chain (after a restart, the chain may have moved). */
  async recheckAll(): Promise<number> {
    return this.recheck(this.options.book.all());
  }

  private async recheck(entries: BookEntry[]): Promise<number> {
    let removed = 0;
    for (const entry of entries) {
      let failure;
      try {
        failure = await this.options.validator.recheck(entry.message);
      } catch (error) {
        // An unreachable chain proves nothing about the offer: keep it, the next event retries.
        this.options.logger.warn("Cannot re-check an offer against the chain", { key: entry.key }, error);
        continue;
      }
      if (!failure) continue;
      const reason = REMOVAL_FOR[failure.reason] ?? "machine_changed";
      // Only evict the copy that was checked; a newer one that arrived meanwhile is checked on its own.
      if (this.options.book.get(entry.key)?.seq === entry.seq && this.options.book.remove(entry.key, reason)) {
        removed++;
        this.count(reason, 1);
        this.options.logger.info("Offer evicted", { key: entry.key, reason, detail: failure.detail });
      }
    }
    return removed;
  }

  private count(reason: RemovalReason, n: number): void {
    if (!n) return;
    this.options.metrics.offersEvicted.inc({ reason }, n);
    this.options.metrics.bookOffers.set(this.options.book.size);
  }
}

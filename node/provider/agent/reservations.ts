/**
 * The provider's reservations, durable: the reservation table (units held for renters), the
 * terms of each hold (who, how long, what it locks), the reserve nonces recently used (a replayed
 * request is refused) and the counter of renter-bound offer nonces. Everything is written to
 * level before a reserve request is answered, so a restarted node never promises the same units
 * twice and never signs two offers with one nonce.
 */
import type { Address, Hex } from "viem";
import { ReservationTable, type Hold, type ReservationSnapshot } from "../../../common/matching/reservations.js";
import { Bucket } from "../../store/buckets.js";
import type { Repository, Store } from "../../store/store.js";

/** What a hold promised, keyed by its id (the renter-bound offer's nonce, decimal). */
export type HoldTerms = {
  holdId: string;
  reserveNonce: Hex;
  renter: Address;
  /** The libp2p peer that sent the request (a relay node sends for many renters). */
  peer?: string | undefined;
  machineId: number;
  units: number;
  duration: number;
  interruptible: boolean;
  pricePerUnitSecond: bigint;
  deposit: bigint;
  collateral: bigint;
  /** Unix ms. */
  expiresAt: number;
};

type Persisted = {
  snapshot: ReservationSnapshot;
  terms: HoldTerms[];
  /** Reserve request nonce → unix ms until which it is remembered. */
  usedNonces: Record<string, number>;
};

/**
 * Renter-bound offer nonces start far above the nonce of the public offers (0): a renter-bound
 * offer uses its nonce up on-chain, and must never use up the public one.
 */
const FIRST_OFFER_NONCE = 1_000_000_000n;

export class ReservationBook {
  private readonly terms = new Map<string, HoldTerms>();
  private readonly usedNonces = new Map<string, number>();
  private nextNonce = FIRST_OFFER_NONCE;
  private writing: Promise<void> = Promise.resolve();
  private readonly unopenedListeners: ((terms: HoldTerms) => void)[] = [];

  private constructor(
    readonly table: ReservationTable,
    private readonly store: Store,
    private readonly repo: Repository<Persisted>,
    private readonly state: Repository<string>,
    private readonly now: () => number,
  ) {}

  /** Restores the book from level (expired holds and nonces are dropped). */
  static async load(store: Store, options: { ttlMs: number; now?: () => number }): Promise<ReservationBook> {
    const now = options.now ?? Date.now;
    const repo = store.repository<Persisted>(Bucket.providerReservations);
    const state = store.repository<string>(Bucket.providerState);
    const persisted = await repo.get("table");
    const table = persisted ? ReservationTable.restore(persisted.snapshot, { ttlMs: options.ttlMs, now }) : new ReservationTable({ ttlMs: options.ttlMs, now });
    const book = new ReservationBook(table, store, repo, state, now);
    const live = new Set(table.holds().map((hold) => hold.id));
    for (const terms of persisted?.terms ?? []) if (live.has(terms.holdId)) book.terms.set(terms.holdId, terms);
    for (const [nonce, until] of Object.entries(persisted?.usedNonces ?? {})) if (until > now()) book.usedNonces.set(nonce, until);
    const stored = await state.get("offerNonce");
    if (stored) book.nextNonce = BigInt(stored);
    return book;
  }

  /** A fresh renter-bound offer nonce; the counter is persisted with the next write. */
  allocateOfferNonce(): bigint {
    return this.nextNonce++;
  }

  isNonceUsed(nonce: Hex): boolean {
    const until = this.usedNonces.get(nonce.toLowerCase());
    return until !== undefined && until > this.now();
  }

  markNonceUsed(nonce: Hex, untilMs: number): void {
    this.usedNonces.set(nonce.toLowerCase(), untilMs);
  }

  /**
   * Uses a reserve nonce up: true the first time, false for as long as it is remembered. Check
   * and mark are one synchronous step, so of concurrent requests carrying one nonce exactly one
   * gets true, whatever the others await later. A request refused after this still used its
   * nonce: the renter signs a fresh request (the SDK does for every try).
   */
  claimNonce(nonce: Hex, untilMs: number): boolean {
    if (this.isNonceUsed(nonce)) return false;
    this.usedNonces.set(nonce.toLowerCase(), untilMs);
    return true;
  }

  /** Called with the terms of every hold that ended without a lease (expired, never opened). */
  onUnopened(listener: (terms: HoldTerms) => void): void {
    this.unopenedListeners.push(listener);
  }

  /**
   * Drops the terms of holds that are gone from the table without a commit or a release: they
   * expired unopened. Returns them (and tells the listeners).
   */
  collectUnopened(): HoldTerms[] {
    const live = new Set(this.table.holds().map((hold) => hold.id));
    const gone: HoldTerms[] = [];
    for (const [id, terms] of this.terms) {
      if (live.has(id)) continue;
      this.terms.delete(id);
      gone.push(terms);
    }
    for (const terms of gone) for (const listener of this.unopenedListeners) listener(terms);
    return gone;
  }

  /** Live holds of one renter wallet, with the deposits they will ask of it. */
  holdsOfRenter(renter: Address): { count: number; deposits: bigint } {
    const key = renter.toLowerCase();
    let count = 0;
    let deposits = 0n;
    for (const { terms } of this.live()) {
      if (terms?.renter.toLowerCase() !== key) continue;
      count++;
      deposits += terms.deposit;
    }
    return { count, deposits };
  }

  /** Live holds requested by one peer. */
  holdsOfPeer(peer: string): number {
    let count = 0;
    for (const { terms } of this.live()) if (terms?.peer === peer) count++;
    return count;
  }

  addTerms(terms: HoldTerms): void {
    this.terms.set(terms.holdId, terms);
  }

  termsOf(holdId: string): HoldTerms | undefined {
    return this.table.holds().some((hold) => hold.id === holdId) ? this.terms.get(holdId) : undefined;
  }

  /** Live holds with their terms. */
  live(): { hold: Hold; terms: HoldTerms | undefined }[] {
    return this.table.holds().map((hold) => ({ hold, terms: this.terms.get(hold.id) }));
  }

  /** Collateral the live holds will lock when their leases open. */
  pendingCollateral(): bigint {
    let sum = 0n;
    for (const { terms } of this.live()) sum += terms?.collateral ?? 0n;
    return sum;
  }

  /** The lease of a hold opened: the hold ends and its units leave the capacity. */
  commit(holdId: string): Hold | undefined {
    const hold = this.table.commit(holdId);
    this.terms.delete(holdId);
    return hold;
  }

  release(holdId: string): boolean {
    this.terms.delete(holdId);
    return this.table.release(holdId);
  }

  /** Writes the current state (holds, terms, used nonces, nonce counter); writes never overtake each other. */
  persist(): Promise<void> {
    const run = this.writing.then(async () => {
      const now = this.now();
      for (const [nonce, until] of this.usedNonces) if (until <= now) this.usedNonces.delete(nonce);
      this.collectUnopened();
      const snapshot = this.table.snapshot();
      await this.store.batch([
        this.repo.putOp("table", { snapshot, terms: [...this.terms.values()], usedNonces: Object.fromEntries(this.usedNonces) }),
        this.state.putOp("offerNonce", this.nextNonce.toString()),
      ]);
    });
    this.writing = run.catch(() => undefined);
    return run;
  }
}

/**
 * The failure notices an offer book holds (common/attest/failure-notice.ts): in memory, indexed
 * by machine for the offer validator and by age for eviction, and in level so a restarted node
 * keeps revoking what it revoked. At most `maxNotices` (50,000 by default): a new notice evicts
 * the oldest. Notices older than FAILURE_WINDOW_SECONDS are dropped at load and as new ones come.
 */
import type { Address } from "viem";
import {
  FAILURE_WINDOW_SECONDS,
  failureNoticeSchema,
  noticeKey,
  type FailureNotice,
  type FailureNoticeIndex,
  type HeldNotice,
  type MachineNotices,
} from "../../common/attest/failure-notice.js";
import { Bucket } from "../store/buckets.js";
import type { Repository, Store } from "../store/store.js";

/** The default cap on held notices. */
export const MAX_NOTICES = 50_000;

type Held = HeldNotice & { storeKey: string; raw: string };
type Stored = { raw: string };

const machineOf = (provider: string, machineId: number) => `${provider.toLowerCase()}/${machineId}`;
/** Level key: observedAt first, so key order is age order (eviction, offers-sync pages). */
const storeKeyOf = (notice: FailureNotice) => `${notice.failure.observedAt.toString().padStart(10, "0")}/${noticeKey(notice.failure)}`;

export type NoticeBookOptions = {
  maxNotices?: number;
  /** Unix seconds now. */
  now?: () => number;
};

/**
 * @example
 * const notices = await NoticeBook.open(store);
 * const validator = new OfferValidator({ ..., notices });
 */
export class NoticeBook implements FailureNoticeIndex {
  private readonly byKey = new Map<string, Held>();
  private readonly byMachine = new Map<string, Set<string>>();
  /** Held notices' store keys, ascending (oldest first). */
  private readonly ordered: string[] = [];
  private readonly byStoreKey = new Map<string, Held>();
  private readonly maxNotices: number;
  private readonly now: () => number;

  private constructor(
    private readonly store: Store,
    private readonly repo: Repository<Stored>,
    options: NoticeBookOptions,
  ) {
    this.maxNotices = options.maxNotices ?? MAX_NOTICES;
    this.now = options.now ?? (() => Math.floor(Date.now() / 1000));
  }

  static async open(store: Store, options: NoticeBookOptions = {}): Promise<NoticeBook> {
    const book = new NoticeBook(store, store.repository<Stored>(Bucket.attestFailureNotices), options);
    const stale: string[] = [];
    for await (const [key, stored] of book.repo.entries()) {
      const parsed = failureNoticeSchema.safeParse(safeJson(stored.raw));
      if (!parsed.success || storeKeyOf(parsed.data) !== key) stale.push(key);
      else book.insert(parsed.data, stored.raw, key);
    }
    if (stale.length) await store.batch(stale.map((key) => book.repo.delOp(key)));
    await book.prune();
    return book;
  }

  get size(): number {
    return this.byKey.size;
  }

  has(key: string): boolean {
    return this.byKey.has(key);
  }

  /** Adds a validated notice (evicting the oldest at the cap); false when it is already held. */
  async add(notice: FailureNotice, raw: string): Promise<boolean> {
    const key = noticeKey(notice.failure);
    if (this.byKey.has(key)) return false;
    const storeKey = storeKeyOf(notice);
    this.insert(notice, raw, storeKey);
    await this.repo.put(storeKey, { raw });
    await this.prune();
    return this.byKey.has(key);
  }

  ofMachine(provider: Address, machineId: number, now: number): MachineNotices {
    const out = new Map<string, { count: number; latest: number }>();
    const since = now - FAILURE_WINDOW_SECONDS;
    for (const key of this.byMachine.get(machineOf(provider, machineId)) ?? []) {
      const held = this.byKey.get(key)!;
      if (held.observedAt <= since) continue;
      const attestor = held.attestor.toLowerCase();
      const current = out.get(attestor);
      out.set(attestor, { count: (current?.count ?? 0) + 1, latest: Math.max(current?.latest ?? 0, held.observedAt) });
    }
    return out;
  }

  /** Held notices of a machine, oldest first. */
  machineNotices(provider: Address, machineId: number): HeldNotice[] {
    const keys = [...(this.byMachine.get(machineOf(provider, machineId)) ?? [])];
    return keys.map((key) => this.byKey.get(key)!).sort((a, b) => a.observedAt - b.observedAt);
  }

  /** Notices in age order after store key `after`: what offers-sync serves. */
  page(after: string | undefined, limit: number): { raw: string[]; next: string | null } {
    let from = 0;
    if (after !== undefined) {
      from = lowerBound(this.ordered, after);
      if (this.ordered[from] === after) from++;
    }
    const keys = this.ordered.slice(from, from + limit);
    return { raw: keys.map((key) => this.byStoreKey.get(key)!.raw), next: keys.length === limit && from + limit < this.ordered.length ? keys[keys.length - 1]! : null };
  }

  private insert(notice: FailureNotice, raw: string, storeKey: string): void {
    const { failure } = notice;
    const held: Held = { key: noticeKey(failure), ...failure, storeKey, raw };
    this.byKey.set(held.key, held);
    this.byStoreKey.set(storeKey, held);
    const machine = machineOf(failure.provider, failure.machineId);
    let set = this.byMachine.get(machine);
    if (!set) this.byMachine.set(machine, (set = new Set()));
    set.add(held.key);
    this.ordered.splice(lowerBound(this.ordered, storeKey), 0, storeKey);
  }

  /** Drops notices past the window, then the oldest beyond the cap. */
  private async prune(): Promise<void> {
    const since = this.now() - FAILURE_WINDOW_SECONDS;
    let drop = 0;
    while (drop < this.ordered.length && (this.byStoreKey.get(this.ordered[drop]!)!.observedAt <= since || this.ordered.length - drop > this.maxNotices)) drop++;
    if (drop === 0) return;
    const removed = this.ordered.splice(0, drop);
    for (const storeKey of removed) {
      const held = this.byStoreKey.get(storeKey)!;
      this.byStoreKey.delete(storeKey);
      this.byKey.delete(held.key);
      const machine = machineOf(held.provider, held.machineId);
      const set = this.byMachine.get(machine);
      set?.delete(held.key);
      if (set && !set.size) this.byMachine.delete(machine);
    }
    await this.store.batch(removed.map((key) => this.repo.delOp(key)));
  }
}

function lowerBound(sorted: readonly string[], key: string): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (sorted[mid]! < key) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

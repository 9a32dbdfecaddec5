/**
 * The failure notices an offer book holds (common/attest/failure-notice.ts): the in-memory
 * NoticeIndex (common/attest/notice-index.ts, indexed by machine and by age), kept in level too
 * so a restarted node keeps revoking what it revoked. At most `maxNotices` (50,000 by default): a
 * new notice evicts the oldest. Notices older than FAILURE_WINDOW_SECONDS are dropped at load and
 * as new ones come.
 */
import type { Address } from "viem";
import { failureNoticeSchema, type FailureNotice, type FailureNoticeIndex, type HeldNotice, type MachineNotices } from "../../common/attest/failure-notice.js";
import { MAX_NOTICES, NoticeIndex, noticeStoreKey, type NoticeIndexOptions } from "../../common/attest/notice-index.js";
import { Bucket } from "../store/buckets.js";
import type { Repository, Store } from "../store/store.js";

export { MAX_NOTICES };

type Stored = { raw: string };

export type NoticeBookOptions = NoticeIndexOptions;

/**
 * @example
 * const notices = await NoticeBook.open(store);
 * const validator = new OfferValidator({ ..., notices });
 */
export class NoticeBook implements FailureNoticeIndex {
  private readonly index: NoticeIndex;

  private constructor(
    private readonly store: Store,
    private readonly repo: Repository<Stored>,
    options: NoticeBookOptions,
  ) {
    this.index = new NoticeIndex(options);
  }

  static async open(store: Store, options: NoticeBookOptions = {}): Promise<NoticeBook> {
    const book = new NoticeBook(store, store.repository<Stored>(Bucket.attestFailureNotices), options);
    const stale: string[] = [];
    for await (const [key, stored] of book.repo.entries()) {
      const parsed = failureNoticeSchema.safeParse(safeJson(stored.raw));
      if (!parsed.success || noticeStoreKey(parsed.data) !== key) stale.push(key);
      else book.index.insert(parsed.data, stored.raw, key);
    }
    if (stale.length) await store.batch(stale.map((key) => book.repo.delOp(key)));
    await book.prune();
    return book;
  }

  get size(): number {
    return this.index.size;
  }

  has(key: string): boolean {
    return this.index.has(key);
  }

  /** Adds a validated notice (evicting the oldest at the cap); false when it is already held. */
  async add(notice: FailureNotice, raw: string): Promise<boolean> {
    const storeKey = noticeStoreKey(notice);
    if (!this.index.insert(notice, raw, storeKey)) return false;
    await this.repo.put(storeKey, { raw });
    const removed = await this.prune();
    return !removed.includes(storeKey);
  }

  ofMachine(provider: Address, machineId: number, now: number): MachineNotices {
    return this.index.ofMachine(provider, machineId, now);
  }

  /** Held notices of a machine, oldest first. */
  machineNotices(provider: Address, machineId: number): HeldNotice[] {
    return this.index.machineNotices(provider, machineId);
  }

  /** Notices in age order after store key `after`: what offers-sync serves. */
  page(after: string | undefined, limit: number): { raw: string[]; next: string | null } {
    return this.index.page(after, limit);
  }

  /** Notices in the order this node received them, after a cursor it returned: what offers-sync serves a re-pull (NoticeIndex.pageSince). */
  pageSince(since: string, limit: number): { raw: string[]; next: string | null; cursor: string } {
    return this.index.pageSince(since, limit);
  }

  /** Drops notices past the window, then the oldest beyond the cap, in memory and in level. */
  private async prune(): Promise<string[]> {
    const removed = this.index.prune();
    if (removed.length) await this.store.batch(removed.map((key) => this.repo.delOp(key)));
    return removed;
  }
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

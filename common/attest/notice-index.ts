/**
 * The failure notices a node or a renter's client holds, in memory (common/attest/failure-notice.ts):
 * indexed by machine for the offer validator and matching, and by age (a store key that starts
 * with `observedAt`) for eviction and for offers-sync pages. At most `maxNotices` (50,000 by
 * default): a new notice evicts the oldest; notices older than FAILURE_WINDOW_SECONDS are dropped
 * as new ones come (prune). The node's NoticeBook (node/offers/notice-book.ts) keeps the same in
 * level; the SDK's offer feed uses this one alone.
 */
import type { Address } from "viem";
import { FAILURE_WINDOW_SECONDS, noticeKey, type FailureNotice, type FailureNoticeIndex, type HeldNotice, type MachineNotices } from "./failure-notice.js";

/** The default cap on held notices. */
export const MAX_NOTICES = 50_000;

type Held = HeldNotice & { storeKey: string; raw: string; seq: number };

/** A `pageSince` cursor: `<this index's epoch>:<arrival number>`. */
const CURSOR = /^([0-9a-f]{16}):(\d{1,15})$/;

const machineOf = (provider: string, machineId: number) => `${provider.toLowerCase()}/${machineId}`;

/** A notice's key in age order: observedAt first, so key order is age order (eviction, offers-sync pages). */
export function noticeStoreKey(notice: FailureNotice): string {
  return `${notice.failure.observedAt.toString().padStart(10, "0")}/${noticeKey(notice.failure)}`;
}

export type NoticeIndexOptions = {
  maxNotices?: number;
  /** Unix seconds now. */
  now?: () => number;
};

/**
 * @example
 * const notices = new NoticeIndex();
 * if (notices.insert(notice, raw)) notices.prune();
 * const validator = new OfferValidator({ ..., notices });
 */
export class NoticeIndex implements FailureNoticeIndex {
  private readonly byKey = new Map<string, Held>();
  private readonly byMachine = new Map<string, Set<string>>();
  /** Held notices' store keys, ascending (oldest first). */
  private readonly ordered: string[] = [];
  private readonly byStoreKey = new Map<string, Held>();
  /**
   * Store keys in the order the notices arrived, with their arrival numbers (`pageSince`); entries
   * of pruned notices are skipped and compacted away. The epoch names this index's numbering: a
   * cursor from another one (another run of the node) starts from the first notice.
   */
  private arrivals: { seq: number; storeKey: string }[] = [];
  private arrived = 0;
  private readonly epoch = [...crypto.getRandomValues(new Uint8Array(8))].map((byte) => byte.toString(16).padStart(2, "0")).join("");
  private readonly maxNotices: number;
  private readonly now: () => number;

  constructor(options: NoticeIndexOptions = {}) {
    this.maxNotices = options.maxNotices ?? MAX_NOTICES;
    this.now = options.now ?? (() => Math.floor(Date.now() / 1000));
  }

  get size(): number {
    return this.byKey.size;
  }

  has(key: string): boolean {
    return this.byKey.has(key);
  }

  /** Adds a validated notice under `storeKey` (noticeStoreKey by default); false when it is already held. Call prune after. */
  insert(notice: FailureNotice, raw: string, storeKey = noticeStoreKey(notice)): boolean {
    const { failure } = notice;
    const key = noticeKey(failure);
    if (this.byKey.has(key)) return false;
    const held: Held = { key, ...failure, storeKey, raw, seq: ++this.arrived };
    this.arrivals.push({ seq: held.seq, storeKey });
    this.byKey.set(key, held);
    this.byStoreKey.set(storeKey, held);
    const machine = machineOf(failure.provider, failure.machineId);
    let set = this.byMachine.get(machine);
    if (!set) this.byMachine.set(machine, (set = new Set()));
    set.add(key);
    this.ordered.splice(lowerBound(this.ordered, storeKey), 0, storeKey);
    return true;
  }

  /** Inserts a validated notice and prunes; true when it is new and kept (not the oldest evicted at once). */
  add(notice: FailureNotice, raw: string): boolean {
    const storeKey = noticeStoreKey(notice);
    return this.insert(notice, raw, storeKey) && !this.prune().includes(storeKey);
  }

  ofMachine(provider: Address, machineId: number, now: number): MachineNotices {
    const out = new Map<string, { count: number; latest: number; times: number[] }>();
    const since = now - FAILURE_WINDOW_SECONDS;
    for (const key of this.byMachine.get(machineOf(provider, machineId)) ?? []) {
      const held = this.byKey.get(key)!;
      if (held.observedAt <= since) continue;
      const attestor = held.attestor.toLowerCase();
      const current = out.get(attestor) ?? { count: 0, latest: 0, times: [] };
      current.times.push(held.observedAt);
      out.set(attestor, { count: current.count + 1, latest: Math.max(current.latest, held.observedAt), times: current.times });
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

  /**
   * Notices in the order this index received them, after cursor `since` (a `cursor` it returned
   * before; any other string, such as `start`, means from the first): what offers-sync serves a
   * client that pulls again, so that a re-pull carries only what is new. `next` continues the
   * pull (as the next `since`), null after the last page; `cursor` is where a later pull starts.
   */
  pageSince(since: string, limit: number): { raw: string[]; next: string | null; cursor: string } {
    const match = CURSOR.exec(since);
    const after = match && match[1] === this.epoch ? Number(match[2]) : 0;
    let lo = 0;
    let hi = this.arrivals.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.arrivals[mid]!.seq <= after) lo = mid + 1;
      else hi = mid;
    }
    const raw: string[] = [];
    let last = after;
    let more = false;
    for (let i = lo; i < this.arrivals.length; i++) {
      const { seq, storeKey } = this.arrivals[i]!;
      const held = this.byStoreKey.get(storeKey);
      if (held?.seq !== seq) continue;
      if (raw.length === limit) {
        more = true;
        break;
      }
      raw.push(held.raw);
      last = seq;
    }
    return { raw, next: more ? `${this.epoch}:${last}` : null, cursor: `${this.epoch}:${this.arrived}` };
  }

  /** Drops notices past the window, then the oldest beyond the cap; returns the store keys dropped. */
  prune(): string[] {
    const since = this.now() - FAILURE_WINDOW_SECONDS;
    let drop = 0;
    while (drop < this.ordered.length && (this.byStoreKey.get(this.ordered[drop]!)!.observedAt <= since || this.ordered.length - drop > this.maxNotices)) drop++;
    if (drop === 0) return [];
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
    // Arrival entries of dropped notices are skipped by pageSince; compacted once they are most.
    if (this.arrivals.length > 2 * this.byStoreKey.size + 64) this.arrivals = this.arrivals.filter(({ seq, storeKey }) => this.byStoreKey.get(storeKey)?.seq === seq);
    return removed;
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

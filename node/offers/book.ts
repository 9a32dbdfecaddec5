/**
 * The offer book: the live offers this node knows, one per provider machine, in memory with
 * indexes for queries and persisted in level so a restarted node starts with what it had.
 *
 * Writes reach level shortly after the in-memory update (batched every few milliseconds):
 * the book is a cache of gossip that providers re-announce, so losing the last few
 * milliseconds in a crash costs nothing, while a write per message would cap ingest.
 *
 * Subscribers (matching engine, HTTP API) listen to `offer` (added or replaced) and
 * `removed` (expired, evicted) events.
 */
import { EventEmitter } from "node:events";
import type { Address, Hex } from "viem";
import { InvalidInputError } from "../../common/errors.js";
import { messageKey, offerMessageSchema, type Interconnect, type OfferMessage } from "../../common/offers/message.js";
import { offerFilterSchema, offerPageSchema, type OfferFilterInput, type OfferPageInput } from "../../common/offers/query.js";
import { isAttested, type AttestationState, type ValidatedOffer } from "../../common/offers/validate.js";
import { parseInput } from "../../common/validation.js";
import { Bucket } from "../store/buckets.js";
import type { Repository, Store } from "../store/store.js";
import type { Logger } from "../log/logger.js";

/** One offer as the book holds it: the message plus the fields queries use, flattened. */
export type BookEntry = {
  key: string;
  provider: Address;
  machineId: number;
  /** Canonical GPU model name. */
  model: string;
  units: number;
  freeUnits: number;
  vramMiB: number;
  region: string;
  interconnect: Interconnect;
  cluster: Hex;
  pricePerUnitSecond: bigint;
  minBidPerUnitSecond: bigint;
  expiry: number;
  seq: number;
  peerId: string;
  addrs: string[];
  attestation: AttestationState;
  /** When this node accepted it (ms since epoch). */
  receivedAt: number;
  message: OfferMessage;
  /** The message as received: what the offers-sync protocol serves. */
  raw: string;
};

export type StoredOffer = {
  raw: string;
  receivedAt: number;
  attestation: AttestationState;
};

/** Why an offer left the book. */
export type RemovalReason = "expired" | "unregistered" | "peer_id_mismatch" | "understaked" | "nonce_revoked" | "machine_removed" | "machine_changed";

export type UpsertResult = "added" | "updated" | "stale" | "full";

export type OfferBookEvents = {
  offer: [entry: BookEntry, previous: BookEntry | undefined];
  removed: [entry: BookEntry, reason: RemovalReason];
  /** A held offer's attestation state changed (the attestor set changed, a failure notice revoked an attestation). */
  attestation: [entry: BookEntry];
};

export type OfferQueryResult = { offers: BookEntry[]; nextCursor: string | undefined };

export type OfferBookOptions = {
  /** Most offers held; further new offers are refused until some leave. */
  maxOffers?: number;
  /** Milliseconds between level write batches. */
  flushDelayMs?: number;
  /** Unix seconds now. */
  now?: () => number;
  /** Where failed database writes are reported. */
  logger?: Logger;
};

type HeapItem = { expiry: number; key: string; seq: number };

/** A binary min-heap of expiries. Superseded items stay until popped (checked against the book then). */
class ExpiryHeap {
  private readonly items: HeapItem[] = [];

  get size(): number {
    return this.items.length;
  }

  push(item: HeapItem): void {
    const items = this.items;
    items.push(item);
    let i = items.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (items[parent]!.expiry <= items[i]!.expiry) break;
      [items[parent], items[i]] = [items[i]!, items[parent]!];
      i = parent;
    }
  }

  peek(): HeapItem | undefined {
    return this.items[0];
  }

  pop(): HeapItem | undefined {
    const items = this.items;
    const top = items[0];
    const last = items.pop();
    if (items.length && last) {
      items[0] = last;
      let i = 0;
      for (;;) {
        const left = 2 * i + 1;
        const right = left + 1;
        let smallest = i;
        if (left < items.length && items[left]!.expiry < items[smallest]!.expiry) smallest = left;
        if (right < items.length && items[right]!.expiry < items[smallest]!.expiry) smallest = right;
        if (smallest === i) break;
        [items[smallest], items[i]] = [items[i]!, items[smallest]!];
        i = smallest;
      }
    }
    return top;
  }

  rebuild(items: HeapItem[]): void {
    this.items.length = 0;
    for (const item of items) this.push(item);
  }
}

function addTo<K>(index: Map<K, Set<string>>, key: K, value: string): void {
  let set = index.get(key);
  if (!set) index.set(key, (set = new Set()));
  set.add(value);
}

function removeFrom<K>(index: Map<K, Set<string>>, key: K, value: string): void {
  const set = index.get(key);
  if (!set) return;
  set.delete(value);
  if (!set.size) index.delete(key);
}

function toEntry(message: OfferMessage, raw: string, attestation: AttestationState, receivedAt: number): BookEntry {
  const { offer, machine, capacity } = message;
  return {
    key: messageKey(message),
    provider: offer.provider,
    machineId: offer.machineId,
    model: machine.model,
    units: machine.units,
    freeUnits: capacity.freeUnits,
    vramMiB: machine.vramMiB,
    region: machine.region,
    interconnect: machine.interconnect,
    cluster: machine.cluster,
    pricePerUnitSecond: offer.pricePerUnitSecond,
    minBidPerUnitSecond: offer.minBidPerUnitSecond,
    expiry: offer.expiry,
    seq: message.seq,
    peerId: message.peerId,
    addrs: message.addrs,
    attestation,
    receivedAt,
    message,
    raw,
  };
}

function encodeCursor(entry: BookEntry): string {
  return Buffer.from(JSON.stringify([entry.pricePerUnitSecond.toString(), entry.key])).toString("base64url");
}

function decodeCursor(cursor: string): { price: bigint; key: string } {
  try {
    const [price, key] = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8")) as [unknown, unknown];
    if (typeof price === "string" && /^\d{1,40}$/.test(price) && typeof key === "string" && key.length <= 128) {
      return { price: BigInt(price), key };
    }
  } catch {
    // reported below
  }
  throw new InvalidInputError(
    "offer page",
    [{ path: "cursor", message: "not a cursor this node issued" }],
    ["Pass the nextCursor of the previous page unchanged, or omit it for the first page."],
  );
}

/** Orders offers by price, then key: the order queries return and cursors follow. */
function byPriceThenKey(a: BookEntry, b: BookEntry): number {
  if (a.pricePerUnitSecond !== b.pricePerUnitSecond) return a.pricePerUnitSecond < b.pricePerUnitSecond ? -1 : 1;
  return a.key < b.key ? -1 : a.key > b.key ? 1 : 0;
}

/**
 * The level-backed offer book.
 *
 * @example
 * const book = await OfferBook.open(store, { maxOffers: 100_000 });
 * book.on("offer", (entry) => matcher.add(entry));
 * const { offers, nextCursor } = book.query({ model: "A100", minFreeUnits: 4 }, { limit: 20 });
 */
export class OfferBook extends EventEmitter<OfferBookEvents> {
  private readonly entries = new Map<string, BookEntry>();
  private readonly byModel = new Map<string, Set<string>>();
  private readonly byRegion = new Map<string, Set<string>>();
  private readonly byProviderIndex = new Map<string, Set<string>>();
  private readonly byMachineIndex = new Map<number, Set<string>>();
  private readonly expiries = new ExpiryHeap();
  private readonly pending = new Map<string, StoredOffer | null>();
  private flushTimer: ReturnType<typeof setTimeout> | undefined;
  private flushing: Promise<void> = Promise.resolve();
  private closed = false;
  private readonly maxOffers: number;
  private readonly flushDelayMs: number;
  private readonly now: () => number;
  private readonly logger: Logger | undefined;

  private constructor(
    private readonly store: Store,
    private readonly repo: Repository<StoredOffer>,
    options: OfferBookOptions,
  ) {
    super();
    this.maxOffers = options.maxOffers ?? 100_000;
    this.flushDelayMs = options.flushDelayMs ?? 20;
    this.now = options.now ?? (() => Math.floor(Date.now() / 1000));
    this.logger = options.logger;
  }

  /** Opens the book over `store`, loading the offers saved there that have not expired. */
  static async open(store: Store, options: OfferBookOptions = {}): Promise<OfferBook> {
    const book = new OfferBook(store, store.repository<StoredOffer>(Bucket.offers), options);
    await book.load();
    return book;
  }

  private async load(): Promise<void> {
    const now = this.now();
    const stale: string[] = [];
    for await (const [key, stored] of this.repo.entries()) {
      const parsed = offerMessageSchema.safeParse(safeJson(stored.raw));
      if (!parsed.success || parsed.data.offer.expiry <= now || messageKey(parsed.data) !== key) {
        stale.push(key);
        continue;
      }
      this.insert(toEntry(parsed.data, stored.raw, stored.attestation, stored.receivedAt));
    }
    if (stale.length) await this.store.batch(stale.map((key) => this.repo.delOp(key)));
  }

  get size(): number {
    return this.entries.size;
  }

  /** The most offers the book holds. */
  get capacity(): number {
    return this.maxOffers;
  }

  /** The sequence number held for a key (validation drops anything not newer). */
  heldSeq(key: string): number | undefined {
    return this.entries.get(key)?.seq;
  }

  get(key: string): BookEntry | undefined {
    return this.entries.get(key);
  }

  /** Every offer held, in no particular order. */
  all(): BookEntry[] {
    return [...this.entries.values()];
  }

  byProvider(provider: Address): BookEntry[] {
    return [...(this.byProviderIndex.get(provider.toLowerCase()) ?? [])].map((key) => this.entries.get(key)!);
  }

  byMachine(machineId: number): BookEntry[] {
    return [...(this.byMachineIndex.get(machineId) ?? [])].map((key) => this.entries.get(key)!);
  }

  /**
   * Adds or replaces the offer of a validated message. `stale` when the book already holds the
   * same or a newer sequence number (a race between two copies), `full` when the book is at its
   * cap and this is a new machine.
   */
  upsert(offer: ValidatedOffer): UpsertResult {
    const previous = this.entries.get(offer.key);
    if (previous && previous.seq >= offer.message.seq) return "stale";
    if (!previous && this.entries.size >= this.maxOffers) return "full";
    const entry = toEntry(offer.message, offer.raw, offer.attestation, Date.now());
    if (previous) this.unindex(previous);
    this.insert(entry);
    this.persist(entry.key, { raw: entry.raw, receivedAt: entry.receivedAt, attestation: entry.attestation });
    this.emit("offer", entry, previous);
    return previous ? "updated" : "added";
  }

  /** Replaces the attestation state of a held offer (the attestor set changed, a failure notice), if it still holds message `seq`. */
  setAttestation(key: string, attestation: AttestationState, seq?: number): void {
    const entry = this.entries.get(key);
    // A newer message arrived while its state was being computed: it carries its own.
    if (!entry || (seq !== undefined && entry.seq !== seq)) return;
    entry.attestation = attestation;
    this.persist(key, { raw: entry.raw, receivedAt: entry.receivedAt, attestation });
    this.emit("attestation", entry);
  }

  /** Removes an offer; returns it, or undefined if the book did not hold it. */
  remove(key: string, reason: RemovalReason): BookEntry | undefined {
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    this.unindex(entry);
    this.persist(key, null);
    this.emit("removed", entry, reason);
    return entry;
  }

  /** Removes every offer whose expiry has passed; returns them. */
  sweepExpired(now = this.now()): BookEntry[] {
    const removed: BookEntry[] = [];
    for (let top = this.expiries.peek(); top && top.expiry <= now; top = this.expiries.peek()) {
      this.expiries.pop();
      const entry = this.entries.get(top.key);
      if (entry && entry.seq === top.seq && entry.expiry <= now) {
        this.remove(entry.key, "expired");
        removed.push(entry);
      }
    }
    // Replaced offers leave their old heap items behind; compact when they dominate.
    if (this.expiries.size > 2 * this.entries.size + 1_024) {
      this.expiries.rebuild([...this.entries.values()].map((e) => ({ expiry: e.expiry, key: e.key, seq: e.seq })));
    }
    return removed;
  }

  /** The earliest expiry among held offers (unix seconds), for scheduling the next sweep. */
  nextExpiry(): number | undefined {
    return this.expiries.peek()?.expiry;
  }

  /**
   * Offers matching `filter`, cheapest first (then by key), a page at a time. Throws
   * InvalidInputError naming the bad parameter.
   *
   * @example
   * const first = book.query({ model: "H100", minFreeUnits: 8, attested: true }, { limit: 10 });
   * const second = book.query({ model: "H100", minFreeUnits: 8, attested: true }, { limit: 10, cursor: first.nextCursor });
   */
  query(filterInput: OfferFilterInput = {}, pageInput: OfferPageInput = {}): OfferQueryResult {
    const filter = parseInput(offerFilterSchema, filterInput, "offer filter");
    const page = parseInput(offerPageSchema, pageInput, "offer page");
    const after = page.cursor ? decodeCursor(page.cursor) : undefined;
    const now = this.now();

    // Start from the narrowest index that applies, then filter.
    const sets: Set<string>[] = [];
    if (filter.model) sets.push(this.byModel.get(filter.model) ?? new Set());
    if (filter.region) sets.push(this.byRegion.get(filter.region.toLowerCase()) ?? new Set());
    if (filter.provider) sets.push(this.byProviderIndex.get(filter.provider.toLowerCase()) ?? new Set());
    sets.sort((a, b) => a.size - b.size);
    const candidates: Iterable<string> = sets[0] ?? this.entries.keys();

    const matches: BookEntry[] = [];
    for (const key of candidates) {
      const entry = this.entries.get(key);
      if (!entry || entry.expiry <= now) continue;
      if (filter.model && entry.model !== filter.model) continue;
      if (filter.region && entry.region.toLowerCase() !== filter.region.toLowerCase()) continue;
      if (filter.provider && entry.provider !== filter.provider) continue;
      if (filter.minFreeUnits !== undefined && entry.freeUnits < filter.minFreeUnits) continue;
      if (filter.minVramMiB !== undefined && entry.vramMiB < filter.minVramMiB) continue;
      if (filter.maxPricePerUnitSecond !== undefined && entry.pricePerUnitSecond > filter.maxPricePerUnitSecond) continue;
      if (filter.interconnect && entry.interconnect !== filter.interconnect) continue;
      if (filter.attested !== undefined && isAttested(entry.attestation, now) !== filter.attested) continue;
      if (after && (entry.pricePerUnitSecond < after.price || (entry.pricePerUnitSecond === after.price && entry.key <= after.key))) continue;
      matches.push(entry);
    }
    matches.sort(byPriceThenKey);
    const offers = matches.slice(0, page.limit);
    const nextCursor = matches.length > page.limit ? encodeCursor(offers[offers.length - 1]!) : undefined;
    return { offers, nextCursor };
  }

  /**
   * Held offers in key order after `afterKey`, from level (which keeps keys sorted): what the
   * offers-sync protocol pages through.
   */
  async pageByKey(afterKey: string | undefined, limit: number): Promise<BookEntry[]> {
    await this.flush();
    const out: BookEntry[] = [];
    // Entries in level but no longer in memory (removed, not yet flushed) are skipped; read a
    // little more than asked so a page is rarely short.
    for await (const [key] of this.repo.entries({ gte: afterKey === undefined ? "" : `${afterKey}\u0000`, limit: limit * 2 })) {
      const entry = this.entries.get(key);
      if (entry) out.push(entry);
      if (out.length >= limit) break;
    }
    return out;
  }

  /** Writes pending changes to level now. */
  async flush(): Promise<void> {
    if (this.flushTimer) clearTimeout(this.flushTimer);
    this.flushTimer = undefined;
    const ops = [...this.pending].map(([key, value]) => (value ? this.repo.putOp(key, value) : this.repo.delOp(key)));
    this.pending.clear();
    const previous = this.flushing;
    const run = (async () => {
      await previous;
      if (ops.length) await this.store.batch(ops);
    })();
    this.flushing = run.catch(() => undefined);
    await run;
  }

  /** Flushes and stops accepting writes. The store stays open (its owner closes it). */
  async close(): Promise<void> {
    if (this.closed) return;
    await this.flush();
    this.closed = true;
    this.removeAllListeners();
  }

  private persist(key: string, value: StoredOffer | null): void {
    if (this.closed) return;
    this.pending.set(key, value);
    if (!this.flushTimer) {
      this.flushTimer = setTimeout(() => {
        this.flushTimer = undefined;
        this.flush().catch((error: unknown) => this.logger?.warn("Cannot write offers to the database", {}, error));
      }, this.flushDelayMs);
    }
  }

  private insert(entry: BookEntry): void {
    this.entries.set(entry.key, entry);
    addTo(this.byModel, entry.model, entry.key);
    addTo(this.byRegion, entry.region.toLowerCase(), entry.key);
    addTo(this.byProviderIndex, entry.provider.toLowerCase(), entry.key);
    addTo(this.byMachineIndex, entry.machineId, entry.key);
    this.expiries.push({ expiry: entry.expiry, key: entry.key, seq: entry.seq });
  }

  private unindex(entry: BookEntry): void {
    this.entries.delete(entry.key);
    removeFrom(this.byModel, entry.model, entry.key);
    removeFrom(this.byRegion, entry.region.toLowerCase(), entry.key);
    removeFrom(this.byProviderIndex, entry.provider.toLowerCase(), entry.key);
    removeFrom(this.byMachineIndex, entry.machineId, entry.key);
  }
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

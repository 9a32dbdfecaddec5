/**
 * The engine's index of the offer book. Offers are grouped by GPU model, then by region, and in
 * each (model, region) bucket kept in two B+ trees: by on-demand price, and by minimum
 * interruptible bid (machines selling interruptible capacity only). A request names a few
 * models and regions, so it touches a few buckets, finds its price limit in O(log n) and then
 * walks only the offers under it: O(log n + k).
 *
 * Updates are incremental. A slot (the indexed form of an entry) lives as long as its key; an
 * update that leaves price, bid, model and region alone — the common case, a capacity change —
 * rewrites the slot's fields in place without touching a tree.
 */
import BTreeModule from "sorted-btree";
import type { OfferEntry } from "./entry.js";
import { NO_CLUSTER, reputationScore } from "./entry.js";
import { toIndexNumber } from "./money.js";
import type { MatchingOptions } from "./options.js";

// sorted-btree ships CommonJS with `exports.default`: Node's ESM loader hands over the exports
// object, bundlers may hand over the class itself.
type BTreeClass = typeof BTreeModule.default;
const BTree: BTreeClass = (BTreeModule as unknown as { default?: BTreeClass }).default ?? (BTreeModule as unknown as BTreeClass);
type BTree<K, V> = InstanceType<typeof BTreeModule.default<K, V>>;

export type PriceKey = { price: number; id: number };
export type BidKey = { minBid: number; id: number };

/** The indexed, number-typed form of an entry; hot loops read only these fields. */
export class Slot implements PriceKey, BidKey {
  entry!: OfferEntry;
  key!: string;
  seq = 0;
  model!: string;
  region!: string;
  bucket!: Bucket;
  price = 0;
  minBid = 0;
  lowestBid = 0;
  free = 0;
  interruptibleUnits = 0;
  units = 0;
  vramMiB = 0;
  expiry = 0;
  minDuration = 0;
  maxDuration = 0;
  attestedAt = -1;
  attestationExpiry = -1;
  reputation = 0;
  /** Reputation and latency part of the ranking cost: fixed per entry, so computed once. */
  staticCost = 0;
  /** `model|cluster` for clustered machines, empty when standalone. */
  clusterKey = "";

  constructor(readonly id: number) {}
}

export type Bucket = {
  readonly model: string;
  readonly region: string;
  readonly byPrice: BTree<PriceKey, Slot>;
  readonly byBid: BTree<BidKey, Slot>;
};

export type ModelGroup = {
  readonly model: string;
  readonly buckets: Map<string, Bucket>;
  size: number;
};

const byPriceOrder = (a: PriceKey, b: PriceKey) => a.price - b.price || a.id - b.id;
const byBidOrder = (a: BidKey, b: BidKey) => a.minBid - b.minBid || a.id - b.id;

export function normalizeRegion(region: string): string {
  return region.trim().toLowerCase();
}

export class BookIndex {
  readonly slots = new Map<string, Slot>();
  readonly models = new Map<string, ModelGroup>();
  private nextId = 1;

  constructor(private readonly options: MatchingOptions) {}

  get size(): number {
    return this.slots.size;
  }

  /** Adds or replaces the entry under its key. An older `seq` than the one held is ignored (returns false). */
  upsert(entry: OfferEntry): boolean {
    let slot = this.slots.get(entry.key);
    if (slot && entry.seq < slot.seq) return false;
    const price = toIndexNumber(entry.offer.pricePerUnitSecond);
    const minBid = toIndexNumber(entry.offer.minBidPerUnitSecond);
    const region = normalizeRegion(entry.machine.region);
    const model = entry.machine.model;
    if (slot && (slot.model !== model || slot.region !== region)) {
      this.unlink(slot);
      slot = undefined;
    }
    if (!slot) {
      slot = new Slot(this.nextId++);
      this.fill(slot, entry, price, minBid, model, region);
      this.link(slot);
      return true;
    }
    const bucket = slot.bucket;
    if (slot.price !== price) {
      bucket.byPrice.delete(slot);
      slot.price = price;
      bucket.byPrice.set(slot, slot);
    }
    if (slot.minBid !== minBid) {
      if (slot.minBid > 0) bucket.byBid.delete(slot);
      slot.minBid = minBid;
      if (minBid > 0) bucket.byBid.set(slot, slot);
    }
    this.fill(slot, entry, price, minBid, model, region);
    return true;
  }

  remove(key: string): boolean {
    const slot = this.slots.get(key);
    if (!slot) return false;
    this.unlink(slot);
    return true;
  }

  /** Ranking weights changed: refresh every slot's precomputed part of the cost. */
  refreshStaticCosts(): void {
    for (const slot of this.slots.values()) slot.staticCost = this.staticCost(slot.entry, slot.reputation);
  }

  private fill(slot: Slot, entry: OfferEntry, price: number, minBid: number, model: string, region: string): void {
    slot.entry = entry;
    slot.key = entry.key;
    slot.seq = entry.seq;
    slot.model = model;
    slot.region = region;
    slot.price = price;
    slot.minBid = minBid;
    const lowest = entry.capacity.lowestInterruptibleBid;
    slot.lowestBid = lowest === null ? Number.POSITIVE_INFINITY : toIndexNumber(lowest);
    slot.free = entry.capacity.freeUnits;
    slot.interruptibleUnits = entry.capacity.interruptibleUnits;
    slot.units = entry.machine.units;
    slot.vramMiB = entry.machine.vramMiB;
    slot.expiry = entry.offer.expiry;
    slot.minDuration = entry.offer.minDuration;
    slot.maxDuration = entry.offer.maxDuration;
    slot.attestedAt = entry.attestedAt ?? -1;
    slot.attestationExpiry = entry.attestationExpiry ?? -1;
    slot.reputation = reputationScore(entry.reputation);
    slot.staticCost = this.staticCost(entry, slot.reputation);
    slot.clusterKey = entry.machine.cluster === NO_CLUSTER ? "" : `${model}|${entry.machine.cluster}`;
  }

  private staticCost(entry: OfferEntry, reputation: number): number {
    const { weights, latencyCeilingMs, unknownLatencyMs } = this.options;
    const latency = Math.min(entry.latencyMs ?? unknownLatencyMs, latencyCeilingMs) / latencyCeilingMs;
    return weights.reputation * (1 - reputation) + weights.latency * latency;
  }

  private link(slot: Slot): void {
    let group = this.models.get(slot.model);
    if (!group) {
      group = { model: slot.model, buckets: new Map(), size: 0 };
      this.models.set(slot.model, group);
    }
    let bucket = group.buckets.get(slot.region);
    if (!bucket) {
      bucket = {
        model: slot.model,
        region: slot.region,
        byPrice: new BTree<PriceKey, Slot>(undefined, byPriceOrder),
        byBid: new BTree<BidKey, Slot>(undefined, byBidOrder),
      };
      group.buckets.set(slot.region, bucket);
    }
    slot.bucket = bucket;
    bucket.byPrice.set(slot, slot);
    if (slot.minBid > 0) bucket.byBid.set(slot, slot);
    group.size++;
    this.slots.set(slot.key, slot);
  }

  private unlink(slot: Slot): void {
    const bucket = slot.bucket;
    bucket.byPrice.delete(slot);
    if (slot.minBid > 0) bucket.byBid.delete(slot);
    const group = this.models.get(slot.model)!;
    group.size--;
    if (bucket.byPrice.size === 0) group.buckets.delete(slot.region);
    if (group.size === 0) this.models.delete(slot.model);
    this.slots.delete(slot.key);
  }
}

/**
 * Visits a bucket's slots by ascending on-demand price from `fromPrice` up to `maxPrice`
 * (inclusive); `visit` returns true to stop. Returns the number of slots visited.
 */
export function walkByPrice(bucket: Bucket, fromPrice: number, maxPrice: number, visit: (slot: Slot) => boolean | void): number {
  let visited = 0;
  bucket.byPrice.editRange({ price: fromPrice, id: 0 }, { price: maxPrice, id: Number.MAX_SAFE_INTEGER }, true, (_key, slot) => {
    visited++;
    if (visit(slot) === true) return { break: visited };
    return undefined;
  });
  return visited;
}

/** Like walkByPrice over the interruptible tree, by minimum bid. */
export function walkByBid(bucket: Bucket, fromBid: number, maxBid: number, visit: (slot: Slot) => boolean | void): number {
  let visited = 0;
  bucket.byBid.editRange({ minBid: fromBid, id: 0 }, { minBid: maxBid, id: Number.MAX_SAFE_INTEGER }, true, (_key, slot) => {
    visited++;
    if (visit(slot) === true) return { break: visited };
    return undefined;
  });
  return visited;
}

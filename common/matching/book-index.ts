/**
 * The engine's index of the offer book. Offers are grouped by GPU model, then by region; each
 * (model, region) bucket, and one bucket per model for requests without a region, keeps sorted
 * lists: every offer by on-demand price; machines
 * selling interruptible capacity by minimum bid and by their fixed ranking cost. A request
 * names a few models and regions, so it touches a few buckets, finds its price limit by binary
 * search and walks only the offers under it: O(log n + k). Clustered machines are also listed
 * per model, by cluster, for multi-machine requests.
 *
 * A list keeps, beside its slots, parallel arrays of the numbers the hot loops test first (sort
 * key, fixed cost, units available, minimum bid). Most offers a walk meets are rejected on
 * those contiguous numbers without touching the slot object, which at 100,000 offers is the
 * difference between a cache miss per offer and none.
 *
 * Updates are incremental. A slot (the indexed form of an entry) lives as long as its key. A
 * capacity change rewrites numbers in place; a price change moves the slot within its list: a
 * binary search and an array splice, O(bucket) memory moves, microseconds for buckets of
 * thousands.
 */
import type { OfferEntry } from "./entry.js";
import { NO_CLUSTER, reputationScore } from "./entry.js";
import { toIndexNumber } from "./money.js";
import type { MatchingOptions } from "./options.js";

/**
 * An indexed entry: its identity, sort keys and what candidates are built from. The numbers the
 * checks read live in the columns of the lists that hold it (SlotList).
 */
export class Slot {
  entry!: OfferEntry;
  key!: string;
  seq = 0;
  model!: string;
  region!: string;
  /** Its (model, region) bucket. */
  bucket!: Bucket;
  /** Its model's all-regions bucket. */
  modelBucket!: Bucket;
  price = 0;
  minBid = 0;
  // Fields holding fractions start as fractions so every slot keeps one field layout (V8 would
  // otherwise change the representation on the first fractional write).
  reputation = 0.5;
  /** Reputation and latency part of the ranking cost: fixed per entry, so computed once. */
  staticCost = 0.5;
  /** free + units of interruptible leases: the most this machine could give a request. */
  maxAvailable = 0;
  /** `model|cluster` for clustered machines, empty when standalone. */
  clusterKey = "";
  /** A number for clusterKey, unique in this index; 0 when standalone. */
  clusterId = 0;
  /** CandidatePart.terms of this entry, written the first time a candidate needs it. */
  terms: string | undefined = undefined;

  constructor(readonly id: number) {}
}

/**
 * Slots sorted by (key, id), with one column per number the per-offer checks and the ranking
 * read (struct of arrays). The key is read through `keyOf` when a slot is placed or found; the
 * columns are what walks and checks read, so a walk over thousands of offers reads contiguous
 * numbers instead of thousands of scattered objects.
 */
export class SlotList {
  readonly slots: Slot[] = [];
  readonly keys: number[] = [];
  /** Slot.price (on-demand price per unit-second), whatever the list is sorted by. */
  readonly prices: number[] = [];
  /** Fixed part of the ranking cost (reputation, latency). */
  readonly costs: number[] = [];
  /** free + units held by interruptible leases: the most a request could get. */
  readonly available: number[] = [];
  readonly free: number[] = [];
  readonly lowestBids: number[] = [];
  readonly bids: number[] = [];
  readonly expiry: number[] = [];
  readonly minDuration: number[] = [];
  readonly maxDuration: number[] = [];
  readonly vramMiB: number[] = [];
  /** Host resources per unit the offer declares (0 when it declares none). */
  readonly cpuCores: number[] = [];
  readonly memoryMiB: number[] = [];
  readonly diskMiB: number[] = [];
  /** -1 when never attested. */
  readonly attestedAt: number[] = [];
  readonly attestationExpiry: number[] = [];
  /** Until when the quorum's attestations verified the GPUs by confidential-computing evidence; -1 when never. */
  readonly ccExpiry: number[] = [];
  readonly attestFailures: number[] = []; // OfferEntry.attestFailuresUntil.length: the most that can count (they only age out)
  readonly reputation: number[] = [];
  readonly units: number[] = [];
  /** Slot.clusterId: 0 when standalone. */
  readonly clusterIds: number[] = [];

  private readonly columns: number[][];
  /** How many slots have each `available` value; gives maxAvailable without a scan. */
  private readonly availableCounts: number[] = [];
  /** The largest `available` in the list: a walk for more units than this can skip the list. */
  maxAvailable = 0;
  /** Inserted, not yet placed (see insert). */
  private pending: Slot[] = [];

  /**
   * @param dirty where the list registers itself while slots wait to be placed, so that its
   *   owner settles every such list before a read; without one, inserts are placed at once.
   */
  constructor(
    private readonly keyOf: (slot: Slot) => number,
    private readonly dirty?: Set<SlotList>,
  ) {
    this.columns = [
      this.prices,
      this.costs,
      this.available,
      this.free,
      this.lowestBids,
      this.bids,
      this.expiry,
      this.minDuration,
      this.maxDuration,
      this.vramMiB,
      this.cpuCores,
      this.memoryMiB,
      this.diskMiB,
      this.attestedAt,
      this.attestationExpiry,
      this.ccExpiry,
      this.attestFailures,
      this.reputation,
      this.units,
      this.clusterIds,
    ];
  }

  get length(): number {
    return this.slots.length;
  }

  /** Index of the first slot whose key is above `limit` (= how many have a key at most `limit`). */
  upperBound(limit: number): number {
    this.settle();
    const keys = this.keys;
    let lo = 0;
    let hi = keys.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (keys[mid]! <= limit) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /**
   * Adds `slot`. The slot waits in a pending batch until the next read of the list (`settle`,
   * called by the index before a match and by every read that needs the order): a batch of a few
   * is placed one by one, a large one (a node loading its book, a benchmark building 1,000,000
   * offers) is sorted and merged into the columns in one pass, O(n + p log p) instead of p
   * splices of every column.
   */
  insert(slot: Slot): void {
    if (this.pending.length === 0) this.dirty?.add(this);
    this.pending.push(slot);
    if (!this.dirty) this.settle();
  }

  /** Places the pending slots; a no-op when none wait. */
  settle(): void {
    const pending = this.pending;
    if (pending.length === 0) return;
    this.pending = [];
    if (pending.length <= SPLICE_BATCH_MAX) {
      for (const slot of pending) this.place(slot);
      return;
    }
    const keyOf = this.keyOf;
    const keyed = pending.map((slot) => ({ slot, key: keyOf(slot) }));
    keyed.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : a.slot.id - b.slot.id));
    // Merge from the back, in place: grow every array by the batch, then fill positions from
    // the end with the larger of the last old slot and the last new one.
    let i = this.slots.length - 1;
    let j = keyed.length - 1;
    const total = this.slots.length + keyed.length;
    this.slots.length = total;
    this.keys.length = total;
    for (const column of this.columns) column.length = total;
    for (let k = total - 1; j >= 0; k--) {
      const incoming = keyed[j]!;
      if (i >= 0 && (this.keys[i]! > incoming.key || (this.keys[i] === incoming.key && this.slots[i]!.id > incoming.slot.id))) {
        this.slots[k] = this.slots[i]!;
        this.keys[k] = this.keys[i]!;
        for (const column of this.columns) column[k] = column[i]!;
        i--;
      } else {
        this.slots[k] = incoming.slot;
        this.keys[k] = incoming.key;
        this.write(k, incoming.slot);
        this.count(this.available[k]!, 1);
        j--;
      }
    }
  }

  /** One slot into its sorted place: a binary search and a splice of every column. */
  private place(slot: Slot): void {
    const at = this.position(this.keyOf(slot), slot.id);
    this.slots.splice(at, 0, slot);
    this.keys.splice(at, 0, this.keyOf(slot));
    if (at === this.slots.length - 1) {
      for (const column of this.columns) column.push(0);
    } else {
      for (const column of this.columns) column.splice(at, 0, 0);
    }
    this.write(at, slot);
    this.count(this.available[at]!, 1);
  }

  /** Removes `slot`, found by the key it was inserted with (call before changing that key). */
  remove(slot: Slot): void {
    this.settle();
    const at = this.indexOf(slot);
    this.count(this.available[at]!, -1);
    this.slots.splice(at, 1);
    this.keys.splice(at, 1);
    for (const column of this.columns) column.splice(at, 1);
  }

  /** Rewrites the columns of a slot whose sort key did not change. */
  refresh(slot: Slot): void {
    this.settle();
    const at = this.indexOf(slot);
    this.count(this.available[at]!, -1);
    this.write(at, slot);
    this.count(this.available[at]!, 1);
  }

  private count(available: number, delta: number): void {
    const counts = this.availableCounts;
    while (counts.length <= available) counts.push(0);
    counts[available]! += delta;
    if (delta > 0 && available > this.maxAvailable) this.maxAvailable = available;
    while (this.maxAvailable > 0 && counts[this.maxAvailable] === 0) this.maxAvailable--;
  }

  /** Where `slot` sits now (binary search by its key). */
  indexOf(slot: Slot): number {
    this.settle();
    const at = this.position(this.keyOf(slot), slot.id);
    if (this.slots[at] !== slot) throw new Error("matching index out of order: a slot is not where its key says");
    return at;
  }

  private write(at: number, slot: Slot): void {
    const entry = slot.entry;
    this.prices[at] = slot.price;
    this.costs[at] = slot.staticCost;
    this.available[at] = entry.capacity.freeUnits + entry.capacity.interruptibleUnits;
    this.free[at] = entry.capacity.freeUnits;
    const lowest = entry.capacity.lowestInterruptibleBid;
    this.lowestBids[at] = lowest === null ? Number.POSITIVE_INFINITY : toIndexNumber(lowest);
    this.bids[at] = slot.minBid;
    this.expiry[at] = entry.offer.expiry;
    this.minDuration[at] = entry.offer.minDuration;
    this.maxDuration[at] = entry.offer.maxDuration;
    this.vramMiB[at] = entry.machine.vramMiB;
    const resources = entry.resources;
    this.cpuCores[at] = resources === null ? 0 : resources.cpuCoresPerUnit;
    this.memoryMiB[at] = resources === null ? 0 : resources.memoryMiBPerUnit;
    this.diskMiB[at] = resources === null ? 0 : resources.diskMiBPerUnit;
    this.attestedAt[at] = entry.attestedAt ?? -1;
    this.attestationExpiry[at] = entry.attestationExpiry ?? -1;
    this.ccExpiry[at] = entry.ccExpiry ?? -1;
    this.attestFailures[at] = entry.attestFailuresUntil.length;
    this.reputation[at] = slot.reputation;
    this.units[at] = entry.machine.units;
    this.clusterIds[at] = slot.clusterId;
  }

  private position(key: number, id: number): number {
    const keys = this.keys;
    let lo = 0;
    let hi = keys.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const k = keys[mid]!;
      if (k < key || (k === key && this.slots[mid]!.id < id)) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
}

/** A pending batch up to this size is placed slot by slot; a larger one is sorted and merged. */
const SPLICE_BATCH_MAX = 32;

export type Bucket = {
  readonly model: string;
  readonly region: string;
  /** Every offer of the bucket by ascending (price, id). */
  readonly byPrice: SlotList;
  /** Offers selling interruptible capacity (minBid > 0) by ascending (minBid, id). */
  readonly byBid: SlotList;
  /** The same offers by ascending fixed ranking cost: interruptible requests walk this one. */
  readonly byCost: SlotList;
};

export type ModelGroup = {
  readonly model: string;
  /** By region. */
  readonly buckets: Map<string, Bucket>;
  /** Every offer of the model, any region: requests without a region walk this one list. */
  readonly all: Bucket;
  /**
   * The clustered machines of this model (any region) by ascending (clusterId, id): each cluster
   * is a run of consecutive positions, so a multi-machine request reads every cluster of the
   * model in one sequential pass over its columns instead of walking all of the model's offers.
   */
  readonly clustered: SlotList;
  size: number;
};

function newBucket(model: string, region: string, dirty: Set<SlotList>): Bucket {
  return { model, region, byPrice: new SlotList(priceOf, dirty), byBid: new SlotList(bidOf, dirty), byCost: new SlotList(costOf, dirty) };
}

const priceOf = (slot: Slot) => slot.price;
const bidOf = (slot: Slot) => slot.minBid;
const costOf = (slot: Slot) => slot.staticCost;
const clusterIdOf = (slot: Slot) => slot.clusterId;

function clusterKeyOf(entry: OfferEntry): string {
  // A reserved-term tier sells the same units as its machine's on-demand offer: it is matched
  // alone, never summed with that offer into a cluster group.
  return entry.machine.cluster === NO_CLUSTER || entry.tier > 0 ? "" : `${entry.machine.model}|${entry.machine.cluster}`;
}

export function normalizeRegion(region: string): string {
  return region.trim().toLowerCase();
}

export class BookIndex {
  readonly slots = new Map<string, Slot>();
  readonly models = new Map<string, ModelGroup>();
  private nextId = 1;
  private readonly clusterIds = new Map<string, number>();
  /** Lists holding inserted slots not yet placed: settled before any read of the index. */
  private readonly dirty = new Set<SlotList>();

  constructor(private readonly options: MatchingOptions) {}

  /** Places every inserted slot into its lists' order. The engine calls it before each match. */
  settle(): void {
    if (this.dirty.size === 0) return;
    for (const list of this.dirty) list.settle();
    this.dirty.clear();
  }

  get size(): number {
    return this.slots.size;
  }

  /** Adds or replaces the entry under its key. An older `seq` than the one held is ignored (returns false). */
  upsert(entry: OfferEntry): boolean {
    const held = this.slots.get(entry.key);
    if (held && entry.seq < held.seq) return false;
    const region = normalizeRegion(entry.machine.region);
    if (held && (held.model !== entry.machine.model || held.region !== region)) this.unlink(held);
    else if (held) {
      this.update(held, entry);
      return true;
    }
    const slot = new Slot(this.nextId++);
    this.fill(slot, entry);
    this.link(slot);
    return true;
  }

  remove(key: string): boolean {
    const slot = this.slots.get(key);
    if (!slot) return false;
    this.unlink(slot);
    return true;
  }

  /** Same model and region: take the slot out of the lists whose sort key changes, refresh the rest. */
  private update(slot: Slot, entry: OfferEntry): void {
    const clusterMoves = clusterKeyOf(entry) !== slot.clusterKey;
    if (clusterMoves) this.unlinkCluster(slot);
    const wasSeller = slot.minBid > 0;
    const price = toIndexNumber(entry.offer.pricePerUnitSecond);
    const minBid = toIndexNumber(entry.offer.minBidPerUnitSecond);
    const cost = this.staticCost(entry, reputationScore(entry.reputation));
    const priceMoves = price !== slot.price;
    const bidMoves = minBid !== slot.minBid;
    const costMoves = cost !== slot.staticCost;
    const buckets = [slot.bucket, slot.modelBucket];
    for (const bucket of buckets) {
      if (priceMoves) bucket.byPrice.remove(slot);
      if (wasSeller && bidMoves) bucket.byBid.remove(slot);
      if (wasSeller && (costMoves || bidMoves)) bucket.byCost.remove(slot);
    }
    this.fill(slot, entry);
    const isSeller = slot.minBid > 0;
    for (const bucket of buckets) {
      if (priceMoves) bucket.byPrice.insert(slot);
      else bucket.byPrice.refresh(slot);
      if (isSeller) {
        if (!wasSeller || bidMoves) bucket.byBid.insert(slot);
        else bucket.byBid.refresh(slot);
        if (!wasSeller || costMoves || bidMoves) bucket.byCost.insert(slot);
        else bucket.byCost.refresh(slot);
      }
    }
    if (clusterMoves) this.linkCluster(slot);
    else if (slot.clusterKey !== "") this.models.get(slot.model)!.clustered.refresh(slot);
  }

  private fill(slot: Slot, entry: OfferEntry): void {
    slot.entry = entry;
    slot.terms = undefined;
    slot.key = entry.key;
    slot.seq = entry.seq;
    slot.model = entry.machine.model;
    slot.region = normalizeRegion(entry.machine.region);
    slot.price = toIndexNumber(entry.offer.pricePerUnitSecond);
    slot.minBid = toIndexNumber(entry.offer.minBidPerUnitSecond);
    slot.maxAvailable = entry.capacity.freeUnits + entry.capacity.interruptibleUnits;
    slot.reputation = reputationScore(entry.reputation);
    slot.staticCost = this.staticCost(entry, slot.reputation);
    slot.clusterKey = clusterKeyOf(entry);
    slot.clusterId = slot.clusterKey === "" ? 0 : this.clusterNumber(slot.clusterKey);
  }

  private clusterNumber(clusterKey: string): number {
    let id = this.clusterIds.get(clusterKey);
    if (id === undefined) {
      id = this.clusterIds.size + 1;
      this.clusterIds.set(clusterKey, id);
    }
    return id;
  }

  private staticCost(entry: OfferEntry, reputation: number): number {
    const { weights, latencyCeilingMs, unknownLatencyMs } = this.options;
    const latency = Math.min(entry.latencyMs ?? unknownLatencyMs, latencyCeilingMs) / latencyCeilingMs;
    return weights.reputation * (1 - reputation) + weights.latency * latency;
  }

  private link(slot: Slot): void {
    let group = this.models.get(slot.model);
    if (!group) {
      group = { model: slot.model, buckets: new Map(), all: newBucket(slot.model, "*", this.dirty), clustered: new SlotList(clusterIdOf, this.dirty), size: 0 };
      this.models.set(slot.model, group);
    }
    let bucket = group.buckets.get(slot.region);
    if (!bucket) {
      bucket = newBucket(slot.model, slot.region, this.dirty);
      group.buckets.set(slot.region, bucket);
    }
    slot.bucket = bucket;
    slot.modelBucket = group.all;
    for (const b of [bucket, group.all]) {
      b.byPrice.insert(slot);
      if (slot.minBid > 0) {
        b.byBid.insert(slot);
        b.byCost.insert(slot);
      }
    }
    group.size++;
    this.slots.set(slot.key, slot);
    this.linkCluster(slot);
  }

  private unlink(slot: Slot): void {
    this.unlinkCluster(slot);
    const bucket = slot.bucket;
    for (const b of [bucket, slot.modelBucket]) {
      b.byPrice.remove(slot);
      if (slot.minBid > 0) {
        b.byBid.remove(slot);
        b.byCost.remove(slot);
      }
    }
    const group = this.models.get(slot.model)!;
    group.size--;
    if (bucket.byPrice.length === 0) group.buckets.delete(slot.region);
    if (group.size === 0) this.models.delete(slot.model);
    this.slots.delete(slot.key);
  }

  private linkCluster(slot: Slot): void {
    if (slot.clusterKey === "") return;
    this.models.get(slot.model)!.clustered.insert(slot);
  }

  /** Call before the slot's clusterId changes (the list is sorted by it). */
  private unlinkCluster(slot: Slot): void {
    if (slot.clusterKey === "") return;
    this.models.get(slot.model)!.clustered.remove(slot);
  }
}

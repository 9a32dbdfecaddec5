/**
 * The matching engine: an incrementally maintained index of the offer book and the match of a
 * request against it. Pure and in-process: the SDK runs it on offers it fetched, a node runs it
 * on its gossiped book. No I/O; time comes from an injectable clock.
 */
import type { OfferEntry } from "./entry.js";
import { type Bucket, BookIndex, type Slot, type SlotList } from "./book-index.js";
import { type Exclusions, type MatchContext, availableUnits, capacityTier, firstFailure } from "./constraints.js";
import { type NoMatchExplanation, explainNoMatch } from "./explain.js";
import { SECONDS_PER_HOUR, toIndexNumber } from "./money.js";
import { type MatchingOptions, type MatchingOptionsInput, parseMatchingOptions } from "./options.js";
import type { MatchRequest } from "./request.js";

/**
 * Cost added to a candidate that needs preemption: larger than any other cost sum, so such
 * candidates always rank below every candidate served from free units.
 */
export const PREEMPT_PENALTY = 1000;

export type CandidatePart = {
  readonly entry: OfferEntry;
  /** Units to lease on this machine. */
  readonly units: number;
  /** True when some of these units are held by interruptible leases that the lease would preempt. */
  readonly preempt: boolean;
  /** What the lease costs per unit-second: the offer price on demand, the bid when interruptible. */
  readonly pricePerUnitSecond: bigint;
};

export type CostBreakdown = {
  /** weights.price × premium over the cheapest fitting offer. */
  price: number;
  /** weights.reputation × (1 − score). */
  reputation: number;
  /** weights.freshness × attestation age / horizon. */
  freshness: number;
  /** weights.latency × latency / ceiling. */
  latency: number;
  /** PREEMPT_PENALTY when the candidate needs preemption. */
  preempt: number;
  /** multiMachinePenalty for a group of machines. */
  multiMachine: number;
};

export type Candidate = {
  /** One part for a single machine; several for a group on a cluster's fast interconnect. */
  readonly parts: readonly CandidatePart[];
  readonly units: number;
  readonly preempt: boolean;
  /** Units-weighted mean price per GPU-hour, base units. */
  readonly pricePerGpuHour: bigint;
  /** Lower is better. */
  readonly cost: number;
  readonly breakdown: CostBreakdown;
};

export type MatchResult =
  | { readonly ok: true; readonly request: MatchRequest; readonly candidates: readonly Candidate[] }
  | { readonly ok: false; readonly request: MatchRequest; readonly explanation: NoMatchExplanation };

export type MatchOptions = {
  /** Unix seconds; defaults to the engine's clock. */
  now?: number;
  /** Machines already tried at a given seq (see Exclusions). */
  exclude?: Exclusions;
  /** Candidates wanted; defaults to options.maxCandidates. */
  limit?: number;
};

/** A machine in a list: its slot and its position, valid for the duration of one match. */
type At = { list: SlotList; i: number; slot: Slot };

type Scored = { at: At; base: number; priceTerm: number; freshness: number };

/** The best `limit` items by cost, kept sorted; ties broken by key so results are reproducible. */
class TopN<T extends { cost: number; tieKey: string }> {
  readonly items: T[] = [];
  constructor(readonly limit: number) {}
  get full(): boolean {
    return this.items.length >= this.limit;
  }
  get worst(): number {
    return this.items.length === 0 ? Number.POSITIVE_INFINITY : this.items[this.items.length - 1].cost;
  }
  offer(item: T): void {
    const items = this.items;
    if (items.length >= this.limit) {
      const last = items[items.length - 1];
      if (item.cost > last.cost || (item.cost === last.cost && item.tieKey >= last.tieKey)) return;
      items.pop();
    }
    let i = items.length;
    while (i > 0 && (items[i - 1].cost > item.cost || (items[i - 1].cost === item.cost && items[i - 1].tieKey > item.tieKey))) i--;
    items.splice(i, 0, item);
  }
}

/** A kept candidate, built into a Candidate only if it survives to the end. */
type Ranked = {
  cost: number;
  tieKey: string;
  slot: Slot;
  tier: number;
  priceTerm: number;
  freshness: number;
  group: GroupPlan | null;
};

type ViableCluster = { members: At[]; cheapest: number; bound: number };

type GroupPlan = {
  chosen: Scored[];
  take: Map<Slot, { units: number; preempt: boolean }>;
  preempt: boolean;
  sums: { price: number; reputation: number; freshness: number; latency: number };
};

/**
 * @example
 * import { MatchingEngine, parseMatchRequest } from "suanli/common/matching";
 * const engine = new MatchingEngine({ weights: { latency: 0.2 } });
 * engine.upsert(entry);
 * const result = engine.match(parseMatchRequest({ gpuType: "A100", gpuCount: 4, duration: 3600, maxPricePerGpuHour: "2.50" }));
 * if (!result.ok) console.log(result.explanation.message);
 */
export class MatchingEngine {
  readonly options: MatchingOptions;
  private readonly index: BookIndex;
  private readonly clock: () => number;

  constructor(options: MatchingOptionsInput = {}, deps: { now?: () => number } = {}) {
    this.options = parseMatchingOptions(options);
    this.index = new BookIndex(this.options);
    this.clock = deps.now ?? (() => Math.floor(Date.now() / 1000));
  }

  /** Number of offers indexed. */
  get size(): number {
    return this.index.size;
  }

  /** Adds an entry or replaces the one under its key; an entry older (by seq) than the one held is ignored and false returned. */
  upsert(entry: OfferEntry): boolean {
    return this.index.upsert(entry);
  }

  /** Removes the offer under `key` (`offerKey(provider, machineId)`); false if none. */
  remove(key: string): boolean {
    return this.index.remove(key);
  }

  get(key: string): OfferEntry | undefined {
    return this.index.slots.get(key)?.entry;
  }

  /** Every indexed entry (unordered). */
  *entries(): IterableIterator<OfferEntry> {
    for (const slot of this.index.slots.values()) yield slot.entry;
  }

  /**
   * Ranks the offers that fit a validated request (parseMatchRequest). Without any, the result
   * explains which constraint removed how many offers and which offers came nearest.
   */
  match(request: MatchRequest, options: MatchOptions = {}): MatchResult {
    const now = options.now ?? this.clock();
    const limit = options.limit ?? this.options.maxCandidates;
    const ctx: MatchContext = {
      request,
      now,
      validUntil: now + this.options.minOfferValiditySeconds,
      count: request.gpuCount,
      duration: request.duration,
      minVramMiB: request.minVramMiB,
      attestedOnly: request.attestedOnly,
      minReputation: request.minReputation,
      interruptible: request.interruptible,
      priceLimit: toIndexNumber(request.interruptible ? request.bidPerUnitSecond! : request.maxPricePerUnitSecond),
      exclusions: options.exclude && options.exclude.size > 0 ? options.exclude : null,
    };
    const buckets = this.selectBuckets(request);
    const top = new TopN<Ranked>(limit);
    const groups = request.colocation === "cluster" ? this.viableClusters(ctx) : [];
    if (request.interruptible) {
      this.rankInterruptible(ctx, buckets, top);
      this.rankGroups(top, groups, ctx, 0);
    } else {
      // The price term is relative to the cheapest offer that can be part of a candidate.
      let cheapest = this.cheapestSingle(ctx, buckets);
      for (const group of groups) if (group.cheapest < cheapest) cheapest = group.cheapest;
      if (cheapest < Number.POSITIVE_INFINITY) {
        this.rankOnDemand(ctx, buckets, top, cheapest);
        this.rankGroups(top, groups, ctx, cheapest);
      }
    }
    const candidates = top.items.map((item) => this.build(item, ctx));
    if (candidates.length > 0) return { ok: true, request, candidates };
    return { ok: false, request, explanation: explainNoMatch(this.index, ctx, this.options) };
  }

  private selectBuckets(request: MatchRequest): Bucket[] {
    const buckets: Bucket[] = [];
    for (const model of request.gpuType.models) {
      const group = this.index.models.get(model);
      if (!group) continue;
      if (request.regions === null) {
        for (const bucket of group.buckets.values()) buckets.push(bucket);
      } else {
        for (const region of request.regions) {
          const bucket = group.buckets.get(region);
          if (bucket) buckets.push(bucket);
        }
      }
    }
    return buckets;
  }

  private freshness(attestedAt: number, now: number): number {
    if (attestedAt < 0) return this.options.weights.freshness;
    const age = (now - attestedAt) / this.options.freshnessHorizonSeconds;
    return this.options.weights.freshness * (age <= 0 ? 0 : age >= 1 ? 1 : age);
  }

  private priceTerm(price: number, cheapest: number): number {
    return (this.options.weights.price * (price - cheapest)) / (cheapest > 0 ? cheapest : 1);
  }

  /** The cheapest price of a single machine that fits; each bucket is walked only up to the best so far. */
  private cheapestSingle(ctx: MatchContext, buckets: Bucket[]): number {
    let cheapest = Number.POSITIVE_INFINITY;
    const count = ctx.count;
    for (let b = 0; b < buckets.length; b++) {
      const list = buckets[b].byPrice;
      if (list.maxAvailable < count) continue;
      const { keys, available } = list;
      const limit = Math.min(ctx.priceLimit, cheapest);
      for (let i = 0; i < keys.length; i++) {
        if (keys[i] > limit) break;
        if (available[i] < count) continue;
        if (firstFailure(list, i, ctx) === 0 && capacityTier(list, i, ctx, count) >= 0) {
          cheapest = keys[i];
          break;
        }
      }
    }
    return cheapest;
  }

  /**
   * On demand, single machines: a walk by ascending price that stops once the price term alone
   * exceeds the worst of the best `limit` costs, since every other term is non-negative; offers
   * whose price term and fixed cost together exceed it are skipped.
   */
  private rankOnDemand(ctx: MatchContext, buckets: Bucket[], top: TopN<Ranked>, cheapest: number): void {
    const weight = this.options.weights.price;
    const denominator = cheapest > 0 ? cheapest : 1;
    const count = ctx.count;
    for (let b = 0; b < buckets.length; b++) {
      const list = buckets[b].byPrice;
      if (list.maxAvailable < count) continue;
      const { keys, costs, available } = list;
      for (let i = 0; i < keys.length; i++) {
        const price = keys[i];
        if (price > ctx.priceLimit) break;
        const priceTerm = (weight * (price - cheapest)) / denominator;
        if (top.full) {
          const worst = top.worst;
          if (priceTerm > worst) break;
          if (priceTerm + costs[i] > worst) continue;
        }
        if (available[i] < count || firstFailure(list, i, ctx) !== 0) continue;
        const tier = capacityTier(list, i, ctx, count);
        if (tier >= 0) this.offerSingle(top, list, i, tier, priceTerm, ctx);
      }
    }
  }

  /**
   * Interruptible, single machines: every offer's price is the renter's bid, so the cost is the
   * fixed part plus freshness; the walk goes by ascending fixed cost and stops once it alone
   * exceeds the worst kept cost.
   */
  private rankInterruptible(ctx: MatchContext, buckets: Bucket[], top: TopN<Ranked>): void {
    const count = ctx.count;
    for (let b = 0; b < buckets.length; b++) {
      const list = buckets[b].byCost;
      if (list.maxAvailable < count) continue;
      const { keys, available, bids } = list;
      for (let i = 0; i < keys.length; i++) {
        if (top.full && keys[i] > top.worst) break;
        if (bids[i] > ctx.priceLimit || available[i] < count || firstFailure(list, i, ctx) !== 0) continue;
        const tier = capacityTier(list, i, ctx, count);
        if (tier >= 0) this.offerSingle(top, list, i, tier, 0, ctx);
      }
    }
  }

  private offerSingle(top: TopN<Ranked>, list: SlotList, i: number, tier: number, priceTerm: number, ctx: MatchContext): void {
    const freshness = this.freshness(list.attestedAt[i], ctx.now);
    const cost = priceTerm + list.costs[i] + freshness + tier * PREEMPT_PENALTY;
    if (top.full && cost > top.worst) return;
    const slot = list.slots[i];
    top.offer({ cost, tieKey: slot.key, slot, tier, priceTerm, freshness, group: null });
  }

  private build(item: Ranked, ctx: MatchContext): Candidate {
    const group = item.group;
    if (group === null) {
      const part = this.part(item.slot, ctx.count, item.tier === 1, ctx);
      return {
        parts: [part],
        units: ctx.count,
        preempt: item.tier === 1,
        pricePerGpuHour: part.pricePerUnitSecond * SECONDS_PER_HOUR,
        cost: item.cost,
        breakdown: this.breakdown(item.slot, item.priceTerm, item.freshness, item.tier === 1 ? PREEMPT_PENALTY : 0, 0),
      };
    }
    const parts = group.chosen.map((s) => this.part(s.at.slot, group.take.get(s.at.slot)!.units, group.take.get(s.at.slot)!.preempt, ctx));
    let total = 0n;
    for (const part of parts) total += BigInt(part.units) * part.pricePerUnitSecond;
    return {
      parts,
      units: ctx.count,
      preempt: group.preempt,
      pricePerGpuHour: (total * SECONDS_PER_HOUR) / BigInt(ctx.count),
      cost: item.cost,
      breakdown: { ...group.sums, preempt: group.preempt ? PREEMPT_PENALTY : 0, multiMachine: this.options.multiMachinePenalty },
    };
  }

  /**
   * Clusters whose machines that fit the request (region, price or bid, per-offer checks) offer
   * at least the requested units together. Walks the cluster index of the requested models,
   * not the book: O(clustered machines of those models).
   */
  private viableClusters(ctx: MatchContext): ViableCluster[] {
    const request = ctx.request;
    const viable: ViableCluster[] = [];
    for (const model of request.gpuType.models) {
      const group = this.index.models.get(model);
      if (!group) continue;
      for (const cluster of group.clusters.values()) {
        // The totals bound what the cluster could offer: most clusters are skipped unread.
        if (cluster.available < ctx.count || (ctx.interruptible ? cluster.cheapestBid : cluster.cheapest) > ctx.priceLimit) continue;
        const members: At[] = [];
        let units = 0;
        let cheapest = Number.POSITIVE_INFINITY;
        for (const slot of cluster.members) {
          if (request.regions !== null && !request.regions.includes(slot.region)) continue;
          if (ctx.interruptible ? slot.minBid === 0 || slot.minBid > ctx.priceLimit : slot.price > ctx.priceLimit) continue;
          const list = slot.bucket.byPrice;
          const i = list.indexOf(slot);
          if (firstFailure(list, i, ctx) !== 0) continue;
          const available = availableUnits(list, i, ctx);
          if (available === 0) continue;
          members.push({ list, i, slot });
          units += available;
          if (slot.price < cheapest) cheapest = slot.price;
        }
        if (units >= ctx.count && members.length > 1) viable.push({ members, cheapest, bound: 0 });
      }
    }
    return viable;
  }

  /**
   * Groups in order of a lower bound on their cost (their best member's price term and fixed
   * cost, plus the multi-machine penalty: a units-weighted mean is never below its smallest
   * term), so building stops once the bound exceeds the worst kept candidate.
   */
  private rankGroups(top: TopN<Ranked>, groups: ViableCluster[], ctx: MatchContext, cheapest: number): void {
    if (groups.length === 0) return;
    for (const group of groups) {
      let bound = Number.POSITIVE_INFINITY;
      for (const { slot } of group.members) {
        const term = (ctx.interruptible ? 0 : this.priceTerm(slot.price, cheapest)) + slot.staticCost;
        if (term < bound) bound = term;
      }
      group.bound = bound + this.options.multiMachinePenalty;
    }
    groups.sort((a, b) => a.bound - b.bound);
    for (const group of groups) {
      if (top.full && group.bound > top.worst) break;
      this.offerGroup(top, group.members, ctx, cheapest);
    }
  }

  /**
   * A group on one cluster: free units from its best-ranked machines first, then preemptible
   * ones; pays multiMachinePenalty. Skipped when one machine alone would serve (that machine is
   * already a single candidate).
   */
  private offerGroup(top: TopN<Ranked>, members: At[], ctx: MatchContext, cheapest: number): void {
    const scored: Scored[] = members.map((at) => {
      const priceTerm = ctx.interruptible ? 0 : this.priceTerm(at.slot.price, cheapest);
      const freshness = this.freshness(at.list.attestedAt[at.i], ctx.now);
      return { at, base: priceTerm + at.slot.staticCost + freshness, priceTerm, freshness };
    });
    scored.sort((a, b) => a.base - b.base || (a.at.slot.key < b.at.slot.key ? -1 : 1));
    const take = new Map<Slot, { units: number; preempt: boolean }>();
    let missing = ctx.count;
    for (const pass of [0, 1]) {
      for (const { at } of scored) {
        if (missing === 0) break;
        const free = at.list.free[at.i];
        const room = pass === 0 ? free : availableUnits(at.list, at.i, ctx) - free;
        const units = Math.min(room, missing);
        if (units <= 0) continue;
        const held = take.get(at.slot);
        take.set(at.slot, { units: (held?.units ?? 0) + units, preempt: pass === 1 || (held?.preempt ?? false) });
        missing -= units;
      }
    }
    if (take.size < 2) return;
    const chosen = scored.filter((s) => take.has(s.at.slot));
    const preempt = chosen.some((s) => take.get(s.at.slot)!.preempt);
    let weighted = 0;
    const sums = { price: 0, reputation: 0, freshness: 0, latency: 0 };
    for (const s of chosen) {
      const share = take.get(s.at.slot)!.units / ctx.count;
      weighted += share * s.base;
      const b = this.breakdown(s.at.slot, s.priceTerm, s.freshness, 0, 0);
      sums.price += share * b.price;
      sums.reputation += share * b.reputation;
      sums.freshness += share * b.freshness;
      sums.latency += share * b.latency;
    }
    const cost = weighted + this.options.multiMachinePenalty + (preempt ? PREEMPT_PENALTY : 0);
    const first = chosen[0].at.slot;
    top.offer({ cost, tieKey: first.clusterKey, slot: first, tier: 0, priceTerm: 0, freshness: 0, group: { chosen, take, preempt, sums } });
  }

  private part(slot: Slot, units: number, preempt: boolean, ctx: MatchContext): CandidatePart {
    return {
      entry: slot.entry,
      units,
      preempt,
      pricePerUnitSecond: ctx.interruptible ? ctx.request.bidPerUnitSecond! : slot.entry.offer.pricePerUnitSecond,
    };
  }

  private breakdown(slot: Slot, priceTerm: number, freshness: number, preempt: number, multiMachine: number): CostBreakdown {
    const { weights, latencyCeilingMs, unknownLatencyMs } = this.options;
    const latency = weights.latency * (Math.min(slot.entry.latencyMs ?? unknownLatencyMs, latencyCeilingMs) / latencyCeilingMs);
    return { price: priceTerm, reputation: weights.reputation * (1 - slot.reputation), freshness, latency, preempt, multiMachine };
  }
}

/**
 * The matching engine: an incrementally maintained index of the offer book and the match of a
 * request against it. Pure and in-process: the SDK runs it on offers it fetched, a node runs it
 * on its gossiped book. No I/O; time comes from an injectable clock.
 */
import type { OfferEntry } from "./entry.js";
import { type Bucket, BookIndex, type Slot, type SlotList } from "./book-index.js";
import { type Exclusions, type MatchContext, availableUnits, capacityTier, firstFailure, hostNeeds } from "./constraints.js";
import { type NoMatchExplanation, explainNoMatch } from "./explain.js";
import { SECONDS_PER_HOUR, toIndexNumber } from "./money.js";
import { type MatchingOptions, type MatchingOptionsInput, parseMatchingOptions } from "./options.js";
import type { Candidate, CandidatePart, CostBreakdown } from "./candidate.js";
import { TopN, type Ranked, type ViableCluster } from "./ranking.js";
import type { MatchRequest } from "./request.js";

/**
 * Cost added to a candidate that needs preemption: larger than any other cost sum, so such
 * candidates always rank below every candidate served from free units.
 */
export const PREEMPT_PENALTY = 1000;

export type { Candidate, CandidatePart, CostBreakdown } from "./candidate.js";

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

/**
 * Units a cluster member at position `i` of its model's cluster list can give the request (0 when it
 * cannot take part): in a requested region, under the price limit (interruptible: selling
 * interruptible capacity at a minimum bid under the bid), passing the per-offer checks.
 */
function memberUnits(list: SlotList, i: number, ctx: MatchContext): number {
  const regions = ctx.request.regions;
  if (regions !== null && !regions.includes(list.slots[i]!.region)) return 0;
  if (ctx.interruptible ? list.bids[i] === 0 || list.bids[i]! > ctx.priceLimit : list.prices[i]! > ctx.priceLimit) return 0;
  if (firstFailure(list, i, ctx) !== 0) return 0;
  return availableUnits(list, i, ctx);
}

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
  /** The ranking of the match in progress (reset by every match). */
  private readonly top = new TopN();
  /** Scratch arrays for group formation (matching is synchronous, so one set serves every match). */
  private readonly scratch = {
    base: [] as number[],
    order: [] as number[],
    take: [] as number[],
    preempted: [] as number[],
    lists: [] as SlotList[],
    positions: [] as number[],
    slots: [] as Slot[],
  };

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
    this.index.settle();
    const now = options.now ?? this.clock();
    const limit = options.limit ?? this.options.maxCandidates;
    const ctx: MatchContext = {
      request,
      now,
      validUntil: now + this.options.minOfferValiditySeconds,
      count: request.gpuCount,
      duration: request.duration,
      minVramMiB: request.minVramMiB,
      ...hostNeeds(request),
      attestedOnly: request.attestedOnly,
      gpuIdentityVerified: request.gpuIdentityVerified,
      minReputation: request.minReputation,
      maxAttestFailures: request.maxAttestFailures,
      interruptible: request.interruptible,
      priceLimit: toIndexNumber(request.interruptible ? request.bidPerUnitSecond! : request.maxPricePerUnitSecond),
      exclusions: options.exclude && options.exclude.size > 0 ? options.exclude : null,
    };
    const buckets = this.selectBuckets(request);
    const top = this.top;
    top.reset(limit);
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
    // Tested on the kept items, not on an empty candidates array: an empty array has another
    // elements kind, and reading it would throw away this function's optimized code.
    if (top.items.length === 0) return { ok: false, request, explanation: explainNoMatch(this.index, ctx, this.options) };
    const candidates = top.items.map((item) => this.build(item, ctx));
    return { ok: true, request, candidates };
  }

  private selectBuckets(request: MatchRequest): Bucket[] {
    const buckets: Bucket[] = [];
    for (const model of request.gpuType.models) {
      const group = this.index.models.get(model);
      if (!group) continue;
      if (request.regions === null) {
        buckets.push(group.all);
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
      const list = buckets[b]!.byPrice;
      if (list.maxAvailable < count) continue;
      const { keys, available } = list;
      const limit = Math.min(ctx.priceLimit, cheapest);
      for (let i = 0; i < keys.length; i++) {
        if (keys[i]! > limit) break;
        if (available[i]! < count) continue;
        if (firstFailure(list, i, ctx) === 0 && capacityTier(list, i, ctx, count) >= 0) {
          cheapest = keys[i]!;
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
  private rankOnDemand(ctx: MatchContext, buckets: Bucket[], top: TopN, cheapest: number): void {
    const weight = this.options.weights.price;
    const denominator = cheapest > 0 ? cheapest : 1;
    const count = ctx.count;
    for (let b = 0; b < buckets.length; b++) {
      const list = buckets[b]!.byPrice;
      if (list.maxAvailable < count) continue;
      const { keys, costs, available } = list;
      for (let i = 0; i < keys.length; i++) {
        const price = keys[i]!;
        if (price > ctx.priceLimit) break;
        const priceTerm = (weight * (price - cheapest)) / denominator;
        if (top.full) {
          const worst = top.worst;
          if (priceTerm > worst) break;
          if (priceTerm + costs[i]! > worst) continue;
        }
        if (available[i]! < count || firstFailure(list, i, ctx) !== 0) continue;
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
  private rankInterruptible(ctx: MatchContext, buckets: Bucket[], top: TopN): void {
    const count = ctx.count;
    for (let b = 0; b < buckets.length; b++) {
      const list = buckets[b]!.byCost;
      if (list.maxAvailable < count) continue;
      const { keys, available, bids } = list;
      for (let i = 0; i < keys.length; i++) {
        if (top.full && keys[i]! > top.worst) break;
        if (bids[i]! > ctx.priceLimit || available[i]! < count || firstFailure(list, i, ctx) !== 0) continue;
        const tier = capacityTier(list, i, ctx, count);
        if (tier >= 0) this.offerSingle(top, list, i, tier, 0, ctx);
      }
    }
  }

  private offerSingle(top: TopN, list: SlotList, i: number, tier: number, priceTerm: number, ctx: MatchContext): void {
    const freshness = this.freshness(list.attestedAt[i]!, ctx.now);
    const cost = priceTerm + list.costs[i]! + freshness + tier * PREEMPT_PENALTY;
    if (top.full && cost > top.worst) return;
    top.offer(cost, list.slots[i]!, tier, priceTerm, freshness, null, 0);
  }

  private build(item: Ranked, ctx: MatchContext): Candidate {
    const group = item.group;
    const slot = item.slot!;
    if (group === null) {
      const part = this.part(slot, ctx.count, item.tier === 1, ctx);
      return {
        parts: [part],
        units: ctx.count,
        preempt: item.tier === 1,
        pricePerGpuHour: part.pricePerUnitSecond * SECONDS_PER_HOUR,
        cost: item.cost,
        breakdown: this.breakdown(slot, item.priceTerm, item.freshness, item.tier === 1 ? PREEMPT_PENALTY : 0, 0),
      };
    }
    return this.buildGroup(item, group, ctx);
  }

  /**
   * Clusters whose machines that fit the request (region, price or bid, per-offer checks) offer
   * at least the requested units together. Reads the clustered machines of the requested models
   * in one pass over each model's cluster list, a cluster being a run of positions there.
   * Members are gathered again later, for the clusters that may enter the top.
   */
  private viableClusters(ctx: MatchContext): ViableCluster[] {
    const viable: ViableCluster[] = [];
    const count = ctx.count;
    for (const model of ctx.request.gpuType.models) {
      const list = this.index.models.get(model)?.clustered;
      if (list === undefined) continue;
      const { clusterIds, prices } = list;
      const length = list.length;
      let i = 0;
      while (i < length) {
        const id = clusterIds[i];
        const start = i;
        let units = 0;
        let machines = 0;
        let cheapest = Number.POSITIVE_INFINITY;
        for (; i < length && clusterIds[i] === id; i++) {
          const available = memberUnits(list, i, ctx);
          if (available === 0) continue;
          units += available;
          machines++;
          if (prices[i]! < cheapest) cheapest = prices[i]!;
        }
        if (units >= count && machines > 1) viable.push({ list, start, end: i, cheapest, bound: 0 });
      }
    }
    return viable;
  }

  /**
   * Puts the machines of a viable cluster that fit the request, with their list positions, in
   * the scratch arrays; returns how many.
   */
  private clusterMembers(group: ViableCluster, ctx: MatchContext): number {
    const { lists, positions, slots } = this.scratch;
    const list = group.list;
    let m = 0;
    for (let i = group.start; i < group.end; i++) {
      if (memberUnits(list, i, ctx) === 0) continue;
      lists[m] = list;
      positions[m] = i;
      slots[m] = list.slots[i]!;
      m++;
    }
    return m;
  }

  /**
   * Groups in order of a lower bound on their cost, so building stops once the bound exceeds the
   * worst kept cost. A group's cost is a units-weighted mean of its members' costs plus the
   * multi-machine penalty, never below its cheapest fitting member's cost plus that penalty; the
   * bound takes that member's cost a hair lower (a relative 1e-9, far above the rounding of the
   * weighted sum) so that rounding can never make it exceed the cost it bounds.
   */
  private rankGroups(top: TopN, groups: ViableCluster[], ctx: MatchContext, cheapest: number): void {
    if (groups.length === 0) return;
    for (const group of groups) {
      const { list, start, end } = group;
      const { prices, costs, attestedAt } = list;
      let least = Number.POSITIVE_INFINITY;
      for (let i = start; i < end; i++) {
        if (memberUnits(list, i, ctx) === 0) continue;
        const base = (ctx.interruptible ? 0 : this.priceTerm(prices[i]!, cheapest)) + costs[i]! + this.freshness(attestedAt[i]!, ctx.now);
        if (base < least) least = base;
      }
      group.bound = least * (1 - 1e-9) + this.options.multiMachinePenalty;
    }
    // Insertion sort, stable like Array.prototype.sort: a few dozen groups, and no comparator
    // calls (which cost more than the sort itself here).
    for (let g = 1; g < groups.length; g++) {
      const group = groups[g]!;
      let at = g;
      while (at > 0 && groups[at - 1]!.bound > group.bound) {
        groups[at] = groups[at - 1]!;
        at--;
      }
      groups[at] = group;
    }
    for (let g = 0; g < groups.length; g++) {
      const group = groups[g]!;
      if (top.full && group.bound > top.worst) break;
      this.offerGroup(top, group, ctx, cheapest);
    }
  }

  /**
   * A group on one cluster: free units from its best-ranked machines first, then preemptible
   * ones; pays multiMachinePenalty. Skipped when one machine alone would serve (that machine is
   * already a single candidate). Only the cost is computed here (in scratch arrays, without
   * allocating); the parts of the groups that stay in the top are planned again in build().
   */
  private offerGroup(top: TopN, group: ViableCluster, ctx: MatchContext, cheapest: number): void {
    const cost = this.planGroup(this.clusterMembers(group, ctx), ctx, cheapest);
    if (cost === null || (top.full && cost > top.worst)) return;
    const first = this.scratch.slots[this.scratch.order[0]!]!;
    top.offer(cost, first, 0, 0, 0, group, cheapest);
  }

  /**
   * Plans a group over the `m` machines in the scratch arrays: orders them by cost, takes units,
   * and returns the group's cost, or null when fewer than two machines would be used.
   */
  private planGroup(m: number, ctx: MatchContext, cheapest: number): number | null {
    const { base, order, take, preempted, lists, positions, slots } = this.scratch;
    for (let j = 0; j < m; j++) {
      const slot = slots[j]!;
      const list = lists[j]!;
      const i = positions[j]!;
      // The list's columns hold the slot's price and fixed cost (read there: no object to load).
      base[j] = (ctx.interruptible ? 0 : this.priceTerm(list.prices[i]!, cheapest)) + list.costs[i]! + this.freshness(list.attestedAt[i]!, ctx.now);
      take[j] = 0;
      preempted[j] = 0;
      // Insertion sort by (base, key): clusters are a handful of machines.
      let k = j;
      while (k > 0 && (base[order[k - 1]!]! > base[j]! || (base[order[k - 1]!] === base[j] && slots[order[k - 1]!]!.key > slot.key))) {
        order[k] = order[k - 1]!;
        k--;
      }
      order[k] = j;
    }
    let missing = ctx.count;
    for (let pass = 0; pass < 2 && missing > 0; pass++) {
      for (let k = 0; k < m && missing > 0; k++) {
        const j = order[k]!;
        const free = lists[j]!.free[positions[j]!]!;
        const room = pass === 0 ? free : availableUnits(lists[j]!, positions[j]!, ctx) - free;
        const units = Math.min(room!, missing);
        if (units <= 0) continue;
        take[j]! += units;
        if (pass === 1) preempted[j] = 1;
        missing -= units;
      }
    }
    let used = 0;
    let weighted = 0;
    let preempt = false;
    for (let j = 0; j < m; j++) {
      if (take[j] === 0) continue;
      used++;
      weighted += (take[j]! / ctx.count) * base[j]!;
      if (preempted[j] === 1) preempt = true;
    }
    if (used < 2) return null;
    return weighted + this.options.multiMachinePenalty + (preempt ? PREEMPT_PENALTY : 0);
  }

  /** Builds the candidate of a group kept in the top, planning it again from the same data. */
  private buildGroup(item: Ranked, group: ViableCluster, ctx: MatchContext): Candidate {
    const cheapest = item.groupCheapest;
    const m = this.clusterMembers(group, ctx);
    this.planGroup(m, ctx, cheapest);
    const { order, take, preempted, lists, positions, slots } = this.scratch;
    const parts: CandidatePart[] = [];
    const sums = { price: 0, reputation: 0, freshness: 0, latency: 0 };
    let preempt = false;
    let total = 0n;
    for (let k = 0; k < m; k++) {
      const j = order[k]!;
      if (take[j] === 0) continue;
      const slot = slots[j]!;
      const part = this.part(slot, take[j]!, preempted[j] === 1, ctx);
      parts.push(part);
      total += BigInt(part.units) * part.pricePerUnitSecond;
      preempt ||= part.preempt;
      const share = take[j]! / ctx.count;
      const b = this.breakdown(slot, ctx.interruptible ? 0 : this.priceTerm(slot.price, cheapest), this.freshness(lists[j]!.attestedAt[positions[j]!]!, ctx.now), 0, 0);
      sums.price += share * b.price;
      sums.reputation += share * b.reputation;
      sums.freshness += share * b.freshness;
      sums.latency += share * b.latency;
    }
    return {
      parts,
      units: ctx.count,
      preempt,
      pricePerGpuHour: (total * SECONDS_PER_HOUR) / BigInt(ctx.count),
      cost: item.cost,
      breakdown: { ...sums, preempt: preempt ? PREEMPT_PENALTY : 0, multiMachine: this.options.multiMachinePenalty },
    };
  }

  private part(slot: Slot, units: number, preempt: boolean, ctx: MatchContext): CandidatePart {
    const pricePerUnitSecond = ctx.interruptible ? ctx.request.bidPerUnitSecond! : slot.entry.offer.pricePerUnitSecond;
    if (slot.terms === undefined) {
      const { tier, offer } = slot.entry;
      slot.terms = tier > 0 ? `reserved tier ${tier}: leases of ${offer.minDuration} s or more, ${offer.pricePerUnitSecond} base units/s` : "on-demand";
    }
    return { entry: slot.entry, units, preempt, pricePerUnitSecond, terms: slot.terms };
  }

  private breakdown(slot: Slot, priceTerm: number, freshness: number, preempt: number, multiMachine: number): CostBreakdown {
    const { weights, latencyCeilingMs, unknownLatencyMs } = this.options;
    const latency = weights.latency * (Math.min(slot.entry.latencyMs ?? unknownLatencyMs, latencyCeilingMs) / latencyCeilingMs);
    return { price: priceTerm, reputation: weights.reputation * (1 - slot.reputation), freshness, latency, preempt, multiMachine };
  }
}

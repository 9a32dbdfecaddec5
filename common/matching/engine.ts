/**
 * The matching engine: an incrementally maintained index of the offer book and the match of a
 * request against it. Pure and in-process: the SDK runs it on offers it fetched, a node runs it
 * on its gossiped book. No I/O; time comes from an injectable clock.
 */
import type { OfferEntry } from "./entry.js";
import { type Bucket, BookIndex, type Slot, walkByBid, walkByPrice } from "./book-index.js";
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

type Scored = { slot: Slot; tier: number; base: number; priceTerm: number; freshness: number };

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

type Ranked = { cost: number; tieKey: string; build: () => Candidate };

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
    let candidates: Candidate[];
    if (request.colocation === "cluster") candidates = this.matchWithClusters(ctx, buckets, limit);
    else if (request.interruptible) candidates = this.matchInterruptible(ctx, buckets, limit);
    else candidates = this.matchOnDemand(ctx, buckets, limit);
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

  private freshness(slot: Slot, now: number): number {
    if (slot.attestedAt < 0) return this.options.weights.freshness;
    const age = (now - slot.attestedAt) / this.options.freshnessHorizonSeconds;
    return this.options.weights.freshness * (age <= 0 ? 0 : age >= 1 ? 1 : age);
  }

  private priceTerm(price: number, cheapest: number): number {
    return (this.options.weights.price * (price - cheapest)) / (cheapest > 0 ? cheapest : 1);
  }

  /**
   * On demand, one machine: first the cheapest fitting price p0 (each bucket walked only up to
   * the best p0 so far), then a walk by ascending price that stops once the price term alone
   * exceeds the worst of the best `limit` costs, since every other term is non-negative.
   */
  private matchOnDemand(ctx: MatchContext, buckets: Bucket[], limit: number): Candidate[] {
    let cheapest = Number.POSITIVE_INFINITY;
    for (const bucket of buckets) {
      walkByPrice(bucket, 0, Math.min(ctx.priceLimit, cheapest), (slot) => {
        if (firstFailure(slot, ctx) !== 0 || capacityTier(slot, ctx, ctx.count) < 0) return false;
        cheapest = slot.price;
        return true;
      });
    }
    if (cheapest === Number.POSITIVE_INFINITY) return [];
    const top = new TopN<Ranked>(limit);
    for (const bucket of buckets) {
      walkByPrice(bucket, 0, ctx.priceLimit, (slot) => {
        const priceTerm = this.priceTerm(slot.price, cheapest);
        if (top.full && priceTerm > top.worst) return true;
        if (firstFailure(slot, ctx) !== 0) return false;
        const tier = capacityTier(slot, ctx, ctx.count);
        if (tier < 0) return false;
        this.offerSingle(top, slot, tier, priceTerm, ctx);
        return false;
      });
    }
    return top.items.map((item) => item.build());
  }

  /** Interruptible, one machine: every offer's price is the renter's bid, so rank by the other terms. */
  private matchInterruptible(ctx: MatchContext, buckets: Bucket[], limit: number): Candidate[] {
    const top = new TopN<Ranked>(limit);
    for (const bucket of buckets) {
      walkByBid(bucket, 0, ctx.priceLimit, (slot) => {
        if (firstFailure(slot, ctx) !== 0) return;
        const tier = capacityTier(slot, ctx, ctx.count);
        if (tier < 0) return;
        this.offerSingle(top, slot, tier, 0, ctx);
      });
    }
    return top.items.map((item) => item.build());
  }

  private offerSingle(top: TopN<Ranked>, slot: Slot, tier: number, priceTerm: number, ctx: MatchContext): void {
    const freshness = this.freshness(slot, ctx.now);
    const cost = priceTerm + slot.staticCost + freshness + tier * PREEMPT_PENALTY;
    if (top.full && cost > top.worst) return;
    top.offer({
      cost,
      tieKey: slot.key,
      build: () => {
        const part = this.part(slot, ctx.count, tier === 1, ctx);
        return {
          parts: [part],
          units: ctx.count,
          preempt: tier === 1,
          pricePerGpuHour: part.pricePerUnitSecond * SECONDS_PER_HOUR,
          cost,
          breakdown: this.breakdown(slot, priceTerm, freshness, tier === 1 ? PREEMPT_PENALTY : 0, 0),
        };
      },
    });
  }

  /**
   * Several machines of one cluster accepted: single machines and groups of a cluster's
   * machines compete. A group takes free units from its cheapest-ranked members first, then
   * preemptible ones, and pays multiMachinePenalty.
   */
  private matchWithClusters(ctx: MatchContext, buckets: Bucket[], limit: number): Candidate[] {
    const usable: Slot[] = [];
    const clusters = new Map<string, Slot[]>();
    const visit = (slot: Slot) => {
      if (firstFailure(slot, ctx) !== 0) return;
      const alone = capacityTier(slot, ctx, ctx.count) >= 0;
      const inCluster = slot.clusterKey !== "" && availableUnits(slot, ctx) > 0;
      if (!alone && !inCluster) return;
      usable.push(slot);
      if (inCluster) {
        const members = clusters.get(slot.clusterKey);
        if (members) members.push(slot);
        else clusters.set(slot.clusterKey, [slot]);
      }
    };
    for (const bucket of buckets) {
      if (ctx.interruptible) walkByBid(bucket, 0, ctx.priceLimit, visit);
      else walkByPrice(bucket, 0, ctx.priceLimit, visit);
    }
    if (usable.length === 0) return [];
    let cheapest = Number.POSITIVE_INFINITY;
    if (!ctx.interruptible) for (const slot of usable) if (slot.price < cheapest) cheapest = slot.price;
    const priceTermOf = (slot: Slot) => (ctx.interruptible ? 0 : this.priceTerm(slot.price, cheapest));
    const top = new TopN<Ranked>(limit);
    for (const slot of usable) {
      const tier = capacityTier(slot, ctx, ctx.count);
      if (tier >= 0) this.offerSingle(top, slot, tier, priceTermOf(slot), ctx);
    }
    for (const members of clusters.values()) {
      let total = 0;
      for (const slot of members) total += availableUnits(slot, ctx);
      if (total < ctx.count) continue;
      const scored: Scored[] = members.map((slot) => {
        const priceTerm = priceTermOf(slot);
        const freshness = this.freshness(slot, ctx.now);
        return { slot, tier: 0, base: priceTerm + slot.staticCost + freshness, priceTerm, freshness };
      });
      scored.sort((a, b) => a.base - b.base || (a.slot.key < b.slot.key ? -1 : 1));
      const take = new Map<Slot, { units: number; preempt: boolean }>();
      let missing = ctx.count;
      for (const pass of [0, 1]) {
        for (const { slot } of scored) {
          if (missing === 0) break;
          const room = pass === 0 ? slot.free : availableUnits(slot, ctx) - slot.free;
          const units = Math.min(room, missing);
          if (units <= 0) continue;
          const held = take.get(slot);
          take.set(slot, { units: (held?.units ?? 0) + units, preempt: pass === 1 || (held?.preempt ?? false) });
          missing -= units;
        }
      }
      if (take.size < 2) continue; // one machine alone is already a single candidate
      const chosen = scored.filter((s) => take.has(s.slot));
      const preempt = chosen.some((s) => take.get(s.slot)!.preempt);
      let weighted = 0;
      const sums = { price: 0, reputation: 0, freshness: 0, latency: 0 };
      for (const s of chosen) {
        const share = take.get(s.slot)!.units / ctx.count;
        weighted += share * s.base;
        const b = this.breakdown(s.slot, s.priceTerm, s.freshness, 0, 0);
        sums.price += share * b.price;
        sums.reputation += share * b.reputation;
        sums.freshness += share * b.freshness;
        sums.latency += share * b.latency;
      }
      const penalty = this.options.multiMachinePenalty;
      const cost = weighted + penalty + (preempt ? PREEMPT_PENALTY : 0);
      top.offer({
        cost,
        tieKey: chosen[0].slot.clusterKey,
        build: () => {
          const parts = chosen.map((s) => this.part(s.slot, take.get(s.slot)!.units, take.get(s.slot)!.preempt, ctx));
          let total = 0n;
          for (const part of parts) total += BigInt(part.units) * part.pricePerUnitSecond;
          return {
            parts,
            units: ctx.count,
            preempt,
            pricePerGpuHour: (total * SECONDS_PER_HOUR) / BigInt(ctx.count),
            cost,
            breakdown: { ...sums, preempt: preempt ? PREEMPT_PENALTY : 0, multiMachine: penalty },
          };
        },
      });
    }
    return top.items.map((item) => item.build());
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

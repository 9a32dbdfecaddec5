/**
 * Market statistics from the offer book's history: price percentiles and utilization by GPU model,
 * per time bucket. The book records a sample for every offer version it accepts and every removal;
 * statistics of a bucket are over the offers live during it, each counted once in its last state
 * in the bucket (an offer published before the bucket and not removed counts with the state it had).
 *
 * Percentiles use the nearest-rank method over offers (not weighted by units): p50 is the price at
 * least half of the offers ask at most.
 */
import type { ModelStats, MarketStats, PriceSummary, StatsBucket, StatsWindow } from "../../common/api/market.js";
import type { OfferEntry } from "./source.js";
import { entryKey } from "./offer-view.js";

type OfferSample = {
  at: number;
  key: string;
  removed: false;
  model: string;
  pricePerUnitSecond: bigint;
  units: number;
  freeUnits: number;
  usedUnits: number;
  expiry: number;
};
type RemovalSample = { at: number; key: string; removed: true };
export type MarketSample = OfferSample | RemovalSample;

export type StatsRecorderOptions = {
  /** Samples older than this are dropped (default 7 days). */
  retentionSeconds?: number;
  /** At most this many samples are held; the oldest go first (default 200,000, about 30 MB). */
  maxSamples?: number;
  /**
   * Units of the offer's machine in use (on-demand + interruptible leases) when the caller knows
   * better than the offer's own snapshot (a node follows CapacityChanged events on-chain);
   * undefined falls back to the snapshot.
   */
  usedUnits?: (entry: OfferEntry) => number | undefined;
};

/** Nearest-rank percentile of a sorted, non-empty list. */
export function percentile(sorted: readonly bigint[], p: number): bigint {
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  const value = sorted[Math.min(rank, sorted.length) - 1];
  if (value === undefined) throw new RangeError("percentile of an empty list");
  return value;
}

export function summarizePrices(prices: bigint[]): PriceSummary | null {
  const sorted = [...prices].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const min = sorted[0];
  const max = sorted[sorted.length - 1];
  if (min === undefined || max === undefined) return null;
  return {
    min,
    p10: percentile(sorted, 10),
    p50: percentile(sorted, 50),
    p90: percentile(sorted, 90),
    max,
  };
}

function snapshotUsedUnits(entry: OfferEntry): number {
  const { capacity } = entry.message;
  return capacity.onDemandUnits + capacity.interruptibleUnits;
}

/**
 * Keeps the samples and computes statistics. Samples must be recorded in time order (the book
 * records them as it accepts offers); out-of-order ones are placed by binary search.
 */
export class StatsRecorder {
  private readonly samples: MarketSample[] = [];
  /** The newest sample of each live offer: a re-announcement that changes nothing is not recorded again. */
  private readonly latest = new Map<string, OfferSample>();
  private readonly retentionSeconds: number;
  private readonly maxSamples: number;
  private readonly knownUsedUnits: ((entry: OfferEntry) => number | undefined) | undefined;

  constructor(options: StatsRecorderOptions = {}) {
    this.retentionSeconds = options.retentionSeconds ?? 7 * 24 * 3600;
    this.maxSamples = options.maxSamples ?? 200_000;
    this.knownUsedUnits = options.usedUnits;
  }

  /** Leased units of the offer's machine, bounded by the machine so a bad figure cannot exceed 100 %. */
  private usedUnitsOf(entry: OfferEntry): number {
    const used = this.knownUsedUnits?.(entry) ?? snapshotUsedUnits(entry);
    return Math.max(0, Math.min(entry.message.machine.units, used));
  }

  get size(): number {
    return this.samples.length;
  }

  /**
   * Records an offer version the book accepted. Providers re-announce unchanged offers every few
   * seconds with a new sequence number; a version whose state equals the newest one held for its
   * key adds nothing (buckets carry the state forward) and is skipped, so the samples hold changes.
   */
  recordOffer(entry: OfferEntry, at: number): void {
    // A reserved-term tier offers the same units as its machine's on-demand offer at a discount
    // for long leases: counting it would count the units twice and pull the index down.
    if ((entry.message.tier ?? 0) > 0) return;
    const { offer, machine, capacity } = entry.message;
    const sample: OfferSample = {
      at,
      key: entryKey(entry),
      removed: false,
      model: machine.model,
      pricePerUnitSecond: offer.pricePerUnitSecond,
      units: machine.units,
      freeUnits: capacity.freeUnits,
      usedUnits: this.usedUnitsOf(entry),
      expiry: offer.expiry,
    };
    const held = this.latest.get(sample.key);
    if (held && held.at <= at && sameState(held, sample)) return;
    this.insert(sample);
    if (!held || held.at <= at) this.latest.set(sample.key, sample);
  }

  /** Records that an offer left the book. */
  recordRemoval(key: string, at: number): void {
    this.latest.delete(key);
    this.insert({ at, key, removed: true });
  }

  private insert(sample: MarketSample): void {
    const last = this.samples[this.samples.length - 1];
    if (!last || last.at <= sample.at) {
      this.samples.push(sample);
    } else {
      let lo = 0;
      let hi = this.samples.length;
      while (lo < hi) {
        const mid = (lo + hi) >>> 1;
        if (this.samples[mid]!.at <= sample.at) lo = mid + 1;
        else hi = mid;
      }
      this.samples.splice(lo, 0, sample);
    }
    const horizon = sample.at - this.retentionSeconds;
    let drop = Math.max(0, this.samples.length - this.maxSamples);
    while (drop < this.samples.length && this.samples[drop]!.at < horizon) drop++;
    if (drop > 0) {
      // A dropped sample can no longer stand for its offer's state: the next version records again.
      for (let i = 0; i < drop; i++) {
        const dropped = this.samples[i]!;
        if (!dropped.removed && this.latest.get(dropped.key) === dropped) this.latest.delete(dropped.key);
      }
      this.samples.splice(0, drop);
    }
  }

  /**
   * Statistics over `window` (buckets aligned to multiples of bucketSeconds), plus the current
   * state from `live` (the book's unexpired offers now).
   */
  compute(window: StatsWindow, live: readonly OfferEntry[], nowSeconds: number): MarketStats {
    const { bucketSeconds } = window;
    const firstStart = Math.floor(window.from / bucketSeconds) * bucketSeconds;
    const starts: number[] = [];
    for (let start = firstStart; start < window.to; start += bucketSeconds) starts.push(start);

    const state = new Map<string, OfferSample>();
    const perBucket: Map<string, OfferSample>[] = [];
    let i = 0;
    for (; i < this.samples.length && this.samples[i]!.at < firstStart; i++) apply(state, this.samples[i]!);
    for (const start of starts) {
      const end = start + bucketSeconds;
      const seen = new Map<string, OfferSample>();
      for (const [key, sample] of state) if (sample.expiry > start) seen.set(key, sample);
      for (; i < this.samples.length && this.samples[i]!.at < end; i++) {
        const sample = this.samples[i]!;
        apply(state, sample);
        if (!sample.removed) seen.set(sample.key, sample);
      }
      perBucket.push(seen);
    }

    const models = new Set<string>();
    if (window.model !== undefined) models.add(window.model);
    else {
      for (const seen of perBucket) for (const sample of seen.values()) models.add(sample.model);
      for (const entry of live) if (entry.message.offer.expiry > nowSeconds) models.add(entry.message.machine.model);
    }

    const result: ModelStats[] = [];
    for (const model of [...models].sort()) {
      const series: StatsBucket[] = starts.map((start, index) => {
        const samples = [...perBucket[index]!.values()].filter((sample) => sample.model === model);
        const units = samples.reduce((sum, sample) => sum + sample.units, 0);
        const usedUnits = samples.reduce((sum, sample) => sum + sample.usedUnits, 0);
        return {
          start,
          offers: samples.length,
          units,
          usedUnits,
          utilization: units > 0 ? usedUnits / units : null,
          price: summarizePrices(samples.map((sample) => sample.pricePerUnitSecond)),
        };
      });
      const current = live.filter((entry) => entry.message.machine.model === model && entry.message.offer.expiry > nowSeconds);
      const units = current.reduce((sum, entry) => sum + entry.message.machine.units, 0);
      const usedUnits = current.reduce((sum, entry) => sum + this.usedUnitsOf(entry), 0);
      result.push({
        model,
        current: {
          offers: current.length,
          units,
          freeUnits: current.reduce((sum, entry) => sum + entry.message.capacity.freeUnits, 0),
          usedUnits,
          utilization: units > 0 ? usedUnits / units : null,
          price: summarizePrices(current.map((entry) => entry.message.offer.pricePerUnitSecond)),
        },
        series,
      });
    }
    return { from: window.from, to: window.to, bucketSeconds, models: result };
  }
}

function sameState(a: OfferSample, b: OfferSample): boolean {
  return (
    a.model === b.model &&
    a.pricePerUnitSecond === b.pricePerUnitSecond &&
    a.units === b.units &&
    a.freeUnits === b.freeUnits &&
    a.usedUnits === b.usedUnits &&
    a.expiry === b.expiry
  );
}

function apply(state: Map<string, OfferSample>, sample: MarketSample): void {
  if (sample.removed) state.delete(sample.key);
  else state.set(sample.key, sample);
}

/**
 * The answer to a request that nothing fits: every constraint in the order applied with how
 * many offers it removed, then the offers that came nearest ("3 A100-80GB machines fit
 * everything else but have only 2 free GPUs"; "the cheapest A100-80GB machine with 4 free GPUs
 * costs 3.90 USD/GPU-h, 1.90 above your cap").
 *
 * Counts are exact: the index answers the first steps by bucket sizes and a price walk, the
 * rest come from one pass over the offers under the price limit (O(log n + k), like a match).
 * Nearest offers outside that set (above the price, in other regions, of other models) are
 * searched by ascending price, each search within `explainScanLimit` offers.
 */
import type { BookIndex, Bucket, Slot, SlotList } from "./book-index.js";
import {
  type ConstraintId,
  F_ATTESTATION,
  F_ATTEST_FAILURES,
  F_CC,
  F_CAPACITY,
  F_DURATION,
  F_EXCLUDED,
  F_EXPIRY,
  F_HOST,
  F_REPUTATION,
  F_VRAM,
  type MatchContext,
  SLOT_CHECKS,
  availableUnits,
  bitUsed,
  capacityTier,
  failureMasks,
  firstFailure,
} from "./constraints.js";
import { attestFailuresAt } from "./entry.js";
import { formatUsd, perHour } from "./money.js";
import type { MatchingOptions } from "./options.js";
import { attestFailuresMissText, capacityHint, constraintLabel, describeRequest, EXPLAIN_REMEDIES, hostMissText, plural } from "./explain-text.js";

export { describeRequest, EXPLAIN_REMEDIES } from "./explain-text.js";

export type ExplanationStep = {
  readonly constraint: ConstraintId;
  /** What the constraint requires, in words (`price at most 2.00 USD/GPU-h`). */
  readonly label: string;
  /** Offers this constraint removed from those left by the previous ones. */
  readonly removed: number;
  /** Offers left after it. */
  readonly remaining: number;
};

export type NearMiss = {
  /** The constraint that, relaxed alone, would let these offers fit. */
  readonly constraint: ConstraintId;
  /** How many offers fail only this constraint, when counted (null for searches that stop at the nearest). */
  readonly count: number | null;
  /** One sentence for people. */
  readonly message: string;
  /** The nearest such offer, when there is one to point at. */
  readonly nearest?: { readonly key: string; readonly model: string; readonly region: string; readonly pricePerGpuHour: bigint };
};

export type NoMatchExplanation = {
  /** One line: what was asked and which constraint removed the last offers. */
  readonly summary: string;
  readonly totalOffers: number;
  readonly steps: readonly ExplanationStep[];
  readonly nearMisses: readonly NearMiss[];
  /** True when a search for nearest offers stopped at explainScanLimit. */
  readonly nearMissSearchTruncated: boolean;
  /** The whole explanation as text: summary, numbered steps, nearest offers. */
  readonly message: string;
};

/** Offers failing exactly one per-offer check, summarized in the same pass that counts the funnel. */
class OnlyStats {
  count = 0;
  // The model they share is kept as a string and a flag (not string | null | undefined), so the
  // field keeps one representation and optimized code that reads it is not thrown away.
  private model = "";
  private mixed = false;
  max = Number.NEGATIVE_INFINITY;
  min = Number.POSITIVE_INFINITY;
  /** Duration: offers that need a longer lease than asked (their minimum is recorded). */
  below = 0;
  add(model: string, value: number): void {
    this.count++;
    this.see(model);
    if (value > this.max) this.max = value;
    if (value < this.min) this.min = value;
  }
  addBelow(model: string, minimum: number): void {
    this.count++;
    this.below++;
    this.see(model);
    if (minimum < this.min) this.min = minimum;
  }
  private see(model: string): void {
    if (this.count === 1) this.model = model;
    else if (this.model !== model) this.mixed = true;
  }
  /** `A100-80GB ` when all offers share a model, else empty. */
  get modelWord(): string {
    return this.model !== "" && !this.mixed ? `${this.model} ` : "";
  }
}

type Found = { slot: Slot; price: bigint };

/** Masks of the offers an explanation scans, reused across explanations (they run synchronously). */
let masksBuffer = new Uint16Array(1024);
function maskScratch(n: number): Uint16Array {
  if (masksBuffer.length < n) masksBuffer = new Uint16Array(Math.max(n, masksBuffer.length * 2));
  return masksBuffer;
}

/**
 * The per-offer part of the funnel over the offers under the limit: their masks first, then
 * the counts. Capacity per cluster needs the units each cluster offers before its machines'
 * masks are tallied. A function of its own, apart from the text, so that it is compiled and
 * optimized on its own.
 */
function tallyScanned(scannedLists: SlotList[], ends: number[], buckets: Bucket[], ctx: MatchContext, n: number) {
  const request = ctx.request;
  const before = F_EXPIRY | F_DURATION | F_VRAM | F_HOST | F_ATTESTATION | F_ATTEST_FAILURES | F_CC | F_REPUTATION;
  const clusterMode = request.colocation === "cluster";
  let largestMachine = 0;
  const clusterUnits = new Map<number, number>();
  const removedBy = new Int32Array(F_EXCLUDED * 2); // indexed by a check's bit
  // Indexed by a check's bit.
  const only: OnlyStats[] = [];
  for (const { bit } of SLOT_CHECKS) only[bit] = new OnlyStats();
  // Nothing under the limit (no bucket at all, often): the loops below would only meet empty
  // arrays, whose other elements kind would throw their optimized code away.
  // Offers failing only the host resources: the most each declares per unit, and how many declare none.
  const host = { cpuCores: 0, memoryMiB: 0, diskMiB: 0, undeclared: 0 };
  if (n === 0) return { removedBy, only, largestMachine, clusterUnits, host };
  const masks = maskScratch(n);
  for (let b = 0, k = 0; b < scannedLists.length; b++) {
    failureMasks(scannedLists[b]!, 0, ends[b]!, ctx, masks, k);
    k += ends[b]!;
  }
  const tally = (list: SlotList, i: number, model: string, mask: number) => {
    const lowest = mask & -mask;
    removedBy[lowest]!++;
    if (mask !== lowest) return;
    const stats = only[mask]!;
    switch (mask) {
      case F_CAPACITY:
        stats.add(model, availableUnits(list, i, ctx));
        break;
      case F_DURATION:
        if (ctx.duration > list.maxDuration[i]!) stats.add(model, list.maxDuration[i]!);
        else stats.addBelow(model, list.minDuration[i]!);
        break;
      case F_VRAM:
        stats.add(model, list.vramMiB[i]!);
        break;
      case F_HOST:
        stats.add(model, 0);
        if (list.cpuCores[i] === 0) host.undeclared++;
        host.cpuCores = Math.max(host.cpuCores, list.cpuCores[i]!);
        host.memoryMiB = Math.max(host.memoryMiB, list.memoryMiB[i]!);
        host.diskMiB = Math.max(host.diskMiB, list.diskMiB[i]!);
        break;
      case F_REPUTATION:
        stats.add(model, list.reputation[i]!);
        break;
      case F_ATTEST_FAILURES:
        stats.add(model, attestFailuresAt(list.slots[i]!.entry, ctx.now));
        break;
      default:
        stats.add(model, 0);
    }
  };
  if (clusterMode) {
    for (let b = 0, k = 0; b < scannedLists.length; b++) {
      const list = scannedLists[b]!;
      const clusterIds = list.clusterIds;
      for (let i = 0; i < ends[b]!; i++, k++) {
        const clusterId = clusterIds[i]!;
        if (clusterId !== 0 && (masks[k]! & before) === 0) clusterUnits.set(clusterId, (clusterUnits.get(clusterId) ?? 0) + availableUnits(list, i, ctx));
      }
    }
  }
  for (let b = 0, k = 0; b < scannedLists.length; b++) {
    const list = scannedLists[b]!;
    const model = buckets[b]!.model;
    const units = list.units;
    for (let i = 0; i < ends[b]!; i++, k++) {
      let mask = masks[k];
      if ((mask! & ~(F_CAPACITY | F_EXCLUDED)) === 0 && units[i]! > largestMachine) largestMachine = units[i]!;
      if (mask === 0) continue;
      // Capacity per cluster: a machine with units to give in a cluster that reaches the count passes.
      if (clusterMode && (mask! & F_CAPACITY) !== 0 && availableUnits(list, i, ctx) > 0) {
        const clusterId = list.clusterIds[i]!;
        if (clusterId !== 0 && (clusterUnits.get(clusterId) ?? 0) >= ctx.count) mask! &= ~F_CAPACITY;
        if (mask === 0) continue;
      }
      tally(list, i, model, mask!);
    }
  }
  return { removedBy, only, largestMachine, clusterUnits, host };
}

/** The first offer from position of key `from` up to key `max` that fits everything (one machine). */
function firstFittingOffer(
  list: SlotList,
  from: number,
  max: number,
  budget: { left: number },
  ctx: MatchContext,
  search: { truncated: boolean },
  onDemandOnly: boolean,
): Slot | undefined {
  if (list.maxAvailable < ctx.count) return undefined;
  const { keys, available, bids } = list;
  for (let i = from > 0 ? list.upperBound(from - 1) : 0; i < keys.length; i++) {
    if (keys[i]! > max) return undefined;
    // Read from the columns, free: only offers that pass these count against the budget.
    if (available[i]! < ctx.count || (onDemandOnly && bids[i] !== 0)) continue;
    if (budget.left-- <= 0) {
      search.truncated = true;
      return undefined;
    }
    // failureMask(list, i, ctx) === 0, stopping at the first failing check.
    if (firstFailure(list, i, ctx) === 0 && capacityTier(list, i, ctx, ctx.count) >= 0) return list.slots[i];
  }
  return undefined;
}

/** Offers outside the scanned set that would fit with one index constraint relaxed (model, region, price or bid). */
function nearMissesBeyond(
  index: BookIndex,
  ctx: MatchContext,
  options: MatchingOptions,
  requested: Set<string>,
  buckets: Bucket[],
  inModels: number,
  search: { truncated: boolean },
): NearMiss[] {
  const request = ctx.request;
  const nearMisses: NearMiss[] = [];
  const firstFitting = (list: SlotList, from: number, max: number, budget: { left: number }, onDemandOnly = false) =>
    firstFittingOffer(list, from, max, budget, ctx, search, onDemandOnly);
  const priceOf = (slot: Slot) => (request.interruptible ? perHour(request.bidPerUnitSecond!) : perHour(slot.entry.offer.pricePerUnitSecond));
  /** The cheapest fitting offer per group of buckets (a model, a region), walking each bucket by price. */
  const cheapestPer = (candidates: Bucket[], groupOf: (b: Bucket) => string): [string, Found][] => {
    const budget = { left: options.explainScanLimit };
    const best = new Map<string, Found>();
    for (const bucket of candidates) {
      const slot = request.interruptible ? firstFitting(bucket.byBid, 0, ctx.priceLimit, budget) : firstFitting(bucket.byPrice, 0, ctx.priceLimit, budget);
      if (!slot) continue;
      const price = priceOf(slot);
      const key = groupOf(bucket);
      const held = best.get(key);
      if (!held || price < held.price) best.set(key, { slot, price });
    }
    return [...best.entries()].sort((a, b) => (a[1].price < b[1].price ? -1 : a[1].price > b[1].price ? 1 : a[0] < b[0] ? -1 : 1)).slice(0, 3);
  };
  const nearest = (found: Found) => ({ key: found.slot.key, model: found.slot.model, region: found.slot.entry.machine.region, pricePerGpuHour: found.price });

  if (inModels < index.size) {
    const others: Bucket[] = [];
    for (const group of index.models.values()) {
      if (requested.has(group.model)) continue;
      if (request.regions === null) others.push(group.all);
      else for (const bucket of group.buckets.values()) if (request.regions.includes(bucket.region)) others.push(bucket);
    }
    const best = cheapestPer(others, (b) => b.model);
    if (best.length > 0) {
      const list = best.map(([model, f]) => `${model} ${request.interruptible ? "at your bid" : `from ${formatUsd(f.price)} USD/GPU-h`}`).join(", ");
      nearMisses.push({ constraint: "gpuType", count: null, message: `Other GPU models fit everything else: ${list}.`, nearest: nearest(best[0]![1]) });
    }
  }
  if (request.regions !== null) {
    const elsewhere: Bucket[] = [];
    for (const model of requested) {
      const group = index.models.get(model);
      if (!group) continue;
      for (const bucket of group.buckets.values()) if (!request.regions.includes(bucket.region)) elsewhere.push(bucket);
    }
    const best = cheapestPer(elsewhere, (b) => b.region);
    if (best.length > 0) {
      const list = best.map(([, f]) => `${f.slot.entry.machine.region}${request.interruptible ? "" : ` from ${formatUsd(f.price)} USD/GPU-h`}`).join(", ");
      nearMisses.push({ constraint: "region", count: null, message: `Offers fit everything else in other regions: ${list}.`, nearest: nearest(best[0]![1]) });
    }
  }
  if (!request.interruptible) {
    const budget = { left: options.explainScanLimit };
    let best: Found | undefined;
    for (const bucket of buckets) {
      const slot = firstFitting(bucket.byPrice, ctx.priceLimit + 1, Number.MAX_SAFE_INTEGER, budget);
      if (!slot) continue;
      const price = perHour(slot.entry.offer.pricePerUnitSecond);
      if (!best || price < best.price) best = { slot, price };
    }
    if (best) {
      nearMisses.push({
        constraint: "price",
        count: null,
        message: `The cheapest ${best.slot.model} machine with ${plural(ctx.count, "GPU")} available that fits everything else costs ${formatUsd(best.price)} USD/GPU-h, ${formatUsd(best.price - request.maxPricePerGpuHour)} USD/GPU-h above your cap of ${formatUsd(request.maxPricePerGpuHour)}.`,
        nearest: nearest(best),
      });
    }
  } else {
    const bid = perHour(request.bidPerUnitSecond!);
    const onDemandBudget = { left: options.explainScanLimit };
    const bidBudget = { left: options.explainScanLimit };
    let onDemandOnly: Found | undefined;
    let bidAbove: Found | undefined;
    for (const bucket of buckets) {
      const slot = firstFitting(bucket.byPrice, 0, Number.MAX_SAFE_INTEGER, onDemandBudget, true);
      if (slot) {
        const price = perHour(slot.entry.offer.pricePerUnitSecond);
        if (!onDemandOnly || price < onDemandOnly.price) onDemandOnly = { slot, price };
      }
      const above = firstFitting(bucket.byBid, ctx.priceLimit + 1, Number.MAX_SAFE_INTEGER, bidBudget);
      if (above) {
        const price = perHour(above.entry.offer.minBidPerUnitSecond);
        if (!bidAbove || price < bidAbove.price) bidAbove = { slot: above, price };
      }
    }
    if (onDemandOnly) {
      nearMisses.push({
        constraint: "interruptible",
        count: null,
        message: `Machines that fit everything else sell only on-demand capacity, from ${formatUsd(onDemandOnly.price)} USD/GPU-h (use mode "on-demand").`,
        nearest: nearest(onDemandOnly),
      });
    }
    if (bidAbove) {
      nearMisses.push({
        constraint: "bid",
        count: null,
        message: `The lowest minimum bid among machines that fit everything else is ${formatUsd(bidAbove.price)} USD/GPU-h, ${formatUsd(bidAbove.price - bid)} USD/GPU-h above your bid of ${formatUsd(bid)}.`,
        nearest: nearest(bidAbove),
      });
    }
  }

  return nearMisses;
}

export function explainNoMatch(index: BookIndex, ctx: MatchContext, options: MatchingOptions): NoMatchExplanation {
  const request = ctx.request;
  const steps: ExplanationStep[] = [];
  let remaining = index.size;
  const step = (constraint: ConstraintId, left: number) => {
    steps.push({ constraint, label: constraintLabel(constraint, ctx, options), removed: remaining - left, remaining: left });
    remaining = left;
  };

  // Index steps: model, region, price or bid.
  const requested = new Set(request.gpuType.models);
  let inModels = 0;
  for (const model of requested) inModels += index.models.get(model)?.size ?? 0;
  step("gpuType", inModels);
  const buckets: Bucket[] = [];
  for (const model of requested) {
    const group = index.models.get(model);
    if (!group) continue;
    if (request.regions === null) buckets.push(group.all);
    else for (const bucket of group.buckets.values()) if (request.regions.includes(bucket.region)) buckets.push(bucket);
  }
  if (request.regions !== null)
    step(
      "region",
      buckets.reduce((n, b) => n + b.byPrice.length, 0),
    );
  // The offers under the price limit: a prefix of each bucket's list.
  const scannedLists: SlotList[] = [];
  const ends: number[] = [];
  let n = 0;
  for (let b = 0; b < buckets.length; b++) {
    const list = request.interruptible ? buckets[b]!.byBid : buckets[b]!.byPrice;
    scannedLists.push(list);
    ends.push(list.upperBound(ctx.priceLimit));
    n += ends[b]!;
  }
  if (request.interruptible) {
    step(
      "interruptible",
      buckets.reduce((sum, b) => sum + b.byBid.length, 0),
    );
    step("bid", n);
  } else {
    step("price", n);
  }

  // Per-offer steps.
  const { removedBy, only, largestMachine, clusterUnits, host } = tallyScanned(scannedLists, ends, buckets, ctx, n);
  for (const { bit, id } of SLOT_CHECKS) {
    if (bitUsed(bit, ctx)) step(id, remaining - removedBy[bit]!);
  }

  // Nearest offers beyond the scanned set, each search bounded by explainScanLimit offers read.
  const search = { truncated: false };
  const nearMisses = nearMissesBeyond(index, ctx, options, requested, buckets, inModels, search);
  const truncated = search.truncated;

  // Nearest offers among the scanned ones: those failing exactly one check.
  for (const { bit, id } of SLOT_CHECKS) {
    if (!bitUsed(bit, ctx)) continue;
    const stats = only[bit]!;
    const count = stats.count;
    const subject = `${count} ${stats.modelWord}machine${count === 1 ? "" : "s"} fit${count === 1 ? "s" : ""} everything else but`;
    const has = count === 1 ? "has" : "have";
    if (bit === F_CAPACITY) {
      const hint = capacityHint(ctx, largestMachine, clusterUnits);
      if (count > 0) {
        const most = stats.max;
        nearMisses.push({
          constraint: id,
          count,
          message: `${subject} ${has} ${stats.min === most ? "only" : "at most"} ${plural(most, "GPU")} available (you asked for ${ctx.count}).${hint ? ` ${hint}` : ""}`,
        });
      } else if (hint) {
        nearMisses.push({ constraint: id, count: 0, message: hint });
      }
      continue;
    }
    if (count === 0) continue;
    let message: string;
    switch (bit) {
      case F_EXPIRY:
        message = `${subject} ${count === 1 ? "its offer expires" : "their offers expire"} within ${options.minOfferValiditySeconds} s (the provider republishes before expiry; try again shortly).`;
        break;
      case F_DURATION:
        message =
          stats.count > stats.below
            ? `${subject} accept${count === 1 ? "s" : ""} leases of at most ${stats.max} s (you asked for ${ctx.duration} s).`
            : `${subject} require${count === 1 ? "s" : ""} leases of at least ${stats.min} s (you asked for ${ctx.duration} s).`;
        break;
      case F_VRAM:
        message = `${subject} ${has} only ${stats.max} MiB per GPU (you asked for ${ctx.minVramMiB}).`;
        break;
      case F_HOST:
        message = hostMissText(subject, count, ctx, host);
        break;
      case F_ATTESTATION:
        message = `${subject} ${has} no current hardware attestation (${EXPLAIN_REMEDIES.acceptUnattested}).`;
        break;
      case F_ATTEST_FAILURES:
        message = attestFailuresMissText(subject, count, stats.min, ctx);
        break;
      case F_CC:
        message = `${subject} ${count === 1 ? "its GPUs were" : "their GPUs were"} not identified by NVIDIA-signed evidence (${EXPLAIN_REMEDIES.acceptWithoutCc}).`;
        break;
      case F_REPUTATION:
        message = `${subject} ${count === 1 ? "its provider's reputation is" : "their providers' reputation is at most"} ${stats.max.toFixed(2)} (you asked for at least ${ctx.minReputation}).`;
        break;
      case F_EXCLUDED:
        message = `${subject} ${count === 1 ? "was" : "were"} already tried by this allocation.`;
        break;
      default:
        continue;
    }
    nearMisses.push({ constraint: id, count, message });
  }

  const totalOffers = index.size;
  const last = [...steps].reverse().find((s) => s.removed > 0 && s.remaining === 0);
  const summary =
    totalOffers === 0
      ? `No offer fits ${describeRequest(request)}: the offer book is empty (no provider has published an offer that this node holds).`
      : `No offer fits ${describeRequest(request)}${last ? `: the last ${plural(last.removed, "offer")} failed "${last.label}"` : ""}.`;
  const lines = [summary];
  if (totalOffers > 0) {
    lines.push(`Constraints in the order applied (${plural(totalOffers, "offer")} in the book):`);
    const emptyAt = steps.findIndex((s) => s.remaining === 0);
    steps.forEach((s, i) => {
      if (emptyAt < 0 || i <= emptyAt) lines.push(`  ${i + 1}. ${s.label}: removed ${s.removed}, ${s.remaining} left`);
    });
    if (emptyAt >= 0 && emptyAt < steps.length - 1) {
      lines.push(
        `  Not reached (no offer left): ${steps
          .slice(emptyAt + 1)
          .map((s) => s.label)
          .join("; ")}.`,
      );
    }
  }
  if (nearMisses.length > 0) {
    lines.push("Nearest offers:");
    for (const miss of nearMisses) lines.push(`  - ${miss.message}`);
  }
  if (truncated) lines.push(`(Searches for nearest offers stopped after ${options.explainScanLimit} offers each.)`);
  return { summary, totalOffers, steps, nearMisses, nearMissSearchTruncated: truncated, message: lines.join("\n") };
}

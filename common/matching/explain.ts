/**
 * The answer to a request that nothing fits: every constraint in the order applied with how
 * many offers it removed, then the offers that came nearest ("3 A100-80GB machines fit
 * everything else but have only 2 free GPUs"; "the cheapest A100-80GB machine with 4 free GPUs
 * costs 3.90 USD/GPU-h, 1.90 above your cap").
 *
 * Counts are exact: the index answers the first steps by bucket sizes and a price walk, the
 * rest come from one pass over the offers under the price limit. Nearest offers outside that
 * set (above the price, in other regions, of other models) are searched by ascending price
 * within `explainScanLimit` offers.
 */
import { type BookIndex, type Bucket, type Slot, walkByBid, walkByPrice } from "./book-index.js";
import {
  type ConstraintId,
  F_ATTESTATION,
  F_CAPACITY,
  F_DURATION,
  F_EXCLUDED,
  F_EXPIRY,
  F_REPUTATION,
  F_VRAM,
  type MatchContext,
  SLOT_CHECKS,
  availableUnits,
  failureMask,
} from "./constraints.js";
import { formatUsd, perHour } from "./money.js";
import type { MatchingOptions } from "./options.js";
import type { MatchRequest } from "./request.js";

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
  /** True when the search for nearest offers stopped at explainScanLimit. */
  readonly nearMissSearchTruncated: boolean;
  /** The whole explanation as text: summary, numbered steps, nearest offers. */
  readonly message: string;
};

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? "" : "s"}`;

/** `4 × A100-80GB, on demand, 3600 s, at most 2.00 USD/GPU-h, region eu-west` */
export function describeRequest(request: MatchRequest): string {
  const parts = [`${request.gpuCount} × ${request.gpuType.label}`];
  if (request.interruptible) parts.push(`interruptible at a bid of ${formatUsd(perHour(request.bidPerUnitSecond!))} USD/GPU-h`);
  else parts.push(`on demand at most ${formatUsd(request.maxPricePerGpuHour)} USD/GPU-h`);
  parts.push(`${request.duration} s`);
  if (request.regions) parts.push(`region ${request.regions.join(" or ")}`);
  if (request.colocation === "cluster") parts.push("one machine or a cluster");
  return parts.join(", ");
}

function constraintLabel(id: ConstraintId, ctx: MatchContext, options: MatchingOptions): string {
  const r = ctx.request;
  switch (id) {
    case "gpuType":
      return `GPU model ${r.gpuType.label}`;
    case "region":
      return `region ${r.regions!.join(" or ")}`;
    case "price":
      return `price at most ${formatUsd(r.maxPricePerGpuHour)} USD/GPU-h`;
    case "interruptible":
      return "sells interruptible capacity";
    case "bid":
      return `minimum bid at most your bid of ${formatUsd(perHour(r.bidPerUnitSecond!))} USD/GPU-h`;
    case "offerExpiry":
      return `offer valid for at least ${options.minOfferValiditySeconds} s more`;
    case "duration":
      return `accepts a lease of ${r.duration} s`;
    case "vram":
      return `at least ${r.minVramMiB} MiB per GPU`;
    case "attestation":
      return "current hardware attestation";
    case "reputation":
      return `provider reputation at least ${r.minReputation}`;
    case "capacity":
      return `${plural(r.gpuCount, "GPU")} available on ${r.colocation === "cluster" ? "one machine or one cluster" : "one machine"}${r.interruptible ? "" : " (free, or preemptible interruptible units)"}`;
    case "excluded":
      return "not already tried by this allocation";
  }
}

function bitUsed(bit: number, ctx: MatchContext): boolean {
  switch (bit) {
    case F_VRAM:
      return ctx.minVramMiB > 0;
    case F_ATTESTATION:
      return ctx.attestedOnly;
    case F_REPUTATION:
      return ctx.minReputation > 0;
    case F_EXCLUDED:
      return ctx.exclusions !== null;
    default:
      return true;
  }
}

type Found = { slot: Slot; price: bigint };

class Budget {
  left: number;
  truncated = false;
  constructor(limit: number) {
    this.left = limit;
  }
  /** Spends one; false (and marks truncated) when none is left. */
  spend(): boolean {
    if (this.left <= 0) {
      this.truncated = true;
      return false;
    }
    this.left--;
    return true;
  }
}

export function explainNoMatch(index: BookIndex, ctx: MatchContext, options: MatchingOptions): NoMatchExplanation {
  const request = ctx.request;
  const steps: ExplanationStep[] = [];
  const nearMisses: NearMiss[] = [];
  const budget = new Budget(options.explainScanLimit);
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
    for (const bucket of group.buckets.values()) {
      if (request.regions === null || request.regions.includes(bucket.region)) buckets.push(bucket);
    }
  }
  if (request.regions !== null) step("region", buckets.reduce((n, b) => n + b.byPrice.size, 0));
  const scanned: Slot[] = [];
  if (request.interruptible) {
    step("interruptible", buckets.reduce((n, b) => n + b.byBid.size, 0));
    for (const bucket of buckets) walkByBid(bucket, 0, ctx.priceLimit, (slot) => void scanned.push(slot));
    step("bid", scanned.length);
  } else {
    for (const bucket of buckets) walkByPrice(bucket, 0, ctx.priceLimit, (slot) => void scanned.push(slot));
    step("price", scanned.length);
  }

  // Per-offer steps, in order; capacity per machine, or per cluster when clusters are accepted.
  const masks = scanned.map((slot) => failureMask(slot, ctx));
  const before = F_EXPIRY | F_DURATION | F_VRAM | F_ATTESTATION | F_REPUTATION;
  if (request.colocation === "cluster") {
    const clusterUnits = new Map<string, number>();
    scanned.forEach((slot, i) => {
      if ((masks[i] & before) === 0 && slot.clusterKey !== "") {
        clusterUnits.set(slot.clusterKey, (clusterUnits.get(slot.clusterKey) ?? 0) + availableUnits(slot, ctx));
      }
    });
    scanned.forEach((slot, i) => {
      const viaCluster = slot.clusterKey !== "" && availableUnits(slot, ctx) > 0 && (clusterUnits.get(slot.clusterKey) ?? 0) >= ctx.count;
      if (viaCluster) masks[i] &= ~F_CAPACITY;
    });
  }
  for (const { bit, id } of SLOT_CHECKS) {
    if (!bitUsed(bit, ctx)) continue;
    const earlier = bit - 1; // every check before this one
    let left = 0;
    for (const mask of masks) if ((mask & (earlier | bit)) === 0) left++;
    step(id, left);
  }

  // Nearest offers: first those found beyond the index steps, then those failing one per-offer check.
  const fits = (slot: Slot) => failureMask(slot, ctx) === 0;
  const firstFitting = (walk: (visit: (slot: Slot) => boolean) => void): Slot | undefined => {
    let found: Slot | undefined;
    walk((slot) => {
      if (!budget.spend()) return true;
      if (fits(slot)) {
        found = slot;
        return true;
      }
      return false;
    });
    return found;
  };
  const cheapestPerGroup = (candidates: Bucket[], groupOf: (b: Bucket) => string): Map<string, Found> => {
    const best = new Map<string, Found>();
    for (const bucket of candidates) {
      const slot = request.interruptible
        ? firstFitting((visit) => walkByBid(bucket, 0, ctx.priceLimit, visit))
        : firstFitting((visit) => walkByPrice(bucket, 0, ctx.priceLimit, visit));
      if (!slot) continue;
      const price = request.interruptible ? perHour(request.bidPerUnitSecond!) : perHour(slot.entry.offer.pricePerUnitSecond);
      const key = groupOf(bucket);
      const held = best.get(key);
      if (!held || price < held.price) best.set(key, { slot, price });
    }
    return best;
  };
  const listCheapest = (found: Map<string, Found>) =>
    [...found.entries()]
      .sort((a, b) => (a[1].price < b[1].price ? -1 : a[1].price > b[1].price ? 1 : a[0] < b[0] ? -1 : 1))
      .slice(0, 3);
  const nearest = (found: Found) => ({
    key: found.slot.key,
    model: found.slot.model,
    region: found.slot.entry.machine.region,
    pricePerGpuHour: found.price,
  });

  if (inModels < index.size) {
    const others: Bucket[] = [];
    for (const group of index.models.values()) {
      if (requested.has(group.model)) continue;
      for (const bucket of group.buckets.values()) {
        if (request.regions === null || request.regions.includes(bucket.region)) others.push(bucket);
      }
    }
    const best = listCheapest(cheapestPerGroup(others, (b) => b.model));
    if (best.length > 0) {
      const list = best.map(([model, f]) => `${model} ${request.interruptible ? "at your bid" : `from ${formatUsd(f.price)} USD/GPU-h`}`).join(", ");
      nearMisses.push({ constraint: "gpuType", count: null, message: `Other GPU models fit everything else: ${list}.`, nearest: nearest(best[0][1]) });
    }
  }
  if (request.regions !== null) {
    const elsewhere: Bucket[] = [];
    for (const model of requested) {
      const group = index.models.get(model);
      if (!group) continue;
      for (const bucket of group.buckets.values()) if (!request.regions.includes(bucket.region)) elsewhere.push(bucket);
    }
    const best = listCheapest(cheapestPerGroup(elsewhere, (b) => b.region));
    if (best.length > 0) {
      const list = best
        .map(([, f]) => `${f.slot.entry.machine.region}${request.interruptible ? "" : ` from ${formatUsd(f.price)} USD/GPU-h`}`)
        .join(", ");
      nearMisses.push({ constraint: "region", count: null, message: `Offers fit everything else in other regions: ${list}.`, nearest: nearest(best[0][1]) });
    }
  }
  if (!request.interruptible) {
    let best: Found | undefined;
    for (const bucket of buckets) {
      const slot = firstFitting((visit) => walkByPrice(bucket, ctx.priceLimit + 1, Number.MAX_SAFE_INTEGER, visit));
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
    let onDemandOnly: Found | undefined;
    let bidAbove: Found | undefined;
    for (const bucket of buckets) {
      const slot = firstFitting((visit) =>
        walkByPrice(bucket, 0, Number.MAX_SAFE_INTEGER, (s) => (s.minBid === 0 ? visit(s) : !budget.spend())),
      );
      if (slot) {
        const price = perHour(slot.entry.offer.pricePerUnitSecond);
        if (!onDemandOnly || price < onDemandOnly.price) onDemandOnly = { slot, price };
      }
      const above = firstFitting((visit) => walkByBid(bucket, ctx.priceLimit + 1, Number.MAX_SAFE_INTEGER, visit));
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
        message: `The lowest minimum bid among machines that fit everything else is ${formatUsd(bidAbove.price)} USD/GPU-h, ${formatUsd(bidAbove.price - perHour(request.bidPerUnitSecond!))} USD/GPU-h above your bid of ${formatUsd(perHour(request.bidPerUnitSecond!))}.`,
        nearest: nearest(bidAbove),
      });
    }
  }

  const modelsIn = (slots: Slot[]) => {
    const names = new Set(slots.map((s) => s.model));
    return names.size === 1 ? `${[...names][0]} ` : "";
  };
  for (const { bit, id } of SLOT_CHECKS) {
    if (!bitUsed(bit, ctx)) continue;
    const only = scanned.filter((_, i) => masks[i] === bit);
    if (id === "capacity") {
      const capacityNote = capacityHint(scanned, masks, ctx);
      if (only.length > 0) {
        const units = only.map((s) => availableUnits(s, ctx));
        const most = Math.max(...units);
        const same = units.every((u) => u === most);
        nearMisses.push({
          constraint: id,
          count: only.length,
          message: `${only.length} ${modelsIn(only)}machine${only.length === 1 ? "" : "s"} fit${only.length === 1 ? "s" : ""} everything else but ${only.length === 1 ? "has" : "have"} ${same ? "only" : "at most"} ${plural(most, "GPU")} available (you asked for ${ctx.count}).${capacityNote ? ` ${capacityNote}` : ""}`,
        });
      } else if (capacityNote) {
        nearMisses.push({ constraint: id, count: 0, message: capacityNote });
      }
      continue;
    }
    if (only.length === 0) continue;
    const n = only.length;
    const subject = `${n} ${modelsIn(only)}machine${n === 1 ? "" : "s"} fit${n === 1 ? "s" : ""} everything else but`;
    let message: string;
    switch (id) {
      case "offerExpiry":
        message = `${subject} ${n === 1 ? "its offer expires" : "their offers expire"} within ${options.minOfferValiditySeconds} s (the provider republishes before expiry; try again shortly).`;
        break;
      case "duration": {
        const tooLong = only.filter((s) => ctx.duration > s.maxDuration);
        message =
          tooLong.length > 0
            ? `${subject} accept${n === 1 ? "s" : ""} leases of at most ${Math.max(...tooLong.map((s) => s.maxDuration))} s (you asked for ${ctx.duration} s).`
            : `${subject} require${n === 1 ? "s" : ""} leases of at least ${Math.min(...only.map((s) => s.minDuration))} s (you asked for ${ctx.duration} s).`;
        break;
      }
      case "vram":
        message = `${subject} ${n === 1 ? "has" : "have"} only ${Math.max(...only.map((s) => s.vramMiB))} MiB per GPU (you asked for ${ctx.minVramMiB}).`;
        break;
      case "attestation":
        message = `${subject} ${n === 1 ? "has" : "have"} no current hardware attestation (set attestedOnly: false to accept unattested machines).`;
        break;
      case "reputation":
        message = `${subject} ${n === 1 ? "its provider's reputation is" : "their providers' reputation is at most"} ${Math.max(...only.map((s) => s.reputation)).toFixed(2)} (you asked for at least ${ctx.minReputation}).`;
        break;
      case "excluded":
        message = `${subject} ${n === 1 ? "was" : "were"} already tried by this allocation.`;
        break;
      default:
        continue;
    }
    nearMisses.push({ constraint: id, count: n, message });
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
      lines.push(`  Not reached (no offer left): ${steps.slice(emptyAt + 1).map((s) => s.label).join("; ")}.`);
    }
  }
  if (nearMisses.length > 0) {
    lines.push("Nearest offers:");
    for (const miss of nearMisses) lines.push(`  - ${miss.message}`);
  }
  if (budget.truncated) lines.push(`(The search for nearest offers stopped after ${options.explainScanLimit} offers.)`);
  return { summary, totalOffers, steps, nearMisses, nearMissSearchTruncated: budget.truncated, message: lines.join("\n") };
}

/** When the count exceeds every machine that passes the other checks, say so and point at clusters. */
function capacityHint(scanned: Slot[], masks: number[], ctx: MatchContext): string | undefined {
  let largest = 0;
  let largestCluster = 0;
  const clusterUnits = new Map<string, number>();
  scanned.forEach((slot, i) => {
    if ((masks[i] & ~(F_CAPACITY | F_EXCLUDED)) !== 0) return;
    if (slot.units > largest) largest = slot.units;
    if (slot.clusterKey !== "") {
      const units = (clusterUnits.get(slot.clusterKey) ?? 0) + availableUnits(slot, ctx);
      clusterUnits.set(slot.clusterKey, units);
      if (units > largestCluster) largestCluster = units;
    }
  });
  if (largest === 0) return undefined;
  if (ctx.request.colocation === "machine" && ctx.count > largest) {
    return `No machine that fits everything else has ${plural(ctx.count, "GPU")} (the largest has ${largest}); set colocation: "cluster" to accept several machines on a declared fast interconnect.`;
  }
  if (ctx.request.colocation === "cluster" && largestCluster > 0 && largestCluster < ctx.count) {
    return `The most GPUs available in one cluster is ${largestCluster}.`;
  }
  return undefined;
}

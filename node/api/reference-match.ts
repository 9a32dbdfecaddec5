/**
 * A plain, scan-based matcher over a list of offers: the in-memory source's answer to a match
 * dry-run. The node's matching engine (node/matching/) is the real one, indexed so a match is
 * O(log n + k); this one exists so that the API can be run and tested without it, and follows
 * the same rules (DESIGN.md, "Matching engine"): constraints applied in a fixed order, each
 * counting what it removed; all GPUs on one machine unless the renter accepts a cluster.
 */
import type { Reputation } from "../../common/api/chain.js";
import type { MatchCandidate, MatchRequest, MatchResult } from "../../common/api/market.js";
import type { Address } from "viem";
import { entryKey, isAttested } from "./offer-view.js";
import type { OfferEntry } from "./source.js";

type Step = { constraint: string; detail: string; keep: (entry: OfferEntry) => boolean; hint: (before: OfferEntry[]) => string };

function reputationScore(reputation: Reputation | undefined): number {
  return reputation ? reputation.leasesCompleted - reputation.faults : 0;
}

/** Units an opener may take: free ones, plus interruptible ones it is allowed to preempt. */
function availableUnits(entry: OfferEntry, request: MatchRequest): number {
  const { capacity } = entry.message;
  if (!request.interruptible) return capacity.freeUnits + capacity.interruptibleUnits;
  const bid = request.bidPerUnitSecond ?? 0n;
  const lowest = capacity.lowestInterruptibleBid;
  return capacity.freeUnits + (lowest !== null && bid > lowest ? capacity.interruptibleUnits : 0);
}

function effectivePrice(entry: OfferEntry, request: MatchRequest): bigint {
  return request.interruptible ? (request.bidPerUnitSecond ?? 0n) : entry.message.offer.pricePerUnitSecond;
}

function list(values: Iterable<string>): string {
  const unique = [...new Set(values)].sort();
  return unique.length ? unique.join(", ") : "none";
}

export function referenceMatch(
  offers: readonly OfferEntry[],
  reputationOf: (provider: Address) => Reputation | undefined,
  request: MatchRequest,
  nowSeconds: number,
): MatchResult {
  const live = offers.filter((entry) => entry.message.offer.expiry > nowSeconds);
  const steps: Step[] = [
    {
      constraint: "model",
      detail: `GPU model is ${request.model}`,
      keep: (entry) => entry.message.machine.model === request.model,
      hint: (before) => `No live offer of ${request.model}; models on offer: ${list(before.map((e) => e.message.machine.model))}.`,
    },
  ];
  if (request.attestedOnly) {
    steps.push({
      constraint: "attested",
      detail: "has a current hardware attestation",
      keep: (entry) => isAttested(entry, nowSeconds),
      hint: () => "No such machine is attested; set attestedOnly to false to include machines without a current attestation.",
    });
  }
  if (request.region !== undefined) {
    const region = request.region.toLowerCase();
    steps.push({
      constraint: "region",
      detail: `region is ${request.region}`,
      keep: (entry) => entry.message.machine.region.toLowerCase() === region,
      hint: (before) => `Regions with such offers: ${list(before.map((e) => e.message.machine.region))}.`,
    });
  }
  if (request.minVramMiB !== undefined) {
    const minVramMiB = request.minVramMiB;
    steps.push({
      constraint: "vram",
      detail: `at least ${minVramMiB} MiB per GPU`,
      keep: (entry) => entry.message.machine.vramMiB >= minVramMiB,
      hint: (before) => `The most memory per GPU on offer is ${Math.max(...before.map((e) => e.message.machine.vramMiB))} MiB.`,
    });
  }
  steps.push({
    constraint: "duration",
    detail: `accepts a lease of ${request.duration} s`,
    keep: (entry) => entry.message.offer.minDuration <= request.duration && request.duration <= entry.message.offer.maxDuration,
    hint: (before) =>
      `Accepted durations: ${list(before.map((e) => `${e.message.offer.minDuration}..${e.message.offer.maxDuration} s`))}.`,
  });
  if (request.interruptible) {
    const bid = request.bidPerUnitSecond ?? 0n;
    steps.push({
      constraint: "interruptible",
      detail: `sells interruptible capacity at a bid of ${bid}`,
      keep: (entry) => entry.message.offer.minBidPerUnitSecond > 0n && bid >= entry.message.offer.minBidPerUnitSecond,
      hint: (before) => {
        const bids = before.map((e) => e.message.offer.minBidPerUnitSecond).filter((b) => b > 0n);
        return bids.length
          ? `Raise bidPerUnitSecond: the lowest minimum bid is ${bids.reduce((a, b) => (a < b ? a : b))}.`
          : "No such machine sells interruptible capacity; ask for on-demand instead.";
      },
    });
  }
  if (request.maxPricePerUnitSecond !== undefined) {
    const max = request.maxPricePerUnitSecond;
    steps.push({
      constraint: "price",
      detail: `price at most ${max} per unit-second`,
      keep: (entry) => effectivePrice(entry, request) <= max,
      hint: (before) =>
        `Raise maxPricePerUnitSecond: the cheapest remaining offer asks ${before.map((e) => effectivePrice(e, request)).reduce((a, b) => (a < b ? a : b))}.`,
    });
  }
  if (request.minReputation !== undefined) {
    const min = request.minReputation;
    steps.push({
      constraint: "reputation",
      detail: `provider reputation (completed − faults) at least ${min}`,
      keep: (entry) => reputationScore(reputationOf(entry.message.offer.provider)) >= min,
      hint: (before) => `The best remaining provider reputation is ${Math.max(...before.map((e) => reputationScore(reputationOf(e.message.offer.provider))))}.`,
    });
  }

  const eliminated: MatchResult["explanation"]["eliminated"] = [];
  let remaining = live;
  let hint: string | null = null;
  for (const step of steps) {
    const kept = remaining.filter(step.keep);
    eliminated.push({ constraint: step.constraint, removed: remaining.length - kept.length, detail: step.detail });
    if (kept.length === 0 && remaining.length > 0 && hint === null) hint = step.hint(remaining);
    remaining = kept;
  }
  if (live.length === 0) hint = "The offer book is empty.";

  // Capacity: whole machines first, then (if allowed) groups of machines of one provider's cluster.
  type Draft = Omit<MatchCandidate, "rank" | "score"> & { freshness: number };
  const drafts: Draft[] = [];
  const fits = remaining.filter((entry) => availableUnits(entry, request) >= request.gpuCount);
  for (const entry of fits) {
    const price = effectivePrice(entry, request);
    drafts.push({
      provider: entry.message.offer.provider,
      allocations: [{ offerKey: entryKey(entry), machineId: entry.message.offer.machineId, units: request.gpuCount }],
      pricePerUnitSecond: price,
      totalCost: price * BigInt(request.gpuCount) * BigInt(request.duration),
      region: entry.message.machine.region,
      attested: isAttested(entry, nowSeconds),
      reputation: reputationOf(entry.message.offer.provider) ?? null,
      freshness: Math.max(0, ...entry.verifiedAttestations.map((v) => v.attestation.issuedAt)),
    });
  }
  let grouped = 0;
  if (request.colocation === "cluster") {
    const zero = `0x${"0".repeat(64)}`;
    const clusters = new Map<string, OfferEntry[]>();
    for (const entry of remaining) {
      if (entry.message.machine.cluster === zero || entry.message.machine.interconnect === "none") continue;
      if (availableUnits(entry, request) >= request.gpuCount) continue;
      const id = `${entry.message.offer.provider.toLowerCase()}/${entry.message.machine.cluster}`;
      clusters.set(id, [...(clusters.get(id) ?? []), entry]);
    }
    for (const members of clusters.values()) {
      members.sort((a, b) => (effectivePrice(a, request) < effectivePrice(b, request) ? -1 : 1));
      const allocations: MatchCandidate["allocations"] = [];
      let need = request.gpuCount;
      let cost = 0n;
      let highest = 0n;
      for (const entry of members) {
        if (need === 0) break;
        const take = Math.min(need, availableUnits(entry, request));
        if (take === 0) continue;
        const price = effectivePrice(entry, request);
        allocations.push({ offerKey: entryKey(entry), machineId: entry.message.offer.machineId, units: take });
        cost += price * BigInt(take) * BigInt(request.duration);
        if (price > highest) highest = price;
        need -= take;
      }
      if (need > 0) continue;
      grouped += members.length;
      const first = members[0];
      drafts.push({
        provider: first.message.offer.provider,
        allocations,
        pricePerUnitSecond: highest,
        totalCost: cost,
        region: first.message.machine.region,
        attested: members.every((entry) => isAttested(entry, nowSeconds)),
        reputation: reputationOf(first.message.offer.provider) ?? null,
        freshness: Math.min(...members.map((e) => Math.max(0, ...e.verifiedAttestations.map((v) => v.attestation.issuedAt)))),
      });
    }
  }
  const tooSmall = remaining.length - fits.length - grouped;
  eliminated.push({
    constraint: "capacity",
    removed: Math.max(0, tooSmall),
    detail: request.colocation === "cluster" ? `${request.gpuCount} units on one machine or one cluster` : `${request.gpuCount} free units on one machine`,
  });
  if (drafts.length === 0 && remaining.length > 0 && hint === null) {
    const largest = Math.max(...remaining.map((entry) => availableUnits(entry, request)));
    hint =
      request.colocation === "cluster"
        ? `The largest free block is ${largest} units; ask for fewer GPUs.`
        : `The largest free block on one machine is ${largest} units; ask for fewer GPUs or accept colocation "cluster".`;
  }

  // Score: effective price against the cheapest candidate weighs most, then reputation, then attestation freshness.
  const cheapest = drafts.reduce<bigint | null>((min, d) => (min === null || d.totalCost < min ? d.totalCost : min), null);
  const newest = Math.max(0, ...drafts.map((d) => d.freshness));
  const scored = drafts.map((draft) => {
    const priceScore = cheapest === null || draft.totalCost === 0n ? 1 : Number((cheapest * 1_000_000n) / draft.totalCost) / 1_000_000;
    const reputation = Math.max(0, reputationScore(draft.reputation ?? undefined));
    const reputationPart = reputation / (reputation + 10);
    const freshnessPart = newest > 0 && draft.freshness > 0 ? draft.freshness / newest : 0;
    const score = Math.round((0.7 * priceScore + 0.2 * reputationPart + 0.1 * freshnessPart) * 1e6) / 1e6;
    const { freshness: _freshness, ...candidate } = draft;
    return { ...candidate, score };
  });
  scored.sort((a, b) => b.score - a.score || (a.allocations[0].offerKey < b.allocations[0].offerKey ? -1 : 1));
  const candidates: MatchCandidate[] = scored.slice(0, request.limit).map((candidate, index) => ({ rank: index + 1, ...candidate }));
  return {
    matched: candidates.length > 0,
    candidates,
    explanation: { considered: live.length, eliminated, hint: candidates.length > 0 ? null : (hint ?? "No offer fits the request.") },
  };
}

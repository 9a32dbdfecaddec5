/**
 * The constraints of a match, in the order they are applied. The first ones are answered by the
 * index (model, region, price or bid); the rest are checked on each offer the index yields.
 * The engine's match and its no-match explanation share these checks, so an explanation never
 * disagrees with a match.
 */
import type { SlotList } from "./book-index.js";
import { attestFailuresAt } from "./entry.js";
import type { MatchRequest } from "./request.js";

export type ConstraintId =
  | "gpuType"
  | "region"
  | "price"
  | "interruptible"
  | "bid"
  | "offerExpiry"
  | "duration"
  | "vram"
  | "hostResources"
  | "attestation"
  | "attestFailures"
  | "gpuIdentityVerified"
  | "reputation"
  | "capacity"
  | "excluded";

/** Constraint ids in the order applied. Those that a request does not use are skipped. */
export const CONSTRAINT_ORDER: readonly ConstraintId[] = [
  "gpuType",
  "region",
  "price",
  "interruptible",
  "bid",
  "offerExpiry",
  "duration",
  "vram",
  "hostResources",
  "attestation",
  "attestFailures",
  "gpuIdentityVerified",
  "reputation",
  "capacity",
  "excluded",
];

// Bits of the per-offer checks (those after the index), in the order applied: the lowest bit set is the first failure.
export const F_EXPIRY = 1;
export const F_DURATION = 2;
export const F_VRAM = 4;
export const F_HOST = 8;
export const F_ATTESTATION = 16;
export const F_ATTEST_FAILURES = 32;
export const F_CC = 64;
export const F_REPUTATION = 128;
export const F_CAPACITY = 256;
export const F_EXCLUDED = 512;

export const SLOT_CHECKS: readonly { bit: number; id: ConstraintId }[] = [
  { bit: F_EXPIRY, id: "offerExpiry" },
  { bit: F_DURATION, id: "duration" },
  { bit: F_VRAM, id: "vram" },
  { bit: F_HOST, id: "hostResources" },
  { bit: F_ATTESTATION, id: "attestation" },
  { bit: F_ATTEST_FAILURES, id: "attestFailures" },
  { bit: F_CC, id: "gpuIdentityVerified" },
  { bit: F_REPUTATION, id: "reputation" },
  { bit: F_CAPACITY, id: "capacity" },
  { bit: F_EXCLUDED, id: "excluded" },
];

/** Machines the caller has already tried, by key, with the `seq` tried: an entry is skipped until it has a newer seq. */
export type Exclusions = ReadonlyMap<string, number>;

/** A request flattened to numbers for the hot loops. */
export type MatchContext = {
  readonly request: MatchRequest;
  readonly now: number;
  /** Offers expiring before this are skipped. */
  readonly validUntil: number;
  readonly count: number;
  readonly duration: number;
  readonly minVramMiB: number;
  /**
   * Host resources each unit must come with (the request's totals divided by its GPU count,
   * rounded up: enough for one machine exactly, and for a cluster whose parts add up); 0 when
   * not asked. `host` is true when any is asked.
   */
  readonly host: boolean;
  readonly cpuCoresPerUnit: number;
  readonly memoryMiBPerUnit: number;
  readonly diskMiBPerUnit: number;
  readonly attestedOnly: boolean;
  /** Only machines whose GPUs the attestor quorum verified by confidential-computing evidence. */
  readonly gpuIdentityVerified: boolean;
  readonly minReputation: number;
  /** Offers whose machine holds more failed challenges than this are skipped (`maxAttestFailures`). */
  readonly maxAttestFailures: number;
  readonly interruptible: boolean;
  /** On demand: the cap per unit-second; interruptible: the bid per unit-second. */
  readonly priceLimit: number;
  readonly exclusions: Exclusions | null;
};

/** The per-unit host resources a request needs (MatchContext's `host` fields). */
export function hostNeeds(request: MatchRequest): Pick<MatchContext, "host" | "cpuCoresPerUnit" | "memoryMiBPerUnit" | "diskMiBPerUnit"> {
  return {
    host: request.cpuCores > 0 || request.memoryMiB > 0 || request.diskMiB > 0,
    cpuCoresPerUnit: Math.ceil(request.cpuCores / request.gpuCount),
    memoryMiBPerUnit: Math.ceil(request.memoryMiB / request.gpuCount),
    diskMiBPerUnit: Math.ceil(request.diskMiB / request.gpuCount),
  };
}

/**
 * Units the machine at position `i` of `list` can give this request and how: 0 from free units,
 * 1 by preempting interruptible leases (ranked below free units), or -1 when it cannot give
 * `units`. On demand preempts any interruptible lease; an interruptible bid must beat the
 * lowest one.
 */
export function capacityTier(list: SlotList, i: number, ctx: MatchContext, units: number): number {
  if (list.free[i]! >= units) return 0;
  if (list.available[i]! < units) return -1;
  if (ctx.interruptible && !(ctx.priceLimit > list.lowestBids[i]!)) return -1;
  return 1;
}

/** Units the machine could give at most (free, plus preemptible ones where allowed). */
export function availableUnits(list: SlotList, i: number, ctx: MatchContext): number {
  if (ctx.interruptible && !(ctx.priceLimit > list.lowestBids[i]!)) return list.free[i]!;
  return list.available[i]!;
}

/** The offer's units come with fewer CPU cores, less memory or less disk than the request needs per unit (or declare none). */
export function lacksHost(list: SlotList, i: number, ctx: MatchContext): boolean {
  return list.cpuCores[i]! < ctx.cpuCoresPerUnit || list.memoryMiB[i]! < ctx.memoryMiBPerUnit || list.diskMiB[i]! < ctx.diskMiBPerUnit;
}

/**
 * More of the machine's signed failures count at match time than `maxAttestFailures` allows. The
 * column holds how many were counted when the entry was indexed (the most that can count: they
 * only age out), so most machines are cleared without looking at the times.
 */
export function overFailures(list: SlotList, i: number, ctx: MatchContext): boolean {
  return list.attestFailures[i]! > ctx.maxAttestFailures && attestFailuresAt(list.slots[i]!.entry, ctx.now) > ctx.maxAttestFailures;
}

function isExcluded(list: SlotList, i: number, ctx: MatchContext): boolean {
  const slot = list.slots[i]!;
  const triedSeq = ctx.exclusions!.get(slot.key);
  return triedSeq !== undefined && slot.seq <= triedSeq;
}

/**
 * The first failing per-offer check other than capacity (0 when all pass). Capacity is judged
 * by the caller, per machine or per cluster.
 */
export function firstFailure(list: SlotList, i: number, ctx: MatchContext): number {
  if (list.expiry[i]! < ctx.validUntil) return F_EXPIRY;
  if (ctx.duration < list.minDuration[i]! || ctx.duration > list.maxDuration[i]!) return F_DURATION;
  if (list.vramMiB[i]! < ctx.minVramMiB) return F_VRAM;
  if (ctx.host && lacksHost(list, i, ctx)) return F_HOST;
  if (ctx.attestedOnly && !(list.attestationExpiry[i]! > ctx.now)) return F_ATTESTATION;
  if (overFailures(list, i, ctx)) return F_ATTEST_FAILURES;
  if (ctx.gpuIdentityVerified && !(list.ccExpiry[i]! > ctx.now)) return F_CC;
  if (list.reputation[i]! < ctx.minReputation) return F_REPUTATION;
  if (ctx.exclusions !== null && isExcluded(list, i, ctx)) return F_EXCLUDED;
  return 0;
}

/** Every failing per-offer check, capacity judged for one machine. */
export function failureMask(list: SlotList, i: number, ctx: MatchContext): number {
  let mask = 0;
  if (list.expiry[i]! < ctx.validUntil) mask |= F_EXPIRY;
  if (ctx.duration < list.minDuration[i]! || ctx.duration > list.maxDuration[i]!) mask |= F_DURATION;
  if (list.vramMiB[i]! < ctx.minVramMiB) mask |= F_VRAM;
  if (ctx.host && lacksHost(list, i, ctx)) mask |= F_HOST;
  if (ctx.attestedOnly && !(list.attestationExpiry[i]! > ctx.now)) mask |= F_ATTESTATION;
  if (overFailures(list, i, ctx)) mask |= F_ATTEST_FAILURES;
  if (ctx.gpuIdentityVerified && !(list.ccExpiry[i]! > ctx.now)) mask |= F_CC;
  if (list.reputation[i]! < ctx.minReputation) mask |= F_REPUTATION;
  if (capacityTier(list, i, ctx, ctx.count) < 0) mask |= F_CAPACITY;
  if (ctx.exclusions !== null && isExcluded(list, i, ctx)) mask |= F_EXCLUDED;
  return mask;
}

/**
 * failureMask for positions [from, to) of `list`, written to `out` from `offset`: the same checks
 * in the same terms, one check at a time over the whole range (a no-match explanation masks
 * thousands of offers): short loops over one or two columns each.
 */
export function failureMasks(list: SlotList, from: number, to: number, ctx: MatchContext, out: Uint16Array, offset: number): void {
  const shift = offset - from;
  const { expiry, minDuration, maxDuration, free, available } = list;
  const { validUntil, duration, count } = ctx;
  for (let i = from; i < to; i++) {
    let mask = 0;
    if (expiry[i]! < validUntil) mask |= F_EXPIRY;
    if (duration < minDuration[i]! || duration > maxDuration[i]!) mask |= F_DURATION;
    // capacityTier(list, i, ctx, count) < 0, the interruptible part below.
    if (free[i]! < count && available[i]! < count) mask |= F_CAPACITY;
    out[i + shift] = mask;
  }
  if (ctx.interruptible) {
    const lowestBids = list.lowestBids;
    const priceLimit = ctx.priceLimit;
    for (let i = from; i < to; i++) if (free[i]! < count && available[i]! >= count && !(priceLimit > lowestBids[i]!)) out[i + shift]! |= F_CAPACITY;
  }
  {
    const { vramMiB } = list;
    const minVramMiB = ctx.minVramMiB;
    for (let i = from; i < to; i++) if (vramMiB[i]! < minVramMiB) out[i + shift]! |= F_VRAM;
  }
  if (ctx.host) {
    for (let i = from; i < to; i++) if (lacksHost(list, i, ctx)) out[i + shift]! |= F_HOST;
  }
  if (ctx.attestedOnly) {
    const { attestationExpiry } = list;
    const now = ctx.now;
    for (let i = from; i < to; i++) if (!(attestationExpiry[i]! > now)) out[i + shift]! |= F_ATTESTATION;
  }
  {
    for (let i = from; i < to; i++) if (overFailures(list, i, ctx)) out[i + shift]! |= F_ATTEST_FAILURES;
  }
  if (ctx.gpuIdentityVerified) {
    const { ccExpiry } = list;
    const now = ctx.now;
    for (let i = from; i < to; i++) if (!(ccExpiry[i]! > now)) out[i + shift]! |= F_CC;
  }
  {
    const { reputation } = list;
    const minReputation = ctx.minReputation;
    for (let i = from; i < to; i++) if (reputation[i]! < minReputation) out[i + shift]! |= F_REPUTATION;
  }
  if (ctx.exclusions !== null) {
    for (let i = from; i < to; i++) if (isExcluded(list, i, ctx)) out[i + shift]! |= F_EXCLUDED;
  }
}

/** Whether a per-offer check applies to this request (one the request does not use is left out of an explanation). */
export function bitUsed(bit: number, ctx: MatchContext): boolean {
  switch (bit) {
    case F_VRAM:
      return ctx.minVramMiB > 0;
    case F_HOST:
      return ctx.host;
    case F_ATTESTATION:
      return ctx.attestedOnly;
    case F_CC:
      return ctx.gpuIdentityVerified;
    case F_REPUTATION:
      return ctx.minReputation > 0;
    case F_EXCLUDED:
      return ctx.exclusions !== null;
    default:
      return true;
  }
}

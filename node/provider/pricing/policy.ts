/**
 * The pricing policies as pure functions: given the configured price, what the node sees (its
 * units in use, the network's price index, the idle workload's earnings) and the price published
 * last, the next price and why. No clock and no I/O here: the engine (engine.ts) calls
 * `decidePrice` once per interval, so a test can replay any demand path step by step.
 */
import type { PricingOptions, PricingPolicyName } from "./options.js";

const BPS = 10_000n;

/** What one evaluation of a model's price looks at. */
export type PriceInputs = {
  /** `provider.prices[model]`, base units per unit-second: the reference of every policy. */
  basePrice: bigint;
  /** `provider.minBids[model]`; 0n: the model sells no interruptible capacity. */
  baseMinBid: bigint;
  /** This node's units of the model under lease (on-demand + interruptible) and in all. */
  usedUnits: number;
  totalUnits: number;
  /** Median ask of other providers' live offers of the model (null: fewer than `market.minOffers`). */
  networkIndex: bigint | null;
  /** What the idle workload earns per unit-second (null: no idle earnings configured or read yet). */
  idleEarnings: bigint | null;
};

export type PublishedPrice = { pricePerUnitSecond: bigint; minBidPerUnitSecond: bigint };

/** What decided the published price. */
export type PriceLimit = "policy" | "step" | "idle-floor";

/** One evaluation, explained: what the metrics and the "Price set" log line carry. */
export type PriceDecision = PublishedPrice & {
  policy: PricingPolicyName;
  /** Where the policy wants the price (before the step bound and the idle floor). */
  targetPerUnitSecond: bigint;
  /** The idle workload's earnings plus the margin (null: none). */
  idleFloorPerUnitSecond: bigint | null;
  limitedBy: PriceLimit;
  /** Units in use, in basis points of the model's units. */
  utilizationBps: number;
  networkIndex: bigint | null;
  previous: PublishedPrice | null;
  changed: boolean;
};

/** Earnings plus margin, rounded up: a unit is never sold for less than it earns idle. */
export function idleFloor(idleEarnings: bigint | null, marginBps: number): bigint | null {
  if (idleEarnings === null) return null;
  return ceilDiv(idleEarnings * (BPS + BigInt(marginBps)), BPS);
}

/** Share of units in use in basis points (0 when the model has no units). */
export function utilizationBps(usedUnits: number, totalUnits: number): number {
  if (totalUnits <= 0) return 0;
  return Math.round((Math.min(Math.max(usedUnits, 0), totalUnits) * 10_000) / totalUnits);
}

/**
 * The `utilization` curve: the floor at 0 % use, the configured price at the target use, the
 * ceiling at 100 %, straight lines between.
 */
export function utilizationTarget(basePrice: bigint, useBps: number, curve: PricingOptions["utilization"]): bigint {
  const { floorBps, ceilingBps, targetBps } = curve;
  const factorBps = useBps <= targetBps ? floorBps + ((10_000 - floorBps) * useBps) / targetBps : 10_000 + ((ceilingBps - 10_000) * (useBps - targetBps)) / (10_000 - targetBps);
  return scaleBps(basePrice, factorBps);
}

/** The `market` target: the index at the offset, within the bounds around the configured price (the configured price without an index). */
export function marketTarget(basePrice: bigint, networkIndex: bigint | null, market: PricingOptions["market"]): bigint {
  if (networkIndex === null) return basePrice;
  const wanted = scaleBps(networkIndex, 10_000 + market.offsetBps);
  return clamp(wanted, scaleBps(basePrice, market.floorBps), scaleBps(basePrice, market.ceilingBps));
}

/** Moves `from` toward `to` by at most `maxStepBps` of `from` (and at least one base unit). */
export function boundedStep(from: bigint, to: bigint, maxStepBps: number): bigint {
  const step = maxBig(1n, (from * BigInt(maxStepBps)) / BPS);
  return clamp(to, from > step ? from - step : 1n, from + step);
}

/**
 * One evaluation of a model's price. `static` publishes the configured price at once; the
 * dynamic policies move toward their target by one bounded step from the previous price. Every
 * policy then lifts the price to the idle floor, which is never stepped toward: a unit is never
 * sold for less than the idle workload earns with it plus the margin. The interruptible minimum
 * bid moves by the same factor as the price and has the same floor.
 */
export function decidePrice(
  options: Pick<PricingOptions, "policy" | "maxStepBps" | "utilization" | "market"> & { marginBps: number },
  inputs: PriceInputs,
  previous: PublishedPrice | null,
): PriceDecision {
  const useBps = utilizationBps(inputs.usedUnits, inputs.totalUnits);
  const target =
    options.policy === "utilization"
      ? utilizationTarget(inputs.basePrice, useBps, options.utilization)
      : options.policy === "market"
        ? marketTarget(inputs.basePrice, inputs.networkIndex, options.market)
        : inputs.basePrice;
  const floor = idleFloor(inputs.idleEarnings, options.marginBps);

  let stepped = target;
  let limitedBy: PriceLimit = "policy";
  if (options.policy !== "static" && previous) {
    stepped = boundedStep(previous.pricePerUnitSecond, target, options.maxStepBps);
    if (stepped !== target) limitedBy = "step";
  }
  if (stepped < 1n) stepped = 1n;
  let price = stepped;
  if (floor !== null && price < floor) {
    price = floor;
    limitedBy = "idle-floor";
  }
  // The bid floor keeps its ratio to the configured price, and has the same idle floor.
  let minBid = 0n;
  if (inputs.baseMinBid > 0n) {
    minBid = maxBig(1n, (inputs.baseMinBid * stepped) / inputs.basePrice);
    if (floor !== null && minBid < floor) minBid = floor;
  }
  return {
    policy: options.policy,
    pricePerUnitSecond: price,
    minBidPerUnitSecond: minBid,
    targetPerUnitSecond: target,
    idleFloorPerUnitSecond: floor,
    limitedBy,
    utilizationBps: useBps,
    networkIndex: inputs.networkIndex,
    previous,
    changed: !previous || previous.pricePerUnitSecond !== price || previous.minBidPerUnitSecond !== minBid,
  };
}

/** Nearest-rank median of asks: the network index (the same p50 the market statistics and the explorer chart show). */
export function medianPrice(prices: readonly bigint[]): bigint | null {
  const sorted = [...prices].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  return sorted[Math.ceil(sorted.length / 2) - 1] ?? null;
}

function scaleBps(value: bigint, factorBps: number): bigint {
  // Basis points may be fractional on the utilization curve: scale by 10^4 more for exactness.
  return (value * BigInt(Math.round(factorBps * 10_000))) / (BPS * BPS);
}
function clamp(value: bigint, low: bigint, high: bigint): bigint {
  return value < low ? low : value > high ? high : value;
}
function ceilDiv(a: bigint, b: bigint): bigint {
  return (a + b - 1n) / b;
}
function maxBig(a: bigint, b: bigint): bigint {
  return a > b ? a : b;
}

/**
 * The pricing engine: once per `pricing.intervalMs` it evaluates every sold model's price with
 * the configured policy (policy.ts) and, when one changed, tells the machine market to republish
 * that model's offers. Every change is explained: a "Price set" log line with the policy, its
 * inputs and the result, and the `suanli_provider_price*` metrics.
 *
 * At start (and after a restart) the first evaluation publishes the policy's target for what the
 * node sees then; from there the dynamic policies move one bounded step per interval.
 */
import type { Logger } from "../../log/logger.js";
import type { Metrics } from "../../metrics/metrics.js";
import { minBidForModel, priceForModel, type ProviderOptions } from "../options.js";
import { idleEarningsPerUnitSecond, IdleEarningsSource } from "./idle-earnings.js";
import { decidePrice, idleFloor, medianPrice, utilizationBps, type PriceDecision, type PriceInputs, type PublishedPrice } from "./policy.js";

export type ModelUsage = { usedUnits: number; totalUnits: number };

export type PriceEngineOptions = {
  options: ProviderOptions;
  /** Canonical models this node sells (those with a configured price). */
  models: readonly string[];
  tokenDecimals: number;
  /** This node's units of a model in use and in all. */
  usage: (model: string) => ModelUsage;
  /** Other providers' live asks for a model (the network index is their median). */
  networkAsks: (model: string) => bigint[];
  /** Called with the models whose published price changed. */
  onChange: (models: string[]) => void;
  metrics?: Metrics;
  logger: Logger;
  /** Milliseconds clock; tests pass a fake one. */
  now?: () => number;
  /** Reads the idle earnings; the default follows `pricing.idleEarnings`. */
  idleEarnings?: IdleEarningsSource;
};

/**
 * @example
 * const engine = new PriceEngine({ options, models: ["A100-80GB"], tokenDecimals: 6,
 *   usage: (model) => ({ usedUnits: 3, totalUnits: 4 }), networkAsks: () => [],
 *   onChange: (models) => market.markDirty(), logger });
 * await engine.start();
 * engine.current("A100-80GB"); // { pricePerUnitSecond, minBidPerUnitSecond }
 */
export class PriceEngine {
  private readonly prices = new Map<string, PublishedPrice>();
  private readonly decisions = new Map<string, PriceDecision>();
  private readonly idle: IdleEarningsSource | undefined;
  private lastStepAtMs: number | null = null;
  private timer: ReturnType<typeof setInterval> | undefined;
  private readonly now: () => number;

  constructor(private readonly ctx: PriceEngineOptions) {
    this.now = ctx.now ?? Date.now;
    const idleOptions = ctx.options.pricing.idleEarnings;
    this.idle = ctx.idleEarnings ?? (idleOptions ? new IdleEarningsSource({ options: idleOptions, logger: ctx.logger }) : undefined);
  }

  /** Reads the idle earnings once, sets the first prices, then evaluates on the interval. */
  async start(): Promise<void> {
    if (this.idle) {
      await this.idle.refresh();
      this.idle.start(() => this.evaluate({ floorOnly: true }));
    }
    this.evaluate();
    if (this.timer) return;
    this.timer = setInterval(() => this.evaluate(), this.ctx.options.pricing.intervalMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    this.idle?.stop();
  }

  /** The price a model is sold at now (undefined: not sold). */
  current(model: string): PublishedPrice | undefined {
    return this.prices.get(model);
  }

  /** The last evaluation of a model, explained. */
  explain(model: string): PriceDecision | undefined {
    return this.decisions.get(model);
  }

  /**
   * Evaluates every model. A dynamic policy steps at most once per interval of the engine's
   * clock: an evaluation sooner than that (a new idle earnings reading: `floorOnly`) only applies
   * the idle floor to the current prices. `fromScratch` sets every price to its policy's target
   * as if nothing had been published (the agent calls it once the chain's counts are read at
   * start). Returns the decisions that changed a price.
   */
  evaluate({ floorOnly = false, fromScratch = false }: { floorOnly?: boolean; fromScratch?: boolean } = {}): PriceDecision[] {
    const { options, tokenDecimals } = this.ctx;
    const pricing = options.pricing;
    const nowMs = this.now();
    const step = fromScratch || (!floorOnly && (this.lastStepAtMs === null || nowMs - this.lastStepAtMs >= pricing.intervalMs));
    if (step) this.lastStepAtMs = nowMs;
    const report = this.idle?.current() ?? null;
    const changed: PriceDecision[] = [];
    const changedModels: string[] = [];
    for (const model of this.ctx.models) {
      const basePrice = priceForModel(options, model, tokenDecimals);
      if (basePrice === undefined) continue;
      const previous = fromScratch ? null : (this.prices.get(model) ?? null);
      const asks = pricing.policy === "market" ? this.ctx.networkAsks(model) : [];
      const networkIndex = asks.length >= pricing.market.minOffers ? medianPrice(asks) : null;
      const inputs: PriceInputs = {
        basePrice,
        baseMinBid: minBidForModel(options, model, tokenDecimals) ?? 0n,
        ...this.ctx.usage(model),
        networkIndex,
        idleEarnings: report ? idleEarningsPerUnitSecond(report, model, tokenDecimals) : null,
      };
      const config = { ...pricing, marginBps: pricing.idleEarnings?.marginBps ?? 0 };
      // Between steps the previous price holds, lifted to the floor if the floor rose.
      const decided = !step && previous ? holdAboveFloor(previous, config, inputs) : decidePrice(config, inputs, previous);
      const held = this.prices.get(model);
      const explained = { ...decided, changed: !held || held.pricePerUnitSecond !== decided.pricePerUnitSecond || held.minBidPerUnitSecond !== decided.minBidPerUnitSecond };
      this.decisions.set(model, explained);
      this.record(model, explained);
      if (!explained.changed) continue;
      this.prices.set(model, { pricePerUnitSecond: explained.pricePerUnitSecond, minBidPerUnitSecond: explained.minBidPerUnitSecond });
      changed.push(explained);
      changedModels.push(model);
      this.ctx.logger.info("Price set", {
        model,
        policy: explained.policy,
        limitedBy: explained.limitedBy,
        pricePerUnitSecond: explained.pricePerUnitSecond,
        minBidPerUnitSecond: explained.minBidPerUnitSecond,
        previousPerUnitSecond: explained.previous?.pricePerUnitSecond ?? null,
        targetPerUnitSecond: explained.targetPerUnitSecond,
        basePerUnitSecond: basePrice,
        utilizationBps: explained.utilizationBps,
        usedUnits: inputs.usedUnits,
        totalUnits: inputs.totalUnits,
        networkIndex: explained.networkIndex,
        networkOffers: asks.length,
        idleEarningsPerUnitSecond: inputs.idleEarnings,
        idleFloorPerUnitSecond: explained.idleFloorPerUnitSecond,
      });
    }
    if (changed.length > 0) this.ctx.onChange(changedModels);
    return changed;
  }

  private record(model: string, decision: PriceDecision): void {
    const metrics = this.ctx.metrics;
    if (!metrics) return;
    metrics.providerPrice.set({ model, kind: "on_demand" }, Number(decision.pricePerUnitSecond));
    metrics.providerPrice.set({ model, kind: "interruptible_min_bid" }, Number(decision.minBidPerUnitSecond));
    metrics.providerPriceTarget.set({ model, policy: decision.policy }, Number(decision.targetPerUnitSecond));
    metrics.providerPriceInput.set({ model, input: "utilization_bps" }, decision.utilizationBps);
    if (decision.networkIndex !== null) metrics.providerPriceInput.set({ model, input: "network_index" }, Number(decision.networkIndex));
    if (decision.idleFloorPerUnitSecond !== null) metrics.providerPriceInput.set({ model, input: "idle_floor" }, Number(decision.idleFloorPerUnitSecond));
    if (decision.changed) metrics.providerPriceChanges.inc({ model, policy: decision.policy, limited_by: decision.limitedBy });
  }
}

/** A decision between steps: the previous price, raised to the idle floor when that rose. */
function holdAboveFloor(previous: PublishedPrice, config: { policy: PriceDecision["policy"]; marginBps: number }, inputs: PriceInputs): PriceDecision {
  const floor = idleFloor(inputs.idleEarnings, config.marginBps);
  const lift = (value: bigint) => (floor !== null && value < floor ? floor : value);
  const pricePerUnitSecond = lift(previous.pricePerUnitSecond);
  const minBidPerUnitSecond = previous.minBidPerUnitSecond > 0n ? lift(previous.minBidPerUnitSecond) : 0n;
  return {
    policy: config.policy,
    pricePerUnitSecond,
    minBidPerUnitSecond,
    targetPerUnitSecond: previous.pricePerUnitSecond,
    idleFloorPerUnitSecond: floor,
    limitedBy: pricePerUnitSecond !== previous.pricePerUnitSecond ? "idle-floor" : "step",
    utilizationBps: utilizationBps(inputs.usedUnits, inputs.totalUnits),
    networkIndex: inputs.networkIndex,
    previous,
    changed: pricePerUnitSecond !== previous.pricePerUnitSecond || minBidPerUnitSecond !== previous.minBidPerUnitSecond,
  };
}

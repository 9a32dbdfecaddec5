import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { nodeConfigSchema } from "../../node/config/schema.js";
import { silentLogger } from "../../node/log/logger.js";
import { createMetrics } from "../../node/metrics/metrics.js";
import type { ProviderOptions } from "../../node/provider/options.js";
import { PriceEngine, type ModelUsage } from "../../node/provider/pricing/engine.js";
import { IdleEarningsError, IdleEarningsSource, idleEarningsPerUnitSecond, parseIdleEarnings } from "../../node/provider/pricing/idle-earnings.js";
import { boundedStep, decidePrice, medianPrice, utilizationTarget } from "../../node/provider/pricing/policy.js";

const MODEL = "A100-80GB";

function providerOptions(provider: Record<string, unknown>): ProviderOptions {
  return nodeConfigSchema.parse({ provider }).provider;
}

/** A market simulation: a fake clock, demand set by the test, evaluations on the clock. */
function simulate(provider: Record<string, unknown>, options: { usage?: ModelUsage; asks?: bigint[]; idle?: IdleEarningsSource } = {}) {
  let nowMs = 1_000_000;
  const demand = { usage: options.usage ?? { usedUnits: 0, totalUnits: 4 }, asks: options.asks ?? [] };
  const changes: string[][] = [];
  const metrics = createMetrics();
  const engine = new PriceEngine({
    options: providerOptions(provider),
    models: [MODEL],
    tokenDecimals: 6,
    usage: () => demand.usage,
    networkAsks: () => demand.asks,
    onChange: (models) => changes.push(models),
    metrics,
    logger: silentLogger(),
    now: () => nowMs,
    idleEarnings: options.idle,
  });
  return {
    engine,
    demand,
    changes,
    metrics,
    /** Advances the clock by `ms` and evaluates; returns the published price. */
    tick(ms: number): bigint {
      nowMs += ms;
      engine.evaluate();
      return engine.current(MODEL)!.pricePerUnitSecond;
    },
    /** `steps` intervals at the current demand: the price after each. */
    path(steps: number, intervalMs: number): bigint[] {
      return Array.from({ length: steps }, () => this.tick(intervalMs));
    },
  };
}

describe("provider pricing policies", () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "suanli-pricing-"));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("static: publishes the configured price whatever the demand", () => {
    const sim = simulate({ prices: { [MODEL]: { pricePerUnitSecond: "1000" } } });
    assert.equal(sim.tick(0), 1000n);
    sim.demand.usage = { usedUnits: 4, totalUnits: 4 };
    assert.deepEqual(sim.path(3, 60_000), [1000n, 1000n, 1000n]);
    assert.equal(sim.changes.length, 1, "only the first evaluation publishes");
  });

  it("utilization: climbs one bounded step per interval as units fill, to the ceiling, and falls back as they idle", () => {
    const provider = {
      prices: { [MODEL]: { pricePerUnitSecond: "1000" } },
      minBids: { [MODEL]: { pricePerUnitSecond: "500" } },
      pricing: { policy: "utilization", intervalMs: 60_000, maxStepBps: 1_000, utilization: { floorBps: 8_000, ceilingBps: 15_000, targetBps: 7_000 } },
    };
    const sim = simulate(provider);
    assert.equal(sim.tick(0), 800n, "idle: the floor of the curve");
    assert.equal(sim.engine.current(MODEL)!.minBidPerUnitSecond, 400n, "the interruptible floor keeps its ratio");
    sim.demand.usage = { usedUnits: 4, totalUnits: 4 };
    // +10 % per interval (of the current price), capped by the ceiling at 150 %.
    assert.deepEqual(sim.path(8, 60_000), [880n, 968n, 1064n, 1170n, 1287n, 1415n, 1500n, 1500n]);
    assert.equal(sim.engine.explain(MODEL)!.limitedBy, "policy");
    assert.equal(sim.engine.current(MODEL)!.minBidPerUnitSecond, 750n);
    // Faster evaluations than the interval do not step again.
    sim.demand.usage = { usedUnits: 0, totalUnits: 4 };
    assert.equal(sim.tick(60_000), 1350n);
    assert.equal(sim.tick(1_000), 1350n, "a second evaluation within the interval holds the price");
    assert.equal(sim.engine.explain(MODEL)!.limitedBy, "step");
    assert.deepEqual(sim.path(4, 60_000), [1215n, 1094n, 985n, 887n]);
    // Units at the target use: the configured price.
    sim.demand.usage = { usedUnits: 7, totalUnits: 10 };
    assert.deepEqual(sim.path(2, 60_000), [975n, 1000n]);
  });

  it("market: follows the median of other providers' asks at the offset, within the bounds, and needs enough offers", async () => {
    const provider = {
      prices: { [MODEL]: { pricePerUnitSecond: "1000" } },
      pricing: { policy: "market", intervalMs: 1_000, maxStepBps: 500, market: { offsetBps: -500, floorBps: 5_000, ceilingBps: 20_000, minOffers: 3 } },
    };
    const sim = simulate(provider, { asks: [1200n, 1300n] });
    assert.equal(sim.tick(0), 1000n, "two offers are not an index: the configured price");
    assert.equal(sim.engine.explain(MODEL)!.networkIndex, null);
    sim.demand.asks = [1200n, 1300n, 1400n, 1100n, 5000n];
    // Index 1300 (median), -5 %: 1235, approached by at most 5 % a step.
    assert.deepEqual(sim.path(6, 1_000), [1050n, 1102n, 1157n, 1214n, 1235n, 1235n]);
    assert.equal(sim.engine.explain(MODEL)!.networkIndex, 1300n);
    // A collapsing book cannot drag the price under 50 % of the configured price.
    sim.demand.asks = [10n, 10n, 10n];
    const fall = sim.path(20, 1_000);
    assert.equal(fall.at(-1), 500n);
    assert.ok(
      fall.every((price, i) => i === 0 || fall[i - 1]! - price <= (fall[i - 1]! * 500n) / 10_000n),
      "every step is bounded",
    );
    const inputs = await sim.metrics.registry.getSingleMetricAsString("suanli_provider_price_input");
    assert.match(inputs, /model="A100-80GB",input="network_index"} 10$/m);
  });

  it("every policy keeps the price and the interruptible floor above the idle workload's earnings plus the margin, at once", async () => {
    const file = path.join(dir, "earnings.json");
    // 3.6 USD per unit-hour = 1000 base units per second (6 decimals).
    await writeFile(file, JSON.stringify({ A100: 3.6 }));
    const idle = new IdleEarningsSource({ options: { file, marginBps: 1_000, refreshMs: 60_000, timeoutMs: 1_000 }, logger: silentLogger() });
    await idle.refresh();
    const provider = {
      prices: { [MODEL]: { pricePerUnitSecond: "900" } },
      minBids: { [MODEL]: { pricePerUnitSecond: "300" } },
      pricing: { policy: "utilization", intervalMs: 60_000, maxStepBps: 1_000, idleEarnings: { file, marginBps: 1_000 } },
    };
    const sim = simulate(provider, { idle });
    assert.equal(sim.tick(0), 1100n, "earnings 1000 + 10 %");
    assert.deepEqual(sim.engine.current(MODEL), { pricePerUnitSecond: 1100n, minBidPerUnitSecond: 1100n });
    assert.equal(sim.engine.explain(MODEL)!.limitedBy, "idle-floor");
    // The workload earns more: the floor applies before the next interval, without a step bound.
    await writeFile(file, "7.2");
    await idle.refresh();
    sim.engine.evaluate({ floorOnly: true });
    assert.equal(sim.engine.current(MODEL)!.pricePerUnitSecond, 2200n);
    // Full demand with the floor above the ceiling: the floor still wins.
    sim.demand.usage = { usedUnits: 4, totalUnits: 4 };
    assert.deepEqual(sim.path(2, 60_000), [2200n, 2200n]);
    // Earnings fall: the price returns to the policy's path one step at a time.
    await writeFile(file, "0");
    await idle.refresh();
    assert.deepEqual(sim.path(3, 60_000), [1980n, 1782n, 1604n]);
    // A broken report keeps the last reading (selling under the earnings is the loss to avoid).
    await writeFile(file, "lots");
    assert.equal(await idle.refresh(), null);
    assert.equal(idleEarningsPerUnitSecond(idle.current()!, MODEL, 6), 0n);
    const changes = await sim.metrics.registry.getSingleMetricAsString("suanli_provider_price_changes_total");
    assert.match(changes, /model="A100-80GB",policy="utilization",limited_by="idle-floor"} 2\n/);
  });

  it("static with a command reporting the earnings", async () => {
    const idle = new IdleEarningsSource({ options: { command: ["/bin/sh", "-c", "echo 7.2"], marginBps: 0, refreshMs: 60_000, timeoutMs: 5_000 }, logger: silentLogger() });
    await idle.refresh();
    const sim = simulate({ prices: { [MODEL]: { pricePerUnitSecond: "1000" } } }, { idle });
    assert.equal(sim.tick(0), 2000n);
    const failing = new IdleEarningsSource({ options: { command: "exit 3", marginBps: 0, refreshMs: 60_000, timeoutMs: 5_000 }, logger: silentLogger() });
    assert.equal(await failing.refresh(), null);
    assert.equal(failing.current(), null);
  });

  it("reads idle earnings reports and refuses bad ones with what is accepted", () => {
    assert.deepEqual(parseIdleEarnings(" 0.42\n"), { all: 0.42, byModel: new Map() });
    const report = parseIdleEarnings('{"A100": 3.6, "H100-80GB-SXM": 7.2}');
    assert.equal(idleEarningsPerUnitSecond(report, "A100-80GB", 6), 1000n);
    assert.equal(idleEarningsPerUnitSecond(report, "A100-80GB/1g.10gb", 6), 1000n, "a MIG slice falls back to its GPU's entry");
    assert.equal(idleEarningsPerUnitSecond(report, "L4-24GB", 6), null);
    assert.equal(idleEarningsPerUnitSecond(parseIdleEarnings("0.0000001"), "L4-24GB", 6), 1n, "rounded up, never to zero");
    for (const bad of ["-1", "abc", "[1]", '{"Z80": 1}', '{"A100": -2}', '{"A100": "3"}']) {
      assert.throws(
        () => parseIdleEarnings(bad),
        (error: Error) => error instanceof IdleEarningsError,
        bad,
      );
    }
  });

  it("pure steps: bounded both ways, at least one base unit, median by nearest rank", () => {
    assert.equal(boundedStep(1000n, 5000n, 1_000), 1100n);
    assert.equal(boundedStep(1000n, 10n, 1_000), 900n);
    assert.equal(boundedStep(5n, 100n, 1_000), 6n);
    assert.equal(boundedStep(1000n, 1050n, 1_000), 1050n);
    assert.equal(medianPrice([3n, 1n, 2n, 4n]), 2n);
    assert.equal(medianPrice([]), null);
    const curve = { floorBps: 8_000, ceilingBps: 15_000, targetBps: 7_000 };
    assert.equal(utilizationTarget(1000n, 3_500, curve), 900n);
    assert.equal(utilizationTarget(1000n, 8_500, curve), 1250n);
    const decision = decidePrice(
      { policy: "static", maxStepBps: 1, utilization: curve, market: { offsetBps: 0, floorBps: 5_000, ceilingBps: 20_000, minOffers: 1 }, marginBps: 0 },
      { basePrice: 10n, baseMinBid: 0n, usedUnits: 0, totalUnits: 1, networkIndex: null, idleEarnings: null },
      null,
    );
    assert.equal(decision.minBidPerUnitSecond, 0n, "no interruptible capacity stays none");
  });

  it("refuses pricing configs it cannot follow, saying what is accepted", () => {
    const bad = [
      { policy: "surge" },
      { utilization: { floorBps: 12_000 } },
      { market: { ceilingBps: 9_000 } },
      { maxStepBps: 0 },
      { idleEarnings: { marginBps: 10 } },
      { idleEarnings: { file: "/tmp/x", command: "echo 1" } },
      { idleEarnings: { file: "relative.txt" } },
    ];
    for (const pricing of bad) {
      const result = nodeConfigSchema.safeParse({ provider: { pricing } });
      assert.equal(result.success, false, JSON.stringify(pricing));
      assert.ok(
        result.error!.issues.every((issue) => issue.path.join(".").startsWith("provider.pricing")),
        JSON.stringify(result.error!.issues),
      );
    }
    assert.equal(providerOptions({}).pricing.policy, "static");
  });
});

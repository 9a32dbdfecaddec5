import assert from "node:assert/strict";
import { readLease } from "../../common/chain/market.js";
import type { SuanliClient } from "../../sdk/index.js";
import { startRenterMarket, type RenterMarket } from "../support/renter-market.js";
import { waitFor } from "../support/wait.js";

/**
 * Issue #21: a provider with the `utilization` policy raises its price as renters fill its
 * units, and renters (through the network, with the SDK) see and pay the new price.
 */
describe("utilization pricing: the price rises as renters fill the provider (real provider, chain, libp2p)", function () {
  this.timeout(180_000);
  let market: RenterMarket;
  const BASE = 100n;

  before(async () => {
    market = await startRenterMarket({
      name: "pricing-utilization",
      provider: {
        provider: {
          inventory: { source: "declared", declared: [{ model: "A100-80GB", count: 4, region: "eu-west" }] },
          prices: { "A100-80GB": { pricePerUnitSecond: BASE.toString() } },
          // The configured price up to a quarter of the units in use, three times it when all are.
          pricing: { policy: "utilization", intervalMs: 300, maxStepBps: 2_000, utilization: { floorBps: 10_000, ceilingBps: 30_000, targetBps: 2_500 } },
        },
      },
      fund: 50_000_000n,
      freeUnits: 4,
      extraRenters: 1,
    });
  });
  after(async () => market?.close());

  it("publishes higher prices as leases take units, one bounded step per interval, and the next renter leases at the new price", async () => {
    const { devnet, bundles, provider } = market;
    const [first, second] = [market.client, market.others[0]];
    const bundle = await bundles.bundle({ "hold.sh": "echo holding; sleep 60" });
    const task = { gpuType: "A100", duration: 120, maxPricePerGpuHour: "5", attestedOnly: false, bundleUrl: bundle.url, sha256: bundle.sha256, command: "sh hold.sh" };
    const seenPrice = async (client: SuanliClient) => (await client.queryOffers({ gpuType: "A100" }))[0]?.pricePerUnitSecond;

    // Idle: the configured price, as the renter sees it on the network.
    assert.equal(await waitFor("the offer at the configured price", async () => ((await seenPrice(second!)) === BASE ? true : undefined), { timeoutMs: 30_000 }), true);

    // Every price the provider publishes, in order (its own book takes each message it sends).
    const published: bigint[] = [BASE];
    provider.daemon.offers.book.on("offer", (entry) => {
      if (entry.pricePerUnitSecond !== published.at(-1)) published.push(entry.pricePerUnitSecond);
    });

    // The first renter takes half the units: the target is 100 + 200 × (5000 - 2500) / 7500 = 166.
    const leased = await first!.submitTask({ ...task, gpuCount: 2 });
    assert.equal(leased.attempt.pricePerUnitSecond, BASE, "the first lease pays the price before it filled the units");

    await waitFor("the second renter to see the raised price", async () => ((await seenPrice(second!)) === 166n ? true : undefined), { timeoutMs: 60_000, intervalMs: 50 });
    // One 20 % step per interval, upward only: 100 → 120 → 144 → 166 (the target).
    assert.deepEqual(published, [100n, 120n, 144n, 166n]);
    const decision = provider.agent.pricing.explain("A100-80GB")!;
    assert.equal(decision.utilizationBps, 5_000);
    assert.equal(decision.targetPerUnitSecond, 166n);

    // The second renter leases at the price it saw, on-chain.
    const second1 = await second!.submitTask({ ...task, gpuCount: 1 });
    assert.equal(second1.attempt.pricePerUnitSecond, 166n);
    const onChain = await readLease(devnet.admin.publicClient, devnet.deployment.contracts.market!, second1.leaseId);
    assert.equal(onChain.pricePerUnitSecond, 166n);
    assert.equal(onChain.deposit, 166n * 120n);

    // Three of four in use: the price keeps climbing toward 233, and the metrics say why.
    await waitFor("the price to reach three quarters' target", async () => ((await seenPrice(first!)) === 233n ? true : undefined), { timeoutMs: 60_000, intervalMs: 50 });
    const metrics = await provider.daemon.metrics.registry.metrics();
    assert.match(metrics, /suanli_provider_price_per_unit_second\{model="A100-80GB",kind="on_demand"\} 233/);
    assert.match(metrics, /suanli_provider_price_input\{model="A100-80GB",input="utilization_bps"\} 7500/);
    assert.match(metrics, /suanli_provider_price_changes_total\{model="A100-80GB",policy="utilization",limited_by="step"\} [1-9]/);

    await first!.cancel(leased.taskId);
    await second!.cancel(second1.taskId);
  });
});

import assert from "node:assert/strict";
import { readLease } from "../../common/chain/market.js";
import { MatchingEngine, offerEntryFromMessage, parseMatchRequest } from "../../common/matching/index.js";
import { nodeConfigSchema } from "../../node/config/schema.js";
import { offerPageSchema } from "../../common/api/offers.js";
import { createClient as createBrowserClient } from "../../sdk/browser.js";
import { startTestDaemon } from "../support/daemons.js";
import { NOW, offerMessage, requestInput, type OfferSpec } from "../support/matching-fixtures.js";
import { startRenterMarket, type RenterMarket } from "../support/renter-market.js";
import { waitFor } from "../support/wait.js";

/** An engine entry of one of a machine's offers: on-demand (tier 0) or a reserved-term tier. */
function tierEntry(spec: OfferSpec, tier: number) {
  return offerEntryFromMessage(
    { ...offerMessage(spec), ...(tier > 0 ? { tier } : {}) },
    { attestation: { attestedAt: NOW - 60, expiry: NOW + 86_400 }, reputation: { leasesCompleted: 5, faults: 0, unitSecondsDelivered: 1n }, latencyMs: 20 },
  );
}

describe("reserved terms: one signed offer per duration tier", () => {
  it("matching picks the tier a duration qualifies for, ranks by the price paid, and names the tier", () => {
    const engine = new MatchingEngine({}, { now: () => NOW });
    const machine = { machineId: 1, provider: 1, price: 1000, maxDuration: 30 * 86_400, cluster: 1 };
    engine.upsert(tierEntry({ ...machine, minDuration: 60 }, 0));
    engine.upsert(tierEntry({ ...machine, price: 900, minDuration: 86_400, seq: 2 }, 1));
    engine.upsert(tierEntry({ ...machine, price: 750, minDuration: 7 * 86_400, seq: 3 }, 2));
    // Another provider, cheaper on demand than our on-demand price, dearer than our tiers.
    engine.upsert(tierEntry({ machineId: 2, provider: 2, price: 950, minDuration: 60 }, 0));
    const best = (duration: number) => {
      const result = engine.match(parseMatchRequest(requestInput({ duration, maxPricePerGpuHour: "10" })));
      assert.ok(result.ok);
      return result.candidates[0]!.parts[0];
    };
    assert.deepEqual([best(3_600)!.entry.machineId, best(3_600)!.terms], [2, "on-demand"]);
    const day = best(2 * 86_400);
    assert.deepEqual([day!.entry.machineId, day!.entry.tier, day!.pricePerUnitSecond], [1, 1, 900n]);
    assert.equal(day!.terms, "reserved tier 1: leases of 86400 s or more, 900 base units/s");
    const week = best(10 * 86_400);
    assert.deepEqual([week!.entry.tier, week!.pricePerUnitSecond], [2, 750n]);
    assert.match(week!.terms!, /^reserved tier 2: leases of 604800 s or more/);
    // A cluster group never sums a tier with its machine's on-demand offer (the same units).
    assert.equal(engine.match(parseMatchRequest(requestInput({ duration: 10 * 86_400, gpuCount: 9, colocation: "cluster", maxPricePerGpuHour: "10" }))).ok, false);
  });

  it("refuses tier configs that make no sense, saying why", () => {
    const parse = (tiers: unknown, terms: Record<string, unknown> = {}) => nodeConfigSchema.safeParse({ provider: { terms: { ...terms, tiers } } });
    assert.equal(
      parse([
        { minDurationSeconds: 86_400, discountBps: 1_000 },
        { minDurationSeconds: 604_800, discountBps: 2_500 },
      ]).success,
      true,
    );
    for (const [tiers, terms] of [
      [
        [
          { minDurationSeconds: 604_800, discountBps: 2_500 },
          { minDurationSeconds: 86_400, discountBps: 1_000 },
        ],
        {},
      ],
      [
        [
          { minDurationSeconds: 86_400, discountBps: 2_500 },
          { minDurationSeconds: 604_800, discountBps: 1_000 },
        ],
        {},
      ],
      [[{ minDurationSeconds: 86_400, discountBps: 10_000 }], {}],
      [[{ minDurationSeconds: 86_400, discountBps: 1_000 }], { maxDurationSeconds: 3_600 }],
      [[{ minDurationSeconds: 30, discountBps: 1_000 }], {}],
    ] as const) {
      const result = parse(tiers, terms);
      assert.equal(result.success, false, JSON.stringify(tiers));
      assert.ok(
        result.error!.issues.every((issue) => issue.path.join(".").startsWith("provider.terms.tiers")),
        JSON.stringify(result.error!.issues),
      );
    }
  });

  describe("a provider with two tiers, renters on the network (real chain, libp2p, SDK)", function () {
    this.timeout(180_000);
    let market: RenterMarket;

    before(async () => {
      market = await startRenterMarket({
        name: "reserved-terms",
        provider: {
          provider: {
            inventory: { source: "declared", declared: [{ model: "A100-80GB", count: 4, region: "eu-west" }] },
            prices: { "A100-80GB": { pricePerUnitSecond: "100" } },
            // On demand up to an hour; an hour or more at 10 % off, two hours or more at 25 % off (up to a day).
            terms: {
              minDurationSeconds: 1,
              maxDurationSeconds: 3_599,
              tiers: [
                { minDurationSeconds: 3_600, maxDurationSeconds: 86_400, discountBps: 1_000 },
                { minDurationSeconds: 7_200, maxDurationSeconds: 86_400, discountBps: 2_500 },
              ],
            },
          },
        },
        fund: 10_000_000n,
        freeUnits: 4,
        extraRenters: 1,
      });
    });
    after(async () => market?.close());

    it("over a node's HTTP API (the browser's feed), each tier offer keeps its tier: its own key, its price, matched as that tier", async () => {
      const { devnet, provider } = market;
      const node = await startTestDaemon(devnet, { p2p: { bootstrap: [provider.peer.addr] }, api: { enabled: true, host: "127.0.0.1", port: 0 } });
      const browser = await createBrowserClient({ rpcUrl: devnet.rpcUrl, nodeUrl: node.api!.url, deployment: devnet.deployment });
      try {
        const machineId = provider.agent.machines[0]!.machineId;
        const key = `${provider.peer.address.toLowerCase()}:${machineId}`;
        // The API's view carries the tier (absent for the on-demand offer).
        const views = await waitFor(
          "the on-demand offer and both tiers in the node's API",
          async () => {
            const page = offerPageSchema.parse(await (await fetch(`${node.api!.url}/v1/offers?limit=100`)).json());
            const mine = page.items.filter((view) => view.machineId === machineId);
            return mine.length === 3 ? mine : undefined;
          },
          { timeoutMs: 30_000 },
        );
        assert.deepEqual(views.map((view) => [view.key, view.tier, view.pricePerUnitSecond]).sort(), [
          [key, undefined, 100n],
          [`${key}:1`, 1, 90n],
          [`${key}:2`, 2, 75n],
        ]);
        // The HTTP feed files each tier under its own key: none replaces the on-demand offer.
        const offers = await waitFor(
          "the three offers in the browser client",
          async () => {
            const seen = (await browser.queryOffers({ gpuType: "A100" })).filter((offer) => offer.machineId === machineId);
            return seen.length === 3 ? seen : undefined;
          },
          { timeoutMs: 30_000 },
        );
        assert.deepEqual(
          offers.map((offer) => [offer.key, offer.pricePerUnitSecond]),
          [
            [`${key}:2`, 75n],
            [`${key}:1`, 90n],
            [key, 100n],
          ],
        );
        const dry = await browser.match({ ...requestInput({ duration: 7_200, maxPricePerGpuHour: "1" }), attestedOnly: false } as never);
        assert.ok(dry.ok);
        assert.match(dry.candidates[0]!.machines[0]!.terms, /^reserved tier 2: leases of 7200 s or more/);
        const short = await browser.match({ ...requestInput({ duration: 600, maxPricePerGpuHour: "1" }), attestedOnly: false } as never);
        assert.ok(short.ok);
        assert.equal(short.candidates[0]!.machines[0]!.terms, "on-demand", "a 10-minute lease gets the on-demand offer");
      } finally {
        await browser.close();
        await node.close();
      }
    });

    it("publishes one offer per tier, leases at the tier's price, and extends into a tier with that tier's offer", async () => {
      const { devnet, bundles, provider } = market;
      const [long, short] = [market.client, market.others[0]];
      const machineId = provider.agent.machines[0]!.machineId;
      const offers = await waitFor(
        "the on-demand offer and both tiers on the network",
        async () => {
          const seen = (await long!.queryOffers({ gpuType: "A100" })).filter((offer) => offer.machineId === machineId);
          return seen.length === 3 ? seen : undefined;
        },
        { timeoutMs: 30_000 },
      );
      assert.deepEqual(
        offers.map((offer) => [offer.key.split(":").length, offer.pricePerUnitSecond]),
        [
          [3, 75n],
          [3, 90n],
          [2, 100n],
        ],
      );

      // The dry run names the tier a 2-hour lease gets.
      const dry = await long!.match({ ...requestInput({ duration: 7_200, maxPricePerGpuHour: "1" }), attestedOnly: false } as never);
      assert.ok(dry.ok);
      assert.match(dry.candidates[0]!.machines[0]!.terms, /^reserved tier 2: leases of 7200 s or more/);

      const bundle = await bundles.bundle({ "hold.sh": "echo holding; sleep 60" });
      const task = { gpuType: "A100", gpuCount: 1, maxPricePerGpuHour: "1", attestedOnly: false, bundleUrl: bundle.url, sha256: bundle.sha256, command: "sh hold.sh" };
      const reserved = await long!.submitTask({ ...task, duration: 7_200 });
      assert.equal(reserved.attempt.pricePerUnitSecond, 75n);
      const lease = await readLease(devnet.admin.publicClient, devnet.deployment.contracts.market!, reserved.leaseId);
      assert.deepEqual([lease.pricePerUnitSecond, lease.deposit], [75n, 75n * 7_200n]);

      // 50 minutes on demand, then 20 more: past the on-demand maximum, inside tier 1's range.
      const onDemand = await short!.submitTask({ ...task, duration: 3_000 });
      assert.equal(onDemand.attempt.pricePerUnitSecond, 100n);
      // Only an active lease can be extended: the provider activates it when it starts the task.
      await waitFor("the provider to activate the on-demand lease", async () => (await short!.status(onDemand.taskId)).lease.status === "Active", { timeoutMs: 30_000 });
      const extended = await short!.extend(onDemand.taskId, { seconds: 1_200 });
      assert.equal(extended.extraDeposit, 100n * 1_200n, "billed at the lease's own price");
      const after = await readLease(devnet.admin.publicClient, devnet.deployment.contracts.market!, onDemand.leaseId);
      assert.equal(after.deposit, 100n * 4_200n);

      await long!.cancel(reserved.taskId);
      await short!.cancel(onDemand.taskId);
    });
  });
});

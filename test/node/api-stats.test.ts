import assert from "node:assert/strict";
import { offerKey } from "../../common/offers/message.js";
import { StatsRecorder } from "../../node/api/stats.js";
import { T0 } from "../support/api-fixture.js";
import { accounts, signedOfferEntry } from "../support/market.js";

describe("market statistics recorder", () => {
  const window = { from: T0 - 3600, to: T0, bucketSeconds: 600 };

  it("records changes, not re-announcements: an unchanged offer version adds no sample and keeps its history", async () => {
    const stats = new StatsRecorder();
    const spec = { provider: accounts.providerA, machineId: 1, model: "A100-80GB", pricePerUnitSecond: 1000n, at: T0 - 3000 };
    const first = await signedOfferEntry({ ...spec, seq: 1 });
    stats.recordOffer(first, T0 - 3000);
    // The provider re-announces every 30 s: new seq, same signed offer, same capacity.
    for (let i = 1; i <= 50; i++) stats.recordOffer({ ...first, message: { ...first.message, seq: 1 + i } }, T0 - 3000 + 30 * i);
    assert.equal(stats.size, 1);
    // A price change is a change.
    stats.recordOffer(await signedOfferEntry({ ...spec, seq: 60, pricePerUnitSecond: 1200n }), T0 - 500);
    assert.equal(stats.size, 2);

    const a100 = stats.compute(window, [], T0).models[0]!;
    // Every bucket from the first publication on holds the offer once, at the price it had then.
    assert.deepEqual(
      a100.series.map((bucket) => bucket.offers),
      [0, 1, 1, 1, 1, 1],
    );
    assert.deepEqual(
      a100.series.map((bucket) => bucket.price?.p50 ?? null),
      [null, 1000n, 1000n, 1000n, 1000n, 1200n],
    );
  });

  it("records the offer again after it left the book, and uses the chain's leased units when it knows them", async () => {
    const used = new Map<number, number>([[1, 6]]);
    const stats = new StatsRecorder({ usedUnits: (entry) => used.get(entry.message.offer.machineId) });
    const entry = await signedOfferEntry({ provider: accounts.providerA, machineId: 1, model: "A100-80GB", pricePerUnitSecond: 1000n, at: T0 - 3000 });
    stats.recordOffer(entry, T0 - 3000);
    stats.recordRemoval(offerKey(accounts.providerA.address, 1), T0 - 2000);
    stats.recordOffer(entry, T0 - 1000);
    assert.equal(stats.size, 3);
    const [a100] = stats.compute(window, [entry], T0 - 1000).models;
    assert.deepEqual([a100!.current.units, a100!.current.usedUnits, a100!.current.utilization], [8, 6, 0.75]);
    assert.deepEqual(
      a100!.series.map((bucket) => bucket.offers),
      [0, 1, 1, 0, 1, 1],
    );
  });
});

import assert from "node:assert/strict";
import type { Address } from "viem";
import { OfferEngineIndex, ReputationCache, type ReputationCounters } from "../../common/matching/index.js";
import { offerKey } from "../../common/offers/message.js";
import { NOW, offerMessage, providerAddress } from "../support/matching-fixtures.js";

/** A reputation source whose reads the test releases one by one. */
function gatedSource() {
  const reads: { provider: Address; release: (counters: ReputationCounters) => void; fail: (error: Error) => void }[] = [];
  const load = (provider: Address) =>
    new Promise<ReputationCounters>((resolve, reject) => {
      reads.push({ provider, release: resolve, fail: reject });
    });
  return { reads, load };
}

const counters = (leasesCompleted: number): ReputationCounters => ({ leasesCompleted, faults: 0, unitSecondsDelivered: 1000n });
/** Lets pending promise callbacks run. */
const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

describe("matching: the offer-to-engine layer shared by the feeds", () => {
  let now = NOW;
  const clock = () => now;
  beforeEach(() => {
    now = NOW;
  });

  it("indexes an offer with its provider's counters, read once for concurrent offers of one provider", async () => {
    const source = gatedSource();
    const index = new OfferEngineIndex({ reputations: new ReputationCache(source.load, { now: clock }), now: clock });
    const a = offerMessage({ provider: 1, machineId: 1 });
    const b = offerMessage({ provider: 1, machineId: 2 });
    const puts = Promise.all([index.put(offerKey(a.offer.provider, 1), a, null), index.put(offerKey(b.offer.provider, 2), b, null)]);
    await settle();
    assert.equal(source.reads.length, 1, "one read for both offers");
    source.reads[0]!.release(counters(7));
    assert.deepEqual(await puts, [true, true]);
    assert.equal(index.engine.size, 2);
    assert.equal(index.engine.get(offerKey(providerAddress(1), 1))?.reputation.leasesCompleted, 7);
    assert.equal(index.message(offerKey(providerAddress(1), 2)), b);
  });

  it("never lets a put that waited for a reputation undo a later remove", async () => {
    const source = gatedSource();
    const index = new OfferEngineIndex({ reputations: new ReputationCache(source.load, { now: clock }), now: clock });
    const message = offerMessage({ provider: 2, machineId: 5 });
    const key = offerKey(message.offer.provider, 5);
    const put = index.put(key, message, null);
    await settle();
    index.remove(key);
    source.reads[0]!.release(counters(1));
    assert.equal(await put, false);
    assert.equal(index.engine.get(key), undefined);
    assert.equal(index.message(key), undefined);
  });

  it("ranks a provider as new at once with putNow, then re-ranks its offers when the counters arrive", async () => {
    const source = gatedSource();
    const index = new OfferEngineIndex({ reputations: new ReputationCache(source.load, { now: clock }), now: clock });
    const message = offerMessage({ provider: 3, machineId: 9 });
    const key = offerKey(message.offer.provider, 9);
    assert.equal(index.putNow(key, message, null), true);
    assert.equal(index.engine.get(key)?.reputation.leasesCompleted, 0);
    await settle();
    source.reads[0]!.release(counters(12));
    await settle();
    assert.equal(index.engine.get(key)?.reputation.leasesCompleted, 12);
  });

  it("keeps an avoided provider's offers out, drops expired offers and skips an offer whose provider cannot be read", async () => {
    const failing = new ReputationCache(() => Promise.reject(new Error("registry unreachable")), { now: clock });
    const skipped: string[] = [];
    const index = new OfferEngineIndex({ reputations: failing, now: clock, onUnindexable: (key) => skipped.push(key) });
    const unreadable = offerMessage({ provider: 4, machineId: 1 });
    assert.equal(await index.put("k1", unreadable, null), false);
    assert.deepEqual(skipped, ["k1"]);

    const cached = new ReputationCache(async () => counters(1), { ttlSeconds: 60, now: clock });
    const live = new OfferEngineIndex({ reputations: cached, now: clock });
    const soon = offerMessage({ provider: 5, machineId: 1, expiry: NOW + 30 });
    const later = offerMessage({ provider: 6, machineId: 2 });
    assert.equal(await live.put(offerKey(soon.offer.provider, 1), soon, null), true);
    assert.equal(await live.put(offerKey(later.offer.provider, 2), later, null), true);
    live.avoid(later.offer.provider, 600);
    assert.equal(live.engine.size, 1, "the avoided provider's offer left the engine");
    assert.equal(await live.put(offerKey(later.offer.provider, 2), later, null), false, "and its offers are skipped meanwhile");
    now = NOW + 31;
    live.sweepExpired();
    assert.equal(live.engine.size, 0);
    assert.deepEqual(live.messages(), []);
  });

  it("keeps an offer that cannot be matched out of the engine, replacing an older matchable version", async () => {
    const index = new OfferEngineIndex({ reputations: new ReputationCache(async () => counters(1), { now: clock }), now: clock });
    const open = offerMessage({ provider: 7, machineId: 3 });
    const key = offerKey(open.offer.provider, 3);
    assert.equal(await index.put(key, open, null), true);
    const bound = { ...open, seq: 2, offer: { ...open.offer, renter: providerAddress(99) } };
    assert.equal(await index.put(key, bound, null), false);
    assert.equal(index.engine.get(key), undefined);
  });
});

/**
 * Issue #34, findings 4 and 7: what a lease commits to is paid for. Each test performs the attack with the
 * numbers of the finding and shows it fails or is bounded (docs/contracts.md, "Threat model").
 * Fixture: machine 1 has 8 A100 units; offers sell at 100 per unit-second (minimum bid 40), 50 % collateral,
 * a 600 s start window; the preemption notice is 60 s.
 */
import assert from "node:assert/strict";
import { readLease } from "../../common/chain/market.js";
import { DEFAULT_PARAMS, PRICE, balance, computeDeposit, connect, deploySuanli, latest, makeOffer, open, openActive, sign, terms, type Connection } from "./support/suanli.js";

const NOTICE = BigInt(DEFAULT_PARAMS.preemptionNotice); // 60 s
const HOUR = 3600;
const WEEK = 7 * 24 * HOUR;
const TIER_PRICE = (PRICE * 75n) / 100n; // the 7-day tier: 25 % off, 75 per unit-second

describe("LeaseMarket: commitments are paid for (issue #34, findings 4 and 7)", () => {
  let connection: Connection;
  before(async () => {
    connection = await connect();
  });
  async function suanliFixture() {
    return deploySuanli(connection);
  }
  const load = () => connection.networkHelpers.loadFixture(suanliFixture);
  const bid = (units: number, bidPerUnitSecond: bigint, duration = 3600, preempt: bigint[] = []) => terms({ units, duration, interruptible: true, bidPerUnitSecond, preempt });

  describe("finding 7: eviction is priced by what it evicts", () => {
    it("a 1-unit, 10 s bid of 51 cannot evict an 8-unit lease bidding 50 (its notice is worth 24,000, the bid owes 510)", async () => {
      const s = await load();
      const { viem } = connection;
      const victim = await openActive(s, { terms: bid(8, 50n), renter: s.renter2 });
      const offer = await makeOffer(s, { minDuration: 10 });
      const signature = await sign(s, offer);
      // The attack of the finding: 1 x 51 x 10 = 510 against the victim's 8 x 50 x 60 = 24,000.
      await viem.assertions.revertWithCustomErrorWithArgs(
        s.market.write.openLease([offer, signature, bid(1, 51n, 10, [victim.leaseId])], { account: s.renter!.account }),
        s.market,
        "PreemptionUnderpriced",
        [510n, 8n * 50n * NOTICE],
      );
      // A longer lease of the same bid does not help: it owes min(notice, duration) = 60 s of 1 x 51 = 3,060.
      await viem.assertions.revertWithCustomErrorWithArgs(
        s.market.write.openLease([offer, signature, bid(1, 51n, 3600, [victim.leaseId])], { account: s.renter!.account }),
        s.market,
        "PreemptionUnderpriced",
        [3_060n, 24_000n],
      );
      assert.equal((await readLease(s.publicClient, s.market.address, victim.leaseId)).status, "Active");
    });

    it("the cheapest eviction that passes costs the evictor at least the victim's notice, even closed at once", async () => {
      const s = await load();
      const victim = await openActive(s, { terms: bid(8, 50n), renter: s.renter2 });
      const before = await balance(s, s.renter!.account.address);
      // 8 units at 51 for the notice: owes 8 x 51 x 60 = 24,480 >= 24,000.
      const evictor = await open(s, { terms: bid(8, 51n, 60, [victim.leaseId]) });
      assert.equal((await readLease(s.publicClient, s.market.address, victim.leaseId)).endReason, "Preempted");
      await s.market.write.close([evictor.leaseId], { account: s.renter!.account });
      assert.equal(before - (await balance(s, s.renter!.account.address)), 24_480n);
      assert.ok(24_480n >= 8n * 50n * NOTICE);
    });

    it("a victim with less than the notice left is owed only what is left", async () => {
      const s = await load();
      const { viem } = connection;
      // 8 units bidding 50 for 100 s, 70 s of which have run: 30 s left, worth 8 x 50 x 30 = 12,000.
      const victim = await openActive(s, { terms: bid(8, 50n, 100), renter: s.renter2 });
      const offer = await makeOffer(s);
      const signature = await sign(s, offer);
      // 4 units at 51 for 60 s owe 12,240 >= 12,000; 3 units owe 9,180, not enough.
      await connection.networkHelpers.time.setNextBlockTimestamp(victim.activatedAt + 70);
      await viem.assertions.revertWithCustomErrorWithArgs(
        s.market.write.openLease([offer, signature, bid(3, 51n, 60, [victim.leaseId])], { account: s.renter!.account }),
        s.market,
        "PreemptionUnderpriced",
        [9_180n, 12_000n],
      );
      await connection.networkHelpers.time.setNextBlockTimestamp(victim.activatedAt + 70);
      await s.market.write.openLease([offer, signature, bid(4, 51n, 60, [victim.leaseId])], { account: s.renter!.account });
      assert.equal(await latest(s), victim.activatedAt + 70);
      const evicted = await readLease(s.publicClient, s.market.address, victim.leaseId);
      assert.deepEqual([evicted.endReason, evicted.stopAt], ["Preempted", victim.activatedAt + 100]);
    });

    it("an on-demand lease still preempts at the offer's price (interruptible leases yield to it by their terms)", async () => {
      const s = await load();
      const victim = await openActive(s, { terms: bid(8, 50n), renter: s.renter2 });
      await open(s, { terms: terms({ units: 2, preempt: [victim.leaseId] }) });
      assert.equal((await readLease(s.publicClient, s.market.address, victim.leaseId)).endReason, "Preempted");
    });
  });
  describe("finding 4: a reserved-term discount is paid for with its commitment", () => {
    const tierOffer = (s: Parameters<typeof makeOffer>[0]) => makeOffer(s, { pricePerUnitSecond: TIER_PRICE, minBidPerUnitSecond: 0n, minDuration: WEEK, maxDuration: 4 * WEEK });

    it("open on the 7-day -25 % tier, use one hour, close: the renter pays the week (90,720,000), not 540,000", async () => {
      const s = await load();
      const renter0 = await balance(s, s.renter!.account.address);
      const { leaseId, activatedAt } = await openActive(s, { offer: await tierOffer(s), terms: { units: 2, duration: WEEK } });
      await connection.networkHelpers.time.setNextBlockTimestamp(activatedAt + HOUR);
      await s.market.write.close([leaseId], { account: s.renter!.account });
      const paid = renter0 - (await balance(s, s.renter!.account.address));
      // The attack of the finding paid 2 x 75 x 3,600 = 540,000; the on-demand hour is 720,000.
      assert.equal(paid, 2n * TIER_PRICE * BigInt(WEEK));
      assert.ok(paid > computeDeposit(2, PRICE, HOUR));
      const lease = await readLease(s.publicClient, s.market.address, leaseId);
      assert.deepEqual([lease.status, lease.endReason, lease.deposit], ["Ended", "RenterClosed", 2n * TIER_PRICE * BigInt(WEEK)]);
      // The provider claims the commitment once the close's accrual is over.
      await s.market.write.claim([leaseId]);
      assert.equal((await readLease(s.publicClient, s.market.address, leaseId)).status, "Settled");
    });

    it("a tier lease closed after its commitment pays what accrued; one longer than the tier owes only the tier's minimum", async () => {
      const s = await load();
      // Four weeks on the 7-day tier, closed after eight days: 8 days accrued (above the week's minimum).
      const long = await openActive(s, { offer: await tierOffer(s), terms: { units: 1, duration: 4 * WEEK } });
      await connection.networkHelpers.time.setNextBlockTimestamp(long.activatedAt + WEEK + 24 * HOUR);
      const renter0 = await balance(s, s.renter!.account.address);
      await s.market.write.close([long.leaseId], { account: s.renter!.account });
      assert.equal(await balance(s, s.renter!.account.address), renter0 + TIER_PRICE * BigInt(4 * WEEK - WEEK - 24 * HOUR));
      // Four weeks closed after one hour: the tier's minimum (one week), the other three refunded.
      const early = await openActive(s, { offer: await tierOffer(s), terms: { units: 1, duration: 4 * WEEK } });
      await connection.networkHelpers.time.setNextBlockTimestamp(early.activatedAt + HOUR);
      const renter1 = await balance(s, s.renter!.account.address);
      await s.market.write.close([early.leaseId], { account: s.renter!.account });
      assert.equal(await balance(s, s.renter!.account.address), renter1 + TIER_PRICE * BigInt(3 * WEEK));
    });

    it("a tier lease cannot shrink away its commitment; an on-demand offer's short minimum binds nothing", async () => {
      const s = await load();
      const { viem } = connection;
      const tier = await openActive(s, { offer: await tierOffer(s), terms: { units: 2, duration: WEEK } });
      await viem.assertions.revertWithCustomErrorWithArgs(s.market.write.shrink([tier.leaseId, 1], { account: s.renter!.account }), s.market, "CommitmentUnserved", [
        tier.leaseId,
        BigInt(tier.activatedAt + WEEK),
      ]);
      // The on-demand offer (minDuration 60 s, under MIN_COMMITMENT) closed after 10 s pays 10 s.
      const onDemand = await openActive(s);
      await connection.networkHelpers.time.setNextBlockTimestamp(onDemand.activatedAt + 10);
      const renter0 = await balance(s, s.renter!.account.address);
      await s.market.write.close([onDemand.leaseId], { account: s.renter!.account });
      assert.equal(await balance(s, s.renter!.account.address), renter0 + computeDeposit(2, PRICE, HOUR) - computeDeposit(2, PRICE, 10));
    });

    it("the provider's own early end is not the renter's commitment: terminate refunds the rest plus the penalty", async () => {
      const s = await load();
      const renter0 = await balance(s, s.renter!.account.address);
      const { leaseId, activatedAt } = await openActive(s, { offer: await tierOffer(s), terms: { units: 2, duration: WEEK } });
      await connection.networkHelpers.time.setNextBlockTimestamp(activatedAt + HOUR);
      await s.market.write.terminate([leaseId], { account: s.provider!.account });
      // The renter paid the hour only and was credited the termination penalty on top.
      assert.ok((await balance(s, s.renter!.account.address)) > renter0 - 2n * TIER_PRICE * BigInt(HOUR));
    });
  });
});

/**
 * Receipts and `suanli tasks` name the minimum a renter's close paid beyond the seconds it used (issue #34,
 * findings 4 and 7): "Commitment" (a reserved-term tier closed early) and "PreemptionNotice" (a lease that
 * evicted others), read from the real contracts on a Hardhat EVM (common/chain/minimum-charge.ts).
 */
import assert from "node:assert/strict";
import { readLease } from "../../common/chain/market.js";
import { classifyMinimumCharge, readMinimumCharge } from "../../common/chain/minimum-charge.js";
import type { Deployment } from "../../common/deployment.js";
import { TransactionError } from "../../sdk/errors.js";
import { openLease, type ChainContext } from "../../sdk/internal/chain.js";
import { DEFAULT_PARAMS, PRICE, connect, deploySuanli, makeOffer, openActive, sign, terms, type Connection } from "../contracts/support/suanli.js";

const HOUR = 3600;
const WEEK = 7 * 24 * HOUR;
const TIER_PRICE = (PRICE * 75n) / 100n; // a 7-day tier at 25 % off

describe("SDK: a close's minimum charge by name (issue #34, findings 4 and 7)", () => {
  let connection: Connection;
  before(async () => {
    connection = await connect();
  });
  async function chargeFixture() {
    return deploySuanli(connection);
  }
  const load = () => connection.networkHelpers.loadFixture(chargeFixture);

  async function closeAt(s: Awaited<ReturnType<typeof load>>, leaseId: bigint, at: number) {
    await connection.networkHelpers.time.setNextBlockTimestamp(at);
    await s.market.write.close([leaseId], { account: s.renter!.account });
    const lease = await readLease(s.publicClient, s.market.address, leaseId);
    return { lease, charge: await readMinimumCharge(s.publicClient, s.market.address, lease, lease.deposit, 0n) };
  }

  it("names Commitment when a 7-day tier lease is closed after one hour (the week is paid, 540,000 of it used)", async () => {
    const s = await load();
    const offer = await makeOffer(s, { pricePerUnitSecond: TIER_PRICE, minBidPerUnitSecond: 0n, minDuration: WEEK, maxDuration: 4 * WEEK });
    const { leaseId, activatedAt } = await openActive(s, { offer, terms: { units: 2, duration: WEEK } });
    const { lease, charge } = await closeAt(s, leaseId, activatedAt + HOUR);
    assert.equal(lease.endReason, "RenterClosed");
    assert.equal(lease.deposit, 2n * TIER_PRICE * BigInt(WEEK));
    assert.deepEqual(charge, { reason: "Commitment", amount: 2n * TIER_PRICE * BigInt(WEEK) - 540_000n });
  });

  it("names PreemptionNotice when a lease that evicted others is closed before its notice ran", async () => {
    const s = await load();
    const bid = (units: number, bidPerUnitSecond: bigint, preempt: bigint[] = []) => terms({ units, duration: HOUR, interruptible: true, bidPerUnitSecond, preempt });
    const victim = await openActive(s, { terms: bid(8, 50n), renter: s.renter2 });
    const evictor = await openActive(s, { terms: bid(8, 51n, [victim.leaseId]) });
    // 10 s used (8 x 51 x 10 = 4,080); the notice owed is 8 x 51 x 60 = 24,480.
    const { charge } = await closeAt(s, evictor.leaseId, evictor.activatedAt + 10);
    assert.equal(DEFAULT_PARAMS.preemptionNotice, 60);
    assert.deepEqual(charge, { reason: "PreemptionNotice", amount: 24_480n - 4_080n });
  });

  it("reports an underpriced eviction by the contract's error name before anything is sent (finding 7)", async () => {
    const s = await load();
    const victim = await openActive(s, { terms: terms({ units: 8, interruptible: true, bidPerUnitSecond: 50n }), renter: s.renter2 });
    const offer = await makeOffer(s, { minDuration: 10 });
    const signature = await sign(s, offer);
    // The renter's allowance covers the deposit, so the deployment (used only for a permit) is not read.
    const ctx = {
      publicClient: s.publicClient,
      walletClient: s.renter!,
      account: s.renter!.account,
      market: s.market.address,
      token: s.token.address,
      deployment: {} as Deployment,
    };
    const blockBefore = await s.publicClient.getBlockNumber();
    await assert.rejects(
      openLease(ctx as unknown as ChainContext, offer, signature, terms({ units: 1, duration: 10, interruptible: true, bidPerUnitSecond: 51n, preempt: [victim.leaseId] }), 510n),
      (error: unknown) => error instanceof TransactionError && error.step === "openLease" && /PreemptionUnderpriced\(510, 24000\)/.test(error.message),
    );
    assert.equal(await s.publicClient.getBlockNumber(), blockBefore);
  });

  it("names nothing for an on-demand close that paid what it used, or for a lease the renter did not close", async () => {
    const s = await load();
    const plain = await openActive(s);
    const { lease, charge } = await closeAt(s, plain.leaseId, plain.activatedAt + 10);
    assert.equal(lease.deposit, 2n * PRICE * 10n);
    assert.equal(charge, null);
    // The same numbers with another end reason, or after a shrink, are not a renter's minimum.
    const ended = { endReason: "Completed" as const, units: 2, pricePerUnitSecond: PRICE, activatedAt: 1_000, stopAt: 1_010 };
    assert.equal(classifyMinimumCharge(ended, 10_000n, { preemptedOthers: false, preemptionNotice: 60, shrunk: false }), null);
    assert.equal(classifyMinimumCharge({ ...ended, endReason: "RenterClosed" }, 10_000n, { preemptedOthers: false, preemptionNotice: 60, shrunk: true }), null);
    assert.deepEqual(classifyMinimumCharge({ ...ended, endReason: "RenterClosed" }, 10_000n, { preemptedOthers: false, preemptionNotice: 60, shrunk: false }), {
      reason: "Commitment",
      amount: 8_000n,
    });
  });
});

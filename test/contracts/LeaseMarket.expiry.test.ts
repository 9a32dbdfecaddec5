import assert from "node:assert/strict";
import { completionHeldUntil, readLease } from "../../common/chain/market.js";
import { FaultKind } from "../../common/eip712.js";
import {
  PRICE,
  STAKE,
  balance,
  computeCollateral,
  computeDeposit,
  connect,
  deploySuanli,
  faultSignatures,
  makeOffer,
  openActive,
  sign,
  terms,
  type Connection,
  type Suanli,
} from "./support/suanli.js";

// Issue #34 (found while fixing overpaid-above-collateral): a claim, `close` or preempting open after an Active lease's
// end finalized it as Expired and released the collateral at once, so a fault observed in the lease's last 600 s could
// no longer land. Now such a lease is held like a completion until end + FAULT_SUBMISSION_WINDOW. Fixture: all 8
// units of machine 1 at 100 per unit-second for an hour (deposit 2,880,000), 50 % collateral (1,440,000), fault window
// 600 s, SLA credit floor 20 % of the collateral.
const UNITS = 8;
const RATE = BigInt(UNITS) * PRICE; // 800 per second
const DEPOSIT = computeDeposit(UNITS, PRICE, 3600);
const COLLATERAL = computeCollateral(DEPOSIT, 5_000);
const W = 600;

describe("LeaseMarket: an expired lease keeps its collateral answerable for the fault window after its end", () => {
  let connection: Connection;
  before(async () => {
    connection = await connect();
  });
  async function suanliFixture() {
    return deploySuanli(connection);
  }
  const load = () => connection.networkHelpers.loadFixture(suanliFixture);
  const at = (t: number) => connection.networkHelpers.time.setNextBlockTimestamp(t);
  const standing = async (s: Suanli) => s.registry.read.getProvider([s.provider!.account.address]);

  /** Ends the lease after its end the way `how` does: the provider's claim, the renter's close, or another renter's open that needs its units. */
  async function endAfterExpiry(s: Suanli, how: "claim" | "close" | "preempting open", leaseId: bigint): Promise<void> {
    if (how === "claim") await s.market.write.claim([leaseId], { account: s.provider!.account });
    else if (how === "close") await s.market.write.close([leaseId], { account: s.renter!.account });
    else {
      const offer = await makeOffer(s, { expiry: Number(await s.publicClient.getBlock().then((b) => b.timestamp)) + 7200 });
      await s.market.write.openLease([offer, await sign(s, offer), terms({ units: 1, preempt: [leaseId] })], { account: s.renter2!.account });
    }
  }

  for (const how of ["claim", "close", "preempting open"] as const) {
    it(`attack: the provider stops serving in the last 10 minutes, a ${how} just after the end cannot stop the fault: it lands with the full credit`, async () => {
      const s = await load();
      const { leaseId, activatedAt } = await openActive(s, { terms: { units: UNITS } });
      const end = activatedAt + 3600;
      const renter0 = await balance(s, s.renter!.account.address);
      const provider0 = await balance(s, s.provider!.account.address);
      // The provider stops serving 300 s before the end; the attestors sign after their QoS window, after the end.
      const fault = { leaseId, kind: FaultKind.unresponsive, observedAt: end - 300 };
      const signatures = await faultSignatures(s, fault);
      await at(end + 1);
      await endAfterExpiry(s, how, leaseId);
      // Units free now; collateral still locked; the provider paid at most until end - 600 (a claim pays that much).
      const paidAtEnd = how === "claim" ? RATE * 3000n : 0n;
      assert.equal(await balance(s, s.provider!.account.address), provider0 + paidAtEnd);
      const held = await readLease(s.publicClient, s.market.address, leaseId);
      assert.deepEqual([held.status, held.endReason, held.stopAt, held.collateral, held.paid, held.claimable], ["Settled", "Expired", end, COLLATERAL, paidAtEnd, 0n]);
      assert.equal(completionHeldUntil(held), end + W);
      // The preempting open's own lease (1 unit for an hour) locks its collateral too.
      const opener = how === "preempting open" ? computeCollateral(computeDeposit(1, PRICE, 3600), 5_000) : 0n;
      assert.equal((await standing(s)).locked, COLLATERAL + opener);
      assert.deepEqual(await s.registry.read.capacityOf([1]), how === "preempting open" ? [8, 1, 0] : [8, 0, 0]);

      await at(end + 200);
      const credit = (COLLATERAL * 2_000n) / 10_000n; // max(pro rata 1,440,000 x 300 / 3600 = 120,000, the 20 % floor) = 288,000
      await connection.viem.assertions.emitWithArgs(s.market.write.submitFault([fault, signatures], { account: s.renter!.account }), s.market, "LeaseEnded", [
        leaseId,
        3,
        end - 300,
        RATE * 3300n,
        // The provider's pay after observedAt (300 s) back to the renter in full, the credit from the collateral on top.
        RATE * 300n,
        credit,
      ]);
      assert.equal(await balance(s, s.provider!.account.address), provider0 + RATE * 3300n);
      assert.equal(await balance(s, s.renter!.account.address), renter0 + RATE * 300n + credit);
      const provider = await standing(s);
      assert.deepEqual([provider.stake, provider.locked, provider.faults, provider.leasesCompleted], [STAKE - credit, opener, 1n, 0n]);
      const lease = await readLease(s.publicClient, s.market.address, leaseId);
      assert.deepEqual([lease.status, lease.endReason, lease.deposit, lease.paid, lease.collateral], ["Settled", "Faulted", RATE * 3300n, RATE * 3300n, 0n]);
    });
  }

  it("without a fault, the claim after end + 600 pays the held window, releases the collateral and counts the completion; not a second earlier", async () => {
    const s = await load();
    const { leaseId, activatedAt } = await openActive(s, { terms: { units: UNITS } });
    const end = activatedAt + 3600;
    const provider0 = await balance(s, s.provider!.account.address);
    await at(end + 10);
    await s.market.write.close([leaseId], { account: s.renter!.account });
    await at(end + W - 1);
    await connection.viem.assertions.revertWithCustomErrorWithArgs(s.market.write.claim([leaseId], { account: s.provider!.account }), s.market, "CollateralHeld", [
      leaseId,
      BigInt(end + W),
    ]);
    // claimMany skips a held lease (its release is `claim`'s), as for a held completion.
    await s.market.write.claimMany([[leaseId]], { account: s.provider!.account });
    assert.equal(await balance(s, s.provider!.account.address), provider0);
    await at(end + W);
    await connection.viem.assertions.emitWithArgs(s.market.write.claim([leaseId], { account: s.provider!.account }), s.market, "CompletionReleased", [leaseId, true]);
    assert.equal(await balance(s, s.provider!.account.address), provider0 + DEPOSIT);
    assert.equal(await balance(s, s.market.address), 0n);
    const provider = await standing(s);
    assert.deepEqual([provider.locked, provider.leasesCompleted, provider.unitSecondsDelivered, provider.faults], [0n, 1n, BigInt(UNITS) * 3600n, 0n]);
    const lease = await readLease(s.publicClient, s.market.address, leaseId);
    assert.deepEqual([lease.status, lease.endReason, lease.deposit, lease.paid, lease.collateral], ["Settled", "Expired", DEPOSIT, DEPOSIT, 0n]);
  });

  it("a claim of the running lease's last window is lagged by 600 s up to the end, and one after end + 600 finalizes it at once", async () => {
    const s = await load();
    const { leaseId, activatedAt } = await openActive(s, { terms: { units: UNITS } });
    const end = activatedAt + 3600;
    const provider0 = await balance(s, s.provider!.account.address);
    // The view after the end, before anyone ends it: what a claim pays now (until end - 600).
    await connection.networkHelpers.time.increaseTo(end + 100);
    assert.equal(await s.market.read.claimable([leaseId]), RATE * 3000n);
    await at(end + W);
    await s.market.write.claim([leaseId], { account: s.provider!.account });
    assert.equal(await balance(s, s.provider!.account.address), provider0 + DEPOSIT);
    const provider = await standing(s);
    assert.deepEqual([provider.locked, provider.leasesCompleted], [0n, 1n]);
    const lease = await readLease(s.publicClient, s.market.address, leaseId);
    assert.deepEqual([lease.status, lease.endReason, lease.collateral], ["Settled", "Expired", 0n]);
    // A fault observed in the last window cannot land after end + 600 either way (its submission window is over).
    const fault = { leaseId, kind: FaultKind.unresponsive, observedAt: end - 1 };
    await connection.viem.assertions.revertWithCustomErrorWithArgs(
      s.market.write.submitFault([fault, await faultSignatures(s, fault)], { account: s.renter!.account }),
      s.market,
      "InvalidLeaseStatus",
      [leaseId, 4],
    );
  });
  it("a lease with no collateral is held all the same: completionHeldUntil sees its unpaid window, so the provider's node releases it", async () => {
    const s = await load();
    const offer = await makeOffer(s, { collateralBps: 0 });
    const { leaseId, activatedAt } = await openActive(s, { offer, terms: { units: UNITS } });
    const end = activatedAt + 3600;
    const provider0 = await balance(s, s.provider!.account.address);
    await at(end + 10);
    await s.market.write.close([leaseId], { account: s.renter!.account });
    const held = await readLease(s.publicClient, s.market.address, leaseId);
    // No collateral shows, but the pay is still escrowed (a close pays nothing; nobody claimed): the hold is read from
    // paid < deposit.
    assert.deepEqual([held.status, held.endReason, held.collateral, held.paid, held.deposit], ["Settled", "Expired", 0n, 0n, DEPOSIT]);
    assert.equal(completionHeldUntil(held), end + W);
    await at(end + W);
    await s.market.write.claim([leaseId], { account: s.provider!.account });
    assert.equal(await balance(s, s.provider!.account.address), provider0 + DEPOSIT);
    const released = await readLease(s.publicClient, s.market.address, leaseId);
    assert.deepEqual([released.paid, released.deposit], [DEPOSIT, DEPOSIT]);
    assert.equal(completionHeldUntil(released), undefined);
  });
});

import assert from "node:assert/strict";
import { readLease } from "../../common/chain/market.js";
import { FaultKind } from "../../common/eip712.js";
import { heldText } from "../../node/cli/commands/renter-output.js";
import type { SuanliContext } from "../../sdk/internal/context.js";
import { leaseOutcome } from "../../sdk/internal/receipt.js";
import type { TaskAttempt } from "../../sdk/types.js";
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
  open,
  openActive,
  settlementSignature,
  sign,
  terms,
  type Connection,
  type Suanli,
} from "./support/suanli.js";

// Issue #34, finding 1: a provider walked away from its collateral with `complete` (instead of `terminate`, just
// before a quorum fault landed, or by preempting its own renter's interruptible lease). Fixture: 2 units at 100 per
// unit-second for an hour (deposit 720,000), 50 % collateral (360,000), fault window 600 s, start penalty 10 %.
const DEPOSIT = computeDeposit(2, PRICE, 3600); // 720,000
const COLLATERAL = computeCollateral(DEPOSIT, 5_000); // 360,000
const DIGEST = `0x${"5a".repeat(32)}` as const;

describe("LeaseMarket: a completion cannot walk away from the collateral (issue #34, finding 1)", () => {
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
  const complete = (s: Suanli, leaseId: bigint) => s.market.write.complete([leaseId, 0, DIGEST, 0n], { account: s.provider!.account });

  it("a fault observed before an early completion still lands within the window: full credit, held pay returned, a fault and no completion", async () => {
    const s = await load();
    const { leaseId, activatedAt } = await openActive(s);
    const renter0 = await balance(s, s.renter!.account.address);
    const provider0 = await balance(s, s.provider!.account.address);
    // The attestors observed the provider down at +1800; it completes at +1900, before their fault lands at +2000.
    const fault = { leaseId, kind: FaultKind.unresponsive, observedAt: activatedAt + 1800 };
    const signatures = await faultSignatures(s, fault);
    await at(activatedAt + 1900);
    await complete(s, leaseId);
    // Paid until stopAt - 600 (+1300); its last window's pay (120,000) stays held with the collateral.
    assert.equal(await balance(s, s.provider!.account.address), provider0 + 260_000n);
    await at(activatedAt + 2000);
    // The unused deposit was refunded at the completion.
    assert.equal(await balance(s, s.renter!.account.address), renter0 + DEPOSIT - 380_000n);
    await connection.viem.assertions.emitWithArgs(s.market.write.submitFault([fault, signatures], { account: s.renter!.account }), s.market, "LeaseEnded", [
      leaseId,
      3,
      activatedAt + 1800,
      360_000n,
      // The held pay after observedAt (100 s, 20,000) back to the renter in full, not out of the collateral.
      20_000n,
      // As if the fault had landed before the completion: half the collateral for the half left at +1800.
      180_000n,
    ]);
    assert.equal(await balance(s, s.renter!.account.address), renter0 + DEPOSIT - 380_000n + 200_000n);
    assert.equal(await balance(s, s.provider!.account.address), provider0 + 360_000n);
    assert.equal(await balance(s, s.market.address), 0n);
    const provider = await standing(s);
    assert.deepEqual([provider.stake, provider.locked, provider.faults, provider.leasesCompleted, provider.unitSecondsDelivered], [STAKE - 180_000n, 0n, 1n, 0n, 3600n]);
    const lease = await readLease(s.publicClient, s.market.address, leaseId);
    assert.deepEqual([lease.status, lease.endReason, lease.deposit, lease.paid], ["Settled", "Faulted", 360_000n, 360_000n]);
  });

  it("overpaid-above-collateral: after a fault on a short lease with low collateral, the renter gets back all the provider's pay after observedAt", async () => {
    // Seed 5918225, sequence 605 of the property suite: 1 unit at 3 per second for 46 s, 50 % collateral (69). The
    // provider stops serving 17 s in, claims and completes at the end; the fault observed at +17 lands in the window.
    // Before, the provider was paid 138 at once and the fault returned only the collateral (69): it kept 69 for 51 of
    // service. Now its last 600 s of pay are held: the completion pays it nothing yet, and the fault returns the 87
    // of pay after observedAt in full, with the SLA credit from the collateral on top.
    const s = await load();
    const offer = await makeOffer(s, { pricePerUnitSecond: 3n, minDuration: 10 });
    const { leaseId, activatedAt } = await openActive(s, { offer, terms: { units: 1, duration: 46 } });
    const renter0 = await balance(s, s.renter!.account.address);
    const provider0 = await balance(s, s.provider!.account.address);
    const fault = { leaseId, kind: FaultKind.unresponsive, observedAt: activatedAt + 17 };
    const signatures = await faultSignatures(s, fault);
    // A claim before the end pays nothing: the whole lease is inside the fault window.
    await at(activatedAt + 40);
    await connection.viem.assertions.revertWithCustomErrorWithArgs(s.market.write.claim([leaseId], { account: s.provider!.account }), s.market, "NothingToClaim", [leaseId]);
    await at(activatedAt + 46);
    await complete(s, leaseId);
    assert.equal(await balance(s, s.provider!.account.address), provider0);
    await at(activatedAt + 100);
    await s.market.write.submitFault([fault, signatures], { account: s.renter!.account });
    // The provider is paid exactly the metered price of what it served (17 s), the renter the rest of its deposit
    // and the SLA credit: max(69 x 29 / 46, 20 % of 69) = 43.
    assert.equal(await balance(s, s.provider!.account.address), provider0 + 51n);
    assert.equal(await balance(s, s.renter!.account.address), renter0 + 138n - 51n + 43n);
    assert.equal(await balance(s, s.market.address), 0n);
    const provider = await standing(s);
    assert.deepEqual([provider.stake, provider.locked, provider.faults], [STAKE - 43n, 0n, 1n]);
    const lease = await readLease(s.publicClient, s.market.address, leaseId);
    assert.deepEqual([lease.status, lease.endReason, lease.deposit, lease.paid, lease.collateral], ["Settled", "Faulted", 51n, 51n, 0n]);
  });

  it("an early completion instead of terminate counts no completion, and the hold cannot be cut short by the provider", async () => {
    const s = await load();
    const { viem } = connection;
    const { leaseId, activatedAt } = await openActive(s);
    await at(activatedAt + 1800);
    await complete(s, leaseId);
    // Neither claimMany (it skips Settled leases) nor claim before stopAt + 600 releases the collateral.
    await s.market.write.claimMany([[leaseId]], { account: s.provider!.account });
    await viem.assertions.revertWithCustomErrorWithArgs(s.market.write.claim([leaseId], { account: s.provider!.account }), s.market, "CollateralHeld", [
      leaseId,
      BigInt(activatedAt + 2400),
    ]);
    assert.equal((await standing(s)).locked, COLLATERAL);
    // The provider cannot terminate or complete it again either.
    await viem.assertions.revertWithCustomErrorWithArgs(s.market.write.terminate([leaseId], { account: s.provider!.account }), s.market, "InvalidLeaseStatus", [leaseId, 4]);
    await viem.assertions.revertWithCustomErrorWithArgs(complete(s, leaseId), s.market, "InvalidLeaseStatus", [leaseId, 4]);
    await at(activatedAt + 2400);
    await s.market.write.claim([leaseId], { account: s.provider!.account });
    const provider = await standing(s);
    assert.deepEqual([provider.locked, provider.leasesCompleted, provider.faults, provider.unitSecondsDelivered], [0n, 0n, 0n, 3600n]);
  });

  it("a fault observed after the completion, or submitted after the window, is refused", async () => {
    const s = await load();
    const { viem } = connection;
    const { leaseId, activatedAt } = await openActive(s);
    await at(activatedAt + 1000);
    await complete(s, leaseId);
    const late = { leaseId, kind: FaultKind.unresponsive, observedAt: activatedAt + 1000 };
    await viem.assertions.revertWithCustomErrorWithArgs(s.market.write.submitFault([late, await faultSignatures(s, late)]), s.market, "FaultObservedOutOfRange", [
      activatedAt + 1000,
      BigInt(activatedAt),
      BigInt(activatedAt + 999),
    ]);
    const stale = { leaseId, kind: FaultKind.unresponsive, observedAt: activatedAt + 500 };
    await at(activatedAt + 1101);
    await viem.assertions.revertWithCustomErrorWithArgs(s.market.write.submitFault([stale, await faultSignatures(s, stale)]), s.market, "FaultSubmissionClosed", [
      activatedAt + 500,
      BigInt(activatedAt + 1100),
    ]);
  });

  it("a renter who co-signs the early completion releases it at once, and it counts as a completion", async () => {
    const s = await load();
    const { viem } = connection;
    const { leaseId, activatedAt } = await openActive(s);
    await at(activatedAt + 1000);
    await complete(s, leaseId);
    const settlement = { leaseId, providerAmount: 200_000n, deadline: activatedAt + 2000 };
    const signatures = [await settlementSignature(s, settlement, s.renter), await settlementSignature(s, settlement, s.provider)] as const;
    await viem.assertions.emitWithArgs(s.market.write.settle([settlement, ...signatures], { account: s.renter!.account }), s.market, "CompletionReleased", [leaseId, true]);
    const provider = await standing(s);
    assert.deepEqual([provider.locked, provider.leasesCompleted, provider.unitSecondsDelivered], [0n, 1n, 2000n]);
    assert.equal(await balance(s, s.market.address), 0n);
  });

  it("an extension after the fault was observed does not raise the credit of a fault on a held lease", async () => {
    const s = await load();
    const { leaseId, activatedAt, offer } = await openActive(s);
    const fault = { leaseId, kind: FaultKind.unresponsive, observedAt: activatedAt + 1800 };
    const signatures = await faultSignatures(s, fault);
    // The renter extends by 29 days after the observation; the provider completes; the renter submits.
    await at(activatedAt + 1850);
    const consent = await makeOffer(s, { maxDuration: offer.maxDuration });
    await s.market.write.extend([leaseId, 29 * 24 * 3600, consent, await sign(s, consent)], { account: s.renter!.account });
    await at(activatedAt + 1900);
    await complete(s, leaseId);
    const renter0 = await balance(s, s.renter!.account.address);
    await at(activatedAt + 2000);
    await s.market.write.submitFault([fault, signatures]);
    // Credit on the lease as it was at observedAt: 180,000, plus the 20,000 paid after it (not the 29 days' collateral).
    assert.equal(await balance(s, s.renter!.account.address), renter0 + 200_000n);
    assert.equal(await balance(s, s.market.address), 0n);
  });

  describe("what the renter's SDK and CLI show", () => {
    /** The SDK's receipt of one lease (sdk/internal/receipt.ts leaseOutcome), read from this chain. */
    async function receiptOf(s: Suanli, leaseId: bigint) {
      const ctx = { publicClient: s.publicClient, market: s.market.address } as unknown as SuanliContext;
      const openedBlock = (await s.publicClient.getBlockNumber()) - 3n;
      const attempt = {
        leaseId,
        provider: s.provider!.account.address,
        peerId: "",
        addrs: [],
        machineId: 1,
        model: "m",
        units: 2,
        pricePerUnitSecond: PRICE,
        deposit: DEPOSIT,
        interruptible: false,
        openedBlock,
        openedAt: 0,
        gas: [],
      };
      return leaseOutcome(ctx, attempt as TaskAttempt);
    }

    it("an early completion is named a held completion with its release time until claim releases it", async () => {
      const s = await load();
      const { leaseId, activatedAt } = await openActive(s);
      await at(activatedAt + 1800);
      await complete(s, leaseId);
      const held = await receiptOf(s, leaseId);
      const until = activatedAt + 1800 + 600;
      assert.deepEqual([held.status, held.endReason, held.collateralHeldUntil, held.cost, held.refunded], ["Settled", "Completed", until, 360_000n, DEPOSIT - 360_000n]);
      assert.match(heldText(held.collateralHeldUntil), new RegExp(`collateral held until ${new Date(until * 1000).toISOString()}`));
      await at(until);
      await s.market.write.claim([leaseId], { account: s.renter!.account });
      const released = await receiptOf(s, leaseId);
      assert.deepEqual([released.endReason, released.collateralHeldUntil, heldText(released.collateralHeldUntil)], ["Completed", null, ""]);
    });

    it("a fault inside the hold shows as Faulted with its credit, no longer held", async () => {
      const s = await load();
      const { leaseId, activatedAt } = await openActive(s);
      const fault = { leaseId, kind: FaultKind.unresponsive, observedAt: activatedAt + 1800 };
      const signatures = await faultSignatures(s, fault);
      await at(activatedAt + 1900);
      await complete(s, leaseId);
      assert.equal((await receiptOf(s, leaseId)).collateralHeldUntil, activatedAt + 1900 + 600);
      await s.market.write.submitFault([fault, signatures], { account: s.renter!.account });
      const faulted = await receiptOf(s, leaseId);
      assert.deepEqual([faulted.endReason, faulted.collateralHeldUntil, faulted.credit, faulted.refunded], ["Faulted", null, 180_000n, DEPOSIT - 360_000n]);
    });
  });

  describe("self-preemption", () => {
    async function fund(s: Suanli) {
      await s.token.write.faucet([s.provider!.account.address, 100_000_000n]);
    }
    const interruptible = { units: 8, interruptible: true, bidPerUnitSecond: 50n };

    it("a provider cannot evict its renter's Open interruptible lease with a lease of its own (it escaped the 10 % start penalty)", async () => {
      const s = await load();
      const { viem } = connection;
      await fund(s);
      const victim = await open(s, { terms: interruptible });
      for (const own of [{ units: 8 }, { ...interruptible, bidPerUnitSecond: 60n }]) {
        const offer = await makeOffer(s);
        await viem.assertions.revertWithCustomErrorWithArgs(
          s.market.write.openLease([offer, await sign(s, offer), terms({ ...own, preempt: [victim.leaseId] })], { account: s.provider!.account }),
          s.market,
          "SelfPreemption",
          [victim.leaseId],
        );
      }
      // Its way out is terminate, which pays the start penalty: 10 % of the 8-unit lease's collateral.
      const renter0 = await balance(s, s.renter!.account.address);
      await s.market.write.terminate([victim.leaseId], { account: s.provider!.account });
      const deposit = computeDeposit(8, 50n, 3600);
      assert.equal(await balance(s, s.renter!.account.address), renter0 + deposit + computeCollateral(deposit, 5_000) / 10n);
      assert.equal((await standing(s)).faults, 1n);
    });

    it("nor its renter's Active one (it escaped the termination penalty and counted nothing against itself)", async () => {
      const s = await load();
      const { viem } = connection;
      await fund(s);
      const victim = await openActive(s, { terms: interruptible });
      const offer = await makeOffer(s);
      await viem.assertions.revertWithCustomErrorWithArgs(
        s.market.write.openLease([offer, await sign(s, offer), terms({ units: 8, preempt: [victim.leaseId] })], { account: s.provider!.account }),
        s.market,
        "SelfPreemption",
        [victim.leaseId],
      );
      // Another renter still preempts it by the interruptible terms.
      const other = await makeOffer(s);
      await s.market.write.openLease([other, await sign(s, other), terms({ units: 8, preempt: [victim.leaseId] })], { account: s.renter2!.account });
      assert.equal((await readLease(s.publicClient, s.market.address, victim.leaseId)).endReason, "Preempted");
    });

    it("a provider may still preempt a lease it rents from itself", async () => {
      const s = await load();
      await fund(s);
      const own = await makeOffer(s);
      const ownLease = await s.market.read.nextLeaseId();
      await s.market.write.openLease([own, await sign(s, own), terms(interruptible)], { account: s.provider!.account });
      const offer = await makeOffer(s);
      await s.market.write.openLease([offer, await sign(s, offer), terms({ units: 8, preempt: [ownLease] })], { account: s.provider!.account });
      assert.equal((await readLease(s.publicClient, s.market.address, ownLease)).endReason, "Preempted");
    });
  });
});

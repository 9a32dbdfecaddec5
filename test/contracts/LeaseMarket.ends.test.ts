import assert from "node:assert/strict";
import { getAddress, recoverTypedDataAddress } from "viem";
import { readLease } from "../../common/chain/market.js";
import { signFault } from "../../common/chain/sign.js";
import { FaultKind, suanliDomain, suanliTypes } from "../../common/eip712.js";
import {
  ATTESTOR_ROLE,
  PRICE,
  STAKE,
  balance,
  computeCollateral,
  computeDeposit,
  connect,
  deploySuanli,
  faultSignatures,
  latest,
  open,
  openActive,
  settlementSignature,
  type Connection,
  type Suanli,
} from "./support/suanli.js";

const DEPOSIT = computeDeposit(2, PRICE, 3600); // 720,000
const COLLATERAL = computeCollateral(DEPOSIT, 5_000); // 360,000
const START_PENALTY = (COLLATERAL * 1_000n) / 10_000n; // 36,000
const DIGEST = `0x${"5a".repeat(32)}` as const;

describe("LeaseMarket: completion, faults, termination, cancellation, settlement", () => {
  let connection: Connection;
  before(async () => {
    connection = await connect();
  });
  async function suanliFixture() {
    return deploySuanli(connection);
  }
  const load = () => connection.networkHelpers.loadFixture(suanliFixture);
  const at = (t: number) => connection.networkHelpers.time.setNextBlockTimestamp(t);
  const stakeOf = async (s: Suanli) => (await s.registry.read.getProvider([s.provider!.account.address])).stake;

  describe("complete", () => {
    it("stops accrual, pays the provider, refunds the renter, holds the collateral for the fault window, then claim releases it", async () => {
      const s = await load();
      const { viem } = connection;
      const { leaseId, activatedAt } = await openActive(s);
      const provider0 = await balance(s, s.provider!.account.address);
      const renter0 = await balance(s, s.renter!.account.address);
      await at(activatedAt + 1000);
      const hash = s.market.write.complete([leaseId, -3, DIGEST, 1990n], { account: s.provider!.account });
      await viem.assertions.emitWithArgs(hash, s.market, "CompletionReported", [leaseId, -3, DIGEST, 1990n]);
      let lease = await readLease(s.publicClient, s.market.address, leaseId);
      // Settled; the view shows the collateral still locked (held) and the provider's total as the deposit. The
      // provider is paid until stopAt - 600 (+400); its last window's pay (120,000) stays held with the collateral.
      assert.deepEqual(
        [lease.status, lease.endReason, lease.stopAt, lease.deposit, lease.paid, lease.claimable, lease.collateral],
        ["Settled", "Completed", activatedAt + 1000, 200_000n, 80_000n, 0n, COLLATERAL],
      );
      assert.equal(await balance(s, s.provider!.account.address), provider0 + 80_000n);
      assert.equal(await balance(s, s.renter!.account.address), renter0 + DEPOSIT - 200_000n);
      assert.equal(await balance(s, s.market.address), 120_000n);
      let provider = await s.registry.read.getProvider([s.provider!.account.address]);
      assert.deepEqual([provider.locked, provider.leasesCompleted, provider.unitSecondsDelivered], [COLLATERAL, 0n, 0n]);
      // The units are free at once; the hold lasts FAULT_SUBMISSION_WINDOW (600 s).
      const [, onDemand] = await s.registry.read.capacityOf([1]);
      assert.equal(onDemand, 0);
      await viem.assertions.revertWithCustomErrorWithArgs(s.market.write.claim([leaseId], { account: s.renter!.account }), s.market, "CollateralHeld", [
        leaseId,
        BigInt(activatedAt + 1600),
      ]);
      await at(activatedAt + 1600);
      await viem.assertions.emitWithArgs(s.market.write.claim([leaseId], { account: s.renter!.account }), s.market, "CompletionReleased", [leaseId, false]);
      lease = await readLease(s.publicClient, s.market.address, leaseId);
      assert.deepEqual([lease.status, lease.deposit, lease.paid, lease.collateral], ["Settled", 200_000n, 200_000n, 0n]);
      assert.equal(await balance(s, s.renter!.account.address), renter0 + DEPOSIT - 200_000n);
      // The release paid the held 120,000.
      assert.equal(await balance(s, s.provider!.account.address), provider0 + 200_000n);
      assert.equal(await balance(s, s.market.address), 0n);
      provider = await s.registry.read.getProvider([s.provider!.account.address]);
      // An early completion the renter did not co-sign: unit-seconds count, a completion does not.
      assert.deepEqual([provider.locked, provider.leasesCompleted, provider.unitSecondsDelivered], [0n, 0n, 2000n]);
    });

    it("after the end pays the whole deposit, refunds nothing, and counts a completion once released", async () => {
      const s = await load();
      const { viem, networkHelpers } = connection;
      const { leaseId, activatedAt } = await openActive(s);
      await networkHelpers.time.increaseTo(activatedAt + 4000);
      await viem.assertions.emitWithArgs(s.market.write.complete([leaseId, 0, DIGEST, 7200n], { account: s.provider!.account }), s.market, "LeaseEnded", [
        leaseId,
        2,
        activatedAt + 3600,
        DEPOSIT,
        0n,
        0n,
      ]);
      await networkHelpers.time.increaseTo(activatedAt + 3600 + 600);
      await viem.assertions.emitWithArgs(s.market.write.claim([leaseId], { account: s.provider!.account }), s.market, "CompletionReleased", [leaseId, true]);
      const provider = await s.registry.read.getProvider([s.provider!.account.address]);
      assert.deepEqual([provider.locked, provider.leasesCompleted, provider.unitSecondsDelivered], [0n, 1n, 7200n]);
    });

    it("is the provider's, for Active leases only", async () => {
      const s = await load();
      const { viem } = connection;
      const { leaseId } = await open(s);
      await viem.assertions.revertWithCustomErrorWithArgs(s.market.write.complete([leaseId, 0, DIGEST, 0n], { account: s.provider!.account }), s.market, "InvalidLeaseStatus", [
        leaseId,
        1,
      ]);
      await s.market.write.activate([leaseId], { account: s.provider!.account });
      await viem.assertions.revertWithCustomErrorWithArgs(s.market.write.complete([leaseId, 0, DIGEST, 0n], { account: s.renter!.account }), s.market, "NotProvider", [
        leaseId,
        getAddress(s.renter!.account.address),
      ]);
    });
  });

  describe("submitFault", () => {
    it("ends the lease at observedAt on a quorum and credits the renter from collateral pro rata", async () => {
      const s = await load();
      const { viem } = connection;
      const { leaseId, activatedAt } = await openActive(s);
      const fault = { leaseId, kind: FaultKind.unresponsive, observedAt: activatedAt + 900 };
      const signatures = await faultSignatures(s, fault);
      const renter0 = await balance(s, s.renter!.account.address);
      await at(activatedAt + 1000);
      const credit = (COLLATERAL * 2700n) / 3600n; // 270,000: three quarters of the promised time were left
      const refund = DEPOSIT - 180_000n;
      const hash = s.market.write.submitFault([fault, signatures], { account: s.other!.account });
      await viem.assertions.emitWithArgs(hash, s.market, "FaultSubmitted", [leaseId, 1, activatedAt + 900, credit]);
      await viem.assertions.emitWithArgs(Promise.resolve(await hash), s.market, "LeaseEnded", [leaseId, 3, activatedAt + 900, 180_000n, refund, credit]);
      await viem.assertions.emitWithArgs(Promise.resolve(await hash), s.registry, "CollateralSlashed", [
        getAddress(s.provider!.account.address),
        getAddress(s.renter!.account.address),
        credit,
      ]);
      assert.equal(await balance(s, s.renter!.account.address), renter0 + refund + credit);
      assert.equal(await stakeOf(s), STAKE - credit);
      const provider = await s.registry.read.getProvider([s.provider!.account.address]);
      assert.deepEqual([provider.locked, provider.faults, provider.unitSecondsDelivered], [0n, 1n, 1800n]);
      assert.equal((await s.registry.read.getMachine([1])).onDemandUnits, 0);
      // The provider still gets what accrued before the fault, and nothing after it.
      const provider0 = await balance(s, s.provider!.account.address);
      await s.market.write.claim([leaseId]);
      assert.equal(await balance(s, s.provider!.account.address), provider0 + 180_000n);
      assert.equal((await readLease(s.publicClient, s.market.address, leaseId)).status, "Settled");
      assert.equal(await balance(s, s.market.address), 0n);
    });

    it("credits at least faultMinCreditBps of the collateral", async () => {
      const s = await load();
      const { viem } = connection;
      const { leaseId, activatedAt } = await openActive(s);
      const fault = { leaseId, kind: FaultKind.capacity, observedAt: activatedAt + 3500 };
      await at(activatedAt + 3550);
      await viem.assertions.emitWithArgs(s.market.write.submitFault([fault, await faultSignatures(s, fault)]), s.market, "FaultSubmitted", [
        leaseId,
        2,
        activatedAt + 3500,
        (COLLATERAL * 2_000n) / 10_000n,
      ]);
    });

    it("a claim pays only until now - 600, so a fault finds the pay after observedAt still in escrow", async () => {
      const s = await load();
      const { viem } = connection;
      const { leaseId, activatedAt } = await openActive(s);
      await at(activatedAt + 1000);
      await s.market.write.claim([leaseId]);
      // Paid until +400: the last window's 120,000 stays in escrow.
      assert.equal((await readLease(s.publicClient, s.market.address, leaseId)).paid, 80_000n);
      const fault = { leaseId, kind: 1, observedAt: activatedAt + 900 };
      const renter0 = await balance(s, s.renter!.account.address);
      await at(activatedAt + 1100);
      const credit = (COLLATERAL * 2700n) / 3600n;
      await viem.assertions.emitWithArgs(s.market.write.submitFault([fault, await faultSignatures(s, fault)]), s.market, "LeaseEnded", [
        leaseId,
        3,
        activatedAt + 900,
        180_000n,
        DEPOSIT - 180_000n,
        credit,
      ]);
      assert.equal(await balance(s, s.renter!.account.address), renter0 + DEPOSIT - 180_000n + credit);
      // The provider claims the rest of what accrued until observedAt.
      assert.equal((await readLease(s.publicClient, s.market.address, leaseId)).status, "Ended");
      await s.market.write.claim([leaseId]);
      assert.deepEqual(
        [(await readLease(s.publicClient, s.market.address, leaseId)).status, (await readLease(s.publicClient, s.market.address, leaseId)).paid],
        ["Settled", 180_000n],
      );
    });

    it("rejects faults below quorum, with a duplicate or unordered signer, or from non-attestors", async () => {
      const s = await load();
      const { viem } = connection;
      const { leaseId, activatedAt } = await openActive(s);
      const fault = { leaseId, kind: 1, observedAt: activatedAt };
      const [a, b] = s.attestors;
      const sigA = await signFault(a!, s.domain, fault);
      const sigB = await signFault(b!, s.domain, fault);
      const submit = (signatures: `0x${string}`[]) => s.market.write.submitFault([fault, signatures]);
      await viem.assertions.revertWithCustomErrorWithArgs(submit([sigA]), s.market, "FaultQuorumNotMet", [1n, 2n]);
      await viem.assertions.revertWithCustomErrorWithArgs(submit([sigA, sigA]), s.market, "DuplicateSigner", [getAddress(a!.account.address)]);
      await viem.assertions.revertWithCustomErrorWithArgs(submit([sigB, sigA]), s.market, "SignersNotAscending", [getAddress(b!.account.address), getAddress(a!.account.address)]);
      const sigOther = await signFault(s.other!, s.domain, fault);
      await viem.assertions.revertWithCustomErrorWithArgs(submit([sigA, sigOther]), s.market, "NotAttestor", [getAddress(s.other!.account.address)]);
      await viem.assertions.revertWithCustomErrorWithArgs(submit([sigA, "0x00"]), s.market, "NotAttestor", ["0x0000000000000000000000000000000000000000"]);
      await viem.assertions.revertWithCustomErrorWithArgs(submit(Array(33).fill(sigA)), s.market, "TooManySignatures", [33n, 32n]);
      // An attestor whose role governance revoked no longer counts.
      await s.registry.write.revokeRole([ATTESTOR_ROLE, b!.account.address]);
      await viem.assertions.revertWithCustomErrorWithArgs(submit([sigA, sigB]), s.market, "NotAttestor", [getAddress(b!.account.address)]);
      await s.registry.write.grantRole([ATTESTOR_ROLE, b!.account.address]);
      // A raised quorum needs more signatures.
      await s.registry.write.setFaultQuorum([3]);
      await viem.assertions.revertWithCustomErrorWithArgs(submit([sigA, sigB]), s.market, "FaultQuorumNotMet", [2n, 3n]);
      await s.market.write.submitFault([fault, await faultSignatures(s, fault, s.attestors)]);
    });

    it("rejects faults signed for another chain or deployment, replayed, or outside the lease's service", async () => {
      const s = await load();
      const { viem, networkHelpers } = connection;
      const { leaseId, activatedAt } = await openActive(s);
      const fault = { leaseId, kind: 1, observedAt: activatedAt + 10 };
      await networkHelpers.time.increase(20);
      for (const domain of [suanliDomain(1, s.market.address), suanliDomain(s.chainId, s.registry.address)]) {
        const signed = await Promise.all(s.attestors.slice(0, 2).map((w) => signFault(w!, domain, fault)));
        const recovered = await Promise.all(
          signed.map((signature) => recoverTypedDataAddress({ domain: s.domain, types: { Fault: suanliTypes.Fault }, primaryType: "Fault", message: fault, signature })),
        );
        const first = signed[BigInt(recovered[0]!) < BigInt(recovered[1]!) ? 0 : 1]!;
        const firstSigner = recovered[BigInt(recovered[0]!) < BigInt(recovered[1]!) ? 0 : 1]!;
        const second = signed[first === signed[0] ? 1 : 0]!;
        await viem.assertions.revertWithCustomErrorWithArgs(s.market.write.submitFault([fault, [first, second]]), s.market, "NotAttestor", [firstSigner]);
      }
      await viem.assertions.revertWithCustomErrorWithArgs(
        s.market.write.submitFault([{ ...fault, kind: 0 }, await faultSignatures(s, { ...fault, kind: 0 })]),
        s.market,
        "InvalidFaultKind",
        [0],
      );
      const t = activatedAt + 100;
      await at(t);
      const early = { ...fault, observedAt: activatedAt - 1 };
      await viem.assertions.revertWithCustomErrorWithArgs(s.market.write.submitFault([early, await faultSignatures(s, early)]), s.market, "FaultObservedOutOfRange", [
        activatedAt - 1,
        BigInt(activatedAt),
        BigInt(t),
      ]);
      await at(t);
      const future = { ...fault, observedAt: t + 5 };
      await viem.assertions.revertWithCustomErrorWithArgs(s.market.write.submitFault([future, await faultSignatures(s, future)]), s.market, "FaultObservedOutOfRange", [
        t + 5,
        BigInt(activatedAt),
        BigInt(t),
      ]);
      const signatures = await faultSignatures(s, fault);
      await s.market.write.submitFault([fault, signatures]);
      await viem.assertions.revertWithCustomErrorWithArgs(s.market.write.submitFault([fault, signatures]), s.market, "InvalidLeaseStatus", [leaseId, 3]);

      // A fault observed at or after the end is about a lease that had already run its course.
      const second = await openActive(s);
      await networkHelpers.time.increaseTo(second.activatedAt + 4000);
      const late = { leaseId: second.leaseId, kind: 1, observedAt: second.activatedAt + 3600 };
      await viem.assertions.revertWithCustomErrorWithArgs(s.market.write.submitFault([late, await faultSignatures(s, late)]), s.market, "FaultObservedOutOfRange", [
        second.activatedAt + 3600,
        BigInt(second.activatedAt),
        BigInt(second.activatedAt + 3599),
      ]);
      const opened = await open(s);
      const onOpen = { leaseId: opened.leaseId, kind: 1, observedAt: await latest(s) };
      await viem.assertions.revertWithCustomErrorWithArgs(s.market.write.submitFault([onOpen, await faultSignatures(s, onOpen)]), s.market, "InvalidLeaseStatus", [
        opened.leaseId,
        1,
      ]);
    });
  });

  describe("terminate by the provider", () => {
    it("pays the provider what accrued and the renter a penalty pro rata to the promised time left", async () => {
      const s = await load();
      const { viem } = connection;
      const { leaseId, activatedAt } = await openActive(s);
      const provider0 = await balance(s, s.provider!.account.address);
      const renter0 = await balance(s, s.renter!.account.address);
      await at(activatedAt + 1000);
      const penalty = (COLLATERAL * 2600n) / 3600n;
      await viem.assertions.emitWithArgs(s.market.write.terminate([leaseId], { account: s.provider!.account }), s.market, "LeaseEnded", [
        leaseId,
        6,
        activatedAt + 1000,
        200_000n,
        DEPOSIT - 200_000n,
        penalty,
      ]);
      assert.equal(await balance(s, s.provider!.account.address), provider0 + 200_000n);
      assert.equal(await balance(s, s.renter!.account.address), renter0 + DEPOSIT - 200_000n + penalty);
      assert.equal(await stakeOf(s), STAKE - penalty);
      assert.equal((await readLease(s.publicClient, s.market.address, leaseId)).status, "Settled");
      assert.equal((await s.registry.read.getProvider([s.provider!.account.address])).faults, 1n);
    });

    it("of an Open lease refunds the deposit plus the start penalty", async () => {
      const s = await load();
      const { viem } = connection;
      const { leaseId } = await open(s);
      const renter0 = await balance(s, s.renter!.account.address);
      await viem.assertions.emitWithArgs(s.market.write.terminate([leaseId], { account: s.provider!.account }), s.market, "LeaseEnded", [
        leaseId,
        6,
        (await latest(s)) + 1,
        0n,
        DEPOSIT,
        START_PENALTY,
      ]);
      assert.equal(await balance(s, s.renter!.account.address), renter0 + DEPOSIT + START_PENALTY);
      assert.equal((await readLease(s.publicClient, s.market.address, leaseId)).status, "Cancelled");
    });

    it("is the provider's, before the end of a running lease", async () => {
      const s = await load();
      const { viem, networkHelpers } = connection;
      const { leaseId, activatedAt } = await openActive(s);
      await viem.assertions.revertWithCustomErrorWithArgs(s.market.write.terminate([leaseId], { account: s.renter!.account }), s.market, "NotProvider", [
        leaseId,
        getAddress(s.renter!.account.address),
      ]);
      await networkHelpers.time.increaseTo(activatedAt + 3600);
      await viem.assertions.revertWithCustomErrorWithArgs(s.market.write.terminate([leaseId], { account: s.provider!.account }), s.market, "LeaseExpired", [
        leaseId,
        activatedAt + 3600,
      ]);
      await s.market.write.claim([leaseId]);
      await viem.assertions.revertWithCustomErrorWithArgs(s.market.write.terminate([leaseId], { account: s.provider!.account }), s.market, "InvalidLeaseStatus", [leaseId, 4]);
    });
  });

  describe("cancel after a missed start", () => {
    it("refunds the deposit plus the start penalty, whoever calls", async () => {
      const s = await load();
      const { viem } = connection;
      const { leaseId } = await open(s);
      const deadline = (await s.market.read.getLease([leaseId])).startDeadline;
      await at(deadline);
      await viem.assertions.revertWithCustomErrorWithArgs(s.market.write.cancel([leaseId], { account: s.renter!.account }), s.market, "StartDeadlineNotPassed", [
        leaseId,
        deadline,
      ]);
      const renter0 = await balance(s, s.renter!.account.address);
      await at(deadline + 1);
      await viem.assertions.emitWithArgs(s.market.write.cancel([leaseId], { account: s.other!.account }), s.market, "LeaseEnded", [
        leaseId,
        7,
        deadline + 1,
        0n,
        DEPOSIT,
        START_PENALTY,
      ]);
      assert.equal(await balance(s, s.renter!.account.address), renter0 + DEPOSIT + START_PENALTY);
      const lease = await readLease(s.publicClient, s.market.address, leaseId);
      assert.deepEqual([lease.status, lease.endReason], ["Cancelled", "MissedStart"]);
      const provider = await s.registry.read.getProvider([s.provider!.account.address]);
      assert.deepEqual([provider.stake, provider.locked, provider.faults], [STAKE - START_PENALTY, 0n, 1n]);
      assert.equal((await s.registry.read.getMachine([1])).onDemandUnits, 0);
      await viem.assertions.revertWithCustomErrorWithArgs(s.market.write.cancel([leaseId]), s.market, "InvalidLeaseStatus", [leaseId, 5]);
    });

    it("does not apply to a lease the provider activated", async () => {
      const s = await load();
      const { viem } = connection;
      const { leaseId } = await openActive(s);
      await viem.assertions.revertWithCustomErrorWithArgs(s.market.write.cancel([leaseId]), s.market, "InvalidLeaseStatus", [leaseId, 2]);
    });
  });

  describe("co-signed settlement", () => {
    it("ends an Active lease at the agreed amount", async () => {
      const s = await load();
      const { viem } = connection;
      const { leaseId, activatedAt } = await openActive(s);
      const settlement = { leaseId, providerAmount: 150_000n, deadline: activatedAt + 2000 };
      const renterSig = await settlementSignature(s, settlement, s.renter);
      const providerSig = await settlementSignature(s, settlement, s.provider);
      const provider0 = await balance(s, s.provider!.account.address);
      const renter0 = await balance(s, s.renter!.account.address);
      await at(activatedAt + 1000);
      await viem.assertions.emitWithArgs(s.market.write.settle([settlement, renterSig, providerSig], { account: s.other!.account }), s.market, "LeaseSettled", [
        leaseId,
        150_000n,
        DEPOSIT - 150_000n,
      ]);
      assert.equal(await balance(s, s.provider!.account.address), provider0 + 150_000n);
      assert.equal(await balance(s, s.renter!.account.address), renter0 + DEPOSIT - 150_000n);
      const lease = await readLease(s.publicClient, s.market.address, leaseId);
      assert.deepEqual([lease.status, lease.endReason, lease.deposit, lease.paid], ["Settled", "CoSigned", 150_000n, 150_000n]);
      assert.equal((await s.registry.read.getMachine([1])).onDemandUnits, 0);
      await viem.assertions.revertWithCustomErrorWithArgs(s.market.write.settle([settlement, renterSig, providerSig]), s.market, "InvalidLeaseStatus", [leaseId, 4]);
    });

    it("settles an Ended lease below what accrued, and an Open one", async () => {
      const s = await load();
      const { networkHelpers } = connection;
      const { leaseId, activatedAt } = await openActive(s);
      await at(activatedAt + 1000);
      await s.market.write.close([leaseId], { account: s.renter!.account });
      const deadline = activatedAt + 5000;
      const settlement = { leaseId, providerAmount: 180_000n, deadline };
      const renter0 = await balance(s, s.renter!.account.address);
      await s.market.write.settle([settlement, await settlementSignature(s, settlement, s.renter), await settlementSignature(s, settlement, s.provider)]);
      assert.equal(await balance(s, s.renter!.account.address), renter0 + 20_000n);
      assert.equal((await readLease(s.publicClient, s.market.address, leaseId)).status, "Settled");

      const opened = await open(s);
      await networkHelpers.time.increase(5);
      const onOpen = { leaseId: opened.leaseId, providerAmount: 1_000n, deadline: (await latest(s)) + 100 };
      await s.market.write.settle([onOpen, await settlementSignature(s, onOpen, s.renter), await settlementSignature(s, onOpen, s.provider)]);
      const lease = await readLease(s.publicClient, s.market.address, opened.leaseId);
      assert.deepEqual([lease.status, lease.endReason, lease.paid], ["Settled", "CoSigned", 1_000n]);
      assert.equal(await balance(s, s.market.address), 0n);
    });

    it("rejects expired settlements, amounts outside [paid, deposit] and wrong signers", async () => {
      const s = await load();
      const { viem } = connection;
      const { leaseId, activatedAt } = await openActive(s);
      // A claim pays until now - 600 (the fault window's pay stays in escrow).
      await at(activatedAt + 700);
      await s.market.write.claim([leaseId]);
      const paid = 20_000n;
      const sign2 = async (settlement: { leaseId: bigint; providerAmount: bigint; deadline: number }) =>
        [settlement, await settlementSignature(s, settlement, s.renter), await settlementSignature(s, settlement, s.provider)] as const;
      const expired = { leaseId, providerAmount: paid, deadline: activatedAt + 800 };
      await at(activatedAt + 801);
      await viem.assertions.revertWithCustomErrorWithArgs(s.market.write.settle(await sign2(expired)), s.market, "SettlementExpired", [
        activatedAt + 800,
        BigInt(activatedAt + 801),
      ]);
      const deadline = activatedAt + 3000;
      await viem.assertions.revertWithCustomErrorWithArgs(
        s.market.write.settle(await sign2({ leaseId, providerAmount: paid - 1n, deadline })),
        s.market,
        "SettlementAmountOutOfRange",
        [paid - 1n, paid, DEPOSIT],
      );
      await viem.assertions.revertWithCustomErrorWithArgs(
        s.market.write.settle(await sign2({ leaseId, providerAmount: DEPOSIT + 1n, deadline })),
        s.market,
        "SettlementAmountOutOfRange",
        [DEPOSIT + 1n, paid, DEPOSIT],
      );
      const settlement = { leaseId, providerAmount: paid, deadline };
      const byOther = await settlementSignature(s, settlement, s.other);
      const byRenter = await settlementSignature(s, settlement, s.renter);
      const byProvider = await settlementSignature(s, settlement, s.provider);
      await viem.assertions.revertWithCustomErrorWithArgs(s.market.write.settle([settlement, byOther, byProvider]), s.market, "InvalidSignature", [
        getAddress(s.renter!.account.address),
        getAddress(s.other!.account.address),
      ]);
      await viem.assertions.revertWithCustomErrorWithArgs(s.market.write.settle([settlement, byRenter, byRenter]), s.market, "InvalidSignature", [
        getAddress(s.provider!.account.address),
        getAddress(s.renter!.account.address),
      ]);
      await viem.assertions.revertWithCustomErrorWithArgs(s.market.write.settle([{ ...settlement, leaseId: 77n }, byRenter, byProvider]), s.market, "InvalidLeaseStatus", [77n, 0]);
    });
  });
});

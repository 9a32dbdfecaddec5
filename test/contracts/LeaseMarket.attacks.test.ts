/**
 * The money threat model, attack by attack (issue #13, docs/contracts.md "Threat model"): each test performs
 * an attack that worked on the earlier rules and shows that it now fails, or is bounded as documented.
 * Fixture: machine 1 has 8 A100 units; offers sell at 100 per unit-second with 50 % collateral, a 600 s start
 * window and a 30-day maxDuration; leases take 2 units for an hour unless a test says otherwise.
 */
import assert from "node:assert/strict";
import { encodeFunctionData, getAddress, parseEventLogs, type Address } from "viem";
import { leaseMarketAbi } from "../../common/abi.js";
import { readLease } from "../../common/chain/market.js";
import { signOffer, signSettlement } from "../../common/chain/sign.js";
import { FaultKind, suanliDomain } from "../../common/eip712.js";
import {
  A100,
  DEFAULT_PARAMS,
  MARKET_ROLE,
  PRICE,
  STAKE,
  balance,
  computeCollateral,
  computeDeposit,
  connect,
  deploySuanli,
  faultSignatures,
  latest,
  makeOffer,
  open,
  openActive,
  sign,
  terms,
  type Connection,
  type Suanli,
} from "./support/suanli.js";

const DEPOSIT = computeDeposit(2, PRICE, 3600); // 720,000
const COLLATERAL = computeCollateral(DEPOSIT, 5_000); // 360,000
const START_PENALTY = (COLLATERAL * 1_000n) / 10_000n; // 36,000
const RATE = 2n * PRICE; // 200 per second for 2 units
const MAX_DURATION = 30 * 24 * 3600;
const WINDOW = 600; // FAULT_SUBMISSION_WINDOW
const NOTICE = DEFAULT_PARAMS.preemptionNotice; // 60 s

describe("LeaseMarket under attack: the money threat model", () => {
  let connection: Connection;
  before(async () => {
    connection = await connect();
  });
  async function suanliFixture() {
    return deploySuanli(connection);
  }
  async function blocklistFixture() {
    return deploySuanli(connection, DEFAULT_PARAMS, { token: "BlocklistToken" });
  }
  async function feeFixture() {
    const s = await deploySuanli(connection);
    await s.market.write.setParams([{ ...DEFAULT_PARAMS, protocolFeeBps: 100, treasury: s.treasury!.account.address }]);
    return s;
  }
  const load = () => connection.networkHelpers.loadFixture(suanliFixture);
  const at = (t: number) => connection.networkHelpers.time.setNextBlockTimestamp(t);
  const stakeOf = async (s: Suanli, who: Address = s.provider!.account.address) => (await s.registry.read.getProvider([who])).stake;
  const fault = (leaseId: bigint, observedAt: number) => ({ leaseId, kind: FaultKind.unresponsive, observedAt });
  async function extend(s: Suanli, leaseId: bigint, extraSeconds: number, renter = s.renter) {
    const consent = await makeOffer(s);
    return s.market.write.extend([leaseId, extraSeconds, consent, await sign(s, consent)], { account: renter!.account });
  }

  describe("finding 1: fault credit inflated after the fact", () => {
    it("an extension after the fault was observed does not raise the credit (the attack pays the honest credit)", async () => {
      const s = await load();
      const { viem } = connection;
      const renter0 = await balance(s, s.renter!.account.address);
      const { leaseId, activatedAt } = await openActive(s);
      const observed = fault(leaseId, activatedAt + 1800);
      const signatures = await faultSignatures(s, observed);
      // The attack: extend to the offer's maxDuration (collateral 259,200,000), then submit the fault.
      await at(activatedAt + 1810);
      await extend(s, leaseId, MAX_DURATION - 3600);
      assert.equal((await readLease(s.publicClient, s.market.address, leaseId)).collateral, computeCollateral(RATE * BigInt(MAX_DURATION), 5_000));
      await at(activatedAt + 1820);
      const credit = (COLLATERAL * 1800n) / 3600n; // 180,000: on the lease as it was at observedAt
      await viem.assertions.emitWithArgs(s.market.write.submitFault([observed, signatures], { account: s.renter!.account }), s.market, "FaultSubmitted", [
        leaseId,
        1,
        activatedAt + 1800,
        credit,
      ]);
      // The renter paid 1,800 s of service and got exactly the honest credit; the extension came back in full.
      assert.equal(await balance(s, s.renter!.account.address), renter0 - RATE * 1800n + credit);
      assert.equal(await stakeOf(s), STAKE - credit);
      assert.equal((await s.registry.read.getProvider([s.provider!.account.address])).locked, 0n);
    });

    it("a chain of extensions (a tiny one, then a big one) still credits the terms before the first", async () => {
      const s = await load();
      const { viem } = connection;
      const { leaseId, activatedAt } = await openActive(s);
      const observed = fault(leaseId, activatedAt + 1800);
      const signatures = await faultSignatures(s, observed);
      await at(activatedAt + 1810);
      await extend(s, leaseId, 10);
      await at(activatedAt + 1820);
      await extend(s, leaseId, MAX_DURATION - 3610);
      await at(activatedAt + 1830);
      await viem.assertions.emitWithArgs(s.market.write.submitFault([observed, signatures]), s.market, "FaultSubmitted", [leaseId, 1, activatedAt + 1800, 180_000n]);
    });

    it("an honest renter who extended after an unseen fault still gets the pre-extension credit; a fault after the extension uses the extended terms", async () => {
      const s = await load();
      const { viem } = connection;
      const before = await openActive(s);
      const early = fault(before.leaseId, before.activatedAt + 900);
      const earlySignatures = await faultSignatures(s, early);
      await at(before.activatedAt + 1000);
      await extend(s, before.leaseId, 600);
      await at(before.activatedAt + 1100);
      await viem.assertions.emitWithArgs(s.market.write.submitFault([early, earlySignatures]), s.market, "FaultSubmitted", [
        before.leaseId,
        1,
        before.activatedAt + 900,
        (COLLATERAL * 2700n) / 3600n, // 270,000
      ]);

      const after = await openActive(s);
      await at(after.activatedAt + 1000);
      await extend(s, after.leaseId, 600);
      const late = fault(after.leaseId, after.activatedAt + 1200);
      await at(after.activatedAt + 1300);
      const extendedCollateral = computeCollateral(RATE * 4200n, 5_000); // 420,000
      await viem.assertions.emitWithArgs(s.market.write.submitFault([late, await faultSignatures(s, late)]), s.market, "FaultSubmitted", [
        after.leaseId,
        1,
        after.activatedAt + 1200,
        (extendedCollateral * 3000n) / 4200n, // 300,000
      ]);
    });

    it("a signed fault expires FAULT_SUBMISSION_WINDOW after observedAt: one held back to the end is refused", async () => {
      const s = await load();
      const { viem } = connection;
      assert.equal(await s.market.read.FAULT_SUBMISSION_WINDOW(), WINDOW);
      // At the deadline it still lands: the provider loses at most the window's pay.
      const first = await openActive(s);
      const inTime = fault(first.leaseId, first.activatedAt + 100);
      await at(first.activatedAt + 100 + WINDOW);
      await viem.assertions.emit(s.market.write.submitFault([inTime, await faultSignatures(s, inTime)]), s.market, "FaultSubmitted");

      // The attack: a fault observed 100 s in, held until 5 s before the end, would pay the provider 100 s of 3,595.
      const { leaseId, activatedAt } = await openActive(s);
      const held = fault(leaseId, activatedAt + 100);
      const signatures = await faultSignatures(s, held);
      await at(activatedAt + 100 + WINDOW + 1);
      await viem.assertions.revertWithCustomErrorWithArgs(s.market.write.submitFault([held, signatures]), s.market, "FaultSubmissionClosed", [
        activatedAt + 100,
        BigInt(activatedAt + 100 + WINDOW),
      ]);
      await at(activatedAt + 3595);
      await viem.assertions.revertWithCustomErrorWithArgs(s.market.write.submitFault([held, signatures]), s.market, "FaultSubmissionClosed", [
        activatedAt + 100,
        BigInt(activatedAt + 100 + WINDOW),
      ]);
      assert.equal((await readLease(s.publicClient, s.market.address, leaseId)).status, "Active");
    });

    it("an extension front-running a termination does not raise the penalty; one older than the window does", async () => {
      const s = await load();
      const { viem } = connection;
      const renter0 = await balance(s, s.renter!.account.address);
      const { leaseId, activatedAt } = await openActive(s);
      await at(activatedAt + 1000);
      await extend(s, leaseId, MAX_DURATION - 3600);
      await at(activatedAt + 1001);
      const penalty = (COLLATERAL * 2599n) / 3600n; // on the lease before the extension
      await viem.assertions.emitWithArgs(s.market.write.terminate([leaseId], { account: s.provider!.account }), s.market, "LeaseEnded", [
        leaseId,
        6,
        activatedAt + 1001,
        RATE * 1001n,
        RATE * BigInt(MAX_DURATION) - RATE * 1001n,
        penalty,
      ]);
      assert.equal(await balance(s, s.renter!.account.address), renter0 - RATE * 1001n + penalty);

      const older = await openActive(s);
      await at(older.activatedAt + 1000);
      await extend(s, older.leaseId, 3600);
      await at(older.activatedAt + 1000 + WINDOW);
      const extendedCollateral = computeCollateral(RATE * 7200n, 5_000); // 720,000
      await viem.assertions.emitWithArgs(s.market.write.terminate([older.leaseId], { account: s.provider!.account }), s.market, "LeaseEnded", [
        older.leaseId,
        6,
        older.activatedAt + 1600,
        RATE * 1600n,
        RATE * 7200n - RATE * 1600n,
        (extendedCollateral * 5600n) / 7200n,
      ]);
    });
  });

  describe("finding 2: preemption costs the preemptor at least the notice period", () => {
    async function victimAndPreemptor(s: Suanli) {
      const victim = await openActive(s, { terms: { units: 8, interruptible: true, bidPerUnitSecond: 50n }, renter: s.renter2 });
      const preemptor = await open(s, { terms: { units: 2, preempt: [victim.leaseId] } });
      return { victim, preemptor };
    }

    it("preempt-then-close while Open pays the provider the notice period", async () => {
      const s = await load();
      const renter0 = await balance(s, s.renter!.account.address);
      const { victim, preemptor } = await victimAndPreemptor(s);
      assert.equal((await readLease(s.publicClient, s.market.address, victim.leaseId)).endReason, "Preempted");
      await s.market.write.close([preemptor.leaseId], { account: s.renter!.account });
      const minimum = RATE * BigInt(NOTICE); // 12,000
      assert.equal(await balance(s, s.renter!.account.address), renter0 - minimum);
      const lease = await readLease(s.publicClient, s.market.address, preemptor.leaseId);
      assert.deepEqual([lease.status, lease.endReason, lease.deposit, lease.claimable], ["Ended", "RenterClosed", minimum, minimum]);
      const provider0 = await balance(s, s.provider!.account.address);
      await s.market.write.claim([preemptor.leaseId]);
      assert.equal(await balance(s, s.provider!.account.address), provider0 + minimum);
      assert.equal((await readLease(s.publicClient, s.market.address, preemptor.leaseId)).status, "Settled");
    });

    it("closing right after activation still pays the notice period; a lease that preempted nothing pays only what accrued", async () => {
      const s = await load();
      const renter0 = await balance(s, s.renter!.account.address);
      const { preemptor } = await victimAndPreemptor(s);
      await s.market.write.activate([preemptor.leaseId], { account: s.provider!.account });
      await s.market.write.close([preemptor.leaseId], { account: s.renter!.account });
      assert.equal(await balance(s, s.renter!.account.address), renter0 - RATE * BigInt(NOTICE));

      const plain = await openActive(s, { renter: s.renter2 });
      const renter2Before = await balance(s, s.renter2!.account.address);
      await at(plain.activatedAt + 1);
      await s.market.write.close([plain.leaseId], { account: s.renter2!.account });
      assert.equal(await balance(s, s.renter2!.account.address), renter2Before + DEPOSIT - RATE);
    });

    it("a preemptor cannot shrink away its notice period", async () => {
      const s = await load();
      const { viem } = connection;
      const { preemptor } = await victimAndPreemptor(s);
      await viem.assertions.revertWithCustomErrorWithArgs(s.market.write.shrink([preemptor.leaseId, 1], { account: s.renter!.account }), s.market, "PreemptionNoticeUnpaid", [
        preemptor.leaseId,
        0n,
      ]);
      await s.market.write.activate([preemptor.leaseId], { account: s.provider!.account });
      const activatedAt = await latest(s);
      await at(activatedAt + 1);
      await viem.assertions.revertWithCustomErrorWithArgs(s.market.write.shrink([preemptor.leaseId, 1], { account: s.renter!.account }), s.market, "PreemptionNoticeUnpaid", [
        preemptor.leaseId,
        BigInt(activatedAt + NOTICE),
      ]);
      await at(activatedAt + NOTICE);
      await s.market.write.shrink([preemptor.leaseId, 1], { account: s.renter!.account });
      // Once shrunk the notice is paid: an immediate close pays only what accrued since.
      const renter0 = await balance(s, s.renter!.account.address);
      await at(activatedAt + NOTICE + 1);
      await s.market.write.close([preemptor.leaseId], { account: s.renter!.account });
      assert.equal(await balance(s, s.renter!.account.address), renter0 + PRICE * BigInt(3600 - NOTICE - 1));
    });
  });

  describe("finding 3: missed-start penalty on the lease as opened", () => {
    it("a dead Open lease cannot be extended: the penalty stays at the as-opened figure", async () => {
      const s = await load();
      const { viem } = connection;
      const renter0 = await balance(s, s.renter!.account.address);
      const { leaseId } = await open(s);
      const deadline = (await latest(s)) + 600;
      await at(deadline + 1);
      await viem.assertions.revertWithCustomErrorWithArgs(s.market.write.activate([leaseId], { account: s.provider!.account }), s.market, "StartDeadlinePassed", [
        leaseId,
        deadline,
      ]);
      await viem.assertions.revertWithCustomErrorWithArgs(extend(s, leaseId, MAX_DURATION - 3600), s.market, "InvalidLeaseStatus", [leaseId, 1]);
      await s.market.write.cancel([leaseId], { account: s.renter!.account });
      const ended = await readLease(s.publicClient, s.market.address, leaseId);
      assert.deepEqual([ended.status, ended.endReason], ["Cancelled", "MissedStart"]);
      assert.equal(await balance(s, s.renter!.account.address), renter0 + START_PENALTY);
      assert.equal(await stakeOf(s), STAKE - START_PENALTY);
    });

    it("a live Open lease cannot be extended either, so a termination pays the as-opened start penalty", async () => {
      const s = await load();
      const { viem } = connection;
      const { leaseId } = await open(s);
      await viem.assertions.revertWithCustomErrorWithArgs(extend(s, leaseId, MAX_DURATION - 3600), s.market, "InvalidLeaseStatus", [leaseId, 1]);
      const renter0 = await balance(s, s.renter!.account.address);
      await s.market.write.terminate([leaseId], { account: s.provider!.account });
      assert.equal((await readLease(s.publicClient, s.market.address, leaseId)).endReason, "Terminated");
      assert.equal(await balance(s, s.renter!.account.address), renter0 + DEPOSIT + START_PENALTY);
      assert.equal(await stakeOf(s), STAKE - START_PENALTY);
    });
  });

  describe("finding 4: a receiver that refuses tokens cannot lock anyone", () => {
    it("with the renter blocklisted, every end of its leases goes through and its money waits in owed", async () => {
      const s = await connection.networkHelpers.loadFixture(blocklistFixture);
      const { viem, networkHelpers } = connection;
      const token = await viem.getContractAt("BlocklistToken", s.token.address);
      const fromBlock = await s.publicClient.getBlockNumber();
      const completed = await openActive(s, { terms: { units: 1 } });
      const terminated = await openActive(s, { terms: { units: 1 } });
      const faulted = await openActive(s, { terms: { units: 1 } });
      const preempted = await openActive(s, { terms: { units: 2, interruptible: true, bidPerUnitSecond: 50n } });
      const missed = await open(s, { terms: { units: 1 } });
      const closed = await openActive(s, { terms: { units: 1 } });
      await token.write.setBlocked([s.renter!.account.address, true]);
      const renterBalance = await balance(s, s.renter!.account.address);

      await networkHelpers.time.increase(100);
      await s.market.write.complete([completed.leaseId, 0, `0x${"11".repeat(32)}`, 0n], { account: s.provider!.account });
      await s.market.write.terminate([terminated.leaseId], { account: s.provider!.account });
      const observed = fault(faulted.leaseId, (await latest(s)) - 10);
      await s.market.write.submitFault([observed, await faultSignatures(s, observed)], { account: s.other!.account });
      const preemptor = await open(s, { terms: { units: 6, preempt: [preempted.leaseId] }, renter: s.renter2 });
      await s.market.write.close([closed.leaseId], { account: s.renter!.account });
      await networkHelpers.time.increase(601);
      await s.market.write.cancel([missed.leaseId], { account: s.other!.account });
      await s.market.write.close([preemptor.leaseId], { account: s.renter2!.account });
      await networkHelpers.time.increase(NOTICE + 1);
      await s.market.write.claimMany([[completed.leaseId, terminated.leaseId, faulted.leaseId, preempted.leaseId, closed.leaseId, preemptor.leaseId]]);
      // The completion's collateral is held for the fault window (issue #34, finding 1): claim releases it after.
      await s.market.write.claim([completed.leaseId]);

      // Nothing reached the renter, nothing is locked: the provider can leave.
      assert.equal(await balance(s, s.renter!.account.address), renterBalance);
      const provider = await s.registry.read.getProvider([s.provider!.account.address]);
      assert.equal(provider.locked, 0n);
      await s.registry.write.removeMachine([1], { account: s.provider!.account });
      await s.registry.write.deregister({ account: s.provider!.account });

      // What the renter is owed is every refund and credit of its leases, and all the market still holds.
      const logs = parseEventLogs({ abi: leaseMarketAbi, logs: await s.publicClient.getLogs({ address: s.market.address, fromBlock }), eventName: "LeaseEnded" });
      const renterLeases = new Set([completed, terminated, faulted, preempted, closed].map((l) => l.leaseId).concat(missed.leaseId));
      const due = logs.filter((l) => renterLeases.has(l.args.leaseId)).reduce((sum, l) => sum + l.args.refund + l.args.credit, 0n);
      assert.equal(await s.market.read.owed([s.renter!.account.address]), due);
      assert.equal(await balance(s, s.market.address), due);

      // The renter pulls it to an address that can receive.
      await viem.assertions.revertWithCustomErrorWithArgs(s.market.write.withdraw([s.renter!.account.address], { account: s.renter!.account }), token, "AccountBlocked", [
        getAddress(s.renter!.account.address),
      ]);
      const other0 = await balance(s, s.other!.account.address);
      await viem.assertions.emitWithArgs(s.market.write.withdraw([s.other!.account.address], { account: s.renter!.account }), s.market, "OwedWithdrawn", [
        getAddress(s.renter!.account.address),
        getAddress(s.other!.account.address),
        due,
      ]);
      assert.equal(await balance(s, s.other!.account.address), other0 + due);
      assert.equal(await balance(s, s.market.address), 0n);
      await viem.assertions.revertWithCustomErrorWithArgs(s.market.write.withdraw([s.other!.account.address], { account: s.renter!.account }), s.market, "NothingOwed", [
        getAddress(s.renter!.account.address),
      ]);
    });

    it("with the provider or the treasury blocklisted, the renter still closes and anyone still claims", async () => {
      const s = await connection.networkHelpers.loadFixture(blocklistFixture);
      const { viem, networkHelpers } = connection;
      const token = await viem.getContractAt("BlocklistToken", s.token.address);
      await s.market.write.setParams([{ ...DEFAULT_PARAMS, protocolFeeBps: 1_000, treasury: s.treasury!.account.address }]);
      const { leaseId, activatedAt } = await openActive(s);
      await token.write.setBlocked([s.provider!.account.address, true]);
      await token.write.setBlocked([s.treasury!.account.address, true]);
      // A claim pays until now - 600 (FAULT_SUBMISSION_WINDOW's pay stays in escrow).
      await at(activatedAt + 700);
      await s.market.write.claim([leaseId], { account: s.other!.account });
      await at(activatedAt + 800);
      await s.market.write.close([leaseId], { account: s.renter!.account });
      await networkHelpers.time.increase(1);
      await s.market.write.claim([leaseId], { account: s.other!.account });
      const total = RATE * 800n;
      assert.equal(await s.market.read.owed([s.provider!.account.address]), total - total / 10n);
      assert.equal(await s.market.read.owed([s.treasury!.account.address]), total / 10n);
      assert.equal((await readLease(s.publicClient, s.market.address, leaseId)).status, "Settled");
    });
  });

  describe("finding 5: reputation counts delivered, paid unit-seconds", () => {
    it("a provider renting from itself gains nothing for unactivated, unpaid or zero-length leases", async () => {
      const s = await load();
      await s.token.write.faucet([s.provider!.account.address, 10_000_000n]);
      const self = s.provider;
      const reputation = async () => {
        const p = await s.registry.read.getProvider([self!.account.address]);
        return [p.leasesCompleted, p.unitSecondsDelivered];
      };
      // Co-signed settlement at 0 without activation.
      const unstarted = await open(s, { renter: self });
      const deadline = (await latest(s)) + 600;
      const settlement = { leaseId: unstarted.leaseId, providerAmount: 0n, deadline };
      const sig = await signSettlement(self!, s.domain, settlement);
      await s.market.write.settle([settlement, sig, sig]);
      assert.deepEqual(await reputation(), [0n, 0n]);
      // An hour of "service" settled at 0.
      const unpaid = await openActive(s, { renter: self });
      await at(unpaid.activatedAt + 3000);
      const zero = { leaseId: unpaid.leaseId, providerAmount: 0n, deadline: unpaid.activatedAt + 4000 };
      const zeroSig = await signSettlement(self!, s.domain, zero);
      await s.market.write.settle([zero, zeroSig, zeroSig]);
      assert.deepEqual(await reputation(), [0n, 0n]);
      // Open, activate and close in one block: no second of service, nothing counted.
      const rpc = connection.provider;
      const offer = await makeOffer(s);
      const signature = await sign(s, offer);
      const sameBlock = await s.market.read.nextLeaseId();
      await rpc.request({ method: "evm_setAutomine", params: [false] });
      try {
        const gas = 1_000_000n;
        const hashes = [
          await s.market.write.openLease([offer, signature, terms()], { account: self!.account, gas }),
          await s.market.write.activate([sameBlock], { account: self!.account, gas }),
          await s.market.write.close([sameBlock], { account: self!.account, gas }),
        ];
        await rpc.request({ method: "evm_mine", params: [] });
        for (const hash of hashes) assert.equal((await s.publicClient.getTransactionReceipt({ hash })).status, "success");
      } finally {
        await rpc.request({ method: "evm_setAutomine", params: [true] });
      }
      assert.equal((await readLease(s.publicClient, s.market.address, sameBlock)).endReason, "RenterClosed");
      assert.deepEqual(await reputation(), [0n, 0n]);
      // Paid service counts, exactly what was paid for.
      const paid = await openActive(s, { renter: self });
      await at(paid.activatedAt + 5);
      await s.market.write.close([paid.leaseId], { account: self!.account });
      assert.deepEqual(await reputation(), [1n, 10n]);
    });
  });

  describe("finding 6: governance cannot make faults impossible", () => {
    it("refuses a fault quorum above the 32 signatures a fault may carry", async () => {
      const s = await load();
      const { viem } = connection;
      await viem.assertions.revertWithCustomErrorWithArgs(s.registry.write.setFaultQuorum([33]), s.registry, "InvalidFaultQuorum", [33, 32]);
      await viem.assertions.revertWithCustomErrorWithArgs(s.registry.write.setFaultQuorum([255]), s.registry, "InvalidFaultQuorum", [255, 32]);
      await s.registry.write.setFaultQuorum([32]);
      assert.equal(await s.registry.read.faultQuorum(), Number(await s.market.read.MAX_FAULT_SIGNATURES()));
    });
  });

  describe("finding 7: the fee is exact over a lease's life", () => {
    it("claiming every 3 s at 33/s pays the treasury what one claim would", async () => {
      const s = await connection.networkHelpers.loadFixture(feeFixture);
      const offer = await makeOffer(s, { pricePerUnitSecond: 33n });
      const split = await openActive(s, { offer, terms: { units: 1 } });
      const whole = await openActive(s, { offer, terms: { units: 1 }, renter: s.renter2 });
      const treasury0 = await balance(s, s.treasury!.account.address);
      // Each claim pays until now - 600 (the fault window's pay stays in escrow).
      for (let i = 1; i <= 10; i++) {
        await at(split.activatedAt + 600 + 3 * i);
        await s.market.write.claim([split.leaseId]);
      }
      const fromSplit = (await balance(s, s.treasury!.account.address)) - treasury0;
      assert.equal(fromSplit, (33n * 30n) / 100n); // 9, where per-claim rounding paid 0
      await at(whole.activatedAt + 630);
      await s.market.write.claim([whole.leaseId]);
      assert.equal((await balance(s, s.treasury!.account.address)) - treasury0 - fromSplit, fromSplit);
    });

    it("claimMany and a final settlement keep the cumulative fee", async () => {
      const s = await connection.networkHelpers.loadFixture(feeFixture);
      const offer = await makeOffer(s, { pricePerUnitSecond: 33n });
      const a = await openActive(s, { offer, terms: { units: 1 } });
      const treasury0 = await balance(s, s.treasury!.account.address);
      for (let i = 1; i <= 5; i++) {
        await at(a.activatedAt + 600 + 3 * i);
        await s.market.write.claimMany([[a.leaseId]]);
      }
      // The completion pays until stopAt - 600 (+31); the rest is held for the fault window.
      await at(a.activatedAt + 631);
      await s.market.write.complete([a.leaseId, 0, `0x${"00".repeat(32)}`, 0n], { account: s.provider!.account });
      assert.equal((await balance(s, s.treasury!.account.address)) - treasury0, (33n * 31n) / 100n);
    });
  });

  describe("also decided and fixed", () => {
    it("extend refuses a price-0 offer as on-demand consent and an offer with less collateral", async () => {
      const s = await load();
      const { viem } = connection;
      const { leaseId } = await openActive(s);
      const free = await makeOffer(s, { pricePerUnitSecond: 0n });
      await viem.assertions.revertWithCustomError(s.market.write.extend([leaseId, 10, free, await sign(s, free)], { account: s.renter!.account }), s.market, "ZeroPrice");
      const thin = await makeOffer(s, { collateralBps: 4_000 });
      await viem.assertions.revertWithCustomErrorWithArgs(
        s.market.write.extend([leaseId, 10, thin, await sign(s, thin)], { account: s.renter!.account }),
        s.market,
        "ExtensionCollateralTooLow",
        [4_000, 5_000],
      );
      const thick = await makeOffer(s, { collateralBps: 6_000 });
      await s.market.write.extend([leaseId, 10, thick, await sign(s, thick)], { account: s.renter!.account });
      assert.equal((await readLease(s.publicClient, s.market.address, leaseId)).collateralBps, 5_000);
    });

    it("refuses a start window under MIN_START_WINDOW, which let a renter collect the start penalty at once", async () => {
      const s = await load();
      const { viem } = connection;
      for (const startWindow of [0, 9]) {
        const offer = await makeOffer(s, { startWindow });
        await viem.assertions.revertWithCustomErrorWithArgs(
          s.market.write.openLease([offer, await sign(s, offer), terms()], { account: s.renter!.account }),
          s.market,
          "StartWindowTooShort",
          [startWindow, 10],
        );
      }
      await open(s, { offer: await makeOffer(s, { startWindow: 10 }) });
    });

    it("a fault during a preemption notice stops accrual at observedAt", async () => {
      const s = await load();
      const { viem } = connection;
      const victim = await openActive(s, { terms: { units: 8, interruptible: true, bidPerUnitSecond: 50n }, renter: s.renter2 });
      await at(victim.activatedAt + 100);
      await open(s, { terms: { units: 2, preempt: [victim.leaseId] } });
      assert.equal((await readLease(s.publicClient, s.market.address, victim.leaseId)).stopAt, victim.activatedAt + 100 + NOTICE);
      const observed = fault(victim.leaseId, victim.activatedAt + 120);
      const renter0 = await balance(s, s.renter2!.account.address);
      await at(victim.activatedAt + 130);
      const total = 8n * 50n * 120n;
      const rest = 8n * 50n * BigInt(100 + NOTICE) - total;
      await viem.assertions.emitWithArgs(s.market.write.submitFault([observed, await faultSignatures(s, observed)]), s.market, "LeaseEnded", [
        victim.leaseId,
        3,
        victim.activatedAt + 120,
        total,
        rest,
        0n,
      ]);
      assert.equal(await balance(s, s.renter2!.account.address), renter0 + rest);
      await viem.assertions.revertWithCustomErrorWithArgs(s.market.write.submitFault([observed, await faultSignatures(s, observed)]), s.market, "InvalidLeaseStatus", [
        victim.leaseId,
        3,
      ]);
      await s.market.write.claim([victim.leaseId]);
      assert.equal((await readLease(s.publicClient, s.market.address, victim.leaseId)).status, "Settled");
    });

    it("openLeaseWithPermit runs the permit inside the reentrancy guard", async () => {
      const { viem, networkHelpers } = connection;
      const [governance, provider, renter] = await viem.getWalletClients();
      const token = await viem.deployContract("ReentrantToken");
      const registry = await viem.deployContract("ProviderRegistry", [token.address, governance!.account.address, 1, 1]);
      const extension = await viem.deployContract("LeaseMarketExtension", [registry.address]);
      const market = await viem.deployContract("LeaseMarket", [registry.address, extension.address, DEFAULT_PARAMS]);
      await registry.write.grantRole([MARKET_ROLE, market.address]);
      for (const w of [provider, renter]) {
        await token.write.mint([w!.account.address, STAKE]);
        await token.write.approve([registry.address, STAKE], { account: w!.account });
        await token.write.approve([market.address, STAKE], { account: w!.account });
      }
      await registry.write.register(["peer", ""], { account: provider!.account });
      await registry.write.stake([10_000_000n], { account: provider!.account });
      await registry.write.addMachine([A100, 8, 1, 0, "eu", `0x${"00".repeat(32)}`], { account: provider!.account });
      const publicClient = await viem.getPublicClient();
      const domain = suanliDomain(await publicClient.getChainId(), market.address);
      const offer = await makeOffer({ publicClient, provider });
      const signature = await signOffer(provider!, domain, offer);
      await market.write.openLease([offer, signature, terms()], { account: renter!.account });
      await market.write.activate([1n], { account: provider!.account });
      await networkHelpers.time.increase(10);
      // The hostile permit re-enters claim(1), which anyone may call: the guard refuses it.
      await token.write.arm([market.address, encodeFunctionData({ abi: leaseMarketAbi, functionName: "claim", args: [1n] })]);
      const permit = { value: 0n, deadline: 0n, v: 27, r: `0x${"00".repeat(32)}` as const, s: `0x${"00".repeat(32)}` as const };
      await market.write.openLeaseWithPermit([offer, signature, terms(), permit], { account: renter!.account });
      assert.equal(await token.read.lastPermitCallSucceeded(), false);
      assert.equal((await market.read.getLease([1n])).paid, 0n);
      assert.equal(await market.read.nextLeaseId(), 3n);
    });

    it("refuses a fee-on-transfer token: the escrow never holds less than it records", async () => {
      const { viem } = connection;
      const [governance, provider, renter] = await viem.getWalletClients();
      const token = await viem.deployContract("FeeOnTransferToken");
      const registry = await viem.deployContract("ProviderRegistry", [token.address, governance!.account.address, 1, 1]);
      const extension = await viem.deployContract("LeaseMarketExtension", [registry.address]);
      const market = await viem.deployContract("LeaseMarket", [registry.address, extension.address, DEFAULT_PARAMS]);
      await registry.write.grantRole([MARKET_ROLE, market.address]);
      for (const w of [provider, renter]) {
        await token.write.mint([w!.account.address, STAKE]);
        await token.write.approve([registry.address, STAKE], { account: w!.account });
        await token.write.approve([market.address, STAKE], { account: w!.account });
      }
      await registry.write.register(["peer", ""], { account: provider!.account });
      await viem.assertions.revertWithCustomErrorWithArgs(registry.write.stake([10_000n], { account: provider!.account }), registry, "TokenTransferShortfall", [10_000n, 9_900n]);
      await registry.write.addMachine([A100, 8, 1, 0, "eu", `0x${"00".repeat(32)}`], { account: provider!.account });
      const publicClient = await viem.getPublicClient();
      const domain = suanliDomain(await publicClient.getChainId(), market.address);
      const offer = await makeOffer({ publicClient, provider }, { collateralBps: 0 });
      await viem.assertions.revertWithCustomErrorWithArgs(
        market.write.openLease([offer, await signOffer(provider!, domain, offer), terms()], { account: renter!.account }),
        market,
        "TokenTransferShortfall",
        [DEPOSIT, DEPOSIT - DEPOSIT / 100n],
      );
    });
  });
});

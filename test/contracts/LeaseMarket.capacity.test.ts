import assert from "node:assert/strict";
import { encodeFunctionData, getAddress, zeroAddress } from "viem";
import { leaseMarketAbi, providerRegistryAbi } from "../../common/abi.js";
import { readLease } from "../../common/chain/market.js";
import { signOffer } from "../../common/chain/sign.js";
import { suanliDomain } from "../../common/eip712.js";
import {
  A100,
  DEFAULT_PARAMS,
  FAULT_QUORUM,
  H100,
  MARKET_ROLE,
  PRICE,
  STAKE,
  UNBONDING_DELAY,
  balance,
  connect,
  deploySuanli,
  latest,
  makeOffer,
  open,
  openActive,
  sign,
  terms,
  type Connection,
} from "./support/suanli.js";

const NOTICE = DEFAULT_PARAMS.preemptionNotice;

describe("LeaseMarket: capacity modes, preemption, extend, shrink, governance", () => {
  let connection: Connection;
  before(async () => {
    connection = await connect();
  });
  async function suanliFixture() {
    return deploySuanli(connection);
  }
  const load = () => connection.networkHelpers.loadFixture(suanliFixture);
  const at = (t: number) => connection.networkHelpers.time.setNextBlockTimestamp(t);
  const interruptible = (bid: bigint, units = 6) => ({ units, interruptible: true, bidPerUnitSecond: bid });

  describe("capacity modes and preemption", () => {
    it("never leases a unit twice", async () => {
      const s = await load();
      const { viem } = connection;
      await open(s, { terms: { units: 5 } });
      await open(s, { terms: interruptible(50n, 3), renter: s.renter2 });
      const machine = await s.registry.read.getMachine([1]);
      assert.deepEqual([machine.onDemandUnits, machine.interruptibleUnits], [5, 3]);
      const offer = await makeOffer(s);
      await viem.assertions.revertWithCustomErrorWithArgs(
        s.market.write.openLease([offer, await sign(s, offer), terms({ units: 1 })], { account: s.renter!.account }),
        s.registry,
        "InsufficientUnits",
        [1, 0, 1],
      );
    });

    it("lets an on-demand lease preempt an interruptible one: notice, billing to stopAt, refund in the same transaction", async () => {
      const s = await load();
      const { viem, networkHelpers } = connection;
      const victim = await openActive(s, { terms: interruptible(50n), renter: s.renter2 });
      const victimDeposit = 6n * 50n * 3600n;
      const t = victim.activatedAt + 1000;
      const stopAt = t + NOTICE;
      const billed = 6n * 50n * BigInt(stopAt - victim.activatedAt);
      const renter2Before = await balance(s, s.renter2!.account.address);
      const offer = await makeOffer(s);
      await at(t);
      const hash = await s.market.write.openLease([offer, await sign(s, offer), terms({ units: 4, preempt: [victim.leaseId] })], { account: s.renter!.account });
      await viem.assertions.emitWithArgs(Promise.resolve(hash), s.market, "LeasePreempted", [victim.leaseId, 2n, stopAt]);
      await viem.assertions.emitWithArgs(Promise.resolve(hash), s.market, "LeaseEnded", [victim.leaseId, 4, stopAt, billed, victimDeposit - billed, 0n]);
      // The node sees the units go idle, then on-demand.
      const capacity = await s.publicClient.getContractEvents({
        address: s.registry.address,
        abi: providerRegistryAbi,
        eventName: "CapacityChanged",
        blockHash: (await s.publicClient.getTransactionReceipt({ hash })).blockHash,
      });
      assert.deepEqual(
        capacity.map((e) => [e.args.onDemandUnits, e.args.interruptibleUnits, e.args.idleUnits]),
        [
          [0, 0, 8],
          [4, 0, 4],
        ],
      );
      assert.equal(await balance(s, s.renter2!.account.address), renter2Before + victimDeposit - billed);
      let lease = await readLease(s.publicClient, s.market.address, victim.leaseId);
      assert.deepEqual([lease.status, lease.endReason, lease.stopAt, lease.collateral], ["Ended", "Preempted", stopAt, 0n]);
      // It keeps accruing through the notice, then stops.
      await networkHelpers.time.increaseTo(t + 30);
      assert.equal(await s.market.read.accrued([victim.leaseId]), 6n * 50n * BigInt(t + 30 - victim.activatedAt));
      await networkHelpers.time.increaseTo(stopAt + 500);
      assert.equal(await s.market.read.accrued([victim.leaseId]), billed);
      const provider0 = await balance(s, s.provider!.account.address);
      await s.market.write.claim([victim.leaseId]);
      assert.equal(await balance(s, s.provider!.account.address), provider0 + billed);
      lease = await readLease(s.publicClient, s.market.address, victim.leaseId);
      assert.equal(lease.status, "Settled");
      const machine = await s.registry.read.getMachine([1]);
      assert.deepEqual([machine.onDemandUnits, machine.interruptibleUnits], [4, 0]);
    });

    it("lets a higher interruptible bid preempt a lower one, but not an equal bid", async () => {
      const s = await load();
      const { viem } = connection;
      const victim = await openActive(s, { terms: interruptible(50n), renter: s.renter2 });
      const offer = await makeOffer(s);
      const signature = await sign(s, offer);
      await viem.assertions.revertWithCustomErrorWithArgs(
        s.market.write.openLease([offer, signature, terms({ ...interruptible(50n, 4), preempt: [victim.leaseId] })], { account: s.renter!.account }),
        s.market,
        "NotPreemptible",
        [victim.leaseId],
      );
      // The higher bid owes at least the victim's notice (6 x 50 x 60 = 18,000; issue #34 finding 7): 6 units at 51.
      await s.market.write.openLease([offer, signature, terms({ ...interruptible(51n, 6), preempt: [victim.leaseId] })], { account: s.renter!.account });
      assert.equal((await readLease(s.publicClient, s.market.address, victim.leaseId)).endReason, "Preempted");
      assert.equal((await s.registry.read.getMachine([1])).interruptibleUnits, 6);
    });

    it("never preempts an on-demand lease, a lease of another machine, or more than 16", async () => {
      const s = await load();
      const { viem } = connection;
      const onDemand = await openActive(s, { terms: { units: 6 } });
      const offer2 = await makeOffer(s, { provider: s.provider2!.account.address, machineId: 2, model: H100 });
      const elsewhere = await open(s, { offer: offer2, terms: interruptible(50n, 2) });
      const offer = await makeOffer(s);
      const signature = await sign(s, offer);
      const openPreempting = (preempt: bigint[]) => s.market.write.openLease([offer, signature, terms({ units: 4, preempt })], { account: s.renter2!.account });
      await viem.assertions.revertWithCustomErrorWithArgs(openPreempting([onDemand.leaseId]), s.market, "NotPreemptible", [onDemand.leaseId]);
      await viem.assertions.revertWithCustomErrorWithArgs(openPreempting([elsewhere.leaseId]), s.market, "PreemptWrongMachine", [elsewhere.leaseId, 1]);
      await viem.assertions.revertWithCustomErrorWithArgs(openPreempting([99n]), s.market, "PreemptWrongMachine", [99n, 1]);
      await viem.assertions.revertWithCustomErrorWithArgs(openPreempting(Array(17).fill(onDemand.leaseId)), s.market, "TooManyPreemptions", [17n, 16n]);
    });

    it("preempts only while units are short, and fails when preemption cannot free enough", async () => {
      const s = await load();
      const { viem } = connection;
      const small = await openActive(s, { terms: interruptible(50n, 2), renter: s.renter2 });
      const offer = await makeOffer(s);
      const signature = await sign(s, offer);
      await s.market.write.openLease([offer, signature, terms({ units: 4, preempt: [small.leaseId] })], { account: s.renter!.account });
      assert.equal((await readLease(s.publicClient, s.market.address, small.leaseId)).status, "Active");
      // 2 units idle; preempting the 2-unit lease frees 2 more, still short of 6.
      await viem.assertions.revertWithCustomErrorWithArgs(
        s.market.write.openLease([offer, signature, terms({ units: 6, preempt: [small.leaseId] })], { account: s.renter!.account }),
        s.registry,
        "InsufficientUnits",
        [1, 4, 6],
      );
      assert.equal((await readLease(s.publicClient, s.market.address, small.leaseId)).status, "Active");
    });

    it("cancels a preempted interruptible lease that never started, refunding all of it", async () => {
      const s = await load();
      const { viem } = connection;
      const victim = await open(s, { terms: interruptible(50n), renter: s.renter2 });
      const renter2Before = await balance(s, s.renter2!.account.address);
      await viem.assertions.emitWithArgs(
        s.market.write.openLease([victim.offer, victim.signature, terms({ units: 8, preempt: [victim.leaseId] })], { account: s.renter!.account }),
        s.market,
        "LeasePreempted",
        [victim.leaseId, 2n, (await latest(s)) + 1],
      );
      assert.equal(await balance(s, s.renter2!.account.address), renter2Before + 6n * 50n * 3600n);
      const lease = await readLease(s.publicClient, s.market.address, victim.leaseId);
      assert.deepEqual([lease.status, lease.endReason], ["Cancelled", "Preempted"]);
    });

    it("caps the notice at the preempted lease's end, and frees units of leases past their end", async () => {
      const s = await load();
      const { viem, networkHelpers } = connection;
      const shortOne = await openActive(s, { terms: { ...interruptible(50n, 4), duration: 100 }, renter: s.renter2 });
      const expired = await openActive(s, { terms: { units: 4, duration: 60 } });
      await networkHelpers.time.increaseTo(expired.activatedAt + 70);
      const offer = await makeOffer(s);
      const hash = await s.market.write.openLease([offer, await sign(s, offer), terms({ units: 8, preempt: [expired.leaseId, shortOne.leaseId] })], {
        account: s.renter!.account,
      });
      await viem.assertions.emitWithArgs(Promise.resolve(hash), s.market, "LeasePreempted", [shortOne.leaseId, 3n, shortOne.activatedAt + 100]);
      await viem.assertions.emitWithArgs(Promise.resolve(hash), s.market, "LeaseEnded", [expired.leaseId, 5, expired.activatedAt + 60, 4n * PRICE * 60n, 0n, 0n]);
      assert.equal((await s.registry.read.getMachine([1])).onDemandUnits, 8);
      // The expired lease ended inside its last fault window, so it is held like a completion (issue #34): nothing is
      // claimable until end + FAULT_SUBMISSION_WINDOW, then the releasing claim pays the whole deposit.
      assert.equal(await s.market.read.claimable([expired.leaseId]), 0n);
      await viem.assertions.revertWithCustomErrorWithArgs(s.market.write.claim([expired.leaseId]), s.market, "CollateralHeld", [
        expired.leaseId,
        BigInt(expired.activatedAt + 60 + 600),
      ]);
      await networkHelpers.time.increaseTo(expired.activatedAt + 60 + 600);
      const provider0 = await balance(s, s.provider!.account.address);
      await s.market.write.claim([expired.leaseId]);
      assert.equal(await balance(s, s.provider!.account.address), provider0 + 4n * PRICE * 60n);
    });
  });

  describe("extend", () => {
    it("adds time and deposit on the provider's current offer and locks more collateral", async () => {
      const s = await load();
      const { viem } = connection;
      const { leaseId, activatedAt } = await openActive(s);
      const consent = await makeOffer(s);
      const renter0 = await balance(s, s.renter!.account.address);
      const locked0 = (await s.registry.read.getProvider([s.provider!.account.address])).locked;
      await viem.assertions.emitWithArgs(s.market.write.extend([leaseId, 600, consent, await sign(s, consent)], { account: s.renter!.account }), s.market, "LeaseExtended", [
        leaseId,
        600,
        2n * PRICE * 600n,
        activatedAt + 4200,
      ]);
      assert.equal(await balance(s, s.renter!.account.address), renter0 - 2n * PRICE * 600n);
      const lease = await readLease(s.publicClient, s.market.address, leaseId);
      assert.deepEqual([lease.end, lease.deposit, lease.collateral], [activatedAt + 4200, 2n * PRICE * 4200n, PRICE * 4200n]);
      assert.equal((await s.registry.read.getProvider([s.provider!.account.address])).locked, locked0 + PRICE * 600n);
    });

    it("refuses an Open lease, and extends an interruptible one at its bid", async () => {
      const s = await load();
      const { viem } = connection;
      const opened = await open(s);
      const consent = await makeOffer(s);
      // An Open lease cannot be extended (it would raise the start penalty after the fact): close and reopen.
      await viem.assertions.revertWithCustomErrorWithArgs(
        s.market.write.extend([opened.leaseId, 100, consent, await sign(s, consent)], { account: s.renter!.account }),
        s.market,
        "InvalidLeaseStatus",
        [opened.leaseId, 1],
      );
      assert.equal((await s.market.read.getLease([opened.leaseId])).duration, 3600);
      const bid = await openActive(s, { terms: interruptible(50n, 2), renter: s.renter2 });
      await s.market.write.extend([bid.leaseId, 100, consent, await sign(s, consent)], { account: s.renter2!.account });
      assert.equal((await s.market.read.getLease([bid.leaseId])).deposit, 2n * 50n * 3700n);
      const pricier = await makeOffer(s, { minBidPerUnitSecond: 51n });
      await viem.assertions.revertWithCustomErrorWithArgs(
        s.market.write.extend([bid.leaseId, 100, pricier, await sign(s, pricier)], { account: s.renter2!.account }),
        s.market,
        "ExtensionPriceTooHigh",
        [51n, 50n],
      );
      const noBids = await makeOffer(s, { minBidPerUnitSecond: 0n });
      await viem.assertions.revertWithCustomErrorWithArgs(
        s.market.write.extend([bid.leaseId, 100, noBids, await sign(s, noBids)], { account: s.renter2!.account }),
        s.market,
        "InterruptibleNotOffered",
        [1],
      );
    });

    it("needs the renter, a nonzero extension, a running lease and a valid consenting offer", async () => {
      const s = await load();
      const { viem, networkHelpers } = connection;
      const { leaseId, activatedAt } = await openActive(s);
      const consent = await makeOffer(s);
      const signature = await sign(s, consent);
      const extend = (extra: number, offer = consent, sig = signature, who = s.renter) => s.market.write.extend([leaseId, extra, offer, sig], { account: who!.account });
      await viem.assertions.revertWithCustomErrorWithArgs(extend(10, consent, signature, s.renter2), s.market, "NotRenter", [leaseId, getAddress(s.renter2!.account.address)]);
      await viem.assertions.revertWithCustomError(extend(0), s.market, "ZeroExtension");
      const pricier = await makeOffer(s, { pricePerUnitSecond: PRICE + 1n });
      await viem.assertions.revertWithCustomErrorWithArgs(extend(10, pricier, await sign(s, pricier)), s.market, "ExtensionPriceTooHigh", [PRICE + 1n, PRICE]);
      const shortMax = await makeOffer(s, { maxDuration: 3700 });
      await viem.assertions.revertWithCustomErrorWithArgs(extend(200, shortMax, await sign(s, shortMax)), s.market, "DurationOutOfRange", [3800, 60, 3700]);
      const other = await makeOffer(s, { provider: s.provider2!.account.address, machineId: 2, model: H100 });
      await viem.assertions.revertWithCustomErrorWithArgs(extend(10, other, await sign(s, other, s.provider2)), s.market, "OfferForOtherMachine", [
        leaseId,
        getAddress(s.provider2!.account.address),
        2,
      ]);
      await viem.assertions.revertWithCustomErrorWithArgs(extend(10, consent, await sign(s, consent, s.other)), s.market, "InvalidSignature", [
        consent.provider,
        getAddress(s.other!.account.address),
      ]);
      const bound = await makeOffer(s, { renter: s.renter!.account.address });
      const boundSig = await sign(s, bound);
      await extend(10, bound, boundSig);
      await viem.assertions.revertWithCustomErrorWithArgs(extend(10, bound, boundSig), s.registry, "InvalidOfferNonce", [bound.provider, bound.nonce]);
      await s.registry.write.revokeNonce([consent.nonce], { account: s.provider!.account });
      await viem.assertions.revertWithCustomErrorWithArgs(extend(10), s.registry, "InvalidOfferNonce", [consent.provider, consent.nonce]);
      const fresh = await makeOffer(s);
      const freshSig = await sign(s, fresh);
      const free = await s.registry.read.freeStake([s.provider!.account.address]);
      await s.registry.write.requestUnstake([free], { account: s.provider!.account });
      await viem.assertions.revertWithCustomErrorWithArgs(extend(10, fresh, freshSig), s.registry, "InsufficientFreeStake", [fresh.provider, 0n, PRICE * 10n]);
      await networkHelpers.time.increaseTo(Math.max(activatedAt + 3610, fresh.expiry + 1));
      await viem.assertions.revertWithCustomErrorWithArgs(extend(10, fresh, freshSig), s.market, "LeaseExpired", [leaseId, activatedAt + 3610]);
      await s.market.write.claim([leaseId]);
      await viem.assertions.revertWithCustomErrorWithArgs(extend(10, fresh, freshSig), s.market, "InvalidLeaseStatus", [leaseId, 4]);
      // The claim inside the end's fault window held the lease's collateral (issue #34); the one after it releases it,
      // and the provider's stake, all unstaked but that, backs the next lease.
      await networkHelpers.time.increaseTo(activatedAt + 3610 + 600);
      await s.market.write.claim([leaseId]);
      const late = await openActive(s);
      const t = (await latest(s)) + 1;
      const expiredOffer = { ...fresh, expiry: t - 1 };
      await at(t);
      await viem.assertions.revertWithCustomErrorWithArgs(
        s.market.write.extend([late.leaseId, 10, expiredOffer, await sign(s, expiredOffer)], { account: s.renter!.account }),
        s.market,
        "OfferExpired",
        [t - 1, BigInt(t)],
      );
    });
  });

  describe("shrink", () => {
    it("pays what accrued, refunds the released units' share and meters the rest from now", async () => {
      const s = await load();
      const { viem, networkHelpers } = connection;
      const { leaseId, activatedAt } = await openActive(s, { terms: { units: 4 } });
      const provider0 = await balance(s, s.provider!.account.address);
      const renter0 = await balance(s, s.renter!.account.address);
      const t = activatedAt + 1000;
      await at(t);
      const refund = 4n * PRICE * 3600n - 4n * PRICE * 1000n - 1n * PRICE * 2600n;
      await viem.assertions.emitWithArgs(s.market.write.shrink([leaseId, 1], { account: s.renter!.account }), s.market, "LeaseShrunk", [leaseId, 1, refund]);
      assert.equal(await balance(s, s.provider!.account.address), provider0 + 4n * PRICE * 1000n);
      assert.equal(await balance(s, s.renter!.account.address), renter0 + refund);
      const lease = await readLease(s.publicClient, s.market.address, leaseId);
      assert.deepEqual(
        [lease.units, lease.activatedAt, lease.end, lease.deposit, lease.paid, lease.collateral],
        [1, t, activatedAt + 3600, PRICE * 2600n, 0n, (PRICE * 2600n) / 2n],
      );
      const provider = await s.registry.read.getProvider([s.provider!.account.address]);
      assert.deepEqual([provider.locked, provider.unitSecondsDelivered], [(PRICE * 2600n) / 2n, 4000n]);
      assert.equal((await s.registry.read.getMachine([1])).onDemandUnits, 1);
      await networkHelpers.time.increaseTo(t + 100);
      assert.equal(await s.market.read.accrued([leaseId]), PRICE * 100n);
      assert.equal(await balance(s, s.market.address), PRICE * 2600n);
    });

    it("shrinks an Open lease by refunding the released share", async () => {
      const s = await load();
      const { leaseId } = await open(s, { terms: { units: 4 } });
      const renter0 = await balance(s, s.renter!.account.address);
      await s.market.write.shrink([leaseId, 3], { account: s.renter!.account });
      assert.equal(await balance(s, s.renter!.account.address), renter0 + PRICE * 3600n);
      assert.equal((await s.market.read.getLease([leaseId])).deposit, 3n * PRICE * 3600n);
    });

    it("needs the renter, 0 < newUnits < units and a running lease", async () => {
      const s = await load();
      const { viem, networkHelpers } = connection;
      const { leaseId, activatedAt } = await openActive(s, { terms: { units: 4 } });
      await viem.assertions.revertWithCustomErrorWithArgs(s.market.write.shrink([leaseId, 1], { account: s.provider!.account }), s.market, "NotRenter", [
        leaseId,
        getAddress(s.provider!.account.address),
      ]);
      await viem.assertions.revertWithCustomErrorWithArgs(s.market.write.shrink([leaseId, 0], { account: s.renter!.account }), s.market, "InvalidShrink", [0, 4]);
      await viem.assertions.revertWithCustomErrorWithArgs(s.market.write.shrink([leaseId, 4], { account: s.renter!.account }), s.market, "InvalidShrink", [4, 4]);
      await networkHelpers.time.increaseTo(activatedAt + 3600);
      await viem.assertions.revertWithCustomErrorWithArgs(s.market.write.shrink([leaseId, 1], { account: s.renter!.account }), s.market, "LeaseExpired", [
        leaseId,
        activatedAt + 3600,
      ]);
      // Closed at its end, inside its last fault window: settled and held like a completion (issue #34), not running.
      await s.market.write.close([leaseId], { account: s.renter!.account });
      await viem.assertions.revertWithCustomErrorWithArgs(s.market.write.shrink([leaseId, 1], { account: s.renter!.account }), s.market, "InvalidLeaseStatus", [leaseId, 4]);
    });
  });

  describe("governance", () => {
    it("lets only governance set the market parameters, within their caps", async () => {
      const s = await load();
      const { viem } = connection;
      const good = { protocolFeeBps: 1_000, startPenaltyBps: 10_000, faultMinCreditBps: 10_000, preemptionNotice: 86_400, treasury: s.treasury!.account.address };
      await viem.assertions.revertWithCustomErrorWithArgs(s.market.write.setParams([good], { account: s.other!.account }), s.market, "NotGovernance", [
        getAddress(s.other!.account.address),
      ]);
      const bad = [
        [{ ...good, protocolFeeBps: 1_001 }, "protocolFeeBps", 1_001n, 1_000n],
        [{ ...good, startPenaltyBps: 10_001 }, "startPenaltyBps", 10_001n, 10_000n],
        [{ ...good, faultMinCreditBps: 10_001 }, "faultMinCreditBps", 10_001n, 10_000n],
        [{ ...good, preemptionNotice: 86_401 }, "preemptionNotice", 86_401n, 86_400n],
      ] as const;
      for (const [params, name, value, max] of bad) {
        await viem.assertions.revertWithCustomErrorWithArgs(s.market.write.setParams([params]), s.market, "ParamOutOfRange", [name, value, max]);
      }
      await viem.assertions.revertWithCustomError(s.market.write.setParams([{ ...good, treasury: zeroAddress }]), s.market, "ZeroTreasury");
      await viem.assertions.emit(s.market.write.setParams([good]), s.market, "MarketParamsChanged");
      assert.deepEqual(await s.market.read.params(), { ...good, treasury: getAddress(good.treasury) });
      assert.equal(await s.market.read.registry(), getAddress(s.registry.address));
      assert.equal(await s.market.read.token(), getAddress(s.token.address));
      assert.equal(await s.market.read.extension(), getAddress(s.extension.address));
    });

    it("runs the extension's code only through the market, and only with a matching registry", async () => {
      const s = await load();
      const { viem } = connection;
      await viem.assertions.revertWithCustomError(s.extension.write.cancel([1n]), s.market, "NotDelegated");
      const otherRegistry = await viem.deployContract("ProviderRegistry", [s.token.address, s.governance!.account.address, UNBONDING_DELAY, FAULT_QUORUM]);
      const otherExtension = await viem.deployContract("LeaseMarketExtension", [otherRegistry.address]);
      await viem.assertions.revertWithCustomErrorWithArgs(
        viem.deployContract("LeaseMarket", [s.registry.address, otherExtension.address, DEFAULT_PARAMS]) as unknown as Promise<`0x${string}`>,
        s.market,
        "ExtensionMismatch",
        [getAddress(s.registry.address), getAddress(otherRegistry.address)],
      );
    });
  });

  describe("reentrancy", () => {
    it("refuses re-entry while tokens leave the market or the registry", async () => {
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
      await registry.write.stake([1_000_000n], { account: provider!.account });
      await registry.write.addMachine([A100, 8, 1, 0, "eu", `0x${"00".repeat(32)}`], { account: provider!.account });
      const publicClient = await viem.getPublicClient();
      const offer = await makeOffer({ publicClient, provider });
      const domain = suanliDomain(await publicClient.getChainId(), market.address);
      await market.write.openLease([offer, await signOffer(provider!, domain, offer), terms()], { account: renter!.account });
      await market.write.activate([1n], { account: provider!.account });
      // Past the fault window, so a claim has something to pay (it pays until now - 600).
      await networkHelpers.time.increase(610);

      // A payment whose transfer re-enters fails (the guard refuses the inner call); the market records it as
      // owed instead of reverting, so the outer call completes exactly once.
      await token.write.arm([market.address, encodeFunctionData({ abi: leaseMarketAbi, functionName: "claim", args: [1n] })]);
      await viem.assertions.emit(market.write.claim([1n]), market, "PaymentDeferred");
      const claimed = (await market.read.getLease([1n])).paid;
      assert.ok(claimed > 0n);
      assert.equal(await market.read.owed([provider!.account.address]), claimed);
      await token.write.arm([market.address, encodeFunctionData({ abi: leaseMarketAbi, functionName: "close", args: [1n] })]);
      await viem.assertions.emit(market.write.close([1n], { account: renter!.account }), market, "PaymentDeferred");
      assert.ok((await market.read.owed([renter!.account.address])) > 0n);
      // Withdrawing what is owed refuses re-entry outright.
      await token.write.arm([market.address, encodeFunctionData({ abi: leaseMarketAbi, functionName: "withdraw", args: [provider!.account.address] })]);
      await viem.assertions.revertWithCustomError(market.write.withdraw([provider!.account.address], { account: provider!.account }), market, "ReentrancyGuardReentrantCall");
      // Armed with a harmless view instead, the same withdrawal goes through.
      await token.write.arm([market.address, encodeFunctionData({ abi: leaseMarketAbi, functionName: "owed", args: [provider!.account.address] })]);
      await market.write.withdraw([provider!.account.address], { account: provider!.account });
      assert.equal(await market.read.owed([provider!.account.address]), 0n);

      await registry.write.requestUnstake([1_000n], { account: provider!.account });
      await networkHelpers.time.increase(2);
      await token.write.arm([registry.address, encodeFunctionData({ abi: providerRegistryAbi, functionName: "withdraw" })]);
      await viem.assertions.revertWithCustomError(registry.write.withdraw({ account: provider!.account }), registry, "ReentrancyGuardReentrantCall");
    });
  });
});

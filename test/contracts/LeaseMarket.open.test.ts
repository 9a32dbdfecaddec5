import assert from "node:assert/strict";
import { network } from "hardhat";
import { domainSeparator, getAddress, keccak256, recoverTypedDataAddress, toBytes, zeroAddress, type Hex } from "viem";
import { readLease } from "../../common/chain/market.js";
import { signOffer } from "../../common/chain/sign.js";
import { signPermitFields } from "../../common/chain/tx.js";
import { suanliDomain, suanliTypes } from "../../common/eip712.js";
import {
  A100,
  H100,
  MIN_BID,
  PRICE,
  STAKE,
  balance,
  computeCollateral,
  computeDeposit,
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

const DEPOSIT = computeDeposit(2, PRICE, 3600);
const COLLATERAL = computeCollateral(DEPOSIT, 5_000);

function typeString(name: keyof typeof suanliTypes): string {
  return `${name}(${suanliTypes[name].map((field) => `${field.type} ${field.name}`).join(",")})`;
}

describe("LeaseMarket: open, activate, claim, close", () => {
  let connection: Connection;
  before(async () => {
    connection = await connect();
  });
  async function suanliFixture() {
    return deploySuanli(connection);
  }
  const load = () => connection.networkHelpers.loadFixture(suanliFixture);

  describe("EIP-712", () => {
    it("uses the domain and type hashes of common/eip712.ts", async () => {
      const s = await load();
      assert.equal(await s.market.read.domainSeparator(), domainSeparator({ domain: s.domain }));
      const [, name, version, chainId, verifyingContract] = await s.market.read.eip712Domain();
      assert.deepEqual([name, version, Number(chainId), verifyingContract], ["Suanli", "1", s.chainId, getAddress(s.market.address)]);
      assert.equal(await s.market.read.OFFER_TYPEHASH(), keccak256(toBytes(typeString("Offer"))));
      assert.equal(await s.market.read.FAULT_TYPEHASH(), keccak256(toBytes(typeString("Fault"))));
      assert.equal(await s.market.read.SETTLEMENT_TYPEHASH(), keccak256(toBytes(typeString("Settlement"))));
    });

    it("accepts an offer signed with viem and rejects other signers, other chains and other deployments", async () => {
      const s = await load();
      const { viem } = connection;
      const offer = await makeOffer(s);
      const byOther = await sign(s, offer, s.other);
      await viem.assertions.revertWithCustomErrorWithArgs(s.market.write.openLease([offer, byOther, terms()], { account: s.renter!.account }), s.market, "InvalidSignature", [
        offer.provider,
        getAddress(s.other!.account.address),
      ]);
      for (const domain of [suanliDomain(1, s.market.address), suanliDomain(s.chainId, s.registry.address)]) {
        const foreign = await signOffer(s.provider!, domain, offer);
        const recovered = await recoverTypedDataAddress({ domain: s.domain, types: { Offer: suanliTypes.Offer }, primaryType: "Offer", message: offer, signature: foreign });
        await viem.assertions.revertWithCustomErrorWithArgs(s.market.write.openLease([offer, foreign, terms()], { account: s.renter!.account }), s.market, "InvalidSignature", [
          offer.provider,
          recovered,
        ]);
      }
      await viem.assertions.revertWithCustomErrorWithArgs(s.market.write.openLease([offer, "0x1234", terms()], { account: s.renter!.account }), s.market, "InvalidSignature", [
        offer.provider,
        zeroAddress,
      ]);
      // A field changed after signing breaks the signature.
      const tampered = { ...offer, pricePerUnitSecond: offer.pricePerUnitSecond - 1n };
      await viem.assertions.revertWithCustomErrorWithArgs(
        s.market.write.openLease([tampered, await sign(s, offer), terms()], { account: s.renter!.account }),
        s.market,
        "InvalidSignature",
        [offer.provider, (recovered: unknown) => recovered !== getAddress(offer.provider)],
      );
      await open(s, { offer });
    });
  });

  describe("openLease", () => {
    it("escrows the deposit, reserves units, locks collateral and announces the lease", async () => {
      const s = await load();
      const { viem, networkHelpers } = connection;
      const offer = await makeOffer(s);
      const signature = await sign(s, offer);
      const t = (await latest(s)) + 10;
      await networkHelpers.time.setNextBlockTimestamp(t);
      const renterBefore = await balance(s, s.renter!.account.address);
      const hash = s.market.write.openLease([offer, signature, terms()], { account: s.renter!.account });
      await viem.assertions.emitWithArgs(hash, s.market, "LeaseOpened", [
        1n,
        offer.provider,
        s.renter!.account.address,
        1,
        2,
        PRICE,
        false,
        DEPOSIT,
        COLLATERAL,
        t + 600,
        offer.nonce,
      ]);
      assert.equal(await balance(s, s.renter!.account.address), renterBefore - DEPOSIT);
      assert.equal(await balance(s, s.market.address), DEPOSIT);
      const provider = await s.registry.read.getProvider([offer.provider]);
      assert.equal(provider.locked, COLLATERAL);
      assert.equal(provider.free, STAKE - COLLATERAL);
      const machine = await s.registry.read.getMachine([1]);
      assert.equal(machine.onDemandUnits, 2);
      assert.equal(machine.interruptibleUnits, 0);
      const lease = await readLease(s.publicClient, s.market.address, 1n);
      assert.equal(lease.status, "Open");
      assert.equal(lease.startDeadline, t + 600);
      assert.equal(lease.activatedAt, 0);
      assert.equal(lease.end, 0);
      assert.equal(lease.duration, 3600);
      assert.equal(lease.collateral, COLLATERAL);
      assert.equal(lease.deposit, DEPOSIT);
      assert.equal(lease.accrued, 0n);
      assert.equal(await s.market.read.nextLeaseId(), 2n);
    });

    it("announces the capacity change of the machine", async () => {
      const s = await load();
      const { viem } = connection;
      const offer = await makeOffer(s);
      await viem.assertions.emitWithArgs(
        s.market.write.openLease([offer, await sign(s, offer), terms({ units: 3 })], { account: s.renter!.account }),
        s.registry,
        "CapacityChanged",
        [1, 3, 0, 5],
      );
      await viem.assertions.emitWithArgs(
        s.market.write.openLease([offer, await sign(s, offer), terms({ units: 1, interruptible: true, bidPerUnitSecond: MIN_BID })], { account: s.renter2!.account }),
        s.registry,
        "CapacityChanged",
        [1, 3, 1, 4],
      );
    });

    it("rejects expired offers and offers bound to another renter", async () => {
      const s = await load();
      const { viem, networkHelpers } = connection;
      const t = (await latest(s)) + 5;
      const expired = await makeOffer(s, { expiry: t - 1 });
      await networkHelpers.time.setNextBlockTimestamp(t);
      await viem.assertions.revertWithCustomErrorWithArgs(
        s.market.write.openLease([expired, await sign(s, expired), terms()], { account: s.renter!.account }),
        s.market,
        "OfferExpired",
        [t - 1, BigInt(t)],
      );
      const bound = await makeOffer(s, { renter: s.renter2!.account.address });
      await viem.assertions.revertWithCustomErrorWithArgs(
        s.market.write.openLease([bound, await sign(s, bound), terms()], { account: s.renter!.account }),
        s.market,
        "OfferNotForRenter",
        [getAddress(s.renter2!.account.address), getAddress(s.renter!.account.address)],
      );
    });

    it("uses a renter-bound offer once and a public offer many times; replays are rejected", async () => {
      const s = await load();
      const { viem } = connection;
      const bound = await makeOffer(s, { renter: s.renter!.account.address });
      const signature = await sign(s, bound);
      await open(s, { offer: bound, signature });
      assert.equal(await s.registry.read.isNonceUsable([bound.provider, bound.nonce]), false);
      await viem.assertions.revertWithCustomErrorWithArgs(s.market.write.openLease([bound, signature, terms()], { account: s.renter!.account }), s.registry, "InvalidOfferNonce", [
        bound.provider,
        bound.nonce,
      ]);
      const offer = await makeOffer(s);
      const publicSignature = await sign(s, offer);
      await open(s, { offer, signature: publicSignature });
      await open(s, { offer, signature: publicSignature, renter: s.renter2 });
      assert.equal((await s.registry.read.getMachine([1])).onDemandUnits, 6);
    });

    it("rejects offers whose nonce the provider revoked", async () => {
      const s = await load();
      const { viem } = connection;
      const offer = await makeOffer(s);
      const signature = await sign(s, offer);
      await s.registry.write.revokeNonce([offer.nonce], { account: s.provider!.account });
      await viem.assertions.revertWithCustomErrorWithArgs(s.market.write.openLease([offer, signature, terms()], { account: s.renter!.account }), s.registry, "InvalidOfferNonce", [
        offer.provider,
        offer.nonce,
      ]);
      const older = await makeOffer(s);
      await s.registry.write.revokeNoncesBelow([older.nonce + 1n], { account: s.provider!.account });
      await viem.assertions.revertWithCustomErrorWithArgs(
        s.market.write.openLease([older, await sign(s, older), terms()], { account: s.renter!.account }),
        s.registry,
        "InvalidOfferNonce",
        [older.provider, older.nonce],
      );
    });

    it("checks units, duration and the price against the offer and the renter's cap", async () => {
      const s = await load();
      const { viem } = connection;
      const offer = await makeOffer(s, { minDuration: 60, maxDuration: 7200 });
      const signature = await sign(s, offer);
      const openWith = (t: Partial<ReturnType<typeof terms>>, o = offer, sig: Hex = signature) => s.market.write.openLease([o, sig, terms(t)], { account: s.renter!.account });
      await viem.assertions.revertWithCustomError(openWith({ units: 0 }), s.market, "ZeroUnits");
      await viem.assertions.revertWithCustomErrorWithArgs(openWith({ duration: 59 }), s.market, "DurationOutOfRange", [59, 60, 7200]);
      await viem.assertions.revertWithCustomErrorWithArgs(openWith({ duration: 7201 }), s.market, "DurationOutOfRange", [7201, 60, 7200]);
      await viem.assertions.revertWithCustomErrorWithArgs(openWith({ maxPricePerUnitSecond: PRICE - 1n }), s.market, "PriceAboveCap", [PRICE, PRICE - 1n]);
      await viem.assertions.revertWithCustomErrorWithArgs(openWith({ interruptible: true, bidPerUnitSecond: MIN_BID - 1n }), s.market, "BidTooLow", [MIN_BID - 1n, MIN_BID]);
      await viem.assertions.revertWithCustomErrorWithArgs(openWith({ interruptible: true, bidPerUnitSecond: 2_000n, maxPricePerUnitSecond: 1_999n }), s.market, "PriceAboveCap", [
        2_000n,
        1_999n,
      ]);
      const onDemandOnly = await makeOffer(s, { minBidPerUnitSecond: 0n });
      await viem.assertions.revertWithCustomErrorWithArgs(
        openWith({ interruptible: true, bidPerUnitSecond: 100n }, onDemandOnly, await sign(s, onDemandOnly)),
        s.market,
        "InterruptibleNotOffered",
        [1],
      );
      const free = await makeOffer(s, { pricePerUnitSecond: 0n, minDuration: 0 });
      await viem.assertions.revertWithCustomError(openWith({}, free, await sign(s, free)), s.market, "ZeroPrice");
      await viem.assertions.revertWithCustomErrorWithArgs(openWith({ duration: 0 }, free, await sign(s, free)), s.market, "DurationOutOfRange", [0, 0, free.maxDuration]);
      const huge = await makeOffer(s, { pricePerUnitSecond: 2n ** 95n });
      await viem.assertions.revertWithCustomErrorWithArgs(
        openWith({ maxPricePerUnitSecond: 2n ** 96n - 1n }, huge, await sign(s, huge)),
        s.market,
        "SafeCastOverflowedUintDowncast",
        [96, 2n * 2n ** 95n * 3600n],
      );
    });

    it("lets the registry refuse a machine the provider does not own, a wrong model, missing units and missing stake", async () => {
      const s = await load();
      const { viem } = connection;
      const as = { account: s.renter!.account };
      const foreign = await makeOffer(s, { machineId: 2 });
      await viem.assertions.revertWithCustomErrorWithArgs(s.market.write.openLease([foreign, await sign(s, foreign), terms()], as), s.registry, "NotMachineOwner", [
        2,
        foreign.provider,
      ]);
      const wrongModel = await makeOffer(s, { model: H100 });
      await viem.assertions.revertWithCustomErrorWithArgs(s.market.write.openLease([wrongModel, await sign(s, wrongModel), terms()], as), s.registry, "ModelMismatch", [
        1,
        A100,
        H100,
      ]);
      const offer = await makeOffer(s);
      const signature = await sign(s, offer);
      await viem.assertions.revertWithCustomErrorWithArgs(s.market.write.openLease([offer, signature, terms({ units: 9 })], as), s.registry, "InsufficientUnits", [1, 8, 9]);
      await s.registry.write.requestUnstake([STAKE - 100n], { account: s.provider!.account });
      await viem.assertions.revertWithCustomErrorWithArgs(s.market.write.openLease([offer, signature, terms()], as), s.registry, "InsufficientFreeStake", [
        offer.provider,
        100n,
        COLLATERAL,
      ]);
    });

    it("takes the deposit through an EIP-2612 permit, also when the permit was front-run", async () => {
      const s = await load();
      const { viem } = connection;
      const wallets = await viem.getWalletClients();
      const fresh = wallets[10]!;
      await s.token.write.faucet([fresh.account.address, DEPOSIT * 2n]);
      const offer = await makeOffer(s);
      const signature = await sign(s, offer);
      const deadline = BigInt((await latest(s)) + 3600);
      const signPermit = (nonce: bigint) =>
        signPermitFields(fresh, {
          owner: fresh.account.address,
          token: s.token.address,
          tokenName: "Suanli Test USD",
          chainId: s.chainId,
          spender: s.market.address,
          value: DEPOSIT,
          nonce,
          deadline,
        });
      const permit = await signPermit(0n);
      await viem.assertions.revertWithCustomErrorWithArgs(
        s.market.write.openLease([offer, signature, terms()], { account: fresh.account }),
        s.token,
        "ERC20InsufficientAllowance",
        [getAddress(s.market.address), 0n, DEPOSIT],
      );
      await s.market.write.openLeaseWithPermit([offer, signature, terms(), permit], { account: fresh.account });
      assert.equal(await balance(s, fresh.account.address), DEPOSIT);
      assert.equal((await s.market.read.getLease([1n])).renter, getAddress(fresh.account.address));

      // Someone submits the renter's next permit first: the open still succeeds on the allowance it set.
      const second = await signPermit(1n);
      await s.token.write.permit([fresh.account.address, s.market.address, second.value, second.deadline, second.v, second.r, second.s]);
      await s.market.write.openLeaseWithPermit([offer, signature, terms(), second], { account: fresh.account });
      assert.equal(await balance(s, fresh.account.address), 0n);
    });
  });

  describe("activate", () => {
    it("starts accrual by the provider before the start deadline", async () => {
      const s = await load();
      const { viem, networkHelpers } = connection;
      const { leaseId } = await open(s);
      const t = (await latest(s)) + 100;
      await networkHelpers.time.setNextBlockTimestamp(t);
      await viem.assertions.emitWithArgs(s.market.write.activate([leaseId], { account: s.provider!.account }), s.market, "LeaseActivated", [leaseId, t, t + 3600]);
      const lease = await readLease(s.publicClient, s.market.address, leaseId);
      assert.equal(lease.status, "Active");
      assert.equal(lease.activatedAt, t);
      assert.equal(lease.startDeadline, 0);
      assert.equal(lease.end, t + 3600);
      await viem.assertions.revertWithCustomErrorWithArgs(s.market.write.activate([leaseId], { account: s.provider!.account }), s.market, "InvalidLeaseStatus", [leaseId, 2]);
      await viem.assertions.revertWithCustomErrorWithArgs(s.market.write.activate([99n], { account: s.provider!.account }), s.market, "InvalidLeaseStatus", [99n, 0]);
    });

    it("refuses anyone but the provider, and any activation after the deadline", async () => {
      const s = await load();
      const { viem, networkHelpers } = connection;
      const { leaseId } = await open(s);
      const deadline = (await s.market.read.getLease([leaseId])).startDeadline;
      await viem.assertions.revertWithCustomErrorWithArgs(s.market.write.activate([leaseId], { account: s.renter!.account }), s.market, "NotProvider", [
        leaseId,
        getAddress(s.renter!.account.address),
      ]);
      await networkHelpers.time.setNextBlockTimestamp(deadline + 1);
      await viem.assertions.revertWithCustomErrorWithArgs(s.market.write.activate([leaseId], { account: s.provider!.account }), s.market, "StartDeadlinePassed", [
        leaseId,
        deadline,
      ]);
    });
  });

  describe("accrual and claims", () => {
    it("accrues units x price per second and pays the provider what accrued, once", async () => {
      const s = await load();
      const { viem, networkHelpers } = connection;
      const { leaseId, activatedAt } = await openActive(s);
      // A claim pays what accrued until now - 600: the fault window's pay stays in escrow (a fault observed in it
      // takes it back), so 700 s in, 100 s are claimable.
      await networkHelpers.time.increaseTo(activatedAt + 700);
      assert.equal(await s.market.read.accrued([leaseId]), 2n * PRICE * 700n);
      assert.equal(await s.market.read.claimable([leaseId]), 2n * PRICE * 100n);
      await networkHelpers.time.setNextBlockTimestamp(activatedAt + 850);
      const before = await balance(s, s.provider!.account.address);
      await viem.assertions.emitWithArgs(s.market.write.claim([leaseId], { account: s.other!.account }), s.market, "LeaseClaimed", [
        leaseId,
        getAddress(s.provider!.account.address),
        2n * PRICE * 250n,
        0n,
      ]);
      assert.equal(await balance(s, s.provider!.account.address), before + 2n * PRICE * 250n);
      assert.equal(await s.market.read.claimable([leaseId]), 0n);
      await networkHelpers.time.setNextBlockTimestamp(activatedAt + 900);
      await s.market.write.claim([leaseId]);
      assert.equal(await balance(s, s.provider!.account.address), before + 2n * PRICE * 300n);
      const lease = await s.market.read.getLease([leaseId]);
      assert.equal(lease.paid, 2n * PRICE * 300n);
      assert.equal(await balance(s, s.market.address), DEPOSIT - lease.paid);
    });

    it("finalizes a lease past its end: everything paid, units and collateral released, Settled", async () => {
      const s = await load();
      const { viem, networkHelpers } = connection;
      const { leaseId, activatedAt } = await openActive(s);
      await networkHelpers.time.increaseTo(activatedAt + 5000);
      assert.equal(await s.market.read.accrued([leaseId]), DEPOSIT);
      const before = await balance(s, s.provider!.account.address);
      await viem.assertions.emitWithArgs(s.market.write.claim([leaseId]), s.market, "LeaseEnded", [leaseId, 5, activatedAt + 3600, DEPOSIT, 0n, 0n]);
      assert.equal(await balance(s, s.provider!.account.address), before + DEPOSIT);
      const lease = await readLease(s.publicClient, s.market.address, leaseId);
      assert.equal(lease.status, "Settled");
      assert.equal(lease.endReason, "Expired");
      assert.equal(lease.end, activatedAt + 3600);
      assert.equal((await s.registry.read.getMachine([1])).onDemandUnits, 0);
      const provider = await s.registry.read.getProvider([s.provider!.account.address]);
      assert.equal(provider.locked, 0n);
      assert.equal(provider.free, STAKE);
      assert.equal(provider.leasesCompleted, 1n);
      assert.equal(provider.unitSecondsDelivered, 2n * 3600n);
      assert.equal(await balance(s, s.market.address), 0n);
      await viem.assertions.revertWithCustomErrorWithArgs(s.market.write.claim([leaseId]), s.market, "InvalidLeaseStatus", [leaseId, 4]);
    });

    it("refuses to claim a lease that is not running", async () => {
      const s = await load();
      const { viem } = connection;
      const { leaseId } = await open(s);
      await viem.assertions.revertWithCustomErrorWithArgs(s.market.write.claim([leaseId]), s.market, "InvalidLeaseStatus", [leaseId, 1]);
      await viem.assertions.revertWithCustomErrorWithArgs(s.market.write.claim([42n]), s.market, "InvalidLeaseStatus", [42n, 0]);
    });

    it("says when nothing accrued since the last claim", async () => {
      // A chain that allows two blocks in the same second, so no time passes between the claims.
      const sameSecond = await network.create({ override: { allowBlocksWithSameTimestamp: true } });
      const s = await deploySuanli(sameSecond);
      const { leaseId } = await openActive(s);
      await sameSecond.networkHelpers.time.increase(610);
      await s.market.write.claim([leaseId]);
      await sameSecond.networkHelpers.time.setNextBlockTimestamp(await latest(s));
      await sameSecond.viem.assertions.revertWithCustomErrorWithArgs(s.market.write.claim([leaseId]), s.market, "NothingToClaim", [leaseId]);
    });

    it("takes the protocol fee for the treasury when governance sets one", async () => {
      const s = await load();
      const { viem, networkHelpers } = connection;
      await s.market.write.setParams([{ protocolFeeBps: 250, startPenaltyBps: 1_000, faultMinCreditBps: 2_000, preemptionNotice: 60, treasury: s.treasury!.account.address }]);
      const { leaseId, activatedAt } = await openActive(s);
      await networkHelpers.time.setNextBlockTimestamp(activatedAt + 1600);
      const before = await balance(s, s.provider!.account.address);
      const amount = 2n * PRICE * 1000n;
      const fee = (amount * 250n) / 10_000n;
      await viem.assertions.emitWithArgs(s.market.write.claim([leaseId]), s.market, "LeaseClaimed", [leaseId, getAddress(s.provider!.account.address), amount, fee]);
      assert.equal(await balance(s, s.provider!.account.address), before + amount - fee);
      assert.equal(await balance(s, s.treasury!.account.address), fee);
    });

    it("claims many leases of several providers in one transaction, skipping those with nothing to claim", async () => {
      const s = await load();
      const { viem, networkHelpers } = connection;
      await s.market.write.setParams([{ protocolFeeBps: 100, startPenaltyBps: 1_000, faultMinCreditBps: 2_000, preemptionNotice: 60, treasury: s.treasury!.account.address }]);
      const a = await openActive(s);
      const b = await openActive(s, { terms: { units: 1 } });
      const offer2 = await makeOffer(s, { provider: s.provider2!.account.address, machineId: 2, model: H100 });
      const c = await openActive(s, { offer: offer2 });
      const d = await open(s);
      const t = (await latest(s)) + 1100;
      await networkHelpers.time.setNextBlockTimestamp(t);
      const p1 = await balance(s, s.provider!.account.address);
      const p2 = await balance(s, s.provider2!.account.address);
      await s.market.write.claimMany([[a.leaseId, b.leaseId, c.leaseId, d.leaseId, 999n, a.leaseId]], { account: s.other!.account });
      // Each paid until t - 600 (the fault window's pay stays in escrow).
      const owedA = 2n * PRICE * BigInt(t - 600 - a.activatedAt);
      const owedB = 1n * PRICE * BigInt(t - 600 - b.activatedAt);
      const owedC = 2n * PRICE * BigInt(t - 600 - c.activatedAt);
      const net = (x: bigint) => x - (x * 100n) / 10_000n;
      assert.equal(await balance(s, s.provider!.account.address), p1 + net(owedA) + net(owedB));
      assert.equal(await balance(s, s.provider2!.account.address), p2 + net(owedC));
      assert.equal(await balance(s, s.treasury!.account.address), (owedA * 100n) / 10_000n + (owedB * 100n) / 10_000n + (owedC * 100n) / 10_000n);
      assert.equal((await s.market.read.getLease([a.leaseId])).paid, owedA);
      assert.equal((await s.market.read.getLease([d.leaseId])).paid, 0n);
      const tooMany = Array.from({ length: 65 }, (_, i) => BigInt(i + 1));
      await viem.assertions.revertWithCustomErrorWithArgs(s.market.write.claimMany([tooMany]), s.market, "BatchTooLarge", [65n, 64n]);
    });
  });

  describe("close by the renter", () => {
    it("refunds the whole deposit of an Open lease and frees its units and collateral", async () => {
      const s = await load();
      const { viem } = connection;
      const { leaseId } = await open(s);
      const before = await balance(s, s.renter!.account.address);
      const hash = s.market.write.close([leaseId], { account: s.renter!.account });
      await viem.assertions.emitWithArgs(hash, s.market, "LeaseEnded", [leaseId, 1, (await latest(s)) + 1, 0n, DEPOSIT, 0n]);
      assert.equal(await balance(s, s.renter!.account.address), before + DEPOSIT);
      const lease = await readLease(s.publicClient, s.market.address, leaseId);
      assert.equal(lease.status, "Cancelled");
      assert.equal(lease.endReason, "RenterClosed");
      assert.equal((await s.registry.read.getProvider([s.provider!.account.address])).locked, 0n);
      assert.equal((await s.registry.read.getMachine([1])).onDemandUnits, 0);
    });

    it("stops accrual of an Active lease, refunds the unaccrued deposit at once and leaves the rest to claim", async () => {
      const s = await load();
      const { viem, networkHelpers } = connection;
      const { leaseId, activatedAt } = await openActive(s);
      const t = activatedAt + 1000;
      await networkHelpers.time.setNextBlockTimestamp(t);
      const before = await balance(s, s.renter!.account.address);
      const accrued = 2n * PRICE * 1000n;
      await viem.assertions.emitWithArgs(s.market.write.close([leaseId], { account: s.renter!.account }), s.registry, "CapacityChanged", [1, 0, 0, 8]);
      assert.equal(await balance(s, s.renter!.account.address), before + DEPOSIT - accrued);
      let lease = await readLease(s.publicClient, s.market.address, leaseId);
      assert.deepEqual([lease.status, lease.endReason, lease.stopAt, lease.deposit, lease.claimable], ["Ended", "RenterClosed", t, accrued, accrued]);
      await networkHelpers.time.increase(500);
      assert.equal(await s.market.read.accrued([leaseId]), accrued);
      const providerBefore = await balance(s, s.provider!.account.address);
      await s.market.write.claim([leaseId]);
      assert.equal(await balance(s, s.provider!.account.address), providerBefore + accrued);
      lease = await readLease(s.publicClient, s.market.address, leaseId);
      assert.equal(lease.status, "Settled");
      assert.equal(await balance(s, s.market.address), 0n);
      await viem.assertions.revertWithCustomErrorWithArgs(s.market.write.close([leaseId], { account: s.renter!.account }), s.market, "InvalidLeaseStatus", [leaseId, 4]);
    });

    it("closes a lease past its end as expired, with nothing to refund", async () => {
      const s = await load();
      const { viem, networkHelpers } = connection;
      const { leaseId, activatedAt } = await openActive(s);
      await networkHelpers.time.increaseTo(activatedAt + 4000);
      await viem.assertions.emitWithArgs(s.market.write.close([leaseId], { account: s.renter!.account }), s.market, "LeaseEnded", [
        leaseId,
        5,
        activatedAt + 3600,
        DEPOSIT,
        0n,
        0n,
      ]);
    });

    it("is the renter's alone", async () => {
      const s = await load();
      const { viem } = connection;
      const { leaseId } = await openActive(s);
      await viem.assertions.revertWithCustomErrorWithArgs(s.market.write.close([leaseId], { account: s.provider!.account }), s.market, "NotRenter", [
        leaseId,
        getAddress(s.provider!.account.address),
      ]);
    });
  });
});

/**
 * Property test of the money and capacity rules. fast-check generates sequences of operations
 * (open with and without preemption, activate, claim, claimMany, close, complete, fault, terminate,
 * cancel, extend, shrink, settle, stake, unstake, withdraw, time jumps) by two providers, three
 * renters and three attestors. Each sequence starts from one snapshot of the chain. After every step
 * an independent model of the lease timelines and one read of every public view check:
 *
 * - the market holds exactly the sum over leases of (deposit - paid); the registry exactly the sum
 *   of stakes; no token appears or vanishes;
 * - no provider gains more than units x price x active time of its leases, nor loses more than
 *   their collateral; no renter pays more than that, nor gains more than the collateral; every
 *   running lease accrues exactly what the model computes;
 * - collateral locked equals the collateral of the running leases; the units the registry counts
 *   as used equal the units of the running leases and never exceed a machine's units;
 * - a lease only ends through an operation that may end it, at the time the rules give.
 */
import assert from "node:assert/strict";
import fc from "fast-check";
import { decodeFunctionResult, encodeFunctionData, getAddress, type Abi, type Address, type Hex } from "viem";
import { network } from "hardhat";
import { leaseMarketAbi, providerRegistryAbi } from "../../common/abi.js";
import { orderFaultSignatures, signFault, signOffer, signSettlement } from "../../common/chain/market.js";
import { suanliDomain, type Offer } from "../../common/eip712.js";
import { modelHash } from "../../common/gpu.js";
import { MARKET_ROLE, ATTESTOR_ROLE } from "./support/suanli.js";

const RUNS = 1_000;
const MIN_STEPS = 4;
const MAX_STEPS = 16;
const PRICE = 3n;
const NOTICE = 20;
const UNBONDING = 10;
const FEE_BPS = 100n;
const BPS = 10_000n;
const ZERO32 = `0x${"00".repeat(32)}` as const;
const LIVE = new Set([1, 2]); // Open, Active

type Op =
  | { kind: "open"; renter: number; machine: number; units: number; duration: number; interruptible: boolean; bid: number; preempt: boolean }
  | { kind: "activate" | "claim" | "close" | "complete" | "terminate" | "cancel"; lease: number }
  | { kind: "claimMany"; leases: number[] }
  | { kind: "fault"; lease: number; fraction: number; signers: number }
  | { kind: "extend"; lease: number; extra: number }
  | { kind: "shrink"; lease: number; units: number }
  | { kind: "settle"; lease: number; fraction: number }
  | { kind: "stake" | "unstake"; provider: number; fraction: number }
  | { kind: "withdraw"; provider: number }
  | { kind: "time"; seconds: number };

const leaseArb = fc.nat({ max: 1_000 });
const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 10, arbitrary: fc.record({ kind: fc.constant("open" as const), renter: fc.nat(2), machine: fc.nat(2), units: fc.integer({ min: 1, max: 4 }), duration: fc.integer({ min: 10, max: 400 }), interruptible: fc.boolean(), bid: fc.integer({ min: 1, max: 6 }), preempt: fc.boolean() }) },
  { weight: 8, arbitrary: fc.record({ kind: fc.constant("activate" as const), lease: leaseArb }) },
  { weight: 5, arbitrary: fc.record({ kind: fc.constant("time" as const), seconds: fc.oneof(fc.integer({ min: 1, max: 60 }), fc.integer({ min: 60, max: 500 })) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("claim" as const), lease: leaseArb }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("claimMany" as const), leases: fc.array(leaseArb, { maxLength: 5 }) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("close" as const), lease: leaseArb }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("complete" as const), lease: leaseArb }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("fault" as const), lease: leaseArb, fraction: fc.double({ min: 0, max: 1, noNaN: true }), signers: fc.integer({ min: 1, max: 3 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("terminate" as const), lease: leaseArb }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("cancel" as const), lease: leaseArb }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("extend" as const), lease: leaseArb, extra: fc.integer({ min: 1, max: 300 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("shrink" as const), lease: leaseArb, units: fc.nat(4) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("settle" as const), lease: leaseArb, fraction: fc.double({ min: 0, max: 1, noNaN: true }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("stake" as const), provider: fc.nat(1), fraction: fc.double({ min: 0, max: 1, noNaN: true }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("unstake" as const), provider: fc.nat(1), fraction: fc.double({ min: 0, max: 1, noNaN: true }) }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant("withdraw" as const), provider: fc.nat(1) }) },
);

/** The model's view of one lease: what the rules say it may earn, from the operations the test ran. */
type ModelLease = {
  id: bigint;
  provider: Address;
  renter: Address;
  machineId: number;
  interruptible: boolean;
  price: bigint;
  collateralBps: bigint;
  units: number;
  /** Seconds the deposit pays for from `segments.at(-1).from` (from activation while Open). */
  duration: number;
  deposit: bigint;
  maxCollateral: bigint;
  end?: number;
  segments: { from: number; units: number }[];
  live: boolean;
  /** When accrual stops by the rules, once ended. */
  stop?: number;
  /** A fault ended it; the provider may have been paid until `faultSubmittedAt` and repaid the excess from collateral. */
  faultSubmittedAt?: number;
  /**
   * What the provider keeps beyond `earnable` after a fault: the rules recover a payment for time after
   * observedAt from the lease's collateral only as far as that collateral reaches.
   */
  unrecoverable: bigint;
  /** It preempted another lease: closed by its renter, it owes at least the notice period (`minimum`). */
  preemptor: boolean;
  minimum?: bigint;
};

function earnable(lease: ModelLease, at: number): bigint {
  const limit = Math.min(at, lease.stop ?? Infinity, lease.end ?? Infinity);
  let total = 0n;
  lease.segments.forEach((segment, i) => {
    const segmentEnd = Math.min(lease.segments[i + 1]?.from ?? Infinity, limit);
    if (segmentEnd > segment.from) total += BigInt(segment.units) * lease.price * BigInt(segmentEnd - segment.from);
  });
  return lease.minimum !== undefined && lease.minimum > total ? lease.minimum : total;
}

/** What the renter is committed to pay: through the stop of an ended lease (a preemption notice runs ahead). */
function committed(lease: ModelLease, at: number): bigint {
  return earnable(lease, lease.live ? at : Math.max(at, lease.stop ?? at));
}

function collateralOf(lease: ModelLease): bigint {
  return (lease.deposit * lease.collateralBps) / BPS;
}

describe("LeaseMarket property: money in = money out, nobody overpaid, no unit leased twice", function () {
  this.timeout(600_000);

  it(`holds over ${RUNS} random operation sequences`, async () => {
    const connection = await network.create();
    const { viem, provider: rpc } = connection;
    const publicClient = await viem.getPublicClient();
    const wallets = await viem.getWalletClients();
    const [governance, p1, p2, r1, r2, r3, a1, a2, a3, treasury] = wallets;
    const providers = [p1, p2];
    const renters = [r1, r2, r3];
    const attestors = [a1, a2, a3];

    const token = await viem.deployContract("TestToken");
    const registry = await viem.deployContract("ProviderRegistry", [token.address, governance.account.address, UNBONDING, 2]);
    const extension = await viem.deployContract("LeaseMarketExtension", [registry.address]);
    const market = await viem.deployContract("LeaseMarket", [
      registry.address,
      extension.address,
      { protocolFeeBps: Number(FEE_BPS), startPenaltyBps: 1_000, faultMinCreditBps: 2_000, preemptionNotice: NOTICE, treasury: treasury.account.address },
    ]);
    const lens = await viem.deployContract("SuanliLens");
    await registry.write.grantRole([MARKET_ROLE, market.address]);
    for (const a of attestors) await registry.write.grantRole([ATTESTOR_ROLE, a.account.address]);
    const maxUint = 2n ** 256n - 1n;
    const stakes = [30_000n, 10_000n];
    for (const [i, p] of providers.entries()) {
      await token.write.faucet([p.account.address, stakes[i] + 50_000n]);
      await token.write.approve([registry.address, maxUint], { account: p.account });
      await registry.write.register([`peer-${i}`, ""], { account: p.account });
      await registry.write.stake([stakes[i]], { account: p.account });
    }
    // Small machines, so leases compete for units; collateral 50 %, 200 % and none.
    const machines = [
      { id: 1, owner: p1, units: 4, bps: 5_000 },
      { id: 2, owner: p1, units: 2, bps: 20_000 },
      { id: 3, owner: p2, units: 4, bps: 0 },
    ];
    for (const m of machines) await registry.write.addMachine([modelHash("L4-24GB"), m.units, 23_034, 0, "eu", ZERO32], { account: m.owner.account });
    for (const r of renters) {
      await token.write.faucet([r.account.address, 1_000_000n]);
      await token.write.approve([market.address, maxUint], { account: r.account });
    }
    const chainId = await publicClient.getChainId();
    const domain = suanliDomain(chainId, market.address);
    const startTime = Number((await publicClient.getBlock()).timestamp);
    const offers: { offer: Offer; signature: Hex }[] = [];
    for (const m of machines) {
      const offer: Offer = {
        provider: getAddress(m.owner.account.address),
        machineId: m.id,
        model: modelHash("L4-24GB"),
        pricePerUnitSecond: PRICE,
        minBidPerUnitSecond: 1n,
        minDuration: 10,
        maxDuration: 1_500,
        collateralBps: m.bps,
        startWindow: 200,
        nonce: BigInt(m.id),
        expiry: startTime + 10_000_000,
        renter: "0x0000000000000000000000000000000000000000",
      };
      offers.push({ offer, signature: await signOffer(m.owner, domain, offer) });
    }

    const holders = [governance, ...providers, ...renters, ...attestors, treasury].map((w) => getAddress(w.account.address));
    const accounts = [...holders, getAddress(market.address), getAddress(registry.address)];
    const providerAddresses = providers.map((p) => getAddress(p.account.address));

    async function snapshot() {
      const data = await rpc.request({
        method: "eth_call",
        params: [{ to: lens.address, data: encodeFunctionData({ abi: lens.abi, functionName: "snapshot", args: [market.address, accounts, providerAddresses, machines.map((m) => m.id)] }) }, "latest"],
      });
      return decodeFunctionResult({ abi: lens.abi, functionName: "snapshot", data: data as Hex });
    }
    type Snapshot = Awaited<ReturnType<typeof snapshot>>;

    const initial = await snapshot();
    const balanceAt = (s: Snapshot, who: Address) => s.balances[accounts.indexOf(getAddress(who))];
    const initialWealth = providerAddresses.map((p, i) => balanceAt(initial, p) + initial.providers[i].stake);
    const initialRenter = renters.map((r) => balanceAt(initial, r.account.address));
    const startBlock = Number((await publicClient.getBlock()).timestamp);

    const stats = { steps: 0, succeeded: 0, byKind: new Map<string, number>(), endings: new Map<number, number>() };

    async function send(from: Address, to: Address, abi: Abi, functionName: string, args: readonly unknown[], at: number): Promise<boolean> {
      await rpc.request({ method: "evm_setNextBlockTimestamp", params: [at] });
      try {
        await rpc.request({ method: "eth_sendTransaction", params: [{ from, to, data: encodeFunctionData({ abi, functionName, args } as never), gas: "0xf4240" }] });
        return true;
      } catch (error) {
        // Reverts are expected (invalid targets, wrong states, short units or stake); anything else is a bug in the test.
        if (!/reverted|VM Exception/.test((error as Error).message)) throw error;
        return false;
      }
    }

    async function runSequence(ops: Op[]) {
      let now = startBlock;
      let previous = initial;
      const model: ModelLease[] = [];
      // Mostly a lease in a state the operation accepts (LeaseStatus numbers), one time in five any lease,
      // so both the effects and the rejections are exercised.
      const pick = (n: number, statuses: number[] = []) => {
        const fitting = model.filter((l) => statuses.includes(previous.leases[Number(l.id) - 1]?.status ?? 0));
        const pool = n % 5 === 0 || fitting.length === 0 ? model : fitting;
        return pool.length ? pool[Math.floor(n / 5) % pool.length] : undefined;
      };
      const preferred: Record<string, number[]> = {
        activate: [1],
        claim: [2, 3],
        close: [1, 2],
        complete: [2],
        fault: [2],
        terminate: [1, 2],
        cancel: [1],
        extend: [1, 2],
        shrink: [1, 2],
        settle: [1, 2, 3],
      };

      for (const op of ops) {
        stats.steps++;
        now += op.kind === "time" ? op.seconds : 1;
        let ok = false;
        // Leases this operation may end, with the stop the rules give them.
        const mayEnd = new Map<bigint, (lease: ModelLease) => number | undefined>();
        const stopNow = (lease: ModelLease) => (lease.segments.length ? Math.min(now, lease.end!) : undefined);
        const m = "lease" in op ? pick(op.lease, preferred[op.kind]) : undefined;
        const leaseView = m ? previous.leases[Number(m.id) - 1] : undefined;

        switch (op.kind) {
          case "time":
            await rpc.request({ method: "evm_mine", params: [now] });
            ok = true;
            break;
          case "open": {
            const machine = machines[op.machine];
            const { offer, signature } = offers[op.machine];
            const price = op.interruptible ? BigInt(op.bid) : PRICE;
            const preempt = op.preempt
              ? model
                  .filter((l) => l.live && l.machineId === machine.id && (l.interruptible || (l.end !== undefined && l.end <= now)))
                  .sort((a, b) => (a.price < b.price ? -1 : 1))
                  .map((l) => l.id)
              : [];
            for (const id of preempt) {
              mayEnd.set(id, (lease) => {
                if (!lease.segments.length) return undefined;
                if (lease.end! <= now) return lease.end;
                return Math.min(now + NOTICE, lease.end!);
              });
            }
            const renter = renters[op.renter];
            const terms = { units: op.units, duration: op.duration, maxPricePerUnitSecond: 10n, interruptible: op.interruptible, bidPerUnitSecond: BigInt(op.bid), preempt };
            ok = await send(renter.account.address, market.address, leaseMarketAbi, "openLease", [offer, signature, terms], now);
            if (ok) {
              const deposit = BigInt(op.units) * price * BigInt(op.duration);
              model.push({
                id: BigInt(previous.leases.length + 1),
                provider: offer.provider,
                renter: getAddress(renter.account.address),
                machineId: machine.id,
                interruptible: op.interruptible,
                price,
                collateralBps: BigInt(machine.bps),
                units: op.units,
                duration: op.duration,
                deposit,
                maxCollateral: (deposit * BigInt(machine.bps)) / BPS,
                segments: [],
                live: true,
                unrecoverable: 0n,
                preemptor: false,
              });
            }
            break;
          }
          case "activate":
            if (!m) break;
            ok = await send(m.provider, market.address, leaseMarketAbi, "activate", [m.id], now);
            if (ok) {
              m.end = now + m.duration;
              m.segments.push({ from: now, units: m.units });
            }
            break;
          case "claim":
            if (!m) break;
            mayEnd.set(m.id, (lease) => lease.end);
            ok = await send(getAddress(r3.account.address), market.address, leaseMarketAbi, "claim", [m.id], now);
            break;
          case "claimMany": {
            const ids = op.leases.map((n) => pick(n, [2, 3])).filter((l): l is ModelLease => l !== undefined);
            for (const l of ids) mayEnd.set(l.id, (lease) => lease.end);
            ok = await send(getAddress(governance.account.address), market.address, leaseMarketAbi, "claimMany", [ids.map((l) => l.id)], now);
            break;
          }
          case "close":
            if (!m) break;
            mayEnd.set(m.id, stopNow);
            ok = await send(m.renter, market.address, leaseMarketAbi, "close", [m.id], now);
            break;
          case "complete":
            if (!m) break;
            mayEnd.set(m.id, stopNow);
            ok = await send(m.provider, market.address, leaseMarketAbi, "complete", [m.id, 0, ZERO32, 1n], now);
            break;
          case "terminate":
            if (!m) break;
            mayEnd.set(m.id, stopNow);
            ok = await send(m.provider, market.address, leaseMarketAbi, "terminate", [m.id], now);
            break;
          case "cancel":
            if (!m) break;
            mayEnd.set(m.id, () => undefined);
            ok = await send(getAddress(r1.account.address), market.address, leaseMarketAbi, "cancel", [m.id], now);
            break;
          case "fault": {
            if (!m || !leaseView || leaseView.status !== 2) break;
            const from = leaseView.activatedAt;
            const observedAt = from + Math.floor(op.fraction * Math.max(0, Math.min(now, leaseView.end - 1) - from));
            const fault = { leaseId: m.id, kind: 1, observedAt };
            const signed = await Promise.all(attestors.slice(0, op.signers).map(async (a) => ({ signer: a.account.address, signature: await signFault(a, domain, fault) })));
            mayEnd.set(m.id, () => observedAt);
            ok = await send(getAddress(r2.account.address), market.address, leaseMarketAbi, "submitFault", [fault, orderFaultSignatures(signed)], now);
            if (ok) {
              m.faultSubmittedAt = now;
              const current = m.segments.at(-1)!;
              const accruedAtFault = BigInt(current.units) * m.price * BigInt(observedAt - current.from);
              const overpaid = leaseView.paid > accruedAtFault ? leaseView.paid - accruedAtFault : 0n;
              m.unrecoverable = overpaid > collateralOf(m) ? overpaid - collateralOf(m) : 0n;
            }
            break;
          }
          case "extend": {
            if (!m) break;
            const { offer, signature } = offers[m.machineId - 1];
            ok = await send(m.renter, market.address, leaseMarketAbi, "extend", [m.id, op.extra, offer, signature], now);
            if (ok) {
              m.duration += op.extra;
              if (m.end !== undefined) m.end += op.extra;
              m.deposit += BigInt(m.units) * m.price * BigInt(op.extra);
              if (collateralOf(m) > m.maxCollateral) m.maxCollateral = collateralOf(m);
            }
            break;
          }
          case "shrink":
            if (!m) break;
            ok = await send(m.renter, market.address, leaseMarketAbi, "shrink", [m.id, op.units], now);
            if (ok) {
              // Shrinking is allowed once a preemptor paid its notice; the minimum no longer applies.
              m.preemptor = false;
              m.units = op.units;
              if (m.segments.length) {
                m.segments.push({ from: now, units: op.units });
                m.duration = m.end! - now;
              }
              m.deposit = BigInt(m.units) * m.price * BigInt(m.duration);
            }
            break;
          case "settle": {
            if (!m || !leaseView) break;
            const { paid, accrued } = leaseView;
            // The renter only agrees to what accrued: the metered bound keeps holding.
            const providerAmount = paid + BigInt(Math.floor(op.fraction * Number(accrued > paid ? accrued - paid : 0n)));
            const settlement = { leaseId: m.id, providerAmount, deadline: now + 100 };
            const renterWallet = renters.find((r) => getAddress(r.account.address) === m.renter)!;
            const providerWallet = providers.find((p) => getAddress(p.account.address) === m.provider)!;
            mayEnd.set(m.id, stopNow);
            ok = await send(getAddress(governance.account.address), market.address, leaseMarketAbi, "settle", [
              settlement,
              await signSettlement(renterWallet, domain, settlement),
              await signSettlement(providerWallet, domain, settlement),
            ], now);
            break;
          }
          case "stake": {
            const p = providers[op.provider];
            const wallet = balanceAt(previous, p.account.address);
            const amount = BigInt(Math.max(1, Math.floor(op.fraction * Number(wallet))));
            ok = await send(getAddress(p.account.address), registry.address, providerRegistryAbi, "stake", [amount], now);
            break;
          }
          case "unstake": {
            const p = previous.providers[op.provider];
            ok = await send(providerAddresses[op.provider], registry.address, providerRegistryAbi, "requestUnstake", [BigInt(Math.ceil(op.fraction * Number(p.free)))], now);
            break;
          }
          case "withdraw":
            ok = await send(providerAddresses[op.provider], registry.address, providerRegistryAbi, "withdraw", [], now);
            break;
        }
        if (ok) {
          stats.succeeded++;
          stats.byKind.set(op.kind, (stats.byKind.get(op.kind) ?? 0) + 1);
        }

        const snap = await snapshot();
        const T = Number(snap.timestamp);
        const where = `after ${JSON.stringify(op)} (${ok ? "succeeded" : "reverted"}) at ${T}`;

        // Leases that stopped running in this step: only the targeted ones, at the time the rules give.
        let preempted = false;
        for (const lease of model) {
          const view = snap.leases[Number(lease.id) - 1];
          if (lease.live && !LIVE.has(view.status)) {
            const rule = mayEnd.get(lease.id);
            assert.ok(ok && rule, `lease ${lease.id} ended ${where}`);
            lease.live = false;
            if (view.endReason === 4) preempted = true;
            // A preemptor closed by its renter owes at least min(notice, duration) of its units x price.
            if (lease.preemptor && view.endReason === 1) {
              const notice = BigInt(lease.units) * lease.price * BigInt(NOTICE);
              lease.minimum = notice < lease.deposit ? notice : lease.deposit;
            }
            lease.stop = rule(lease) ?? now;
            stats.endings.set(view.endReason, (stats.endings.get(view.endReason) ?? 0) + 1);
            if (lease.segments.length) assert.equal(view.stopAt, lease.stop, `stopAt of lease ${lease.id} ${where}`);
          }
          assert.equal(LIVE.has(view.status), lease.live, `lease ${lease.id} live ${where}`);
        }
        if (op.kind === "open" && ok && preempted) model.at(-1)!.preemptor = true;

        // Money: contracts hold exactly what they owe; nothing is created or lost.
        const owed = snap.leases.reduce((sum, l) => sum + l.deposit - l.paid, 0n);
        assert.equal(balanceAt(snap, market.address), owed, `market balance ${where}`);
        assert.equal(balanceAt(snap, registry.address), snap.providers.reduce((sum, p) => sum + p.stake, 0n), `registry balance ${where}`);
        assert.equal(snap.balances.reduce((a, b) => a + b, 0n), snap.totalSupply, `token conservation ${where}`);

        for (const lease of model) {
          const view = snap.leases[Number(lease.id) - 1];
          assert.ok(view.paid <= view.accrued && view.accrued <= view.deposit, `paid <= accrued <= deposit for lease ${lease.id} ${where}`);
          if (lease.live) {
            assert.equal(view.units, lease.units, `units of lease ${lease.id} ${where}`);
            assert.equal(view.deposit, lease.deposit, `deposit of lease ${lease.id} ${where}`);
            assert.equal(view.collateral, collateralOf(lease), `collateral of lease ${lease.id} ${where}`);
            if (lease.segments.length) {
              const current = lease.segments.at(-1)!;
              assert.equal(view.end, lease.end, `end of lease ${lease.id} ${where}`);
              assert.equal(view.activatedAt, current.from, `metering start of lease ${lease.id} ${where}`);
              const expected = BigInt(current.units) * lease.price * BigInt(Math.max(0, Math.min(T, lease.end!) - current.from));
              assert.equal(view.accrued, expected, `accrued of lease ${lease.id} ${where}`);
            } else {
              assert.equal(view.accrued, 0n, `an unstarted lease accrues nothing ${where}`);
            }
          } else {
            // Once ended, `deposit` is the provider's final total: never above what the rules allow.
            const bound = lease.faultSubmittedAt !== undefined ? earnable({ ...lease, stop: lease.faultSubmittedAt }, T) : committed(lease, T);
            if (lease.segments.length === 0) assert.equal(view.deposit, lease.minimum ?? 0n, `an unstarted lease pays nothing (a preemptor its notice) ${where}`);
            else assert.ok(view.deposit <= bound, `final total ${view.deposit} > ${bound} for lease ${lease.id} ${where}`);
          }
        }

        // Nobody is paid more than the rules allow.
        providerAddresses.forEach((address, i) => {
          const mine = model.filter((l) => l.provider === address);
          const gain = balanceAt(snap, address) + snap.providers[i].stake - initialWealth[i];
          const maxGain = mine.reduce((sum, l) => sum + earnable(l, T) + l.unrecoverable, 0n);
          const maxLoss = mine.reduce((sum, l) => sum + l.maxCollateral, 0n);
          assert.ok(gain <= maxGain, `provider ${i} gained ${gain} > ${maxGain} ${where}`);
          assert.ok(-gain <= maxLoss, `provider ${i} lost ${-gain} > collateral ${maxLoss} ${where}`);
          // Collateral locked is exactly that of its running leases.
          const locked = snap.leases.filter((l) => getAddress(l.provider) === address && LIVE.has(l.status)).reduce((sum, l) => sum + l.collateral, 0n);
          assert.equal(snap.providers[i].locked, locked, `provider ${i} locked ${where}`);
        });
        renters.forEach((r, i) => {
          const address = getAddress(r.account.address);
          const mine = model.filter((l) => l.renter === address);
          const refundable = mine.filter((l) => l.live).reduce((sum, l) => {
            const view = snap.leases[Number(l.id) - 1];
            return sum + view.deposit - view.accrued;
          }, 0n);
          const cost = initialRenter[i] - balanceAt(snap, address) - refundable;
          const maxCost = mine.reduce((sum, l) => sum + committed(l, T) + l.unrecoverable, 0n);
          const maxCredit = mine.reduce((sum, l) => sum + l.maxCollateral, 0n);
          assert.ok(cost <= maxCost, `renter ${i} paid ${cost} > ${maxCost} ${where}`);
          assert.ok(-cost <= maxCredit, `renter ${i} gained ${-cost} > collateral ${maxCredit} ${where}`);
        });

        // No unit is leased twice.
        machines.forEach((machine, i) => {
          const view = snap.machines[i];
          const running = snap.leases.filter((l) => l.machineId === machine.id && LIVE.has(l.status));
          const onDemand = running.filter((l) => !l.interruptible).reduce((sum, l) => sum + l.units, 0);
          const interruptible = running.filter((l) => l.interruptible).reduce((sum, l) => sum + l.units, 0);
          assert.equal(view.onDemandUnits, onDemand, `on-demand units of machine ${machine.id} ${where}`);
          assert.equal(view.interruptibleUnits, interruptible, `interruptible units of machine ${machine.id} ${where}`);
          assert.ok(onDemand + interruptible <= machine.units, `machine ${machine.id} over-leased ${where}`);
        });
        previous = snap;
      }
    }

    let snapshotId = (await rpc.request({ method: "evm_snapshot", params: [] })) as string;
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { minLength: MIN_STEPS, maxLength: MAX_STEPS }), async (ops) => {
        try {
          await runSequence(ops);
        } finally {
          await rpc.request({ method: "evm_revert", params: [snapshotId] });
          snapshotId = (await rpc.request({ method: "evm_snapshot", params: [] })) as string;
        }
      }),
      { numRuns: RUNS },
    );
    // The generator must reach every operation for the property to mean something.
    for (const kind of ["open", "activate", "claim", "claimMany", "close", "complete", "fault", "terminate", "cancel", "extend", "shrink", "settle", "stake", "unstake", "withdraw", "time"]) {
      assert.ok((stats.byKind.get(kind) ?? 0) > 0, `no ${kind} ever succeeded`);
    }
    // And every way a lease can end must have happened.
    const reasons = ["", "RenterClosed", "Completed", "Faulted", "Preempted", "Expired", "Terminated", "MissedStart", "CoSigned"];
    for (let reason = 1; reason < reasons.length; reason++) {
      assert.ok((stats.endings.get(reason) ?? 0) > 0, `no lease ever ended as ${reasons[reason]}`);
    }
    const summary = [...stats.byKind.entries()].map(([k, v]) => `${k} ${v}`).join(", ");
    const endings = [...stats.endings.entries()].map(([k, v]) => `${reasons[k]} ${v}`).join(", ");
    console.log(`      ${RUNS} sequences, ${stats.steps} steps, ${stats.succeeded} succeeded (${summary}); leases ended: ${endings}`);
  });
});

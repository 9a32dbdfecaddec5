/**
 * The chaos suite's money check (checkLedger) against a real devnet: a lease that preempted another
 * and was closed before its preemption notice ran out owes the notice (LeaseMarket._preemptorMinimum),
 * capped by the deposit it had booked, not by the time it ran. A CI soak once reported such a lease
 * as "provider total 300 beyond the 200 metered": the check read the ended lease's view, whose
 * duration is only the time it ran.
 * A held completion (issue #34: its last fault window of pay stays in escrow until the releasing claim) is money
 * escrowed for the provider, not lost; still held past the window and the grace, it is stuck.
 */
import assert from "node:assert/strict";
import type { Address } from "viem";
import { leaseMarketAbi, testTokenAbi } from "../../common/abi.js";
import { signOffer } from "../../common/chain/sign.js";
import { devnetAccount } from "../../common/devnet.js";
import { ANY_RENTER, suanliDomain, type Offer } from "../../common/eip712.js";
import { modelHash } from "../../common/gpu.js";
import { checkLedger } from "../support/chaos.js";
import type { ChainClients } from "../../node/chain/clients.js";
import { advanceChain, fund, registerProvider, send, startDevnet, type Devnet } from "../support/devnet.js";

type Wallet = Required<ChainClients>;

const NOTICE = 30;
const PRICE = 100n;

describe("chaos money check: a preemptor closed within its notice, a held completion", function () {
  this.timeout(60_000);
  let devnet: Devnet;
  let market: Address;
  let provider: Wallet;
  let machineId: number;
  let open: (renterIndex: number, terms: { interruptible: boolean; bidPerUnitSecond: bigint; preempt: bigint[] }) => Promise<{ renter: Wallet; leaseId: bigint }>;
  before(async () => {
    devnet = await startDevnet({ params: { preemptionNotice: NOTICE } });
    market = devnet.deployment.contracts.market!;
    provider = await devnet.wallet(1);
    [machineId] = (await registerProvider(devnet, provider, {
      peerId: "12D3KooWpreemptorledgercheck",
      stake: 10_000_000n,
      machines: [{ model: "A100-80GB", units: 1, vramMiB: 81_920 }],
    })) as [number];
    const now = Number((await devnet.admin.publicClient.getBlock()).timestamp);
    const offer: Offer = {
      provider: provider.account.address,
      machineId,
      model: modelHash("A100-80GB"),
      pricePerUnitSecond: PRICE,
      minBidPerUnitSecond: 10n,
      minDuration: 1,
      maxDuration: 86_400,
      collateralBps: 1_000,
      startWindow: 600,
      nonce: 0n,
      expiry: now + 36_000,
      renter: ANY_RENTER,
    };
    const signature = await signOffer(devnetAccount(1), suanliDomain(devnet.deployment.chainId, market), offer);
    open = async (renterIndex, terms) => {
      const renter = await devnet.wallet(renterIndex);
      await fund(devnet, renter, 1_000_000n);
      await send(renter, { address: devnet.deployment.contracts.token, abi: testTokenAbi, functionName: "approve", args: [market, 1_000_000n] });
      const args = [offer, signature, { units: 1, duration: 600, maxPricePerUnitSecond: PRICE, ...terms }] as const;
      const { result: leaseId } = await renter.publicClient.simulateContract({ account: renter.account, address: market, abi: leaseMarketAbi, functionName: "openLease", args });
      await send(renter, { address: market, abi: leaseMarketAbi, functionName: "openLease", args });
      await send(provider, { address: market, abi: leaseMarketAbi, functionName: "activate", args: [leaseId] });
      return { renter, leaseId };
    };
  });
  after(async () => {
    await devnet?.close();
  });

  it("owes the notice period, capped by the deposit it booked, and the check accepts it", async () => {
    const victim = await open(5, { interruptible: true, bidPerUnitSecond: 20n, preempt: [] });
    const preemptor = await open(6, { interruptible: false, bidPerUnitSecond: 0n, preempt: [victim.leaseId] });
    await send(preemptor.renter, { address: market, abi: leaseMarketAbi, functionName: "close", args: [preemptor.leaseId] });

    const report = await checkLedger(devnet, { wallets: [], capacity: new Map([[machineId, 1]]) });
    const closed = report.leases.find((lease) => lease.leaseId === preemptor.leaseId)!;
    assert.equal(closed.endReason, "RenterClosed");
    // It ran a second or two, and pays the whole notice: more than it ran, as the contract says.
    assert.equal(closed.deposit, PRICE * BigInt(NOTICE));
    assert.ok(closed.stopAt - closed.activatedAt < NOTICE, `ran ${closed.stopAt - closed.activatedAt} s`);
    assert.deepEqual(report.violations, []);
  });

  it("counts a held completion's unpaid window as escrowed for its provider, and as stuck once nobody releases it", async () => {
    // After the first case: the machine's unit is free again (the preemptor was closed).
    const lease = await open(7, { interruptible: false, bidPerUnitSecond: 0n, preempt: [] });
    await advanceChain(devnet, 5);
    await send(provider, { address: market, abi: leaseMarketAbi, functionName: "complete", args: [lease.leaseId, 0, `0x${"00".repeat(32)}`, 1n] });
    const held = await checkLedger(devnet, { wallets: [], capacity: new Map([[machineId, 1]]) });
    const view = held.leases.find((l) => l.leaseId === lease.leaseId)!;
    // Settled with nothing paid yet: the provider's total stays in escrow until the releasing claim (issue #34).
    assert.deepEqual([view.status, view.endReason, view.paid], ["Settled", "Completed", 0n]);
    assert.ok(view.deposit > 0n);
    assert.deepEqual(held.violations, []);
    assert.equal(held.marketDrift, 0n);

    // Nobody releases it: past the window and the grace, the check says the pay was left behind.
    await advanceChain(devnet, 600 + 31);
    const forgotten = await checkLedger(devnet, { wallets: [], capacity: new Map([[machineId, 1]]) });
    assert.deepEqual(forgotten.stuck, [lease.leaseId]);
    assert.match(
      forgotten.violations.join("\n"),
      new RegExp(`lease ${lease.leaseId} is still held \\d+ s past its fault window \\(${view.deposit} of its provider's pay not released\\)`),
    );

    // The releasing claim pays the provider its total: nothing held, nothing stuck, nothing lost.
    await send(provider, { address: market, abi: leaseMarketAbi, functionName: "claim", args: [lease.leaseId] });
    const released = await checkLedger(devnet, { wallets: [], capacity: new Map([[machineId, 1]]) });
    const after = released.leases.find((l) => l.leaseId === lease.leaseId)!;
    assert.deepEqual([after.paid, after.collateral], [view.deposit, 0n]);
    assert.deepEqual(released.violations, []);
  });
});

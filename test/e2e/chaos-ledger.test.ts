/**
 * The chaos suite's money check (checkLedger) against a real devnet: a lease that preempted another
 * and was closed before its preemption notice ran out owes the notice (LeaseMarket._preemptorMinimum),
 * capped by the deposit it had booked, not by the time it ran. A CI soak once reported such a lease
 * as "provider total 300 beyond the 200 metered": the check read the ended lease's view, whose
 * duration is only the time it ran.
 */
import assert from "node:assert/strict";
import { leaseMarketAbi, testTokenAbi } from "../../common/abi.js";
import { signOffer } from "../../common/chain/sign.js";
import { devnetAccount } from "../../common/devnet.js";
import { ANY_RENTER, suanliDomain, type Offer } from "../../common/eip712.js";
import { modelHash } from "../../common/gpu.js";
import { checkLedger } from "../support/chaos.js";
import { fund, registerProvider, send, startDevnet, type Devnet } from "../support/devnet.js";

const NOTICE = 30;
const PRICE = 100n;

describe("chaos money check: a preemptor closed within its notice", function () {
  this.timeout(60_000);
  let devnet: Devnet;
  before(async () => {
    devnet = await startDevnet({ params: { preemptionNotice: NOTICE } });
  });
  after(async () => {
    await devnet?.close();
  });

  it("owes the notice period, capped by the deposit it booked, and the check accepts it", async () => {
    const market = devnet.deployment.contracts.market!;
    const provider = await devnet.wallet(1);
    const [machineId] = await registerProvider(devnet, provider, {
      peerId: "12D3KooWpreemptorledgercheck",
      stake: 10_000_000n,
      machines: [{ model: "A100-80GB", units: 1, vramMiB: 81_920 }],
    });
    const now = Number((await devnet.admin.publicClient.getBlock()).timestamp);
    const offer: Offer = {
      provider: provider.account.address,
      machineId: machineId!,
      model: modelHash("A100-80GB"),
      pricePerUnitSecond: PRICE,
      minBidPerUnitSecond: 10n,
      minDuration: 1,
      maxDuration: 86_400,
      collateralBps: 1_000,
      startWindow: 600,
      nonce: 0n,
      expiry: now + 3_600,
      renter: ANY_RENTER,
    };
    const signature = await signOffer(devnetAccount(1), suanliDomain(devnet.deployment.chainId, market), offer);
    const open = async (renterIndex: number, terms: { interruptible: boolean; bidPerUnitSecond: bigint; preempt: bigint[] }) => {
      const renter = await devnet.wallet(renterIndex);
      await fund(devnet, renter, 1_000_000n);
      await send(renter, { address: devnet.deployment.contracts.token, abi: testTokenAbi, functionName: "approve", args: [market, 1_000_000n] });
      const args = [offer, signature, { units: 1, duration: 600, maxPricePerUnitSecond: PRICE, ...terms }] as const;
      const { result: leaseId } = await renter.publicClient.simulateContract({ account: renter.account, address: market, abi: leaseMarketAbi, functionName: "openLease", args });
      await send(renter, { address: market, abi: leaseMarketAbi, functionName: "openLease", args });
      await send(provider, { address: market, abi: leaseMarketAbi, functionName: "activate", args: [leaseId] });
      return { renter, leaseId };
    };
    const victim = await open(5, { interruptible: true, bidPerUnitSecond: 20n, preempt: [] });
    const preemptor = await open(6, { interruptible: false, bidPerUnitSecond: 0n, preempt: [victim.leaseId] });
    await send(preemptor.renter, { address: market, abi: leaseMarketAbi, functionName: "close", args: [preemptor.leaseId] });

    const report = await checkLedger(devnet, { wallets: [], capacity: new Map([[machineId!, 1]]) });
    const closed = report.leases.find((lease) => lease.leaseId === preemptor.leaseId)!;
    assert.equal(closed.endReason, "RenterClosed");
    // It ran a second or two, and pays the whole notice: more than it ran, as the contract says.
    assert.equal(closed.deposit, PRICE * BigInt(NOTICE));
    assert.ok(closed.stopAt - closed.activatedAt < NOTICE, `ran ${closed.stopAt - closed.activatedAt} s`);
    assert.deepEqual(report.violations, []);
  });
});

/**
 * Issue #34 finding 5: reputation must cost what it claims to measure. A provider renting its own idle units to
 * itself as interruptible at a bid of 1 base unit (real renters still preempt it) used to gain a completion and
 * every unit-second at zero net cost. Interruptible leases now add no unit-seconds and no completion (their faults
 * still count); what remains countable is on-demand time, which a real renter cannot take back, so each counted
 * unit-second is one the machine could not sell (docs/contracts.md "Reputation").
 * Fixture: machine 1 has 8 A100 units; the provider's public offer sells on demand at 100 per unit-second.
 */
import assert from "node:assert/strict";
import { COMPLETION_HOLD_SECONDS, readLease } from "../../common/chain/market.js";
import { FaultKind } from "../../common/eip712.js";
import {
  DEFAULT_PARAMS,
  PRICE,
  balance,
  connect,
  deploySuanli,
  faultSignatures,
  latest,
  makeOffer,
  openActive,
  sign,
  terms,
  type Connection,
  type Suanli,
} from "./support/suanli.js";

const HOUR = 3600;

describe("LeaseMarket: reputation farming (issue #34 finding 5)", () => {
  let connection: Connection;
  before(async () => {
    connection = await connect();
  });
  async function suanliFixture() {
    const s = await deploySuanli(connection);
    await s.token.write.faucet([s.provider!.account.address, 10_000_000n]);
    return s;
  }
  async function feeFixture() {
    const s = await suanliFixture();
    await s.market.write.setParams([{ ...DEFAULT_PARAMS, protocolFeeBps: 100, treasury: s.treasury!.account.address }]);
    return s;
  }
  const load = () => connection.networkHelpers.loadFixture(suanliFixture);
  const at = (t: number) => connection.networkHelpers.time.setNextBlockTimestamp(t);
  const reputation = async (s: Suanli) => {
    const p = await s.registry.read.getProvider([s.provider!.account.address]);
    return [p.leasesCompleted, p.unitSecondsDelivered, p.faults];
  };
  const selfBid = (units = 8) => ({ units, duration: HOUR, interruptible: true, bidPerUnitSecond: 1n });

  it("a provider renting all 8 idle units to itself at a bid of 1 gains no completion and no unit-second", async () => {
    const s = await load();
    const self = s.provider;
    const before = await balance(s, self!.account.address);
    // Its public offer (on demand at 100, interruptible from 1): the attacker bids the floor for a full hour.
    const offer = await makeOffer(s, { minBidPerUnitSecond: 1n });
    const farm = await openActive(s, { offer, renter: self, terms: selfBid() });
    await connection.networkHelpers.time.increaseTo(farm.activatedAt + HOUR + 1);
    await s.market.write.close([farm.leaseId], { account: self!.account });
    // Closed inside its last fault window, the lease is held like a completion (issue #34): the claim after the
    // window releases it, and that is when reputation would count it.
    await connection.networkHelpers.time.increaseTo(farm.activatedAt + HOUR + COMPLETION_HOLD_SECONDS);
    await s.market.write.claim([farm.leaseId]);
    const lease = await readLease(s.publicClient, s.market.address, farm.leaseId);
    assert.deepEqual([lease.status, lease.endReason], ["Settled", "Expired"]);
    // 8 × 3,600 = 28,800 unit-seconds and one completion before the fix; nothing now.
    assert.deepEqual(await reputation(s), [0n, 0n, 0n]);
    // The provider paid itself 28,800 base units: net cost zero (no fee), which is why nothing may count.
    assert.equal(await balance(s, self!.account.address), before);

    // The same farming ended by the renter (close before the end) and by shrinking: still nothing.
    const early = await openActive(s, { offer: await makeOffer(s, { minBidPerUnitSecond: 1n }), renter: self, terms: selfBid() });
    await at(early.activatedAt + 600);
    await s.market.write.shrink([early.leaseId, 2], { account: self!.account });
    await at(early.activatedAt + 1200);
    await s.market.write.close([early.leaseId], { account: self!.account });
    assert.deepEqual(await reputation(s), [0n, 0n, 0n]);
  });

  it("a real renter still preempts the self-lease, and the provider's preempted time counts for nothing", async () => {
    const s = await load();
    const self = s.provider;
    const offer = await makeOffer(s, { minBidPerUnitSecond: 1n });
    const farm = await openActive(s, { offer, renter: self, terms: selfBid() });
    await at(farm.activatedAt + 1000);
    const real = await makeOffer(s);
    const realId = await s.market.read.nextLeaseId();
    await s.market.write.openLease([real, await sign(s, real), terms({ units: 8, preempt: [farm.leaseId] })], {
      account: s.renter!.account,
    });
    assert.equal((await readLease(s.publicClient, s.market.address, farm.leaseId)).endReason, "Preempted");
    await s.market.write.activate([realId], { account: self!.account });
    assert.deepEqual(await reputation(s), [0n, 0n, 0n]);
    // The real renter's on-demand hour is the reputation: 8 × 3,600 paid unit-seconds and a completion.
    const activatedAt = await latest(s);
    await connection.networkHelpers.time.increaseTo(activatedAt + HOUR + 1);
    await s.market.write.close([realId], { account: s.renter!.account });
    // Held until its fault window has passed (issue #34): counted by the releasing claim, not before.
    assert.deepEqual(await reputation(s), [0n, 0n, 0n]);
    await connection.networkHelpers.time.increaseTo(activatedAt + HOUR + COMPLETION_HOLD_SECONDS);
    await s.market.write.claim([realId]);
    assert.deepEqual(await reputation(s), [1n, 8n * 3600n, 0n]);
  });

  it("a fault on an interruptible lease still counts against the provider", async () => {
    const s = await load();
    const offer = await makeOffer(s, { minBidPerUnitSecond: 1n });
    const lease = await openActive(s, { offer, terms: selfBid(2) });
    await at(lease.activatedAt + 100);
    const fault = { leaseId: lease.leaseId, kind: FaultKind.unresponsive, observedAt: lease.activatedAt + 90 };
    await s.market.write.submitFault([fault, await faultSignatures(s, fault)]);
    assert.deepEqual(await reputation(s), [0n, 0n, 1n]);
  });

  it("what still counts costs the machine's time: on-demand self-rental blocks real renters and pays the fee", async () => {
    const s = await connection.networkHelpers.loadFixture(feeFixture);
    const self = s.provider;
    const before = await balance(s, self!.account.address);
    // On demand at the offer's price: counted, but the 8 units are not for sale while it runs.
    const farm = await openActive(s, { renter: self, terms: { units: 8, duration: HOUR } });
    const real = await makeOffer(s);
    await assert.rejects(s.market.write.openLease([real, await sign(s, real), terms({ units: 1 })], { account: s.renter!.account }), /InsufficientUnits/);
    await assert.rejects(
      s.market.write.openLease([real, await sign(s, real), terms({ units: 1, preempt: [farm.leaseId] })], {
        account: s.renter!.account,
      }),
    );
    await connection.networkHelpers.time.increaseTo(farm.activatedAt + HOUR + 1);
    await s.market.write.close([farm.leaseId], { account: self!.account });
    await connection.networkHelpers.time.increaseTo(farm.activatedAt + HOUR + COMPLETION_HOLD_SECONDS);
    await s.market.write.claim([farm.leaseId]);
    const counted = 8n * 3600n;
    assert.deepEqual(await reputation(s), [1n, counted, 0n]);
    // Each counted unit-second cost 1 % of the on-demand price to the treasury: 28,800 × 100 × 1 % = 28,800.
    const fee = (counted * PRICE * 100n) / 10_000n;
    assert.equal(await balance(s, self!.account.address), before - fee);
    assert.equal(await balance(s, s.treasury!.account.address), fee);
  });
});

/**
 * The in-lease check share an offer announces (issue 24, item 4): validated at every boundary
 * (the offer message, the provider's config), defaulted for offers that announce none.
 */
import assert from "node:assert/strict";
import { DEFAULT_LEASE_CHECK_SHARE_BPS, leaseCheckShareBps, leaseChecksSchema } from "../../common/attest/lease-checks.js";
import { offerMessageSchema } from "../../common/offers/message.js";
import { providerOptionsSchema } from "../../node/provider/options.js";

describe("offer terms: the in-lease check share", () => {
  it("accepts 0.1 % to 10 %, refuses anything else naming the bound, and defaults to 1 % when absent", () => {
    assert.deepEqual(leaseChecksSchema.parse({ shareBps: 10 }), { shareBps: 10 });
    assert.deepEqual(leaseChecksSchema.parse({ shareBps: 1_000 }), { shareBps: 1_000 });
    const none = leaseChecksSchema.safeParse({ shareBps: 0 });
    assert.equal(none.success, false);
    assert.match(none.error!.issues[0]!.message, /at least 10 .*every lease is checked/);
    const tooMuch = leaseChecksSchema.safeParse({ shareBps: 1_001 });
    assert.match(tooMuch.error!.issues[0]!.message, /at most 1000/);
    assert.equal(leaseChecksSchema.safeParse({ shareBps: 100, extra: 1 }).success, false);
    assert.equal(leaseCheckShareBps(undefined), DEFAULT_LEASE_CHECK_SHARE_BPS);
    assert.equal(leaseCheckShareBps({ shareBps: 250 }), 250);
    // In the offer message it is optional (messages before it sign as they did) and checked when present.
    assert.ok("leaseChecks" in offerMessageSchema.shape);
    assert.equal(offerMessageSchema.shape.leaseChecks.safeParse(undefined).success, true);
    assert.equal(offerMessageSchema.shape.leaseChecks.safeParse({ shareBps: 5 }).success, false);
  });

  it("the provider's config sets it, 1 % by default, and refuses a share outside the bounds", () => {
    assert.equal(providerOptionsSchema.parse({}).terms.leaseCheckShareBps, DEFAULT_LEASE_CHECK_SHARE_BPS);
    assert.equal(providerOptionsSchema.parse({ terms: { leaseCheckShareBps: 500 } }).terms.leaseCheckShareBps, 500);
    const refused = providerOptionsSchema.safeParse({ terms: { leaseCheckShareBps: 5_000 } });
    assert.equal(refused.success, false);
    assert.deepEqual(refused.error!.issues[0]!.path, ["terms", "leaseCheckShareBps"]);
  });
});

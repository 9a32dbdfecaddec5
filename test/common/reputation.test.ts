/**
 * A provider's uptime as offers, the explorer, /v1/providers and `suanli offers` show it (issue #40
 * item 9): the share of its counted leases that ended without a fault, one decimal, or null before
 * any lease counts (a new provider is neither 0 % nor 100 %).
 */
import assert from "node:assert/strict";
import { reputationSchema, uptimePercentOf } from "../../common/api/reputation.js";

describe("reputation: uptime percent", () => {
  it("is completed / (completed + faults), to one decimal, and null before any counted lease", () => {
    assert.equal(uptimePercentOf({ leasesCompleted: 0, faults: 0 }), null);
    assert.equal(uptimePercentOf({ leasesCompleted: 12, faults: 0 }), 100);
    assert.equal(uptimePercentOf({ leasesCompleted: 0, faults: 3 }), 0);
    assert.equal(uptimePercentOf({ leasesCompleted: 12, faults: 1 }), 92.3);
    assert.equal(uptimePercentOf({ leasesCompleted: 2n, faults: 1n }), 66.7);
    assert.equal(uptimePercentOf({ leasesCompleted: 999, faults: 1 }), 99.9);
  });

  it("the wire schema takes the figure and refuses one outside 0..100", () => {
    const base = { leasesCompleted: 1, faults: 0, unitSecondsDelivered: "3600" };
    assert.equal(reputationSchema.parse({ ...base, uptimePercent: 100 }).uptimePercent, 100);
    assert.equal(reputationSchema.parse({ ...base, uptimePercent: null }).uptimePercent, null);
    assert.equal(reputationSchema.safeParse({ ...base, uptimePercent: 101 }).success, false);
    assert.equal(reputationSchema.safeParse(base).success, false);
  });
});

/**
 * Issue #22, item 7: a task's status shows wall-clock elapsed time and the cost accrued by now,
 * not the chain's view as of its last block (a quiet devnet mines no blocks while a task runs).
 */
import assert from "node:assert/strict";
import { meteredByNow } from "../../sdk/internal/metering.js";

const base = { units: 2, pricePerUnitSecond: 100n, stopAt: 0, end: 1_000_600 };

describe("status metering by the wall clock (issue #22 item 7)", () => {
  it("an active lease accrues units × price per second since activation, though the chain saw no block since", () => {
    // The chain's accrual is as of activation (no block since): 0.
    const metered = meteredByNow({ ...base, status: "Active", activatedAt: 1_000_000, accrued: 0n }, 1_000_042.7);
    assert.equal(metered.elapsedSeconds, 42);
    assert.equal(metered.accruedNow, 2n * 100n * 42n);
  });

  it("stops at the lease's end, never below what the chain reports, and is zero before activation", () => {
    assert.deepEqual(meteredByNow({ ...base, status: "Active", activatedAt: 1_000_000, accrued: 0n }, 2_000_000), { elapsedSeconds: 600, accruedNow: 2n * 100n * 600n });
    assert.equal(meteredByNow({ ...base, status: "Active", activatedAt: 1_000_000, accrued: 50_000n }, 1_000_010).accruedNow, 50_000n);
    assert.deepEqual(meteredByNow({ ...base, status: "Open", activatedAt: 0, accrued: 0n }, 1_000_010), { elapsedSeconds: 0, accruedNow: 0n });
  });

  it("an ended lease shows its metered time and the chain's final total", () => {
    assert.deepEqual(meteredByNow({ ...base, status: "Ended", activatedAt: 1_000_000, stopAt: 1_000_030, accrued: 6_000n }, 1_005_000), { elapsedSeconds: 30, accruedNow: 6_000n });
  });
});

/**
 * The attestor's liveness clock never runs backwards (node/attest/faults/liveness.ts nonDecreasingClock):
 * an honest attestor signs a liveness fault once the fault window after observedAt has passed on
 * its clock (mayFaultAt), and every receipt it gives afterwards must be stamped later than that
 * window, or the fault and the receipt together slash it (receiptContradictsFault, the contract's
 * rule). A wall clock stepped backwards after the signature would stamp the next receipt inside
 * the window; the liveness clock stamps it no earlier than the signature.
 */
import assert from "node:assert/strict";
import { receiptContradictsFault } from "../../../common/attest/liveness.js";
import { FaultKind, type Fault } from "../../../common/eip712.js";
import { FAULT_WINDOW_STALE_MS, MAX_FAULT_WINDOW_SECONDS, livenessFaultWindow, mayFaultAt, nonDecreasingClock } from "../../../node/attest/faults/liveness.js";

describe("attestor: the liveness clock never runs backwards", () => {
  const WINDOW_S = 30;
  const observedAt = 1_700_000_000;
  const fault: Fault = { leaseId: 7n, kind: FaultKind.unresponsive, observedAt };

  /** Signs at the first ms mayFaultAt allows, then NTP steps the wall clock back 2 s and the provider answers. */
  function receiptAfterStep(clock: () => number, wall: { ms: number }): bigint {
    wall.ms = (observedAt + WINDOW_S) * 1000 + 1;
    const signedAtMs = clock();
    assert.equal(mayFaultAt({ lastSuccessAt: observedAt }, observedAt, signedAtMs, WINDOW_S), true, "the honest attestor may sign now");
    wall.ms -= 2_000;
    return BigInt(clock());
  }

  it("stamps a receipt given after a fault's signature later than the fault's window, even when the wall clock steps back", () => {
    const wall = { ms: 0 };
    const receivedAtMs = receiptAfterStep(
      nonDecreasingClock(() => wall.ms),
      wall,
    );
    assert.equal(receiptContradictsFault(fault, { leaseId: fault.leaseId, challenge: `0x${"11".repeat(32)}`, receivedAtMs }, WINDOW_S), false);
    // The raw wall clock would have stamped it inside the window: the honest signature would be slashable.
    const raw = receiptAfterStep(() => wall.ms, wall);
    assert.equal(receiptContradictsFault(fault, { leaseId: fault.leaseId, challenge: `0x${"11".repeat(32)}`, receivedAtMs: raw }, WINDOW_S), true);
  });

  it("follows the wall clock forwards, and stands still while it is behind", () => {
    const wall = { ms: 1_000 };
    const clock = nonDecreasingClock(() => wall.ms);
    assert.equal(clock(), 1_000);
    wall.ms = 5_000;
    assert.equal(clock(), 5_000);
    wall.ms = 3_000;
    assert.equal(clock(), 5_000);
    wall.ms = 5_001;
    assert.equal(clock(), 5_001);
  });
});

describe("attestor: the fault window it waits out (livenessFaultWindow)", () => {
  const now = 1_700_000_000_000;
  it("waits max(qosWindowSeconds, the staking's faultWindow) while the read is fresh, and the longest window the contract allows once it is half a day old or never succeeded", () => {
    assert.equal(livenessFaultWindow({ qosWindowSeconds: 30, nowMs: now }), 30);
    assert.equal(livenessFaultWindow({ qosWindowSeconds: 30, staking: { windowSeconds: 60, readAtMs: now - 60_000 }, nowMs: now }), 60);
    assert.equal(livenessFaultWindow({ qosWindowSeconds: 90, staking: { windowSeconds: 60, readAtMs: now - 60_000 }, nowMs: now }), 90);
    assert.equal(livenessFaultWindow({ qosWindowSeconds: 30, staking: { windowSeconds: 60, readAtMs: now - FAULT_WINDOW_STALE_MS }, nowMs: now }), 60);
    // The chain unreachable for more than half a day: governance may have raised the window meanwhile.
    assert.equal(livenessFaultWindow({ qosWindowSeconds: 30, staking: { windowSeconds: 60, readAtMs: now - FAULT_WINDOW_STALE_MS - 1 }, nowMs: now }), MAX_FAULT_WINDOW_SECONDS);
    assert.equal(livenessFaultWindow({ qosWindowSeconds: 30, staking: { windowSeconds: 0, readAtMs: 0 }, nowMs: now }), MAX_FAULT_WINDOW_SECONDS);
  });
});

/**
 * The provider's estimate of the chain's clock (node/provider/agent/chain-clock.ts): lease timing
 * follows the chain's time whatever this host's wall clock says, learned from fresh blocks only.
 */
import assert from "node:assert/strict";
import { ChainClock } from "../../node/provider/agent/chain-clock.js";

/** A clock whose wall time runs `skewMs` off the real time, and a real time the test moves. */
function clocks(skewMs: number) {
  const t = { realMs: 1_800_000_000_000, monotonicMs: 0 };
  const clock = new ChainClock(
    () => t.realMs + skewMs,
    () => t.monotonicMs,
  );
  const advance = (ms: number) => {
    t.realMs += ms;
    t.monotonicMs += ms;
  };
  return { t, clock, advance };
}

describe("provider chain clock", () => {
  for (const skewMs of [-30_000, 30_000, 0]) {
    it(`with the host's clock ${skewMs / 1000} s off, a fresh block sets the chain's time to within the block's rounding`, () => {
      const { t, clock, advance } = clocks(skewMs);
      assert.equal(clock.nowMs(), t.realMs + skewMs, "before any fresh block it takes the host's clock");
      clock.fresh(Math.floor(t.realMs / 1000));
      advance(5_000);
      assert.ok(Math.abs(clock.nowMs() - t.realMs) <= 1_000, `${clock.nowMs() - t.realMs} ms off`);
    });
  }

  it("a stale block (history, or a look long after the last) teaches nothing; a new block at a prompt look does", () => {
    const { t, clock, advance } = clocks(-30_000);
    clock.look(10n, Math.floor(t.realMs / 1000) - 600); // first look: nothing to compare with
    advance(60_000);
    clock.look(11n, Math.floor(t.realMs / 1000)); // new, but the previous look was a minute ago
    assert.equal(clock.offsetMs(), 0, "no sample from a look that was not prompt");
    advance(1_000);
    clock.look(12n, Math.floor(t.realMs / 1000));
    assert.ok(Math.abs(clock.nowMs() - t.realMs) <= 1_000, "the block that appeared between two prompt looks is fresh");
  });

  it("the smallest offset wins (a block seen late only makes the estimate later, never earlier) and samples expire", () => {
    const { t, clock, advance } = clocks(10_000);
    clock.fresh(Math.floor(t.realMs / 1000) - 20); // seen 20 s late: offset 30 s
    clock.fresh(Math.floor(t.realMs / 1000)); // fresh: offset 10 s
    assert.ok(Math.abs(clock.nowMs() - t.realMs) <= 1_000);
    advance(11 * 60_000);
    assert.equal(clock.offsetMs(), 0, "after ten minutes without a fresh block the host's clock is taken again");
  });
});

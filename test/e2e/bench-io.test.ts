/**
 * The io benchmark's short form (bench/io.ts, `npm run bench -- io`), so that it cannot rot: a
 * real provider process on a devnet, a task that writes an output and serves an echo port, the
 * renter's forwarded round trips, then cancel -> download of what the task wrote. Before issue
 * #33 the download after the cancel failed with CompletionMismatchError (the renter's close puts
 * no completion on-chain, and the SDK took the provider's signed report for a contradiction).
 * Figures are not asserted here (speed is the bench's business); that every step works is.
 */
import assert from "node:assert/strict";
import { run } from "../../bench/io.js";

describe("bench io, short form: forward round trips, then cancel and a verified download", function () {
  this.timeout(240_000);

  it("downloads the cancelled task's output verified against the provider's signed report", async () => {
    const summary = (await run(["--mb", "2", "--requests", "50"])) as {
      download: { bytes: number; verified: boolean; verifiedAgainst: string | null };
      forwardRttMs: { requests: number; p50: number };
    };
    assert.equal(summary.download.bytes, 2 * 1024 * 1024);
    assert.equal(summary.download.verified, true);
    assert.equal(summary.download.verifiedAgainst, "signed-report");
    assert.equal(summary.forwardRttMs.requests, 50);
    assert.ok(Number.isFinite(summary.forwardRttMs.p50));
  });
});

import assert from "node:assert/strict";
import { runDetached, type DetachedLogger } from "../../common/detached.js";

/** A logger that records its warnings. */
function recorder(): DetachedLogger & { warnings: { message: string; context?: Record<string, unknown>; error?: unknown }[] } {
  const warnings: { message: string; context?: Record<string, unknown>; error?: unknown }[] = [];
  return { warnings, warn: (message, context, error) => void warnings.push({ message, context, error }) };
}

/** Waits until the promise's settlement handlers have run (two macrotask turns). */
const settle = () => new Promise<void>((resolve) => setImmediate(() => setImmediate(resolve)));

/** Counts unhandled rejections while `fn` runs and its promises settle. */
async function unhandledDuring(fn: () => void): Promise<number> {
  let count = 0;
  const onUnhandled = () => count++;
  process.on("unhandledRejection", onUnhandled);
  try {
    fn();
    await settle();
  } finally {
    process.off("unhandledRejection", onUnhandled);
  }
  return count;
}

describe("runDetached", () => {
  it("logs a rejection as '<what> failed' with its context and the error, and leaves no unhandled rejection", async () => {
    const log = recorder();
    const error = new Error("disk full");
    const unhandled = await unhandledDuring(() => runDetached(Promise.reject(error), log, "Writing the reservations", { leaseId: 7n }));
    assert.equal(unhandled, 0);
    assert.deepEqual(log.warnings, [{ message: "Writing the reservations failed", context: { leaseId: 7n }, error }]);
  });

  it("logs nothing when the work succeeds", async () => {
    const log = recorder();
    runDetached(Promise.resolve(42), log, "Sampling");
    await settle();
    assert.deepEqual(log.warnings, []);
  });

  it("drops the failure without a logger, and survives a logger that throws", async () => {
    const throwing: DetachedLogger = {
      warn: () => {
        throw new Error("logger broken");
      },
    };
    const unhandled = await unhandledDuring(() => {
      runDetached(Promise.reject(new Error("peer gone")), undefined, "Closing a stream");
      runDetached(Promise.reject(new Error("peer gone")), throwing, "Closing a stream");
    });
    assert.equal(unhandled, 0);
  });
});

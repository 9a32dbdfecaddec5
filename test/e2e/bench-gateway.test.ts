/**
 * The gateway benchmark's short form (bench/gateway.ts, `npm run bench -- gateway`), so that it
 * cannot rot: a provider process on a devnet, a gateway node, a task serving HTTP, requests straight
 * to its port and through a public endpoint. Figures are not asserted (speed is the bench's
 * business); that both sides answered every request over kept-alive connections is.
 */
import assert from "node:assert/strict";
import { run } from "../../bench/gateway.js";

describe("bench gateway, short form: the same requests straight to the task and through a gateway endpoint", function () {
  this.timeout(240_000);

  it("answers every request both ways, over at most one forward stream per concurrent caller", async () => {
    const summary = (await run(["--requests", "60", "--concurrency", "3"])) as {
      direct: { requests: number; requestsPerSecond: number; p50Ms: number };
      gateway: { requests: number; requestsPerSecond: number; p50Ms: number; streamsOpened: number };
      throughputRatio: number;
    };
    assert.equal(summary.direct.requests, 60);
    assert.equal(summary.gateway.requests, 60);
    assert.ok(summary.gateway.requestsPerSecond > 0 && Number.isFinite(summary.gateway.p50Ms));
    assert.ok(summary.gateway.streamsOpened >= 1 && summary.gateway.streamsOpened <= 3, `streams: ${summary.gateway.streamsOpened}`);
    assert.ok(Number.isFinite(summary.throughputRatio));
  });
});

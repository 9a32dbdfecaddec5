/**
 * The devnet bundler's start without a chain (node/devnet/bundler.ts, docs/aa.md): the preload that keeps Alto's server
 * on 127.0.0.1, and the refusal to start on a port something already holds (a stale Alto would answer in place of the
 * new one). test/e2e/aa-bundler.test.ts checks a real Alto's socket and environment.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { createServer, type Server } from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { ENTRY_POINT_08 } from "../../common/account-abstraction.js";
import { devnetPrivateKey } from "../../common/devnet.js";
import { BundlerError, startBundler } from "../../node/devnet/bundler.js";

const run = promisify(execFile);
const preload = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../node/devnet/alto-loopback.mjs");

describe("devnet bundler: loopback only, and a port that must be free", function () {
  this.timeout(20_000);

  it("the preload moves a listen on every interface (or on no host) to 127.0.0.1, and leaves a named host alone", async () => {
    // Each form `listen` takes for "every interface": Fastify's options object, port and host, port alone, nothing.
    const script = `
      import http from "node:http";
      const forms = [(s) => s.listen({ port: 0, host: "0.0.0.0" }), (s) => s.listen(0, "::"), (s) => s.listen(0, "0.0.0.0", 511),
        (s) => s.listen({ port: 0 }), (s) => s.listen(0), (s) => s.listen(), (s) => s.listen(0, "localhost")];
      for (const form of forms) {
        const server = http.createServer();
        await new Promise((resolve) => { server.once("listening", resolve); form(server); });
        console.log(server.address().address);
        server.close();
      }`;
    const { stdout } = await run(process.execPath, ["--import", preload, "--input-type=module", "--eval", script]);
    const addresses = stdout.trim().split("\n");
    assert.deepEqual(addresses.slice(0, 6), Array(6).fill("127.0.0.1"));
    assert.match(addresses[6]!, /^(127\.0\.0\.1|::1)$/, "localhost stays localhost");
  });

  for (const host of ["127.0.0.1", "0.0.0.0"]) {
    it(`refuses to start Alto on a port a server on ${host} holds, naming the port and a stale Alto`, async () => {
      const holder: Server = createServer();
      await new Promise<void>((resolve) => holder.listen(0, host, resolve));
      const { port } = holder.address() as { port: number };
      try {
        await assert.rejects(
          startBundler({
            rpcUrl: "http://127.0.0.1:9",
            entryPoint: ENTRY_POINT_08,
            executorKeys: [devnetPrivateKey(19)],
            utilityKey: devnetPrivateKey(18),
            safeMode: false,
            port,
            readyTimeoutMs: 2_000,
          }),
          (error: unknown) => {
            assert.ok(error instanceof BundlerError, String(error));
            assert.match(error.message, new RegExp(`Port ${port} on 127\\.0\\.0\\.1 is in use: a previous Alto .* may still be running`));
            assert.match(error.message, new RegExp(`ss -ltnp 'sport = :${port}'`));
            return true;
          },
        );
      } finally {
        await new Promise<void>((resolve) => holder.close(() => resolve()));
      }
    });
  }
});

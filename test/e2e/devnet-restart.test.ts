/**
 * Issue #22, item 1: a provider whose data dir was written for one devnet must not serve a
 * restarted devnet (same chain id, same contract addresses, lease ids from 1 again) with the old
 * chain's leases. Real processes: `suanli devnet` twice on the same port, `suanli provider start`
 * with the same data dir each time.
 */
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { runCli, startCli } from "../support/cli.js";
import { freePort } from "../support/ports.js";
import { ProviderExitedError, ProviderProcess, writeProviderConfig } from "../support/provider-process.js";

describe("a provider's data dir is bound to its deployment (issue #22)", function () {
  this.timeout(240_000);
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "suanli-restart-"));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("refuses a restarted devnet under the old data dir, naming both deployments and the fix", async () => {
    const port = await freePort();
    const rpcUrl = `http://127.0.0.1:${port}`;
    const deployments = path.join(dir, "deployments");
    // The devnet is a process of its own (below): the faucet funds the provider's wallet, as a user's would.
    const { configFile: config } = await writeProviderConfig({ rpcUrl, deploymentsDir: deployments }, 1, {
      dir,
      overrides: {
        // Readable logs, as a user's terminal shows them.
        log: { level: "warn", format: "pretty" },
        provider: { inventory: { source: "declared", declared: [{ model: "A100-80GB", count: 1, region: "eu-west" }] }, chain: { stakeTarget: "100" } },
      },
    });
    const devnetArgs = ["devnet", "--no-bundler", "--port", String(port), "--deployments", deployments, "--attestor-nodes", "", "--json"];

    const first = startCli(devnetArgs);
    let firstMarket: unknown;
    try {
      firstMarket = ((await first.ready).contracts as { market: string }).market;
      const faucet = await runCli(["wallet", "faucet", "--devnet-account", "1", "--amount", "100", "--rpc-url", rpcUrl, "--deployments", deployments]);
      assert.equal(faucet.code, 0, faucet.stderr);
      const provider = await ProviderProcess.start(config, { timeoutMs: 120_000 });
      assert.equal(provider.ready.event, "ready", provider.stderr.join("\n"));
      assert.equal(await provider.kill("SIGTERM"), 0, provider.stderr.join("\n"));
    } finally {
      await first.stop("SIGTERM");
    }

    const second = startCli(devnetArgs);
    try {
      const described = await second.ready;
      // The situation of the bug: the same addresses on a chain with the same id.
      assert.equal((described.contracts as { market: string }).market, firstMarket);
      const faucet = await runCli(["wallet", "faucet", "--devnet-account", "1", "--amount", "100", "--rpc-url", rpcUrl, "--deployments", deployments]);
      assert.equal(faucet.code, 0, faucet.stderr);
      // Refused: it exits before it is ready (a node that did start is stopped and fails the check below).
      const refused: unknown = await ProviderProcess.start(config, { timeoutMs: 120_000 }).then(
        async (node) => {
          await node.kill("SIGKILL");
          return node;
        },
        (error: unknown) => error,
      );
      assert.ok(refused instanceof ProviderExitedError, `expected the refusal (exit 1), got ${refused instanceof ProviderProcess ? "a node that started" : String(refused)}`);
      const again = { code: refused.code, stdout: refused.stdout.join("\n"), stderr: refused.stderr.join("\n") };
      assert.equal(again.code, 1, `expected the refusal (exit 1); stdout: ${again.stdout}\nstderr: ${again.stderr}`);
      assert.match(again.stderr, /holds another deployment's data/);
      assert.match(again.stderr, /Stored: +chain 31337, market 0x[0-9a-fA-F]{40}, deployed in block \d+ \(hash 0x[0-9a-f]{64}\)/);
      assert.match(again.stderr, /Fix: start with another data dir/);
      assert.doesNotMatch(again.stdout, /"event":"ready"/);

      // The fix as printed: another data dir starts.
      const fresh = await ProviderProcess.start(config, { timeoutMs: 120_000, args: ["--dataDir", path.join(dir, "provider-2")] });
      try {
        assert.equal(fresh.ready.event, "ready", fresh.stderr.join("\n"));
      } finally {
        await fresh.kill("SIGTERM");
      }
    } finally {
      await second.stop("SIGTERM");
    }
  });
});

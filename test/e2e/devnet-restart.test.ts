/**
 * Issue #22, item 1: a provider whose data dir was written for one devnet must not serve a
 * restarted devnet (same chain id, same contract addresses, lease ids from 1 again) with the old
 * chain's leases. Real processes: `suanli devnet` twice on the same port, `suanli provider start`
 * with the same data dir each time.
 */
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { devnetPrivateKey } from "../../common/devnet.js";
import { runCli, startCli } from "../support/cli.js";
import { freePort } from "../support/ports.js";

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
    const config = path.join(dir, "provider.json");
    await writeFile(
      config,
      JSON.stringify({
        dataDir: path.join(dir, "provider"),
        log: { level: "warn" },
        chain: { rpcUrl, deploymentsDir: deployments, privateKey: devnetPrivateKey(1), pollingIntervalMs: 250 },
        p2p: { listen: ["/ip4/127.0.0.1/tcp/0"], allowPrivateAddresses: true, dht: { enabled: false } },
        provider: {
          inventory: { source: "declared", declared: [{ model: "A100-80GB", count: 1 }] },
          prices: { "A100-80GB": { usdPerGpuHour: 2 } },
          chain: { stakeTarget: "100" },
          runtime: { sandbox: "none" },
        },
      }),
    );
    const devnetArgs = ["devnet", "--port", String(port), "--deployments", deployments, "--attestor-nodes", "", "--json"];

    const first = startCli(devnetArgs);
    let firstMarket: unknown;
    try {
      firstMarket = ((await first.ready).contracts as { market: string }).market;
      const faucet = await runCli(["wallet", "faucet", "--devnet-account", "1", "--amount", "100", "--rpc-url", rpcUrl, "--deployments", deployments]);
      assert.equal(faucet.code, 0, faucet.stderr);
      const provider = startCli(["provider", "start", "--config", config, "--json"], { timeoutMs: 120_000 });
      assert.equal((await provider.ready).event, "ready", provider.stderr());
      assert.equal(await provider.stop("SIGTERM"), 0, provider.stderr());
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
      const again = await runCli(["provider", "start", "--config", config, "--json"], { timeoutMs: 120_000 });
      assert.equal(again.code, 1, `expected the refusal (exit 1); stdout: ${again.stdout}\nstderr: ${again.stderr}`);
      assert.match(again.stderr, /holds another deployment's data/);
      assert.match(again.stderr, /Stored: +chain 31337, market 0x[0-9a-fA-F]{40}, deployed in block \d+ \(hash 0x[0-9a-f]{64}\)/);
      assert.match(again.stderr, /Fix: start with another data dir/);
      assert.doesNotMatch(again.stdout, /"event":"ready"/);

      // The fix as printed: another data dir starts.
      const fresh = startCli(["provider", "start", "--config", config, "--dataDir", path.join(dir, "provider-2"), "--json"], { timeoutMs: 120_000 });
      try {
        assert.equal((await fresh.ready).event, "ready", fresh.stderr());
      } finally {
        await fresh.stop("SIGTERM");
      }
    } finally {
      await second.stop("SIGTERM");
    }
  });
});

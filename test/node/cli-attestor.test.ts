import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { multiaddr } from "@multiformats/multiaddr";
import { tmpdir } from "node:os";
import path from "node:path";
import type { Address } from "viem";
import { providerRegistryAbi } from "../../common/abi.js";
import { devnetAccount, devnetPrivateKey } from "../../common/devnet.js";
import { connectChain } from "../../node/chain/clients.js";
import { createHost } from "../../common/p2p/host.js";
import { runCli, startCli, SUANLI_BIN } from "../support/cli.js";

describe("suanli devnet attestors and suanli attestor start (CLI)", function () {
  this.timeout(120_000);

  it("the devnet grants ATTESTOR_ROLE to the accounts asked for, and attestor start refuses a wallet without it", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "suanli-cli-attestor-"));
    const devnet = spawn(process.execPath, [SUANLI_BIN, "devnet", "--no-bundler", "--port", "0", "--deployments", dir, "--attestors", "7,8", "--attestor-nodes", "", "--json"], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    try {
      const described = await new Promise<{ rpcUrl: string; attestors: Address[]; contracts: { registry: Address } }>((resolve, reject) => {
        let stdout = "";
        let stderr = "";
        devnet.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
        devnet.stdout.on("data", (chunk: Buffer) => {
          stdout += chunk.toString();
          const line = stdout.split("\n").find((text) => text.startsWith("{"));
          if (line) resolve(JSON.parse(line));
        });
        devnet.once("exit", (code) => reject(new Error(`devnet exited with ${code}: ${stderr}`)));
      });
      assert.deepEqual(described.attestors, [devnetAccount(7).address, devnetAccount(8).address]);
      const { publicClient } = await connectChain({ rpcUrl: described.rpcUrl });
      const isAttestor = (index: number) =>
        publicClient.readContract({ address: described.contracts.registry, abi: providerRegistryAbi, functionName: "isAttestor", args: [devnetAccount(index).address] });
      assert.deepEqual(await Promise.all([7, 8, 9].map(isAttestor)), [true, true, false]);

      const config = path.join(dir, "attestor.json");
      await writeFile(
        config,
        JSON.stringify({
          dataDir: path.join(dir, "node"),
          log: { level: "warn" },
          chain: { rpcUrl: described.rpcUrl, deploymentsDir: dir, privateKey: devnetPrivateKey(9) },
          p2p: { listen: ["/ip4/127.0.0.1/tcp/0"], dht: { enabled: false } },
        }),
      );
      const refused = await runCli(["attestor", "start", "--config", config]);
      assert.equal(refused.code, 1);
      assert.match(refused.stderr, /does not hold ATTESTOR_ROLE/);

      // An attestor's wallet runs; metrics.enabled serves its Prometheus endpoint (as under every start command).
      await writeFile(
        config,
        JSON.stringify({
          dataDir: path.join(dir, "node7"),
          log: { level: "warn" },
          chain: { rpcUrl: described.rpcUrl, deploymentsDir: dir, privateKey: devnetPrivateKey(7), pollingIntervalMs: 200 },
          p2p: { listen: ["/ip4/127.0.0.1/tcp/0"], dht: { enabled: false } },
          attest: { challenge: { preset: "cpu-devnet" }, runner: { kind: "cpu", workers: 1 } },
        }),
      );
      const attestor = startCli(["attestor", "start", "--config", config, "--json", "--metrics.enabled", "--metrics.port", "0"]);
      try {
        const ready = (await attestor.ready) as { address: Address; metricsUrl: string | null };
        assert.equal(ready.address, devnetAccount(7).address);
        assert.match(ready.metricsUrl ?? "", /^http:\/\/127\.0\.0\.1:\d+\/metrics$/);
        const text = await (await fetch(ready.metricsUrl!)).text();
        assert.match(text, /^suanli_p2p_peers \d+$/m);
        assert.match(text, /^# TYPE suanli_attest_challenges_total counter$/m);
        assert.equal(await attestor.stop("SIGTERM"), 0, attestor.stderr());
      } finally {
        await attestor.stop("SIGKILL");
      }
    } finally {
      devnet.kill("SIGINT");
      await new Promise((resolve) => (devnet.exitCode !== null ? resolve(undefined) : devnet.once("exit", resolve)));
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("a plain devnet runs attestor nodes 7-9 at the fixed addresses examples/provider.devnet.json bootstraps from (issue #22 item 2)", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "suanli-cli-attestor-"));
    const devnet = startCli(["devnet", "--no-bundler", "--port", "0", "--deployments", dir, "--json"], { timeoutMs: 90_000 });
    try {
      const described = (await devnet.ready) as { attestorNodes: { account: number; address: Address; addr: string }[] };
      const example = JSON.parse(await readFile("examples/provider.devnet.json", "utf8")) as { p2p: { bootstrap: string[] } };
      assert.deepEqual(
        described.attestorNodes.map((node) => node.account),
        [7, 8, 9],
      );
      assert.deepEqual(
        described.attestorNodes.map((node) => node.addr),
        example.p2p.bootstrap,
      );
      // Each is a running node: a libp2p dial to its address succeeds and it speaks the attest protocol.
      const host = await createHost({ listen: [], dht: { enabled: false }, gossip: { enabled: false }, connections: { min: 0 } });
      try {
        for (const node of described.attestorNodes) {
          const connection = await host.dial(multiaddr(node.addr), { signal: AbortSignal.timeout(10_000) });
          assert.equal(connection.remotePeer.toString(), node.addr.split("/p2p/")[1]);
        }
      } finally {
        await host.stop();
      }
      const refused = await runCli(["devnet", "--port", "0", "--attestors", "7", "--attestor-nodes", "8"]);
      assert.equal(refused.code, 2);
      assert.match(refused.stderr, /--attestor-nodes takes accounts among --attestors/);
    } finally {
      await devnet.stop("SIGINT");
      await rm(dir, { recursive: true, force: true });
    }
  });
});

/**
 * `suanli node start` and `suanli devnet --api-port` as real child processes: a plain node that
 * keeps the offer book and serves the API from a config file, and the devnet's node with demo
 * providers that register on-chain and publish offers.
 */
import assert from "node:assert/strict";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { privateKeyToAccount } from "viem/accounts";
import { tmpdir } from "node:os";
import path from "node:path";
import { healthSchema } from "../../common/api/market.js";
import { devnetAccount } from "../../common/devnet.js";
import { suanliDomain, suanliTypes, type ReserveRequest } from "../../common/eip712.js";
import { offerPageSchema } from "../../common/api/offers.js";
import { providerPageSchema } from "../../common/api/chain.js";
import { parseConfigFlags } from "../../node/cli/config-flags.js";
import { runCli, startCli, type RunningCli } from "../support/cli.js";
import { startDevnet, type Devnet } from "../support/devnet.js";
import { waitFor } from "../support/wait.js";

describe("suanli node start / suanli devnet --api-port (CLI)", function () {
  this.timeout(120_000);
  let devnet: Devnet;
  let dir: string;
  const running: RunningCli[] = [];

  before(async () => {
    devnet = await startDevnet();
    dir = await mkdtemp(path.join(tmpdir(), "suanli-cli-node-"));
  });
  after(async () => {
    for (const child of running) await child.stop("SIGKILL");
    await devnet?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("starts a node from a config file that serves the API, and stops cleanly on SIGTERM", async () => {
    const file = path.join(dir, "node.json");
    await writeFile(
      file,
      JSON.stringify({
        dataDir: path.join(dir, "node-data"),
        log: { level: "warn" },
        chain: { rpcUrl: devnet.rpcUrl, deploymentsDir: devnet.deploymentsDir, pollingIntervalMs: 100 },
        p2p: { listen: ["/ip4/127.0.0.1/tcp/0"], allowPrivateAddresses: true, dht: { enabled: false } },
        api: { enabled: true, port: 9 },
      }),
    );
    // The flag overrides the file's port (9 is privileged: the node would fail to listen on it).
    const node = startCli(["node", "start", "--config", file, "--json", "--api.port", "0", "--metrics.enabled", "--metrics.port", "0"]);
    running.push(node);
    const ready = (await node.ready) as { apiUrl: string; metricsUrl: string | null; peerId: string; chainId: number; addrs: string[] };
    // metrics.enabled serves the Prometheus endpoint under `node start` too (not only `provider start`).
    assert.match(ready.metricsUrl ?? "", /^http:\/\/127\.0\.0\.1:\d+\/metrics$/);
    assert.notEqual(new URL(ready.metricsUrl!).port, new URL(ready.apiUrl).port);
    assert.match(await (await fetch(ready.metricsUrl!)).text(), /^suanli_p2p_peers \d+$/m);
    assert.equal(ready.chainId, 31337);
    assert.match(ready.apiUrl, /^http:\/\/127\.0\.0\.1:\d+$/);
    assert.match(ready.addrs[0]!, /^\/ip4\/127\.0\.0\.1\/tcp\/\d+\/p2p\//);
    // The index reads past events in the background; on a fresh devnet that takes a moment.
    const health = await waitFor("the index caught up", async () => {
      const body = healthSchema.parse(await (await fetch(`${ready.apiUrl}/v1/health`)).json());
      return body.checks.find((check) => check.name === "index")?.status === "ok" ? body : undefined;
    });
    assert.deepEqual(
      health.checks.map((check) => [check.name, check.status]),
      [
        ["chain", "ok"],
        ["index", "ok"],
        ["p2p", "degraded"],
        ["offers", "ok"],
      ],
    );
    assert.equal(await node.stop("SIGTERM"), 0, node.stderr());
  });

  it("refuses a bad config value, naming the key and the flag it came from, with exit code 2", async () => {
    const badPort = await runCli(["node", "start", "--api.port", "lots", "--chain.rpcUrl", devnet.rpcUrl]);
    assert.equal(badPort.code, 2, badPort.stderr);
    assert.match(badPort.stderr, /api\.port/);
    assert.match(badPort.stderr, /flag --api\.port/);
  });

  it("runs the devnet with a node and demo providers that register on-chain and publish offers", async () => {
    const deployments = path.join(dir, "devnet-deployments");
    const devnetCli = startCli(["devnet", "--no-bundler", "--port", "0", "--api-port", "0", "--demo-offers", "--attestor-nodes", "", "--deployments", deployments, "--json"], {
      timeoutMs: 90_000,
    });
    running.push(devnetCli);
    const ready = (await devnetCli.ready) as { apiUrl: string; chainId: number; contracts: { market: `0x${string}` }; demoProviders: string[]; node: { addrs: string[] } };
    assert.equal(ready.demoProviders.length, 3);
    // None is the README's sample provider (examples/provider.devnet.json), which a user starts
    // beside this devnet: one wallet in two nodes evicts the demo's offers (issue #40 item 4).
    const sample = JSON.parse(await readFile(path.join(process.cwd(), "examples/provider.devnet.json"), "utf8")) as { chain: { privateKey: `0x${string}` } };
    const sampleAddress = privateKeyToAccount(sample.chain.privateKey).address.toLowerCase();
    assert.ok(!ready.demoProviders.map((address) => address.toLowerCase()).includes(sampleAddress), `${sampleAddress} runs a demo provider too`);
    const offers = await waitFor(
      "the demo offers in the devnet node's book",
      async () => {
        const page = offerPageSchema.parse(await (await fetch(`${ready.apiUrl}/v1/offers`)).json());
        return page.total === 6 ? page : undefined;
      },
      { timeoutMs: 20_000, intervalMs: 200 },
    );
    assert.equal(offers.items.filter((offer) => offer.attested).length, 5);
    assert.deepEqual([...new Set(offers.items.map((offer) => offer.provider))].sort(), [...ready.demoProviders].sort());
    const providers = providerPageSchema.parse(await (await fetch(`${ready.apiUrl}/v1/providers`)).json());
    assert.equal(providers.total, 3);
    // The demo providers publish offers but rent nothing: a reservation says so with a 4xx that
    // names it (issue #22 item 6), not a 502 as if the provider were down.
    const renter = devnetAccount(4);
    const offer = offers.items[0]!;
    const message: ReserveRequest = {
      renter: renter.address,
      provider: offer.provider,
      machineId: offer.machineId,
      units: 1,
      duration: 3600,
      interruptible: false,
      bidPerUnitSecond: 0n,
      issuedAt: Math.floor(Date.now() / 1000),
      nonce: `0x${"ab".repeat(32)}`,
    };
    const signature = await renter.signTypedData({
      domain: suanliDomain(ready.chainId, ready.contracts.market),
      types: { ReserveRequest: suanliTypes.ReserveRequest },
      primaryType: "ReserveRequest",
      message,
    });
    const reserved = await fetch(`${ready.apiUrl}/v1/reservations`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ request: { ...message, bidPerUnitSecond: "0" }, signature }),
    });
    const answer = (await reserved.json()) as { error: { name: string; message: string } };
    assert.equal(reserved.status, 409, JSON.stringify(answer));
    assert.equal(answer.error.name, "ProviderNotRentingError");
    assert.match(answer.error.message, /does not serve reservations/);
    assert.equal(await devnetCli.stop("SIGTERM"), 0, devnetCli.stderr());
  });

  it("reads config flags as --<dotted key> <value>, --<key>=<value> or a bare --<key> (true)", () => {
    assert.deepEqual(parseConfigFlags(["--api.port", "9090", "--chain.rpcUrl=http://127.0.0.1:8545", "--api.enabled", "--log.level", "debug"]), {
      "api.port": "9090",
      "chain.rpcUrl": "http://127.0.0.1:8545",
      "api.enabled": "true",
      "log.level": "debug",
    });
    assert.throws(
      () => parseConfigFlags(["stray"]),
      (error: Error & { exitCode?: number }) => error.name === "CliError" && error.exitCode === 2,
    );
    assert.throws(() => parseConfigFlags(["--api..port", "1"]), { name: "CliError" });
  });

  it("refuses devnet node flags without --api-port", async () => {
    const result = await runCli(["devnet", "--port", "0", "--demo-offers"]);
    assert.equal(result.code, 2);
    assert.match(result.stderr, /--demo-offers needs --api-port/);
  });
});

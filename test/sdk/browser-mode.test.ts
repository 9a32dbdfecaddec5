import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { readdir, readFile } from "node:fs/promises";
import path from "node:path";
import { http } from "viem";
import { devnetAccount } from "../../common/devnet.js";
import { sealingKeyPairFromSeed, verifySealingKey } from "../../common/sealed.js";
import type { Logger } from "../../node/log/logger.js";
import { createClient as createBrowserClient } from "../../sdk/browser.js";
import { createClient, type SuanliClient } from "../../sdk/index.js";
import { startBundleServer, type BundleServer } from "../support/bundles.js";
import { startTestDaemon } from "../support/daemons.js";
import { fund, startDevnet, type Devnet } from "../support/devnet.js";
import { startTestProvider, type TestProvider } from "../support/provider.js";
import { waitFor } from "../support/wait.js";

/**
 * The browser path without a browser: the client talks to a node's HTTP API only (no libp2p),
 * and its wallet is an EIP-1193 provider holding the key (here the devnet's JSON-RPC endpoint,
 * which signs for its unlocked accounts exactly as an injected wallet answers eth_signTypedData_v4
 * and eth_sendTransaction).
 */
describe("SDK over a node's HTTP API with an injected-style wallet", function () {
  this.timeout(120_000);
  let devnet: Devnet;
  let bundles: BundleServer;
  let provider: TestProvider;
  let node: Awaited<ReturnType<typeof startTestDaemon>>;
  let client: SuanliClient;
  const renter = devnetAccount(6);
  /** Everything the relay node logs, at every level, serialized. */
  const relayLog: string[] = [];
  const recorder = (bindings: Record<string, unknown>): Logger => {
    const record = (level: string) => (message: string, context?: unknown, error?: unknown) =>
      relayLog.push(
        `${level} ${message} ${JSON.stringify({ ...bindings, ...(context as object) }, (_k, v: unknown) => (typeof v === "bigint" ? v.toString() : v))} ${error instanceof Error ? `${error.message} ${String(error.cause)}` : ""}`,
      );
    return {
      trace: record("trace"),
      debug: record("debug"),
      info: record("info"),
      warn: record("warn"),
      error: record("error"),
      child: (more) => recorder({ ...bindings, ...more }),
      level: "trace",
    };
  };
  const relayLogger = recorder({});

  before(async () => {
    devnet = await startDevnet({ wallClockBlocks: true });
    bundles = await startBundleServer();
    provider = await startTestProvider(devnet, 1);
    node = await startTestDaemon(devnet, { p2p: { bootstrap: [provider.peer.addr] }, api: { enabled: true, host: "127.0.0.1", port: 0 } }, { logger: relayLogger });
    await fund(devnet, await devnet.wallet(6), 50_000_000n);
    client = await createClient({
      rpcUrl: devnet.rpcUrl,
      nodeUrl: node.api!.url,
      account: renter.address,
      walletTransport: http(devnet.rpcUrl),
      deployment: devnet.deployment,
    });
    await waitFor("the offer through the node's API", async () => (await client.queryOffers()).length === 1, { timeoutMs: 20_000 });
  });
  after(async () => {
    await client?.close();
    await node?.close();
    await provider?.close();
    await bundles?.close();
    await devnet?.close();
  });

  it("reserves, opens (permit signed by the wallet), runs the task and settles, all through the node", async () => {
    const bundle = await bundles.bundle({ "run.sh": "echo hello from the browser path; mkdir -p output; echo 1 > output/x" });
    const submitted = await client.submitTask({
      gpuType: "A100",
      gpuCount: 1,
      duration: 30,
      maxPricePerGpuHour: "1",
      attestedOnly: false,
      bundleUrl: bundle.url,
      sha256: bundle.sha256,
      command: "sh run.sh",
    });
    assert.equal(submitted.provider, provider.peer.address);
    const lines: string[] = [];
    for await (const line of client.logs(submitted.taskId)) lines.push(line.text);
    assert.ok(lines.some((line) => line.includes("hello from the browser path")));
    const receipt = await client.wait(submitted.taskId);
    assert.equal(receipt.state, "succeeded");
    assert.equal(receipt.completion?.verified, true);
    assert.equal(receipt.leases[0]!.cost + receipt.leases[0]!.refunded, receipt.leases[0]!.deposit);
  });

  it("offers carry the provider's wallet-signed sealing key (the one it accepts with), through the node's API", async () => {
    const [offer] = await client.queryOffers();
    assert.ok(offer!.sealingKey, "the offer publishes a sealing key");
    assert.equal(await verifySealingKey(offer!.sealingKey, provider.peer.address, devnet.deployment.chainId), true);
    // The provider's own current key: the pair its newest seed derives (what it signs into every acceptance).
    const keysDir = path.join(provider.daemon.config.dataDir, "sealing-keys");
    const newest = (await readdir(keysDir)).sort((a, b) => parseInt(b) - parseInt(a))[0]!;
    const stored = JSON.parse(await readFile(path.join(keysDir, newest), "utf8")) as { seed: string; expiresAt: number };
    assert.equal(offer!.sealingKey.publicKey, (await sealingKeyPairFromSeed(Buffer.from(stored.seed, "hex"))).publicKey);
    assert.equal(offer!.sealingKey.expiresAt, stored.expiresAt);
  });

  it("a secret travels sealed to the provider's key: the relay forwards and keeps only ciphertext, the task gets the value", async () => {
    const secret = `hf_${randomBytes(12).toString("hex")}`;
    const bundle = await bundles.bundle({ "run.sh": 'printf %s "$HF_TOKEN" | sha256sum | cut -c1-64 | sed "s/^/token-sha256=/"' });
    // What the browser sends to the relay node, and what the relay answers.
    const sent: { url: string; body: string }[] = [];
    const realFetch = globalThis.fetch;
    globalThis.fetch = (async (input: Parameters<typeof fetch>[0], init?: Parameters<typeof fetch>[1]) => {
      const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
      if (url.startsWith(node.api!.url)) sent.push({ url, body: typeof init?.body === "string" ? init.body : "" });
      return realFetch(input, init);
    }) as typeof fetch;
    let submitted;
    try {
      submitted = await client.submitTask({
        gpuType: "A100",
        gpuCount: 1,
        duration: 30,
        maxPricePerGpuHour: "1",
        attestedOnly: false,
        bundleUrl: bundle.url,
        sha256: bundle.sha256,
        command: "sh run.sh",
        env: { MODE: "plain", HF_TOKEN: { value: secret, secret: true } },
      });
    } finally {
      globalThis.fetch = realFetch;
    }
    const receipt = await client.wait(submitted.taskId);
    assert.equal(receipt.state, "succeeded");
    const lines: string[] = [];
    for await (const line of client.logs(submitted.taskId)) lines.push(line.text);
    const expected = createHash("sha256").update(secret).digest("hex");
    assert.ok(lines.includes(`token-sha256=${expected}`), `the task got the plaintext:\n${lines.join("\n")}`);

    const taskCall = sent.find((call) => /\/v1\/leases\/\d+\/task$/.test(call.url));
    assert.ok(taskCall, "the task went through the relay");
    const forwarded = JSON.parse(taskCall.body) as { spec: { env: Record<string, unknown> } };
    assert.equal(forwarded.spec.env.MODE, "plain");
    assert.match((forwarded.spec.env.HF_TOKEN as { sealed: string }).sealed, /^0x[0-9a-f]+$/);
    for (const call of sent) assert.ok(!call.body.includes(secret), `${call.url} carried the plaintext`);
    assert.ok(!relayLog.some((line) => line.includes(secret)), "the relay's logs hold no plaintext");
    assert.ok(relayLog.length > 0, "the relay logged (the check above looked at something)");
    const stored = await readTree(node.config.dataDir);
    assert.ok(stored.length > 0 && !stored.includes(Buffer.from(secret)), "the relay's data dir holds no plaintext");
    assert.ok(!(await readTree(provider.daemon.config.dataDir)).includes(Buffer.from(secret)), "the provider's store holds no plaintext either");
  });

  it("the browser entry's client: offers and the bundle digest check work, exec and forward throw TaskIoUnsupportedError at once", async () => {
    const browserClient = await createBrowserClient({
      rpcUrl: devnet.rpcUrl,
      nodeUrl: node.api!.url,
      account: renter.address,
      walletTransport: http(devnet.rpcUrl),
      deployment: devnet.deployment,
    });
    try {
      await waitFor("the offer through the browser client", async () => (await browserClient.queryOffers()).length === 1, { timeoutMs: 20_000 });
      // exec and forward are refused before anything else: even an unknown task id gets TaskIoUnsupportedError, not UnknownTaskError.
      await assert.rejects(browserClient.exec("task-unknown", "ls"), { name: "TaskIoUnsupportedError", message: /exec needs the Node SDK/ });
      await assert.rejects(browserClient.forward("task-unknown", { port: 8000 }), { name: "TaskIoUnsupportedError", message: /forward needs the Node SDK/ });
      // The output download goes through the node's relay instead (test/e2e/task-output-relay.test.ts): an unknown task is just that.
      await assert.rejects(browserClient.downloadOutput("task-unknown"), { name: "UnknownTaskError" });
      // The bundle digest is checked without node:crypto (streaming SHA-256 that also runs in browsers): a wrong one costs nothing.
      const bundle = await bundles.bundle({ "run.sh": "echo never runs" });
      const leasesBefore = (await browserClient.tasks()).length;
      await assert.rejects(
        browserClient.submitTask({
          gpuType: "A100",
          gpuCount: 1,
          duration: 30,
          maxPricePerGpuHour: "1",
          attestedOnly: false,
          bundleUrl: bundle.url,
          sha256: "ab".repeat(32),
          command: "sh run.sh",
        }),
        (error: Error & { fields?: string[] }) => {
          assert.equal(error.name, "InvalidInputError");
          assert.deepEqual(error.fields, ["sha256"]);
          assert.ok(error.message.includes(`has sha256 ${bundle.sha256.replace(/^0x/, "").toLowerCase()}`), error.message);
          return true;
        },
      );
      assert.equal((await browserClient.tasks()).length, leasesBefore, "nothing was submitted");
    } finally {
      await browserClient.close();
    }
  });
});

/** Every file under `dir`, concatenated (level's log and tables, the node's keys). */
async function readTree(dir: string): Promise<Buffer> {
  const parts: Buffer[] = [];
  for (const entry of await readdir(dir, { recursive: true, withFileTypes: true })) {
    if (entry.isFile()) parts.push(await readFile(path.join(entry.parentPath, entry.name)).catch(() => Buffer.alloc(0)));
  }
  return Buffer.concat(parts);
}

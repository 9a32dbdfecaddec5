import assert from "node:assert/strict";
import { http } from "viem";
import { devnetAccount } from "../../common/devnet.js";
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

  before(async () => {
    devnet = await startDevnet({ wallClockBlocks: true });
    bundles = await startBundleServer();
    provider = await startTestProvider(devnet, 1);
    node = await startTestDaemon(devnet, { p2p: { bootstrap: [provider.peer.addr] }, api: { enabled: true, host: "127.0.0.1", port: 0 } });
    await fund(devnet, await devnet.wallet(6), 50_000_000n);
    client = await createClient({
      rpcUrl: devnet.rpcUrl,
      nodeUrl: node.api!.url,
      account: renter.address,
      walletTransport: http(devnet.rpcUrl),
      deployment: devnet.deployment as never,
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
    assert.equal(receipt.leases[0].cost + receipt.leases[0].refunded, receipt.leases[0].deposit);
  });
});

import assert from "node:assert/strict";
import { parseEther } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { readMachine } from "../../common/chain/market.js";
import { createClient, type SubmitTaskReturnType, type SuanliClient } from "../../sdk/index.js";
import { startBundleServer, type BundleServer } from "../support/bundles.js";
import { startTestDaemon } from "../support/daemons.js";
import { fund, startDevnet, type Devnet } from "../support/devnet.js";
import { startTestProvider, type TestProvider } from "../support/provider.js";
import { waitFor } from "../support/wait.js";
import { testTokenAbi } from "../../common/abi.js";

/**
 * Issue #5's race: 20 renters submit at once for 8 GPUs on three providers. Every unit is leased
 * at most once, every renter gets a lease or a clear explanation, and nobody's money is stuck.
 */
describe("20 renters racing for scarce GPUs (real providers, real chain)", function () {
  this.timeout(240_000);
  let devnet: Devnet;
  let bundles: BundleServer;
  const providers: TestProvider[] = [];
  let apiNode: Awaited<ReturnType<typeof startTestDaemon>>;
  const clients: SuanliClient[] = [];
  const FUNDS = 20_000_000n;

  before(async () => {
    devnet = await startDevnet({ wallClockBlocks: true });
    bundles = await startBundleServer();
    providers.push(await startTestProvider(devnet, 1));
    providers.push(await startTestProvider(devnet, 2));
    providers.push(await startTestProvider(devnet, 3, { provider: { inventory: { source: "declared", declared: [{ model: "A100-80GB", count: 4, region: "eu-west" }] } } }));
    apiNode = await startTestDaemon(devnet, { p2p: { bootstrap: providers.map((p) => p.peer.addr) }, api: { enabled: true, host: "127.0.0.1", port: 0 } });
    const bootstrap = providers.map((p) => p.peer.addr);
    for (let i = 0; i < 20; i++) {
      const account = privateKeyToAccount(generatePrivateKey());
      const gas = await devnet.admin.walletClient!.sendTransaction({ to: account.address, value: parseEther("1") });
      await devnet.admin.publicClient.waitForTransactionReceipt({ hash: gas });
      await fund(devnet, await devnet.wallet(account), FUNDS);
      // Half the renters use libp2p, half a node's HTTP API (the browser path).
      clients.push(
        i % 2 === 0
          ? await createClient({ rpcUrl: devnet.rpcUrl, account, bootstrap, deployment: devnet.deployment })
          : await createClient({ rpcUrl: devnet.rpcUrl, account, nodeUrl: apiNode.api!.url, deployment: devnet.deployment }),
      );
    }
    for (const client of clients) {
      await waitFor("every offer seen by every renter", async () => (await client.queryOffers({ gpuType: "A100" })).reduce((n, o) => n + o.freeUnits, 0) === 8, {
        timeoutMs: 30_000,
      });
    }
  });
  after(async () => {
    for (const client of clients) await client.close().catch(() => undefined);
    await apiNode?.close();
    for (const provider of providers) await provider.close();
    await bundles?.close();
    await devnet?.close();
  });

  it("leases each unit at most once; every loser gets an explanation; no deposit is stuck", async () => {
    const bundle = await bundles.bundle({ "hold.sh": "echo holding; sleep 30" });
    const results = await Promise.allSettled(
      clients.map((client) =>
        client.submitTask({
          gpuType: "A100",
          gpuCount: 1,
          duration: 120,
          maxPricePerGpuHour: "1",
          attestedOnly: false,
          bundleUrl: bundle.url,
          sha256: bundle.sha256,
          command: "sh hold.sh",
        }),
      ),
    );
    const won = results.filter((r): r is PromiseFulfilledResult<SubmitTaskReturnType> => r.status === "fulfilled").map((r) => r.value);
    const lost = results.filter((r): r is PromiseRejectedResult => r.status === "rejected").map((r) => r.reason as Error);

    // Scarce: 8 units, 20 renters. Every unit is sold, none twice.
    assert.equal(won.length, 8, `8 leases expected; losers said: ${lost.map((e) => e.name).join(", ")}`);
    const perMachine = new Map<string, number>();
    for (const lease of won) {
      const key = `${lease.attempt.provider}:${lease.attempt.machineId}`;
      perMachine.set(key, (perMachine.get(key) ?? 0) + lease.attempt.units);
    }
    for (const provider of providers) {
      const machine = provider.agent.machines[0]!;
      const onChain = await readMachine(devnet.admin.publicClient, devnet.deployment.contracts.registry!, machine.machineId);
      assert.ok(onChain.onDemandUnits <= onChain.units, "the chain never sold more than the machine has");
      assert.equal(perMachine.get(`${provider.peer.address}:${machine.machineId}`) ?? 0, onChain.onDemandUnits);
    }

    // Every loser has a clear reason: nothing fits any more, with the explanation.
    for (const error of lost) {
      assert.ok(["NoMatchError", "AllocationError"].includes(error.name), `${error.name}: ${error.message}`);
      assert.ok(error.message.length > 20, "the explanation says why");
    }

    // Money: losers hold exactly what they were given; winners' deposits are in their leases.
    const balanceOf = (address: `0x${string}`) =>
      devnet.admin.publicClient.readContract({ address: devnet.deployment.contracts.token, abi: testTokenAbi, functionName: "balanceOf", args: [address] });
    const winners = new Set(won.map((w) => w.attempt.leaseId));
    for (const [i, client] of clients.entries()) {
      const result = results[i]!;
      const balance = await balanceOf(client.address!);
      if (result.status === "rejected") assert.equal(balance, FUNDS, "a renter without a lease has all its money");
      else assert.equal(balance, FUNDS - result.value.attempt.deposit, "a winner's deposit is escrowed in its lease");
    }

    // Winners cancel: their unaccrued deposits come back.
    for (const [i, client] of clients.entries()) {
      const result = results[i]!;
      if (result.status !== "fulfilled") continue;
      const receipt = await client.cancel(result.value.taskId);
      assert.ok(winners.has(receipt.leases[0]!.leaseId));
      assert.equal(await balanceOf(client.address!), FUNDS - receipt.totalCost);
    }
  });
});

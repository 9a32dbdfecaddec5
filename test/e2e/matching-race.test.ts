import assert from "node:assert/strict";
import { readMachine } from "../../common/chain/market.js";
import type { SubmitTaskReturnType, SuanliClient } from "../../sdk/index.js";
import type { BundleServer } from "../support/bundles.js";
import type { Devnet } from "../support/devnet.js";
import type { TestProvider } from "../support/provider.js";
import { startRenterMarket, type RenterMarket } from "../support/renter-market.js";
import { testTokenAbi } from "../../common/abi.js";

/**
 * Issue #5's race: 20 renters submit at once for 8 GPUs on three providers. Every unit is leased
 * at most once, every renter gets a lease or a clear explanation, and nobody's money is stuck.
 */
describe("20 renters racing for scarce GPUs (real providers, real chain)", function () {
  this.timeout(240_000);
  let market: RenterMarket;
  let devnet: Devnet;
  let bundles: BundleServer;
  let providers: TestProvider[];
  let clients: SuanliClient[];
  const FUNDS = 20_000_000n;

  before(async () => {
    // Three providers: two of two A100s and one of four (8 units), and 20 renters who see every offer,
    // half through libp2p, half through a node's HTTP API (the browser path).
    const fourA100s = { provider: { inventory: { source: "declared", declared: [{ model: "A100-80GB", count: 4, region: "eu-west" }] } } };
    market = await startRenterMarket({
      name: "matching-race",
      providers: [{}, {}, fourA100s],
      apiNode: true,
      fund: FUNDS,
      extraRenters: 19,
      extraRentersVia: "alternate",
      freeUnits: 2,
      offers: 3,
      offerTimeoutMs: 30_000,
    });
    ({ devnet, bundles, providers } = market);
    clients = [market.client, ...market.others];
  });
  after(async () => market?.close());

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

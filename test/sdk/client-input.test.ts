import assert from "node:assert/strict";
import { leaseMarketAbi, testTokenAbi } from "../../common/abi.js";
import { devnetAccount, devnetPrivateKey } from "../../common/devnet.js";
import { offerKey } from "../../common/offers/message.js";
import { createClient, type SuanliClient } from "../../sdk/index.js";
import { startTestDaemon } from "../support/daemons.js";
import { fund, registerProvider, startDevnet, type Devnet } from "../support/devnet.js";
import { waitFor } from "../support/wait.js";

const ZERO32 = `0x${"0".repeat(64)}` as const;
const SHA = "ab".repeat(32);

describe("SDK: offers, explanations and bad input (devnet + a provider node)", function () {
  this.timeout(90_000);
  let devnet: Devnet;
  let provider: Awaited<ReturnType<typeof startTestDaemon>>;
  let client: SuanliClient;
  let readOnly: SuanliClient;
  let machineId: number;

  before(async () => {
    devnet = await startDevnet();
    provider = await startTestDaemon(devnet, { chain: { privateKey: devnetPrivateKey(1) } }, { publishesOffers: true });
    const wallet = await devnet.wallet(1);
    [machineId] = (await registerProvider(devnet, wallet, {
      peerId: provider.p2p.host.peerId.toString(),
      stake: 1_000_000_000n,
      machines: [{ model: "A100-80GB", units: 4, vramMiB: 81_920 }],
    })) as [number];
    await provider.offers.publisher!.set({
      machine: { machineId, model: "A100-80GB", units: 4, vramMiB: 81_920, interconnect: "nvlink", region: "eu-west", cluster: ZERO32 },
      // 700 base units per second = 2.52 USD per GPU-hour
      terms: { pricePerUnitSecond: 700n, minDuration: 60, maxDuration: 86_400, collateralBps: 2_000, startWindow: 120 },
      capacity: { freeUnits: 4 },
    });
    const bootstrap = [`${provider.p2p.host.getMultiaddrs()[0]!.toString()}`];
    client = await createClient({ rpcUrl: devnet.rpcUrl, account: devnetAccount(5), bootstrap, deployment: devnet.deploymentsDir });
    readOnly = await createClient({ rpcUrl: devnet.rpcUrl, bootstrap, deployment: devnet.deploymentsDir });
    await waitFor("the offer in the client's feed", async () => (await client.queryOffers()).length === 1, { timeoutMs: 15_000 });
  });
  after(async () => {
    await client?.close();
    await readOnly?.close();
    await provider?.close();
    await devnet?.close();
  });

  it("lists the live offer with its model and price per GPU-hour", async () => {
    const offers = await client.queryOffers({ gpuType: "A100" });
    assert.equal(offers.length, 1);
    assert.equal(offers[0]!.key, offerKey(devnetAccount(1).address, machineId));
    assert.equal(offers[0]!.model, "A100-80GB");
    assert.equal(offers[0]!.pricePerGpuHour, "2.52");
    assert.equal(offers[0]!.freeUnits, 4);
    assert.equal(offers[0]!.attested, false);
    assert.deepEqual(await client.queryOffers({ gpuType: "H100" }), []);
  });

  it("explains a no-match: unattested machines, then the price cap", async () => {
    const attested = await client.match({ gpuType: "A100", gpuCount: 2, duration: 600, maxPricePerGpuHour: "3" });
    assert.equal(attested.ok, false);
    if (attested.ok) return;
    assert.match(attested.explanation.message, /attest/i);

    const cheap = await client.match({ gpuType: "A100", gpuCount: 2, duration: 600, maxPricePerGpuHour: "1", attestedOnly: false });
    assert.equal(cheap.ok, false);
    if (cheap.ok) return;
    assert.match(cheap.explanation.message, /2\.52/);
    assert.match(cheap.explanation.message, /above your cap/);

    const fits = await client.match({ gpuType: "A100", gpuCount: 2, duration: 600, maxPricePerGpuHour: "3", attestedOnly: false });
    assert.equal(fits.ok, true);
  });

  it("refuses bad task parameters naming the field, before anything is reserved or paid", async () => {
    const market = devnet.deployment.contracts.market!;
    const before = await devnet.admin.publicClient.readContract({ address: market, abi: leaseMarketAbi, functionName: "nextLeaseId" });
    const base = {
      gpuType: "A100",
      gpuCount: 1,
      duration: 600,
      maxPricePerGpuHour: "3",
      attestedOnly: false,
      bundleUrl: "http://127.0.0.1:1/b.tar.gz",
      sha256: SHA,
      command: "true",
    };
    const cases: [Record<string, unknown>, string][] = [
      [{ ...base, gpuType: "B9000" }, "gpuType"],
      [{ ...base, bundleUrl: "not a url" }, "bundleUrl"],
      [{ ...base, sha256: undefined }, "sha256"],
      [{ ...base, gpuCount: 0 }, "gpuCount"],
      [{ ...base, duration: -5 }, "duration"],
      [{ ...base, maxPricePerGpuHour: "cheap" }, "maxPricePerGpuHour"],
    ];
    for (const [params, field] of cases) {
      await assert.rejects(client.submitTask(params as never), (error: unknown) => {
        assert.equal((error as Error).name, "InvalidInputError", `${field}: ${(error as Error).message}`);
        assert.ok((error as { fields: string[] }).fields.includes(field), `${field} named in ${(error as Error).message}`);
        return true;
      });
    }
    await assert.rejects(readOnly.submitTask(base as never), { name: "NoWalletError" });
    const after = await devnet.admin.publicClient.readContract({ address: market, abi: leaseMarketAbi, functionName: "nextLeaseId" });
    assert.equal(after, before, "no lease was opened");
  });

  it("refuses a task the wallet cannot pay, moving no funds", async () => {
    const poor = await createClient({
      rpcUrl: devnet.rpcUrl,
      account: devnetAccount(6),
      bootstrap: [`${provider.p2p.host.getMultiaddrs()[0]!.toString()}`],
      deployment: devnet.deploymentsDir,
    });
    try {
      const wallet = await devnet.wallet(6);
      await fund(devnet, wallet, 1_000n);
      await waitFor("offers", async () => (await poor.queryOffers()).length === 1, { timeoutMs: 15_000 });
      await assert.rejects(
        poor.submitTask({
          gpuType: "A100",
          gpuCount: 1,
          duration: 600,
          maxPricePerGpuHour: "3",
          attestedOnly: false,
          bundleUrl: "http://127.0.0.1:1/b.tar.gz",
          sha256: SHA,
          command: "true",
        }),
        (error: unknown) => {
          assert.equal((error as Error).name, "InsufficientBalanceError");
          assert.match((error as Error).message, /faucet/);
          return true;
        },
      );
      const balance = await devnet.admin.publicClient.readContract({
        address: devnet.deployment.contracts.token,
        abi: testTokenAbi,
        functionName: "balanceOf",
        args: [devnetAccount(6).address],
      });
      assert.equal(balance, 1_000n);
    } finally {
      await poor.close();
    }
  });
});

/**
 * The explorer page in headless Chromium (Debian's chromium, driven by playwright-core) against a
 * running devnet node: an embedded chain with the contracts deployed, the API serving an in-memory
 * offer book seeded with signed offers. The page must show the offers, filter them, open a
 * provider, chart prices, and show a new offer the moment the node learns of it.
 */
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { chromium, type BrowserContext, type Page } from "playwright-core";
import { healthSchema } from "../../common/api/market.js";
import { devnetAccount } from "../../common/devnet.js";
import { offerKey } from "../../common/offers/message.js";
import { InMemoryMarketSource } from "../../node/api/memory-source.js";
import { createApiServer, type ApiServer } from "../../node/api/server.js";
import { connectChain } from "../../node/chain/clients.js";
import { deployContracts } from "../../node/chain/deploy.js";
import { startEmbeddedChain, type EmbeddedChain } from "../../node/chain/embedded.js";
import { buildExplorer } from "../../scripts/build-explorer.js";
import { accounts, machineRecord, providerRecord, signedOfferEntry, TEST_MARKET } from "../support/market.js";

const CHROMIUM = process.env.SUANLI_CHROMIUM ?? "/usr/bin/chromium";

describe("explorer page in headless Chromium against a devnet node", function () {
  let chain: EmbeddedChain;
  let api: ApiServer;
  let source: InMemoryMarketSource;
  let base: string;
  let context: BrowserContext;
  let profile: string;
  let page: Page;
  const outsideRequests: string[] = [];
  const pageErrors: string[] = [];
  const now = Math.floor(Date.now() / 1000);

  before(async function () {
    if (!existsSync(CHROMIUM)) {
      throw new Error(
        `Chromium is required for the explorer test and was not found at ${CHROMIUM}. ` +
          "Install Debian's package (`apt-get install -y chromium`; .ci/run does it) or set SUANLI_CHROMIUM to its path.",
      );
    }
    await buildExplorer();

    chain = await startEmbeddedChain();
    const clients = await connectChain({ rpcUrl: chain.rpcUrl, account: devnetAccount(0) });
    const deployment = await deployContracts({ publicClient: clients.publicClient, walletClient: clients.walletClient! });
    source = new InMemoryMarketSource({ publicClient: clients.publicClient, domain: { chainId: deployment.chainId, verifyingContract: TEST_MARKET } });
    const { providerA, providerB, attestor } = accounts;
    // Offers over the last hour, so the chart has more than one bucket.
    const seeds = [
      { provider: providerA, machineId: 1, model: "A100-80GB", pricePerUnitSecond: 400n, region: "eu-west", attestor, at: now - 3000 },
      { provider: providerA, machineId: 2, model: "H100-80GB-SXM", pricePerUnitSecond: 900n, region: "eu-west", attestor, at: now - 2000 },
      { provider: providerB, machineId: 3, model: "A100-80GB", pricePerUnitSecond: 650n, region: "us-east", at: now - 1000, units: 4, onDemandUnits: 3 },
      { provider: providerB, machineId: 4, model: "RTX4090-24GB", pricePerUnitSecond: 90n, region: "us-east", attestor, at: now - 100, units: 2, vramMiB: 24_564 },
    ];
    for (const seed of seeds) source.putOffer(await signedOfferEntry(seed));
    source.putProvider(
      providerRecord(providerA, [machineRecord(providerA.address, 1, "A100-80GB"), machineRecord(providerA.address, 2, "H100-80GB-SXM")], {
        stake: 25_000_000_000n,
        freeStake: 24_000_000_000n,
      }),
    );
    api = await createApiServer({ source, deployment, options: { port: 0, host: "127.0.0.1" } });
    base = await api.listen();

    profile = await mkdtemp(path.join(tmpdir(), "suanli-chromium-"));
    context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        // Resolve no host name but loopback: the page may reach the node and nothing else.
        "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
      ],
    });
    page = context.pages()[0] ?? (await context.newPage());
    page.on("request", (request) => {
      if (!request.url().startsWith(base)) outsideRequests.push(request.url());
    });
    page.on("pageerror", (error) => pageErrors.push(error.message));
  });

  after(async () => {
    await context?.close();
    await api?.close();
    await chain?.close();
    if (profile) await rm(profile, { recursive: true, force: true });
  });

  const rowKeys = () => page.$$eval("#offers-table tbody tr[data-key]", (rows) => rows.map((row) => (row as HTMLElement).dataset.key));
  const waitForKeys = async (expected: string[]) => {
    await page.waitForFunction(
      (keys) => {
        const rows = [...document.querySelectorAll<HTMLElement>("#offers-table tbody tr[data-key]")].map((row) => row.dataset.key);
        return rows.length === keys.length && rows.every((key, i) => key === keys[i]);
      },
      expected,
      { timeout: 5000 },
    );
  };
  const key = (provider: { address: string }, machineId: number) => offerKey(provider.address, machineId);

  it("serves the devnet node's health with the chain up", async () => {
    const health = healthSchema.decode(await (await fetch(`${base}/v1/health`)).json());
    assert.equal(health.status, "ok");
    assert.match(health.checks.find((check) => check.name === "chain")?.detail ?? "", /^chain 31337 at block \d+/);
  });

  it("loads the offers, cheapest first, with the node's chain and token", async () => {
    await page.goto(`${base}/explorer/`);
    await page.waitForSelector("body[data-ready=true]", { timeout: 10_000 });
    assert.deepEqual(await rowKeys(), [
      key(accounts.providerB, 4),
      key(accounts.providerA, 1),
      key(accounts.providerB, 3),
      key(accounts.providerA, 2),
    ]);
    assert.match((await page.textContent("#chain")) ?? "", /chain 31337 · token tUSD/);
    // 400 base units per second = 1.44 tUSD per GPU-hour (6 decimals).
    assert.equal(await page.textContent(`tr[data-key="${key(accounts.providerA, 1)}"] td.price`), "1.44 tUSD");
    assert.equal(await page.textContent(`tr[data-key="${key(accounts.providerB, 3)}"] td.free`), "1 / 4");
    await page.waitForSelector("#live[data-state=open]", { timeout: 5000 });
  });

  it("filters by model, price, free GPUs, region and attestation", async () => {
    await page.selectOption("#f-model", "A100-80GB");
    await waitForKeys([key(accounts.providerA, 1), key(accounts.providerB, 3)]);
    await page.fill("#f-max-price", "2");
    await waitForKeys([key(accounts.providerA, 1)]);
    await page.fill("#f-max-price", "");
    await page.fill("#f-min-free", "2");
    await waitForKeys([key(accounts.providerA, 1)]);
    await page.fill("#f-min-free", "");
    await page.fill("#f-region", "us-east");
    await waitForKeys([key(accounts.providerB, 3)]);
    await page.fill("#f-region", "");
    await page.selectOption("#f-attested", "true");
    await waitForKeys([key(accounts.providerA, 1)]);
    await page.selectOption("#f-attested", "");
    await waitForKeys([key(accounts.providerA, 1), key(accounts.providerB, 3)]);

    // A bad value is explained, with the field, instead of showing stale rows as if they matched.
    await page.fill("#f-region", "eu west");
    await page.waitForSelector("#filter-error:not([hidden])", { timeout: 5000 });
    assert.match((await page.textContent("#filter-error")) ?? "", /region/);
    await page.fill("#f-region", "");
    await page.waitForSelector("#filter-error[hidden]", { state: "attached", timeout: 5000 });
  });

  it("shows a new offer that matches the filters the moment the node learns of it", async () => {
    // Still filtered to A100-80GB. An H100 offer arrives too and must not show.
    const arriving = await signedOfferEntry({ provider: accounts.providerB, machineId: 5, model: "A100-80GB", pricePerUnitSecond: 500n, region: "ap-south", at: now, attestor: accounts.attestor });
    const other = await signedOfferEntry({ provider: accounts.providerB, machineId: 6, model: "H100-80GB-SXM", pricePerUnitSecond: 100n, at: now });
    source.putOffer(other);
    source.putOffer(arriving);
    await waitForKeys([key(accounts.providerA, 1), key(accounts.providerB, 5), key(accounts.providerB, 3)]);
    assert.equal(await page.getAttribute(`tr[data-key="${key(accounts.providerB, 5)}"]`, "class"), "new");
    assert.equal(await page.textContent(`tr[data-key="${key(accounts.providerB, 5)}"] td.attested`), "yes");

    // And one that leaves the book disappears.
    source.removeOffer(key(accounts.providerB, 3), "expired");
    await waitForKeys([key(accounts.providerA, 1), key(accounts.providerB, 5)]);
  });

  it("charts the price per GPU-hour of a model", async () => {
    await page.selectOption("#chart-window", "3600:60");
    await page.selectOption("#chart-model", "A100-80GB");
    await page.waitForFunction(() => document.querySelectorAll("#price-chart circle.dot").length >= 2, undefined, { timeout: 5000 });
    assert.match((await page.textContent("#chart-summary")) ?? "", /Now: 2 offers/);
  });

  it("opens a provider's stake, reputation and machines", async () => {
    await page.click(`tr[data-key="${key(accounts.providerA, 1)}"] .provider-link`);
    await page.waitForSelector("#provider:not([hidden]) #provider-machines tbody tr", { timeout: 5000 });
    assert.equal(await page.textContent("#provider-address"), accounts.providerA.address);
    const facts = (await page.textContent("#provider-facts")) ?? "";
    assert.match(facts, /Stake25,000 tUSD/);
    assert.match(facts, /Leases completed12/);
    assert.equal(await page.$$eval("#provider-machines tbody tr", (rows) => rows.length), 2);
  });

  it("fetched nothing from anywhere but the node, and raised no script error", () => {
    assert.deepEqual(outsideRequests, []);
    assert.deepEqual(pageErrors, []);
  });
});

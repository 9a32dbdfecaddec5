/**
 * The renter console's "Sign in with a passkey" (issue 38, docs/console.md) in headless Chromium with a virtual
 * WebAuthn authenticator (the Chrome DevTools Protocol's WebAuthn domain, through playwright-core's CDP session):
 * Chromium's own navigator.credentials creates the passkey and signs each user operation, as a phone's or laptop's
 * would after a fingerprint. The page is opened as http://localhost:<port>: WebAuthn needs a secure context and a
 * relying party that is a domain (Chromium refuses 127.0.0.1: "This is an invalid domain").
 *
 * Against a devnet with ERC-4337 (Alto as the bundler, the deployment's SponsorPaymaster and a node running the sponsor
 * and the HTTP API, whose console config names both) and a real provider: a passkey renter with 0 ETH and some tUSD
 * signs in, rents, follows the logs, gets the receipt, extends and cancels a second task. The authenticator's
 * assertions are counted (CDP's `WebAuthn.credentialAsserted`): each is one prompt a person answers. The money is
 * checked on-chain: the renter pays exactly the receipts' cost, never holds ETH, and every operation's gas came out of
 * the paymaster's EntryPoint deposit.
 */
import assert from "node:assert/strict";
import { mkdir, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import type { CDPSession, Page } from "playwright-core";
import { parseEther, parseEventLogs, parseUnits, type Address, type Hex } from "viem";
import { entryPoint08Abi } from "viem/account-abstraction";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { leaseMarketAbi, passkeyAccountFactoryAbi, testTokenAbi } from "../../common/abi.js";
import { ENTRY_POINT_08 } from "../../common/account-abstraction.js";
import { startDevnetBundler } from "../../node/devnet/bundler.js";
import { buildConsole } from "../../scripts/build-explorer.js";
import { launchChromium } from "../support/chromium.js";
import { submitAndWait } from "../support/console-page.js";
import { startTestDaemon } from "../support/daemons.js";
import { freePort } from "../support/ports.js";
import { startMarket, type Market } from "../support/renter-market.js";
import { waitFor } from "../support/wait.js";

const SHOTS = path.resolve(process.env.SUANLI_SCREENSHOTS ?? path.join(process.cwd(), ".suanli-screenshots"), "console-passkey");

describe("renter console: Sign in with a passkey (Chromium's virtual WebAuthn authenticator), 0 ETH, the sponsor paying the gas", function () {
  this.timeout(240_000);
  let market: Market;
  let browser: Awaited<ReturnType<typeof launchChromium>> | undefined;
  let page: Page;
  let cdp: CDPSession;
  let authenticatorId: string;
  let consoleUrl: string;
  let renter: Address;
  /** Assertions the authenticator made (prompts a person answered), and credentials it created. */
  let asserted = 0;
  let created = 0;
  const pageErrors: string[] = [];
  const sponsorKey = generatePrivateKey();

  const read = () => market.devnet.admin.publicClient;
  const contracts = () => market.devnet.deployment.contracts;
  const tokens = (address: Address) => read().readContract({ address: contracts().token, abi: testTokenAbi, functionName: "balanceOf", args: [address] });
  const paymasterDeposit = () => read().readContract({ address: ENTRY_POINT_08, abi: entryPoint08Abi, functionName: "balanceOf", args: [contracts().paymaster!] });
  /** The renter's user operations: how many succeeded, whose paymaster paid, and their gas in all. */
  const operations = async (sender: Address) => {
    const events = parseEventLogs({ abi: entryPoint08Abi, eventName: "UserOperationEvent", logs: await read().getLogs({ address: ENTRY_POINT_08, fromBlock: 0n }) }).filter(
      (event) => event.args.sender === sender,
    );
    return { count: events.length, paymasters: new Set(events.map((event) => event.args.paymaster)), gas: events.reduce((sum, event) => sum + event.args.actualGasCost, 0n) };
  };
  const amount = (text: string) => parseUnits(text, 6);
  const receiptFacts = async () => {
    const facts = (await page.textContent("#receipt-facts")) ?? "";
    const money = /Paid([\d.]+) tUSDRefunded([\d.]+) tUSD/.exec(facts);
    assert.ok(money, facts);
    return { facts, paid: amount(money[1]!), refunded: amount(money[2]!) };
  };

  async function signIn(button: "#passkey-signin" | "#passkey-new"): Promise<void> {
    await page.click(button);
    await page.waitForFunction(() => document.body.dataset.connected === "true" || !document.querySelector<HTMLElement>("#wallet-error")!.hidden, undefined, { timeout: 60_000 });
    assert.equal(await page.isHidden("#wallet-error"), true, (await page.textContent("#wallet-error")) ?? "");
  }

  before(async function () {
    await rm(SHOTS, { recursive: true, force: true });
    await mkdir(SHOTS, { recursive: true });
    await buildConsole();
    market = await startMarket({
      name: "console-passkey",
      devnet: { accountAbstraction: true, sponsor: { signer: privateKeyToAccount(sponsorKey).address, depositWei: parseEther("10") } },
      fund: 0n,
    });
    const bundler = await startDevnetBundler({ rpcUrl: market.devnet.rpcUrl, entryPoint: contracts().entryPoint! });
    market.defer(() => bundler.stop());
    // One node serves the console and runs the sponsor; its console config names the bundler and the sponsor.
    const dataDir = path.join(market.work, "node");
    await mkdir(dataDir);
    await writeFile(path.join(dataDir, "sponsor.key"), `${sponsorKey}\n`, { mode: 0o600 });
    const sponsorPort = await freePort();
    // The sponsor answers the console's page only (CORS; its default is no page at all).
    const apiPort = await freePort();
    const node = await startTestDaemon(market.devnet, {
      dataDir,
      p2p: { bootstrap: [market.provider.peer.addr] },
      api: { enabled: true, host: "127.0.0.1", port: apiPort, console: { bundlerUrl: bundler.url, paymasterUrl: `http://127.0.0.1:${sponsorPort}` } },
      sponsor: { enabled: true, port: sponsorPort, corsOrigins: [`http://localhost:${apiPort}`] },
    });
    market.defer(() => node.close());
    await waitFor("the provider's offer in the node's book", () => node.offers.book.size === 1, { timeoutMs: 20_000 });
    consoleUrl = `http://localhost:${new URL(node.api!.url).port}/console/`;

    browser = await launchChromium();
    page = await browser.context.newPage();
    page.on("pageerror", (error) => pageErrors.push(error.message));
    cdp = await browser.context.newCDPSession(page);
    await cdp.send("WebAuthn.enable", { enableUI: false });
    ({ authenticatorId } = await cdp.send("WebAuthn.addVirtualAuthenticator", {
      options: { protocol: "ctap2", transport: "internal", hasResidentKey: true, hasUserVerification: true, isUserVerified: true, automaticPresenceSimulation: true },
    }));
    cdp.on("WebAuthn.credentialAsserted", () => (asserted += 1));
    cdp.on("WebAuthn.credentialAdded", () => (created += 1));
  });

  after(async () => {
    await browser?.close();
    await market?.close();
  });

  it("creates a passkey and signs in: the address is the passkey's PasskeyAccount, deployed by the session's one approval, with 0 ETH", async () => {
    await page.goto(consoleUrl);
    await page.waitForSelector("body[data-ready=true]");
    assert.equal(await page.isVisible("#passkey-signin"), true, (await page.textContent("#passkey-status")) ?? "");
    assert.equal(await page.evaluate(() => window.localStorage.length), 0);
    await signIn("#passkey-signin");
    renter = (await page.textContent("#wallet-address")) as Address;
    // What the page remembers is public: the credential id and its public key (x ‖ y), nothing else.
    const remembered = JSON.parse((await page.evaluate(() => window.localStorage.getItem("suanli.console.passkey")))!) as { id: string; publicKey: Hex };
    assert.deepEqual(Object.keys(remembered).sort(), ["createdAt", "id", "publicKey"]);
    const predicted = await read().readContract({
      address: contracts().passkeyAccountFactory!,
      abi: passkeyAccountFactoryAbi,
      functionName: "getAddress",
      args: [`0x${remembered.publicKey.slice(2, 66)}`, `0x${remembered.publicKey.slice(66)}`, 0n],
    });
    assert.equal(renter, predicted, "the renter is the factory's clone for the passkey's key");
    const { credentials } = await cdp.send("WebAuthn.getCredentials", { authenticatorId });
    assert.equal(credentials.length, 1);
    assert.equal(Buffer.from(credentials[0]!.credentialId, "base64").toString("base64url"), remembered.id);
    assert.equal(credentials[0]!.rpId, "localhost");
    assert.equal(created, 1);
    assert.equal(asserted, 1, "one prompt: the session's approval, which also deployed the account");
    assert.notEqual((await read().getCode({ address: renter })) ?? "0x", "0x");
    assert.equal(await read().getBalance({ address: renter }), 0n);
    assert.match((await page.textContent("#wallet-kind")) ?? "", /^a passkey: .* the deployment's sponsor pays the gas/);
    assert.match((await page.textContent("#wallet-session")) ?? "", /^key 0x[0-9a-fA-F]{8}… signs your requests until /);
    assert.equal(await page.$$eval("#offers-table tbody tr", (rows) => rows.length), 1);
  });

  it("a reload signs in again with the remembered passkey (the same account, no new credential) and shows its tUSD and 0 ETH", async () => {
    const { publicClient, walletClient } = market.devnet.admin;
    await publicClient.waitForTransactionReceipt({
      hash: await walletClient!.writeContract({ address: contracts().token, abi: testTokenAbi, functionName: "faucet", args: [renter, 5_000_000n] }),
    });
    await page.reload();
    await page.waitForSelector("body[data-ready=true]");
    assert.equal(await page.textContent("#passkey-signin"), "Sign in with your passkey");
    asserted = 0;
    await signIn("#passkey-signin");
    assert.equal(await page.textContent("#wallet-address"), renter);
    assert.equal(created, 1, "no new passkey");
    assert.equal(asserted, 1, "the new session's approval");
    assert.equal(await page.textContent("#wallet-balance"), "5 tUSD");
    assert.equal(await page.textContent("#wallet-gas"), "0 ETH (none needed: the sponsor pays the gas)");
    await page.screenshot({ path: path.join(SHOTS, "1-signed-in.png") });
  });

  it("rents with 0 ETH: the task's logs, its verified receipt, two prompts since signing in, the exact cost, the sponsor's deposit paying the gas", async () => {
    const before = { tokens: await tokens(renter), deposit: await paymasterDeposit(), ops: await operations(renter) };
    const bundle = await market.bundles.bundle({ "run.sh": "echo hello from a passkey; sleep 2; echo bye" });
    await page.fill("#gpu-type", "A100");
    await page.fill("#duration", "60");
    await page.fill("#max-price", "1");
    await page.uncheck("#attested-only");
    await page.fill("#bundle-url", bundle.url);
    await page.fill("#bundle-sha256", bundle.sha256);
    await page.fill("#command", "sh run.sh");
    await submitAndWait(page);
    assert.equal(asserted, 2, "the person approved twice for the whole task: the session, then approve + openLease");
    await page.waitForFunction(() => document.querySelector("#task-logs")?.textContent?.includes("hello from a passkey"), undefined, { timeout: 30_000 });
    await page.waitForSelector("#receipt:not([hidden])", { timeout: 60_000 });
    assert.match((await page.textContent("#task-logs")) ?? "", /hello from a passkey\nbye\n/);
    assert.equal(await page.getAttribute("#receipt", "data-state"), "succeeded");
    assert.match((await page.textContent("#receipt-facts .completion")) ?? "", /^verified on-chain · exit 0 /);
    assert.equal(asserted, 2, "logs, status and the receipt asked for nothing");
    await page.screenshot({ path: path.join(SHOTS, "2-receipt.png"), fullPage: true });
    console.log(`      console-passkey screenshots: ${SHOTS}`);

    const { paid, refunded } = await receiptFacts();
    const leaseId = BigInt((await page.textContent("#task-lease"))!);
    const [opened] = parseEventLogs({ abi: leaseMarketAbi, eventName: "LeaseOpened", logs: await read().getLogs({ address: contracts().market, fromBlock: 0n }) }).filter(
      (event) => event.args.leaseId === leaseId,
    );
    assert.equal(opened?.args.renter, renter, "the passkey account is the lease's renter");
    assert.equal(paid + refunded, opened.args.deposit, "what was not used came back");
    assert.equal(before.tokens - (await tokens(renter)), paid, "the account paid exactly the task's cost");
    assert.equal(await read().getBalance({ address: renter }), 0n, "the account never held ETH");
    const after = await operations(renter);
    assert.equal(after.count - before.ops.count, 1, "approve + openLease: one user operation");
    assert.deepEqual([...after.paymasters], [contracts().paymaster], "every operation of the account was the sponsor's");
    assert.equal(before.deposit - (await paymasterDeposit()), after.gas - before.ops.gas, "the paymaster's deposit paid exactly the operation's gas");
  });

  it("extends a running task and cancels it: one prompt each, the refund exact, still no ETH", async () => {
    const before = { tokens: await tokens(renter), deposit: await paymasterDeposit(), ops: await operations(renter) };
    asserted = 0;
    const bundle = await market.bundles.bundle({ "run.sh": "echo long job started; sleep 120; echo never" });
    // Paid time to spare: the extension must land before it runs out, on a loaded host too.
    await page.fill("#duration", "120");
    await page.fill("#bundle-url", bundle.url);
    await page.fill("#bundle-sha256", bundle.sha256);
    await submitAndWait(page);
    assert.equal(asserted, 1, "a later task in the session: approve + openLease only");
    await page.waitForFunction(() => document.querySelector("#task-logs")?.textContent?.includes("long job started"), undefined, { timeout: 60_000 });

    await page.fill("#extend-seconds", "30");
    await page.click("#task-extend");
    await page.waitForFunction(
      () =>
        /^Extended lease \d+ by 30 s for [\d.]+ tUSD: paid until /.test(document.querySelector("#task-message")?.textContent ?? "") ||
        !document.querySelector<HTMLElement>("#task-error")!.hidden,
      undefined,
      { timeout: 60_000 },
    );
    assert.equal(await page.isHidden("#task-error"), true, (await page.textContent("#task-error")) ?? "");
    assert.equal(asserted, 2, "the extension: one prompt");
    const extra = amount(/for ([\d.]+) tUSD/.exec((await page.textContent("#task-message"))!)![1]!);

    await page.click("#task-cancel");
    await page.waitForSelector("#receipt:not([hidden])", { timeout: 60_000 });
    assert.match((await page.textContent("#task-message")) ?? "", /^Cancelled\. Refunded [\d.]+ tUSD\.$/);
    const { facts, paid, refunded } = await receiptFacts();
    assert.match(facts, /^Statestopped/);
    // The renter's close and the provider's own end after the stop race: either ends the lease (aa-passkey.test.ts).
    assert.match(facts, /Lease \d+1× A100\S*, \d+ s, (Ended|Settled|Cancelled) \((RenterClosed|Completed)\)/);
    assert.ok(asserted === 2 || asserted === 3, `the cancel: at most one more prompt (${asserted} in all)`);
    assert.ok(!((await page.textContent("#task-logs")) ?? "").includes("never"));

    const leaseId = BigInt((await page.textContent("#task-lease"))!);
    const [opened] = parseEventLogs({ abi: leaseMarketAbi, eventName: "LeaseOpened", logs: await read().getLogs({ address: contracts().market, fromBlock: 0n }) }).filter(
      (event) => event.args.leaseId === leaseId,
    );
    assert.equal(paid + refunded, opened!.args.deposit + extra, "deposit and extension: what was not used came back");
    assert.equal(before.tokens - (await tokens(renter)), paid, "the account paid exactly what the cancelled lease cost");
    assert.equal(await read().getBalance({ address: renter }), 0n);
    const after = await operations(renter);
    assert.equal(after.count - before.ops.count, asserted, "one user operation per prompt");
    assert.deepEqual([...after.paymasters], [contracts().paymaster]);
    assert.equal(before.deposit - (await paymasterDeposit()), after.gas - before.ops.gas, "the paymaster's deposit paid exactly the operations' gas");
  });

  it("a passkey prompt the person refuses: the sign-in fails saying so, and nothing is sent or spent", async () => {
    const before = { tokens: await tokens(renter), ops: await operations(renter) };
    await cdp.send("WebAuthn.setUserVerified", { authenticatorId, isUserVerified: false });
    try {
      await page.reload();
      await page.waitForSelector("body[data-ready=true]");
      asserted = 0;
      await page.click("#passkey-signin");
      await page.waitForSelector("#wallet-error:not([hidden])", { timeout: 30_000 });
      const message = (await page.textContent("#wallet-error")) ?? "";
      assert.match(message, /^PasskeySignatureError: The passkey did not sign the user operation for "approve the session": its prompt was dismissed or timed out/);
      assert.match(message, /Nothing of this operation was sent/);
      assert.notEqual(await page.getAttribute("body", "data-connected"), "true", "not signed in");
      assert.equal(await page.isDisabled("#submit-button"), true);
      assert.equal(await page.textContent("#passkey-status"), `Not signed in. Your passkey's account is ${renter}.`);
    } finally {
      await cdp.send("WebAuthn.setUserVerified", { authenticatorId, isUserVerified: true });
    }
    assert.equal(asserted, 0);
    assert.equal((await operations(renter)).count, before.ops.count, "no user operation");
    assert.equal(await tokens(renter), before.tokens);
    assert.deepEqual(pageErrors, []);
  });
});

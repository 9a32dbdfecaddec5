/**
 * ERC-4337 on the devnet with real parts (issue 38, docs/aa.md): EntryPoint v0.8 and SimpleAccountFactory deployed from
 * @account-abstraction/contracts' own bytecode at their canonical addresses, Pimlico's Alto from npm as its own process,
 * and a renter's SimpleAccount (owned by a fresh key, paying its own gas in ETH) sending one user operation through
 * viem's bundler client. A bundler that is down is named in a clear error before anything is signed.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { encodeFunctionData, getAddress, http, parseEther, parseEventLogs, parseUnits, type Address } from "viem";
import { createBundlerClient, entryPoint08Abi, type SmartAccount } from "viem/account-abstraction";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { leaseMarketAbi, sponsorPaymasterAbi, testTokenAbi } from "../../common/abi.js";
import { consoleConfigSchema } from "../../common/api/console.js";
import { BundlerUnavailableError, checkBundler, ENTRY_POINT_08, SIMPLE_ACCOUNT_FACTORY_08, simpleAccountAbi } from "../../common/account-abstraction.js";
import { parseDeployment, serializeDeployment } from "../../common/deployment.js";
import { devnetAccount, devnetPrivateKey } from "../../common/devnet.js";
import { deployAccountAbstraction } from "../../node/chain/account-abstraction.js";
import { connectChain } from "../../node/chain/clients.js";
import { startDevnetBundler, type Bundler } from "../../node/devnet/bundler.js";
import { toSimpleAccount } from "../../sdk/internal/simple-account.js";
import { startAnvil } from "../support/anvil.js";
import { startCli } from "../support/cli.js";
import { startDevnet, type Devnet } from "../support/devnet.js";
import { DIRECT_LEASE_PRICE, signDirectOffer } from "../support/devnet-lease.js";

const PARENT_SECRET = "0x5ec2e7000000000000000000000000000000000000000000000000000000beef";

/** The local addresses of the TCP sockets listening on `port` (Linux's /proc/net/tcp and tcp6; hex address:port). */
async function listeningAddresses(port: number): Promise<string[]> {
  const hexPort = port.toString(16).toUpperCase().padStart(4, "0");
  const tables = await Promise.all(["/proc/net/tcp", "/proc/net/tcp6"].map((file) => readFile(file, "utf8")));
  return tables
    .flatMap((table) => table.split("\n").slice(1))
    .map((line) => line.trim().split(/\s+/))
    .filter(([, local, , state]) => state === "0A" && local?.endsWith(`:${hexPort}`))
    .map(([, local]) => local!.split(":")[0]!);
}

describe("ERC-4337 on the devnet: EntryPoint v0.8, SimpleAccountFactory and Alto", function () {
  this.timeout(60_000);
  let devnet: Devnet;
  let bundler: Bundler;

  before(async () => {
    devnet = await startDevnet({ accountAbstraction: true });
    // A secret of ours in this process's environment: Alto must not get it.
    process.env.SUANLI_KEY = PARENT_SECRET;
    try {
      bundler = await startDevnetBundler({ rpcUrl: devnet.rpcUrl, entryPoint: devnet.deployment.contracts.entryPoint! });
    } finally {
      delete process.env.SUANLI_KEY;
    }
  });

  after(async () => {
    await bundler?.stop();
    await devnet?.close();
  });

  it("deploys EntryPoint v0.8 and SimpleAccountFactory at their canonical addresses and names them in the manifest", async () => {
    const { entryPoint, accountFactory } = devnet.deployment.contracts;
    assert.equal(entryPoint, ENTRY_POINT_08);
    assert.equal(accountFactory, SIMPLE_ACCOUNT_FACTORY_08);
    const { publicClient } = devnet.admin;
    for (const address of [entryPoint!, accountFactory!]) assert.notEqual((await publicClient.getCode({ address })) ?? "0x", "0x", `no code at ${address}`);
    // The factory builds accounts for this EntryPoint, and the manifest round-trips the two new keys.
    const implementation = await publicClient.readContract({
      address: accountFactory!,
      abi: [{ type: "function", name: "accountImplementation", stateMutability: "view", inputs: [], outputs: [{ type: "address" }] }] as const,
      functionName: "accountImplementation",
    });
    const implementationEntryPoint = await publicClient.readContract({
      address: implementation,
      abi: [{ type: "function", name: "entryPoint", stateMutability: "view", inputs: [], outputs: [{ type: "address" }] }] as const,
      functionName: "entryPoint",
    });
    assert.equal(implementationEntryPoint, ENTRY_POINT_08);
    const reread = parseDeployment(JSON.parse(serializeDeployment(devnet.deployment)));
    assert.equal(reread.contracts.entryPoint, ENTRY_POINT_08);
    assert.equal(reread.contracts.accountFactory, SIMPLE_ACCOUNT_FACTORY_08);
  });

  it("a new smart account pays its own gas and batches approve + transfer in one user operation through Alto", async () => {
    const { publicClient, walletClient } = devnet.admin;
    const { token, market } = devnet.deployment.contracts;
    const owner = privateKeyToAccount(generatePrivateKey());
    const account: SmartAccount = await toSimpleAccount({ client: publicClient, owner, factory: devnet.deployment.contracts.accountFactory! });
    const sender = await account.getAddress();
    assert.equal((await publicClient.getCode({ address: sender })) ?? "0x", "0x", "the account is counterfactual before its first operation");

    // Funded like a renter: ETH for its gas, tUSD to spend. No paymaster.
    const funds = parseEther("1");
    const tokens = parseUnits("100", 6);
    await publicClient.waitForTransactionReceipt({ hash: await walletClient!.sendTransaction({ to: sender, value: funds }) });
    await publicClient.waitForTransactionReceipt({
      hash: await walletClient!.writeContract({ address: token, abi: testTokenAbi, functionName: "faucet", args: [sender, tokens] }),
    });

    const allowance = parseUnits("25", 6);
    const sent = parseUnits("7", 6);
    const recipient: Address = privateKeyToAccount(generatePrivateKey()).address;
    await checkBundler(bundler.url, ENTRY_POINT_08);
    const bundlerClient = createBundlerClient({ client: publicClient, transport: http(bundler.url), pollingInterval: 100 });
    const hash = await bundlerClient.sendUserOperation({
      account,
      calls: [
        { to: token, data: encodeFunctionData({ abi: testTokenAbi, functionName: "approve", args: [market!, allowance] }) },
        { to: token, data: encodeFunctionData({ abi: testTokenAbi, functionName: "transfer", args: [recipient, sent] }) },
      ],
    });
    const receipt = await bundlerClient.waitForUserOperationReceipt({ hash, timeout: 30_000 });
    assert.equal(receipt.success, true, `user operation ${hash} failed: ${receipt.reason ?? ""}`);
    assert.equal(receipt.sender, sender);
    // Both calls went through executeBatch in the one bundle transaction, sent by the bundler's executor.
    const transaction = await publicClient.getTransaction({ hash: receipt.receipt.transactionHash });
    assert.equal(getAddress(transaction.to!), ENTRY_POINT_08);
    const ops = await bundlerClient.getUserOperation({ hash });
    assert.equal(ops.userOperation.callData.slice(0, 10), encodeFunctionData({ abi: simpleAccountAbi, functionName: "executeBatch", args: [[]] }).slice(0, 10));

    const read = <F extends "allowance" | "balanceOf">(functionName: F, args: F extends "allowance" ? [Address, Address] : [Address]) =>
      publicClient.readContract({ address: token, abi: testTokenAbi, functionName, args } as never) as Promise<bigint>;
    assert.equal(await read("allowance", [sender, market!]), allowance);
    assert.equal(await read("balanceOf", [sender]), tokens - sent);
    assert.equal(await read("balanceOf", [recipient]), sent);
    assert.notEqual((await publicClient.getCode({ address: sender })) ?? "0x", "0x", "the first operation deployed the account");
    assert.equal(await publicClient.readContract({ address: sender, abi: simpleAccountAbi, functionName: "owner" }), owner.address);

    // The account paid exactly the operation's gas: what left its balance is the actual cost plus what the EntryPoint
    // keeps as its deposit (the prefund's unused part).
    const deposit = await publicClient.readContract({ address: ENTRY_POINT_08, abi: entryPoint08Abi, functionName: "balanceOf", args: [sender] });
    const left = await publicClient.getBalance({ address: sender });
    assert.ok(receipt.actualGasCost > 0n);
    assert.equal(funds - left, receipt.actualGasCost + deposit);
  });

  it("the smart account opens a real lease: approve + openLease of a provider's signed offer, in one user operation", async () => {
    const { publicClient, walletClient } = devnet.admin;
    const { token, market } = devnet.deployment.contracts;
    // A provider (devnet account 1) registers a machine and signs an on-demand offer, as on the devnet's market.
    const provider = await devnet.wallet(1);
    const { offer, signature } = await signDirectOffer(devnet, provider, { peerId: "12D3KooWAaBundlerTestProvider" });
    const price = DIRECT_LEASE_PRICE;
    const terms = { units: 2, duration: 600, maxPricePerUnitSecond: price, interruptible: false, bidPerUnitSecond: 0n, preempt: [] };
    const deposit = 2n * price * 600n;

    const owner = privateKeyToAccount(generatePrivateKey());
    const account = await toSimpleAccount({ client: publicClient, owner, factory: devnet.deployment.contracts.accountFactory! });
    const sender = await account.getAddress();
    await publicClient.waitForTransactionReceipt({ hash: await walletClient!.sendTransaction({ to: sender, value: parseEther("1") }) });
    await publicClient.waitForTransactionReceipt({
      hash: await walletClient!.writeContract({ address: token, abi: testTokenAbi, functionName: "faucet", args: [sender, deposit] }),
    });
    const marketBefore = await publicClient.readContract({ address: token, abi: testTokenAbi, functionName: "balanceOf", args: [market!] });

    const bundlerClient = createBundlerClient({ client: publicClient, transport: http(bundler.url), pollingInterval: 100 });
    const hash = await bundlerClient.sendUserOperation({
      account,
      calls: [
        { to: token, data: encodeFunctionData({ abi: testTokenAbi, functionName: "approve", args: [market!, deposit] }) },
        { to: market!, data: encodeFunctionData({ abi: leaseMarketAbi, functionName: "openLease", args: [offer, signature, terms] }) },
      ],
    });
    const receipt = await bundlerClient.waitForUserOperationReceipt({ hash, timeout: 30_000 });
    assert.equal(receipt.success, true, `user operation ${hash} failed: ${receipt.reason ?? ""}`);
    const [opened] = parseEventLogs({ abi: leaseMarketAbi, eventName: "LeaseOpened", logs: receipt.logs });
    assert.ok(opened, "LeaseOpened in the user operation's logs");
    assert.equal(opened.args.renter, sender, "the smart account is the lease's renter");
    assert.equal(opened.args.provider, provider.account.address);
    assert.equal(opened.args.deposit, deposit);
    // The whole deposit moved from the account to the market, and the allowance was spent exactly.
    assert.equal(await publicClient.readContract({ address: token, abi: testTokenAbi, functionName: "balanceOf", args: [sender] }), 0n);
    assert.equal(await publicClient.readContract({ address: token, abi: testTokenAbi, functionName: "balanceOf", args: [market!] }), marketBefore + deposit);
    assert.equal(await publicClient.readContract({ address: token, abi: testTokenAbi, functionName: "allowance", args: [sender, market!] }), 0n);
  });

  it("Alto listens on 127.0.0.1 only and gets none of our environment but its keys", async () => {
    const port = Number(new URL(bundler.url).port);
    await checkBundler(bundler.url, ENTRY_POINT_08);
    // 0100007F is 127.0.0.1: one listening socket, none on every interface (00000000) or IPv6.
    assert.deepEqual(await listeningAddresses(port), ["0100007F"]);
    const environ = (await readFile(`/proc/${bundler.pid}/environ`, "utf8")).split("\0").filter(Boolean);
    const names = environ.map((entry) => entry.slice(0, entry.indexOf("=")));
    assert.ok(!names.includes("SUANLI_KEY") && !environ.some((entry) => entry.includes(PARENT_SECRET)), "the parent's SUANLI_KEY is not in Alto's environment");
    assert.ok(names.includes("ALTO_EXECUTOR_PRIVATE_KEYS") && names.includes("ALTO_UTILITY_PRIVATE_KEY"), names.join(" "));
    assert.deepEqual(
      names.filter((name) => !name.startsWith("ALTO_")).sort(),
      ["HOME", "PATH", "TMPDIR"].filter((name) => process.env[name] !== undefined),
    );
  });

  it("a bundler that is down, or serves another EntryPoint, is named in a clear error before anything is signed", async () => {
    // Answering, but for another EntryPoint (v0.7's).
    const other = "0x0000000071727De22E5E9d8BAf0edAc6f37da032";
    await assert.rejects(
      checkBundler(bundler.url, other),
      (error: unknown) => error instanceof BundlerUnavailableError && error.reason === "entry-point" && error.message.includes(other),
    );
    // Stopped by its PID: gone.
    await bundler.stop();
    assert.throws(() => process.kill(bundler.pid, 0), /ESRCH/);
    await assert.rejects(checkBundler(bundler.url, ENTRY_POINT_08, 2_000), (error: unknown) => {
      assert.ok(error instanceof BundlerUnavailableError, String(error));
      assert.equal(error.reason, "unreachable");
      assert.ok(error.message.startsWith(`The ERC-4337 bundler at ${bundler.url} does not answer`), error.message);
      assert.match(error.message, /Nothing was signed or sent/);
      return true;
    });
  });

  it("`suanli devnet` deploys the two, starts Alto for that EntryPoint and a gas sponsor the paymaster honours (its console's passkey sign-in uses both), and stops them with itself on SIGTERM", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "suanli-aa-devnet-"));
    const cli = startCli(["devnet", "--port", "0", "--bundler-port", "0", "--api-port", "0", "--attestors", "", "--deployments", dir, "--json"], { timeoutMs: 45_000 });
    try {
      const described = (await cli.ready) as {
        rpcUrl: string;
        bundlerUrl: string | null;
        sponsorUrl: string | null;
        sponsorAddress: Address | null;
        apiUrl: string;
        contracts: { entryPoint?: Address; accountFactory?: Address; paymaster?: Address };
      };
      assert.equal(described.contracts.entryPoint, ENTRY_POINT_08);
      assert.equal(described.contracts.accountFactory, SIMPLE_ACCOUNT_FACTORY_08);
      assert.ok(described.bundlerUrl, "the devnet names its bundler");
      await checkBundler(described.bundlerUrl, ENTRY_POINT_08);
      // Started from the CLI (its bundle, bin/suanli.mjs), the loopback preload is found too.
      assert.deepEqual(await listeningAddresses(Number(new URL(described.bundlerUrl).port)), ["0100007F"]);
      // The devnet's console offers "Sign in with a passkey" through it; the browser calls it from the page's origin (CORS).
      const config = consoleConfigSchema.parse(await (await fetch(`${described.apiUrl}/console/config.json`)).json());
      assert.equal(config.bundlerUrl, described.bundlerUrl);
      // The API node's sponsor pays smart accounts' gas: the paymaster names its key and has a deposit to pay from.
      assert.ok(described.sponsorUrl && described.sponsorAddress && described.contracts.paymaster, "the devnet names its sponsor and paymaster");
      assert.equal(config.paymasterUrl, described.sponsorUrl);
      const { publicClient } = await connectChain({ rpcUrl: described.rpcUrl });
      assert.equal(await publicClient.readContract({ address: described.contracts.paymaster, abi: sponsorPaymasterAbi, functionName: "signer" }), described.sponsorAddress);
      const deposit = await publicClient.readContract({ address: ENTRY_POINT_08, abi: entryPoint08Abi, functionName: "balanceOf", args: [described.contracts.paymaster] });
      assert.equal(deposit, parseEther("100"));
      // The sponsor answers the console's page, and no other site's.
      const sponsorPreflight = (origin: string) =>
        fetch(described.sponsorUrl!, { method: "OPTIONS", headers: { origin, "access-control-request-method": "POST", "access-control-request-headers": "content-type" } });
      const consoleOrigin = new URL(described.apiUrl).origin.replace("127.0.0.1", "localhost");
      assert.equal((await sponsorPreflight(consoleOrigin)).headers.get("access-control-allow-origin"), consoleOrigin);
      assert.equal((await sponsorPreflight("https://elsewhere.example")).headers.get("access-control-allow-origin"), null);
      const preflight = await fetch(described.bundlerUrl, {
        method: "OPTIONS",
        headers: { origin: described.apiUrl.replace("127.0.0.1", "localhost"), "access-control-request-method": "POST", "access-control-request-headers": "content-type" },
      });
      assert.equal(preflight.headers.get("access-control-allow-origin"), described.apiUrl.replace("127.0.0.1", "localhost"));
      assert.equal(await cli.stop("SIGTERM", 15_000), 0);
      await assert.rejects(
        checkBundler(described.bundlerUrl, ENTRY_POINT_08, 2_000),
        (error: unknown) => error instanceof BundlerUnavailableError && error.reason === "unreachable",
      );
    } finally {
      await cli.stop("SIGKILL");
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("`npm run deploy -- --account-abstraction` on Anvil (its deterministic deployer is there from genesis) names both; a second run sends nothing", async () => {
    const anvil = await startAnvil({ chainId: 4242 });
    const dir = await mkdtemp(path.join(tmpdir(), "suanli-aa-anvil-"));
    try {
      const root = path.resolve(import.meta.dirname, "../..");
      const args = ["node/chain/deploy-cli.ts", "--rpc-url", anvil.rpcUrl, "--private-key", devnetPrivateKey(0), "--out", dir, "--account-abstraction"];
      const { stdout } = await promisify(execFile)(path.join(root, "node_modules/.bin/tsx"), args, { cwd: root });
      assert.match(stdout, new RegExp(`entryPoint +${ENTRY_POINT_08}`));
      assert.match(stdout, new RegExp(`accountFactory +${SIMPLE_ACCOUNT_FACTORY_08}`));
      const manifest = parseDeployment(JSON.parse(await readFile(path.join(dir, "4242.json"), "utf8")));
      assert.equal(manifest.contracts.entryPoint, ENTRY_POINT_08);
      assert.equal(manifest.contracts.accountFactory, SIMPLE_ACCOUNT_FACTORY_08);
      // What is at a CREATE2 address is the contract its init code names: kept, not deployed again.
      const clients = await connectChain({ rpcUrl: anvil.rpcUrl, chainId: 4242, account: devnetAccount(0), pollingIntervalMs: 50 });
      const nonce = await clients.publicClient.getTransactionCount({ address: devnetAccount(0).address });
      assert.deepEqual(await deployAccountAbstraction({ publicClient: clients.publicClient, walletClient: clients.walletClient! }), {
        entryPoint: ENTRY_POINT_08,
        accountFactory: SIMPLE_ACCOUNT_FACTORY_08,
      });
      assert.equal(await clients.publicClient.getTransactionCount({ address: devnetAccount(0).address }), nonce);
    } finally {
      await anvil.stop();
      await rm(dir, { recursive: true, force: true });
    }
  });
});

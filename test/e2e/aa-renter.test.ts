/**
 * A smart-account renter with no ETH (issue 38, docs/aa.md "The SDK with a smart account" and "The CLI"): the SDK's
 * `createClient({ smartAccount })` and the CLI's `--smart-account` rent through Alto with the deployment's sponsor
 * paying the gas, on a real devnet with a real provider node. Every money-moving step is one user operation
 * (approve + openLease together), the account's requests go through a session key it approved on-chain, and a bundler
 * that is down is a BundlerError naming it, with nothing done (no lease, no approve, no operation).
 */
import assert from "node:assert/strict";
import { mkdir, writeFile } from "node:fs/promises";
import path from "node:path";
import { parseEther, parseEventLogs, type Address } from "viem";
import { entryPoint08Abi } from "viem/account-abstraction";
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from "viem/accounts";
import { leaseMarketAbi, testTokenAbi } from "../../common/abi.js";
import { ENTRY_POINT_08, simpleAccountFactoryAbi } from "../../common/account-abstraction.js";
import { startDevnetBundler, type Bundler } from "../../node/devnet/bundler.js";
import { BundlerError, type SuanliClient } from "../../sdk/index.js";
import { lastJson, runCli } from "../support/cli.js";
import { startTestDaemon } from "../support/daemons.js";
import { freePort } from "../support/ports.js";
import { connectRenter, startMarket, type Market } from "../support/renter-market.js";

describe("a smart-account renter with no ETH: the SDK's smartAccount and the CLI's --smart-account, through Alto and the sponsor", function () {
  this.timeout(120_000);
  let market: Market;
  let bundler: Bundler;
  let sponsorUrl: string;
  let owner: PrivateKeyAccount;
  let client: SuanliClient;
  const sponsorKey = generatePrivateKey();

  const read = () => market.devnet.admin.publicClient;
  const tokens = (address: Address) => read().readContract({ address: market.devnet.deployment.contracts.token, abi: testTokenAbi, functionName: "balanceOf", args: [address] });
  const allowance = (address: Address) =>
    read().readContract({
      address: market.devnet.deployment.contracts.token,
      abi: testTokenAbi,
      functionName: "allowance",
      args: [address, market.devnet.deployment.contracts.market!],
    });
  /** User operations the account has made (`succeeded`: those whose calls did not revert): the EntryPoint's UserOperationEvent logs for it. */
  const operations = async (address: Address, succeeded = false) =>
    BigInt(
      parseEventLogs({ abi: entryPoint08Abi, eventName: "UserOperationEvent", logs: await read().getLogs({ address: ENTRY_POINT_08, fromBlock: 0n }) }).filter(
        (event) => event.args.sender === address && (!succeeded || event.args.success),
      ).length,
    );
  const leasesOf = async (renter: Address) =>
    parseEventLogs({ abi: leaseMarketAbi, eventName: "LeaseOpened", logs: await read().getLogs({ address: market.devnet.deployment.contracts.market, fromBlock: 0n }) }).filter(
      (event) => event.args.renter === renter,
    );
  const faucet = async (to: Address, amount: bigint) => {
    const { publicClient, walletClient } = market.devnet.admin;
    await publicClient.waitForTransactionReceipt({
      hash: await walletClient!.writeContract({ address: market.devnet.deployment.contracts.token, abi: testTokenAbi, functionName: "faucet", args: [to, amount] }),
    });
  };
  const smartClient = async (name: string, key: PrivateKeyAccount, bundlerUrl: string) => {
    const renter = await connectRenter(market.devnet, {
      name,
      account: key,
      bootstrap: [market.provider.peer.addr],
      client: { account: undefined, smartAccount: { owner: key, bundlerUrl, paymasterUrl: sponsorUrl } },
    });
    market.defer(() => renter.close());
    return renter;
  };
  const task = async (script: string, duration = 60) => {
    const bundle = await market.bundles.bundle({ "run.sh": script });
    return { gpuType: "A100", gpuCount: 1, duration, maxPricePerGpuHour: "1", attestedOnly: false, bundleUrl: bundle.url, sha256: bundle.sha256, command: "sh run.sh" };
  };

  before(async () => {
    market = await startMarket({
      name: "aa-renter",
      devnet: { accountAbstraction: true, sponsor: { signer: privateKeyToAccount(sponsorKey).address, depositWei: parseEther("10") } },
      fund: 0n,
    });
    bundler = await startDevnetBundler({ rpcUrl: market.devnet.rpcUrl, entryPoint: market.devnet.deployment.contracts.entryPoint! });
    market.defer(() => bundler.stop());
    // The sponsor's key in its node's data dir, as the node makes it on a first start: the deploy named its address.
    const dataDir = path.join(market.work, "sponsor");
    await mkdir(dataDir);
    await writeFile(path.join(dataDir, "sponsor.key"), `${sponsorKey}\n`, { mode: 0o600 });
    const sponsor = await startTestDaemon(market.devnet, { dataDir, sponsor: { enabled: true, port: 0 } });
    market.defer(() => sponsor.close());
    sponsorUrl = sponsor.sponsor!.url;
    owner = privateKeyToAccount(generatePrivateKey());
    client = await smartClient("the smart account", owner, bundler.url);
  });
  after(async () => market?.close());

  it("the SDK: a 0-ETH smart account rents, its task completes, the refund is exact; approve + openLease are one user operation", async () => {
    const renter = client.address!;
    assert.notEqual(renter, owner.address, "the renter is the smart account, not its owner");
    await faucet(renter, 1_000_000n);
    assert.equal(await read().getCode({ address: renter }), undefined, "not deployed yet");
    const before = await tokens(renter);

    const { taskId, attempt } = await client.submitTask(await task("echo hello from a smart account; sleep 1; echo bye"));
    const lines: string[] = [];
    for await (const line of client.logs(taskId, { follow: true })) lines.push(line.text);
    const receipt = await client.wait(taskId);

    assert.equal(receipt.state, "succeeded");
    assert.ok(lines.includes("hello from a smart account") && lines.includes("bye"), lines.join("\n"));
    const [opened] = await leasesOf(renter);
    assert.equal(opened?.args.leaseId, attempt.leaseId, "the smart account is the lease's renter");
    assert.deepEqual(
      attempt.gas.map((step) => step.step),
      ["approve + openLease"],
      "the deposit's approve and openLease went as one user operation",
    );
    // Two operations: the session's approval (which deployed the account), then approve + openLease.
    assert.equal(await operations(renter), 2n);
    assert.equal(client.session?.renter, renter, "the session key signs for the smart account");
    const lease = receipt.leases[0]!;
    assert.equal(lease.cost + lease.refunded, lease.deposit, "what was not used came back");
    assert.equal(before - (await tokens(renter)), receipt.totalCost, "the account paid exactly the task's cost");
    assert.equal(await allowance(renter), 0n, "the approve was exactly the deposit");
    assert.equal(await read().getBalance({ address: renter }), 0n, "the account never held ETH");
  });

  it("the SDK: extend and cancel are one user operation each; the refund of the cancelled lease is exact", async () => {
    const renter = client.address!;
    const before = await tokens(renter);
    const { taskId, attempt } = await client.submitTask(await task("echo started; sleep 60", 30));
    for await (const line of client.logs(taskId, { follow: true })) if (line.text === "started") break;
    const extended = await client.extend(taskId, { seconds: 30 });
    const receipt = await client.cancel(taskId);
    const steps = receipt.leases[0]!.gas.map((step) => step.step);
    // The close: the renter's operation, unless the provider, told to cancel, ended the lease first (refunding the same
    // way; the renter's close, sent too, then reverts in its operation, which the SDK reads as the lease already ended).
    const closed = steps.length === 3 ? 1n : 0n;
    assert.deepEqual(steps, ["approve + openLease", "approve + extend", ...(closed ? ["close (cancel)"] : [])], steps.join(", "));
    const opened = (await leasesOf(renter)).find((event) => event.args.leaseId === attempt.leaseId)!;
    assert.equal(receipt.leases[0]!.deposit, opened.args.deposit + extended.extraDeposit);
    assert.equal(receipt.leases[0]!.cost + receipt.leases[0]!.refunded, receipt.leases[0]!.deposit);
    assert.equal(before - (await tokens(renter)), receipt.totalCost, "the account paid exactly what the cancelled lease cost");
    assert.equal(await operations(renter, true), 4n + closed, "one operation each for the lease, the extension and the close");
    assert.equal(await read().getBalance({ address: renter }), 0n);
  });

  it("the CLI: submit --wait with --smart-account, --bundler and --paymaster; a later command reuses the kept session", async () => {
    const key = generatePrivateKey();
    const keyFile = path.join(market.work, "owner.key");
    await writeFile(keyFile, `${key}\n`, { mode: 0o600 });
    const stateDir = path.join(market.work, "cli-state");
    const common = ["--rpc-url", market.devnet.rpcUrl, "--deployments", market.devnet.deploymentsDir, "--state-dir", stateDir];
    const smart = ["--smart-account", keyFile, "--bundler", bundler.url, "--paymaster", sponsorUrl];
    // The account's address, as a user finds it (nothing sent): the SimpleAccount factory's for the file's key.
    const shown = await runCli(["wallet", "address", ...common.slice(0, 4), "--smart-account", keyFile, "--json"]);
    assert.equal(shown.code, 0, shown.stderr);
    const { address: renter, owner: shownOwner, kind } = lastJson<{ address: Address; owner: Address; kind: string }>(shown.stdout);
    assert.deepEqual([shownOwner, kind], [privateKeyToAccount(key).address, "key"]);
    const factory = market.devnet.deployment.contracts.accountFactory!;
    assert.equal(renter, await read().readContract({ address: factory, abi: simpleAccountFactoryAbi, functionName: "getAddress", args: [shownOwner, 0n] }));
    await faucet(renter, 1_000_000n);
    const bundle = await market.bundles.bundle({ "run.sh": "echo hello from a smart account, by the CLI" });
    const run = await runCli(
      [
        "submit",
        ...["--gpu", "A100", "--duration", "60", "--max-price", "1", "--allow-unattested", "--bundle", bundle.url, "--sha256", bundle.sha256],
        ...["--bootstrap", market.provider.peer.addr, ...common, ...smart, "--wait", "--json", "--", "sh run.sh"],
      ],
      { timeoutMs: 60_000 },
    );
    assert.equal(run.code, 0, run.stderr);
    const receipt = lastJson<{ state: string; totalCost: string; leases: { deposit: string; cost: string; refunded: string; gas: { step: string }[] }[] }>(run.stdout);
    assert.equal(receipt.state, "succeeded");
    assert.deepEqual(
      receipt.leases[0]!.gas.map((step) => step.step),
      ["approve + openLease"],
    );
    assert.equal(BigInt(receipt.leases[0]!.cost) + BigInt(receipt.leases[0]!.refunded), BigInt(receipt.leases[0]!.deposit));
    assert.equal(1_000_000n - (await tokens(renter)), BigInt(receipt.totalCost));
    assert.equal(await read().getBalance({ address: renter }), 0n);
    assert.equal(await operations(renter), 2n);

    // Flags that do not go together are refused before anything is reached (exit 2), every problem at once.
    const usage = await runCli(["tasks", ...common, "--smart-account", keyFile, "--devnet-account", "5", "--paymaster", "sponsor"]);
    assert.equal(usage.code, 2, usage.stderr);
    assert.match(usage.stderr, /--smart-account and --key\/--key-file\/--devnet-account both give the renter/);
    assert.match(usage.stderr, /--smart-account needs --bundler URL/);
    assert.match(usage.stderr, /--paymaster must be an http\(s\):\/\/ URL, got "sponsor"/);

    const tasks = await runCli(["tasks", ...common, ...smart, "--json"]);
    assert.equal(tasks.code, 0, tasks.stderr);
    assert.match(tasks.stdout, /succeeded/);
    assert.equal(await operations(renter), 2n, "the next command used the kept session: no new approval");
  });

  it("a bundler that is down: BundlerError naming it, and no lease, no approve, no operation", async () => {
    const down = `http://127.0.0.1:${await freePort()}`;
    const renter = client.address!;
    const [leases, allowed, balance, ops] = await Promise.all([leasesOf(renter), allowance(renter), tokens(renter), operations(renter)]);
    // The same account with its live session: the reservation is signed, then approve + openLease cannot be sent.
    const same = await smartClient("the smart account, bundler down", owner, down);
    await same.useSession(client.session);
    const refused = (error: unknown) => {
      assert.ok(error instanceof BundlerError, String(error));
      assert.equal(error.url, down);
      assert.equal(error.service, "bundler");
      assert.equal(error.unreachable, true);
      assert.ok(error.shortMessage.includes(down), error.shortMessage);
      return true;
    };
    await assert.rejects(same.submitTask(await task("echo never")), (error: unknown) => refused(error) && (error as BundlerError).step === "approve + openLease");
    assert.deepEqual(await leasesOf(renter), leases, "no lease opened");
    assert.equal(await allowance(renter), allowed, "no approve without its openLease");
    assert.equal(await tokens(renter), balance);
    assert.equal(await operations(renter), ops, "no operation");

    // A new account: its first operation (approving its session) fails first, before anything is reserved.
    const fresh = await smartClient("a new smart account, bundler down", privateKeyToAccount(generatePrivateKey()), down);
    await faucet(fresh.address!, 1_000_000n);
    await assert.rejects(fresh.submitTask(await task("echo never")), (error: unknown) => refused(error) && (error as BundlerError).step === "approve the session");
    assert.equal(await read().getCode({ address: fresh.address! }), undefined, "not even deployed");
    assert.deepEqual(await leasesOf(fresh.address!), []);
  });

  it("a sponsor that refuses: BundlerError naming the sponsor and its reason, nothing done", async () => {
    // A second sponsor of the same paymaster whose bound no operation fits.
    const dataDir = path.join(market.work, "sponsor-strict");
    await mkdir(dataDir);
    await writeFile(path.join(dataDir, "sponsor.key"), `${sponsorKey}\n`, { mode: 0o600 });
    const strict = await startTestDaemon(market.devnet, { dataDir, sponsor: { enabled: true, port: 0, maxWeiPerOperation: "1" } });
    market.defer(() => strict.close());
    const renter = await connectRenter(market.devnet, {
      name: "a smart account, strict sponsor",
      account: owner,
      bootstrap: [market.provider.peer.addr],
      client: { account: undefined, smartAccount: { owner: privateKeyToAccount(generatePrivateKey()), bundlerUrl: bundler.url, paymasterUrl: strict.sponsor!.url } },
    });
    market.defer(() => renter.close());
    await faucet(renter.address!, 1_000_000n);
    await assert.rejects(renter.submitTask(await task("echo never")), (error: unknown) => {
      assert.ok(error instanceof BundlerError, String(error));
      assert.equal(error.service, "paymaster");
      assert.equal(error.url, strict.sponsor!.url);
      assert.equal(error.unreachable, false);
      assert.match(error.reason, /above the sponsor's 1 per operation/);
      return true;
    });
    assert.equal(await read().getCode({ address: renter.address! }), undefined, "nothing sent: not even deployed");
    assert.equal(await tokens(renter.address!), 1_000_000n);
  });
});

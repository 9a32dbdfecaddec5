/**
 * Gas without ETH (issue 38, docs/aa.md "Gas without ETH"): the deployment's SponsorPaymaster and a
 * node's sponsor (an ERC-7677 service) with Alto and viem's own clients. A renter's new smart
 * account holding tUSD and no ETH opens a real lease; the sponsor refuses what is not the
 * deployment's business and what passes an account's daily budget; a sponsorship cannot be moved
 * to another operation; only the paymaster's owner replaces its signer.
 */
import assert from "node:assert/strict";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { encodeFunctionData, http, parseEther, parseEventLogs, type Address } from "viem";
import { createBundlerClient, createPaymasterClient, entryPoint08Abi, formatUserOperationRequest, type SmartAccount, type UserOperation } from "viem/account-abstraction";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { leaseMarketAbi, sponsorPaymasterAbi, testTokenAbi } from "../../common/abi.js";
import { ENTRY_POINT_08 } from "../../common/account-abstraction.js";
import { devnetAccount } from "../../common/devnet.js";
import { startDevnetBundler, type Bundler } from "../../node/devnet/bundler.js";
import { toSimpleAccount } from "../../sdk/internal/simple-account.js";
import { startTestDaemon } from "../support/daemons.js";
import { startDevnet, type Devnet } from "../support/devnet.js";
import { DIRECT_LEASE_PRICE, signDirectOffer } from "../support/devnet-lease.js";

describe("ERC-4337 gas without ETH: the SponsorPaymaster and a node's sponsor (ERC-7677) through Alto", function () {
  this.timeout(90_000);
  let devnet: Devnet;
  let bundler: Bundler;
  let node: Awaited<ReturnType<typeof startTestDaemon>>;
  let work: string;
  let paymaster: Address;
  const sponsorKey = generatePrivateKey();

  const bundlerClient = () =>
    createBundlerClient({
      client: devnet.admin.publicClient,
      transport: http(bundler.url),
      paymaster: createPaymasterClient({ transport: http(node.sponsor!.url) }),
      pollingInterval: 100,
    });
  const newAccount = async (): Promise<SmartAccount> =>
    toSimpleAccount({ client: devnet.admin.publicClient, owner: privateKeyToAccount(generatePrivateKey()), factory: devnet.deployment.contracts.accountFactory! });
  const faucet = async (to: Address, amount: bigint) => {
    const { publicClient, walletClient } = devnet.admin;
    await publicClient.waitForTransactionReceipt({
      hash: await walletClient!.writeContract({ address: devnet.deployment.contracts.token, abi: testTokenAbi, functionName: "faucet", args: [to, amount] }),
    });
  };
  const deposit = () => devnet.admin.publicClient.readContract({ address: ENTRY_POINT_08, abi: entryPoint08Abi, functionName: "balanceOf", args: [paymaster] });

  before(async () => {
    devnet = await startDevnet({ accountAbstraction: true, sponsor: { signer: privateKeyToAccount(sponsorKey).address, depositWei: parseEther("10") } });
    paymaster = devnet.deployment.contracts.paymaster!;
    bundler = await startDevnetBundler({ rpcUrl: devnet.rpcUrl, entryPoint: devnet.deployment.contracts.entryPoint! });
    // The sponsor's key in its data dir, as the node makes it on a first start: the deploy named its address.
    work = await mkdtemp(path.join(tmpdir(), "suanli-sponsor-"));
    const dataDir = path.join(work, "node");
    await mkdir(dataDir);
    await writeFile(path.join(dataDir, "sponsor.key"), `${sponsorKey}\n`, { mode: 0o600 });
    node = await startTestDaemon(devnet, { dataDir, sponsor: { enabled: true, port: 0, maxOperationsPerAccountPerDay: 3 } });
  });
  after(async () => {
    await node?.close();
    await bundler?.stop();
    await devnet?.close();
    if (work) await rm(work, { recursive: true, force: true });
  });

  it("deploys the paymaster with the sponsor's key as its signer and a deposit in the EntryPoint", async () => {
    assert.ok(paymaster, "the manifest names the paymaster");
    const { publicClient } = devnet.admin;
    assert.equal(await publicClient.readContract({ address: paymaster, abi: sponsorPaymasterAbi, functionName: "signer" }), node.sponsor!.address);
    assert.equal(await publicClient.readContract({ address: paymaster, abi: sponsorPaymasterAbi, functionName: "entryPoint" }), ENTRY_POINT_08);
    assert.equal(await deposit(), parseEther("10"));
  });

  it("a new smart account with tUSD and no ETH opens a lease (approve + openLease) in one sponsored user operation", async () => {
    const { publicClient } = devnet.admin;
    const { token, market } = devnet.deployment.contracts;
    const provider = await devnet.wallet(1);
    const { offer, signature } = await signDirectOffer(devnet, provider, { peerId: "12D3KooWAaSponsorTestProvider" });
    const terms = { units: 1, duration: 600, maxPricePerUnitSecond: DIRECT_LEASE_PRICE, interruptible: false, bidPerUnitSecond: 0n, preempt: [] };
    const leaseDeposit = DIRECT_LEASE_PRICE * 600n;
    const account = await newAccount();
    const sender = await account.getAddress();
    await faucet(sender, leaseDeposit);
    assert.equal(await publicClient.getBalance({ address: sender }), 0n, "no ETH at all");
    const before = await deposit();

    const client = bundlerClient();
    const hash = await client.sendUserOperation({
      account,
      calls: [
        { to: token, data: encodeFunctionData({ abi: testTokenAbi, functionName: "approve", args: [market!, leaseDeposit] }) },
        { to: market!, data: encodeFunctionData({ abi: leaseMarketAbi, functionName: "openLease", args: [offer, signature, terms] }) },
      ],
    });
    const receipt = await client.waitForUserOperationReceipt({ hash, timeout: 30_000 });
    assert.equal(receipt.success, true, `user operation ${hash} failed: ${receipt.reason ?? ""}`);
    assert.equal(receipt.paymaster, paymaster, "the paymaster paid");
    const [opened] = parseEventLogs({ abi: leaseMarketAbi, eventName: "LeaseOpened", logs: receipt.logs });
    assert.equal(opened?.args.renter, sender, "the smart account is the lease's renter");
    assert.equal(opened?.args.deposit, leaseDeposit);
    assert.equal(await publicClient.getBalance({ address: sender }), 0n, "the account still has no ETH");
    assert.equal(before - (await deposit()), receipt.actualGasCost, "the paymaster's deposit paid exactly the operation's gas");
  });

  it("refuses an operation that is not the deployment's business, and charges nothing for it", async () => {
    const { token } = devnet.deployment.contracts;
    const account = await newAccount();
    const sender = await account.getAddress();
    await faucet(sender, 5_000_000n);
    const stranger = privateKeyToAccount(generatePrivateKey()).address;
    const before = await deposit();
    await assert.rejects(
      bundlerClient().sendUserOperation({
        account,
        calls: [{ to: token, data: encodeFunctionData({ abi: testTokenAbi, functionName: "transfer", args: [stranger, 5_000_000n] }) }],
      }),
      (error: Error) => /only approve\(market, amount\) is sponsored/.test(error.message),
    );
    await assert.rejects(bundlerClient().sendUserOperation({ account, calls: [{ to: stranger, value: 1n, data: "0x" }] }), (error: Error) =>
      /call 0 \(to 0x[0-9a-fA-F]{40}\) sends 1 wei: sponsored calls send no ETH/.test(error.message),
    );
    assert.equal(await devnet.admin.publicClient.readContract({ address: token, abi: testTokenAbi, functionName: "balanceOf", args: [sender] }), 5_000_000n);
    assert.equal(await deposit(), before);
  });

  it("a sponsorship signed for one operation does not pay for another (the bundler refuses it: AA34)", async () => {
    const { token, market } = devnet.deployment.contracts;
    const account = await newAccount();
    const client = bundlerClient();
    const prepared = await client.prepareUserOperation({
      account,
      calls: [{ to: token, data: encodeFunctionData({ abi: testTokenAbi, functionName: "approve", args: [market!, 1n] }) }],
    });
    // The same sponsor data on other calls, signed again by the account's owner.
    const { account: _prepared, ...operation } = prepared;
    const tampered = {
      ...operation,
      callData: await account.encodeCalls([{ to: token, data: encodeFunctionData({ abi: testTokenAbi, functionName: "approve", args: [market!, 10n ** 12n] }) }]),
    } as UserOperation<"0.8">;
    tampered.signature = await account.signUserOperation(tampered);
    await assert.rejects(client.request({ method: "eth_sendUserOperation", params: [formatUserOperationRequest(tampered), ENTRY_POINT_08] }), (error: Error) =>
      /AA34/.test(error.message),
    );
  });

  it("an account gets at most sponsor.maxOperationsPerAccountPerDay sponsorships a day; the refusal says so", async () => {
    const { token, market } = devnet.deployment.contracts;
    const account = await newAccount();
    const client = bundlerClient();
    const calls = [{ to: token, data: encodeFunctionData({ abi: testTokenAbi, functionName: "approve", args: [market!, 1n] }) }];
    for (let i = 0; i < 3; i++) await client.prepareUserOperation({ account, calls });
    await assert.rejects(client.prepareUserOperation({ account, calls }), (error: Error) => /3 sponsored operations today, the sponsor's daily limit/.test(error.message));
  });

  it("only the paymaster's owner replaces its signer", async () => {
    const stranger = await devnet.wallet(7);
    await assert.rejects(
      stranger.publicClient.simulateContract({
        account: devnetAccount(7),
        address: paymaster,
        abi: sponsorPaymasterAbi,
        functionName: "setSigner",
        args: [devnetAccount(7).address],
      }),
      /OwnableUnauthorizedAccount/,
    );
    await assert.rejects(
      devnet.admin.publicClient.simulateContract({
        account: devnetAccount(0),
        address: paymaster,
        abi: sponsorPaymasterAbi,
        functionName: "setSigner",
        args: ["0x0000000000000000000000000000000000000000"],
      }),
      /ZeroSigner/,
    );
  });
});

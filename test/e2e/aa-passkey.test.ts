/**
 * A renter whose smart account's owner is a passkey (issue 38, docs/aa.md "A passkey owner"): the SDK's
 * `createClient({ smartAccount: { owner: toWebAuthnAccount(...) } })` rents from the deployment's PasskeyAccount through
 * Alto, the sponsor paying the gas, on a real devnet with a real provider. The passkey is a software authenticator
 * (test/support/webauthn.ts) answering viem's WebAuthn requests as navigator.credentials would; it counts its
 * signatures, each an approval a person gives: the goal is at most two for a whole task. The CLI rents the same way
 * from a passkey file (`wallet passkey new`, `--smart-account FILE`: the same software authenticator, in the product).
 */
import assert from "node:assert/strict";
import { chmod, mkdir, readdir, readFile, stat, writeFile } from "node:fs/promises";
import path from "node:path";
import { encodeFunctionData, http, parseEther, parseEventLogs, type Address } from "viem";
import { createBundlerClient, createPaymasterClient, entryPoint08Abi } from "viem/account-abstraction";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { leaseMarketAbi, passkeyAccountFactoryAbi, testTokenAbi } from "../../common/abi.js";
import { ENTRY_POINT_08 } from "../../common/account-abstraction.js";
import { startDevnetBundler, type Bundler } from "../../node/devnet/bundler.js";
import { ClientConfigError, createClient, type SuanliClient } from "../../sdk/index.js";
import { toPasskeyAccount } from "../../sdk/internal/passkey-account.js";
import { lastJson, runCli } from "../support/cli.js";
import { startTestDaemon } from "../support/daemons.js";
import { connectRenter, startMarket, type Market } from "../support/renter-market.js";
import { softwareAuthenticator, type SoftwareAuthenticator } from "../support/webauthn.js";

describe("a passkey renter with no ETH: the SDK's smartAccount with a WebAuthn owner, through Alto and the sponsor", function () {
  this.timeout(120_000);
  let market: Market;
  let bundler: Bundler;
  let sponsorUrl: string;
  let passkey: SoftwareAuthenticator;
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
  const task = async (script: string, duration = 60) => {
    const bundle = await market.bundles.bundle({ "run.sh": script });
    return { gpuType: "A100", gpuCount: 1, duration, maxPricePerGpuHour: "1", attestedOnly: false, bundleUrl: bundle.url, sha256: bundle.sha256, command: "sh run.sh" };
  };

  before(async () => {
    market = await startMarket({
      name: "aa-passkey",
      devnet: { accountAbstraction: true, sponsor: { signer: privateKeyToAccount(sponsorKey).address, depositWei: parseEther("10") } },
      fund: 0n,
    });
    bundler = await startDevnetBundler({ rpcUrl: market.devnet.rpcUrl, entryPoint: market.devnet.deployment.contracts.entryPoint! });
    market.defer(() => bundler.stop());
    const dataDir = path.join(market.work, "sponsor");
    await mkdir(dataDir);
    await writeFile(path.join(dataDir, "sponsor.key"), `${sponsorKey}\n`, { mode: 0o600 });
    const sponsor = await startTestDaemon(market.devnet, { dataDir, sponsor: { enabled: true, port: 0 } });
    market.defer(() => sponsor.close());
    sponsorUrl = sponsor.sponsor!.url;
    passkey = softwareAuthenticator();
    client = await connectRenter(market.devnet, {
      name: "the passkey account",
      account: privateKeyToAccount(generatePrivateKey()),
      bootstrap: [market.provider.peer.addr],
      client: { account: undefined, smartAccount: { owner: passkey.account, bundlerUrl: bundler.url, paymasterUrl: sponsorUrl } },
    });
    market.defer(() => client.close());
  });
  after(async () => market?.close());

  it("the manifest names the PasskeyAccountFactory; the client's address is its clone for the passkey", async () => {
    const factory = market.devnet.deployment.contracts.passkeyAccountFactory;
    assert.ok(factory, "contracts.passkeyAccountFactory");
    assert.notEqual((await read().getCode({ address: factory })) ?? "0x", "0x");
    const predicted = await read().readContract({ address: factory, abi: passkeyAccountFactoryAbi, functionName: "getAddress", args: [passkey.qx, passkey.qy, 0n] });
    assert.equal(client.address, predicted);
    assert.equal(passkey.signatures, 0, "nothing signed yet");
  });

  it("a 0-ETH passkey account rents: approve + openLease in one operation, the task completes, the refund is exact, two passkey approvals in all", async () => {
    const renter = client.address!;
    await faucet(renter, 1_000_000n);
    assert.equal(await read().getCode({ address: renter }), undefined, "not deployed yet");
    const before = await tokens(renter);

    const { taskId, attempt } = await client.submitTask(await task("echo hello from a passkey; sleep 1; echo bye"));
    const lines: string[] = [];
    for await (const line of client.logs(taskId, { follow: true })) lines.push(line.text);
    const receipt = await client.wait(taskId);

    assert.equal(receipt.state, "succeeded");
    assert.ok(lines.includes("hello from a passkey") && lines.includes("bye"), lines.join("\n"));
    const [opened] = await leasesOf(renter);
    assert.equal(opened?.args.leaseId, attempt.leaseId, "the passkey account is the lease's renter");
    assert.deepEqual(
      attempt.gas.map((step) => step.step),
      ["approve + openLease"],
    );
    // Two operations (the session's approval, which deployed the account; then approve + openLease), one assertion each.
    assert.equal(await operations(renter, true), 2n);
    assert.equal(passkey.signatures, 2, "the person approved twice for the whole task");
    assert.equal(client.session?.renter, renter, "the session key signs the account's requests");
    const lease = receipt.leases[0]!;
    assert.equal(lease.cost + lease.refunded, lease.deposit, "what was not used came back");
    assert.equal(before - (await tokens(renter)), receipt.totalCost, "the account paid exactly the task's cost");
    assert.equal(await allowance(renter), 0n, "the approve was exactly the deposit");
    assert.equal(await read().getBalance({ address: renter }), 0n, "the account never held ETH");
  });

  it("the next task in the session takes one approval; cancelling it one more, and its refund is exact", async () => {
    const renter = client.address!;
    const before = await tokens(renter);
    const signed = passkey.signatures;
    const { taskId, attempt } = await client.submitTask(await task("echo started; sleep 60", 30));
    assert.equal(passkey.signatures, signed + 1, "approve + openLease: one approval, the session is already there");
    for await (const line of client.logs(taskId, { follow: true })) if (line.text === "started") break;
    const receipt = await client.cancel(taskId);
    const steps = receipt.leases[0]!.gas.map((step) => step.step);
    // The close is the renter's operation, unless the provider, told to cancel, ended the lease first (aa-renter.test.ts).
    const closed = steps.length === 2 ? 1 : 0;
    assert.deepEqual(steps, ["approve + openLease", ...(closed ? ["close (cancel)"] : [])], steps.join(", "));
    const opened = (await leasesOf(renter)).find((event) => event.args.leaseId === attempt.leaseId)!;
    assert.equal(receipt.leases[0]!.deposit, opened.args.deposit);
    assert.equal(receipt.leases[0]!.cost + receipt.leases[0]!.refunded, receipt.leases[0]!.deposit);
    assert.equal(before - (await tokens(renter)), receipt.totalCost, "the account paid exactly what the cancelled lease cost");
    assert.equal(await operations(renter, true), 3n + BigInt(closed));
    // The close's operation is signed even when the provider's end made it revert (it reverts on-chain, not in estimation).
    if (closed) assert.equal(passkey.signatures, signed + 2, "the cancel: one more approval");
    else assert.ok(passkey.signatures <= signed + 2, `${passkey.signatures} signatures`);
    assert.equal(await read().getBalance({ address: renter }), 0n);
  });

  it("the CLI: wallet passkey new, wallet address and submit --wait with --smart-account PASSKEY-FILE; bad passkey files are refused before anything is done", async () => {
    const stateDir = path.join(market.work, "cli-state");
    const common = ["--rpc-url", market.devnet.rpcUrl, "--deployments", market.devnet.deploymentsDir];
    const file = path.join(market.work, "renter.passkey");
    const made = await runCli(["wallet", "passkey", "new", "--out", file, "--json"]);
    assert.equal(made.code, 0, made.stderr);
    const { publicKey } = lastJson<{ publicKey: `0x${string}` }>(made.stdout);
    assert.equal((await stat(file)).mode & 0o777, 0o600, "the passkey file is its owner's only");
    const content = await readFile(file, "utf8");
    assert.equal(JSON.parse(content).type, "webauthn-p256");
    const again = await runCli(["wallet", "passkey", "new", "--out", file]);
    assert.equal(again.code, 2);
    assert.match(again.stderr, /exists: a passkey file is never overwritten/);
    assert.equal(await readFile(file, "utf8"), content, "the first passkey is intact");

    const shown = await runCli(["wallet", "address", ...common, "--smart-account", file, "--json"]);
    assert.equal(shown.code, 0, shown.stderr);
    const renter = lastJson<{ address: Address; kind: string }>(shown.stdout);
    const factory = market.devnet.deployment.contracts.passkeyAccountFactory!;
    const predicted = await read().readContract({
      address: factory,
      abi: passkeyAccountFactoryAbi,
      functionName: "getAddress",
      args: [`0x${publicKey.slice(2, 66)}`, `0x${publicKey.slice(66)}`, 0n],
    });
    assert.deepEqual(renter, { address: predicted, owner: publicKey, kind: "passkey" });
    await faucet(renter.address, 1_000_000n);

    const smart = ["--smart-account", file, "--bundler", bundler.url, "--paymaster", sponsorUrl, "--state-dir", stateDir];
    const bundle = await market.bundles.bundle({ "run.sh": "echo hello from a passkey file" });
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
    assert.equal(1_000_000n - (await tokens(renter.address)), BigInt(receipt.totalCost), "the passkey's account paid exactly the task's cost");
    assert.equal(await read().getBalance({ address: renter.address }), 0n, "no ETH");
    assert.equal(await operations(renter.address, true), 2n, "the session's approval (deploying the account), then approve + openLease");

    // Bad passkey files: exit 2 naming what is wrong and what is accepted, before the chain is reached: nothing sent, nothing kept.
    const kept = await readdir(stateDir);
    const bad = async (name: string, text: string, mode = 0o600) => {
      const badFile = path.join(market.work, name);
      await writeFile(badFile, text, { mode });
      await chmod(badFile, mode);
      const refused = await runCli(["tasks", ...common, "--smart-account", badFile, "--bundler", bundler.url, "--state-dir", stateDir]);
      assert.equal(refused.code, 2, refused.stderr);
      return refused.stderr;
    };
    const passkey = JSON.parse(content) as Record<string, string>;
    assert.match(await bad("truncated.passkey", content.slice(0, 40)), /is not valid JSON\b.*a passkey file is one JSON object/);
    // JSON.parse quotes the text around its fault: never echoed, as it may be the private key.
    const quoted = await bad("quoted.passkey", `{"privateKey": '${passkey.privateKey}'}`);
    assert.match(quoted, /is not valid JSON\b.*a passkey file is one JSON object/);
    assert.doesNotMatch(quoted, new RegExp(passkey.privateKey!.slice(2, 9), "i"), "no part of the key in the error");
    assert.match(
      await bad("ed25519.passkey", JSON.stringify({ ...passkey, type: "webauthn-ed25519" })),
      /type must be "webauthn-p256" \(a P-256 WebAuthn key\), got "webauthn-ed25519"/,
    );
    const mixed = await bad("mixed.passkey", JSON.stringify({ ...passkey, privateKey: `0x${"ab".repeat(32)}`, pin: "1234" }));
    assert.match(mixed, /publicKey is not the private key's public key/);
    assert.match(mixed, /pin unknown key \(accepted keys here: type, rpId, origin, credentialId, privateKey, publicKey\)/);
    assert.match(await bad("open.passkey", content, 0o644), /is open to other users \(mode 0644\).*chmod 600/);
    assert.match(await bad("neither.key", "hello"), /neither a key file \(0x followed by 64 hex digits\) nor a passkey file/);
    assert.deepEqual(await readdir(stateDir), kept, "no session or task list kept for a refused file");
    assert.equal(await operations(renter.address), 2n, "nothing sent");
  });

  it("the sponsor pays for the deployment's business only: a passkey account's token transfer is refused, nothing signed or charged", async () => {
    const owner = softwareAuthenticator();
    const account = await toPasskeyAccount({ client: read(), owner: owner.account, factory: market.devnet.deployment.contracts.passkeyAccountFactory! });
    await faucet(account.address, 5_000_000n);
    const bundlerClient = createBundlerClient({ client: read(), transport: http(bundler.url), paymaster: createPaymasterClient({ transport: http(sponsorUrl) }) });
    const stranger = privateKeyToAccount(generatePrivateKey()).address;
    await assert.rejects(
      bundlerClient.sendUserOperation({
        account,
        calls: [{ to: market.devnet.deployment.contracts.token, data: encodeFunctionData({ abi: testTokenAbi, functionName: "transfer", args: [stranger, 5_000_000n] }) }],
      }),
      (error: Error) => /only approve\(market, amount\) is sponsored/.test(error.message),
    );
    assert.equal(owner.signatures, 0, "refused before the passkey was asked");
    assert.equal(await tokens(account.address), 5_000_000n);
    assert.equal(await read().getCode({ address: account.address }), undefined);
  });

  it("a deployment that names no PasskeyAccountFactory: ClientConfigError before anything is sent", async () => {
    const { passkeyAccountFactory, ...contracts } = market.devnet.deployment.contracts;
    assert.ok(passkeyAccountFactory);
    await assert.rejects(
      createClient({
        rpcUrl: market.devnet.rpcUrl,
        bootstrap: [market.provider.peer.addr],
        deployment: { ...market.devnet.deployment, contracts },
        smartAccount: { owner: softwareAuthenticator().account, bundlerUrl: bundler.url },
      }),
      (error: unknown) => error instanceof ClientConfigError && /names no passkey account factory/.test(error.message),
    );
  });
});

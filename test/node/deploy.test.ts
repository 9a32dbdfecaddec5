import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { createPublicClient, erc20Abi, http, type Abi } from "viem";
import { attestorStakingAbi, leaseMarketAbi, providerRegistryAbi, sessionKeysAbi, testTokenAbi, timelockControllerAbi } from "../../common/abi.js";
import { devnetAccount } from "../../common/devnet.js";
import { connectChain } from "../../node/chain/clients.js";
import { ATTESTOR_ROLE, DEVNET_PARAMS, MARKET_ROLE, PRODUCTION_TIMELOCK_DELAY_SECONDS, deployAttestorStaking, deployContracts } from "../../node/chain/deploy.js";
import { parseDeployFlags } from "../../node/chain/deploy-flags.js";
import { startEmbeddedChain, type EmbeddedChain } from "../../node/chain/embedded.js";
import { readDeployment, writeDeployment } from "../../node/chain/manifest.js";
import { ANYONE, CANCELLER_ROLE, EXECUTOR_ROLE, PROPOSER_ROLE } from "../../node/chain/timelock.js";
import { lastJson, runCli } from "../support/cli.js";

describe("devnet deployment (embedded chain)", () => {
  let chain: EmbeddedChain;
  let dir: string;
  before(async () => {
    chain = await startEmbeddedChain();
    dir = await mkdtemp(path.join(tmpdir(), "suanli-deploy-"));
  });
  after(async () => {
    await chain.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("deploys token, registry and market, writes a manifest and a plain viem client reads them back", async () => {
    const clients = await connectChain({ rpcUrl: chain.rpcUrl, account: devnetAccount(0) });
    const deployment = await deployContracts({ publicClient: clients.publicClient, walletClient: clients.walletClient! });
    await writeDeployment(dir, deployment);

    const manifest = await readDeployment(dir, 31337);
    assert.equal(manifest.chainId, 31337);
    assert.equal(manifest.contracts.token, deployment.contracts.token);
    assert.ok(manifest.contracts.registry && manifest.contracts.market);
    assert.ok(manifest.deploymentBlock >= 1n);

    // A plain viem client, knowing nothing but the URL and the manifest.
    const reader = createPublicClient({ transport: http(chain.rpcUrl) });
    const [symbol, decimals, supply] = await Promise.all([
      reader.readContract({ address: manifest.contracts.token, abi: testTokenAbi, functionName: "symbol" }),
      reader.readContract({ address: manifest.contracts.token, abi: testTokenAbi, functionName: "decimals" }),
      reader.readContract({ address: manifest.contracts.token, abi: testTokenAbi, functionName: "totalSupply" }),
    ]);
    assert.equal(symbol, "tUSD");
    assert.equal(decimals, 6);
    assert.equal(supply, 0n);

    // The market is wired to the registry (MARKET_ROLE) and both settle in the token; devnet parameters apply.
    const registry = manifest.contracts.registry!;
    const market = manifest.contracts.market!;
    const [marketRegistry, marketToken, registryToken, hasMarketRole, params, unbondingDelay, quorum] = await Promise.all([
      reader.readContract({ address: market, abi: leaseMarketAbi, functionName: "registry" }),
      reader.readContract({ address: market, abi: leaseMarketAbi, functionName: "token" }),
      reader.readContract({ address: registry, abi: providerRegistryAbi, functionName: "token" }),
      reader.readContract({ address: registry, abi: providerRegistryAbi, functionName: "hasRole", args: [MARKET_ROLE, market] }),
      reader.readContract({ address: market, abi: leaseMarketAbi, functionName: "params" }),
      reader.readContract({ address: registry, abi: providerRegistryAbi, functionName: "unbondingDelay" }),
      reader.readContract({ address: registry, abi: providerRegistryAbi, functionName: "faultQuorum" }),
    ]);
    assert.equal(marketRegistry, registry);
    assert.equal(marketToken, manifest.contracts.token);
    assert.equal(registryToken, manifest.contracts.token);
    assert.equal(hasMarketRole, true);
    assert.equal(params.preemptionNotice, DEVNET_PARAMS.preemptionNotice);
    assert.equal(params.protocolFeeBps, 0);
    assert.equal(unbondingDelay, DEVNET_PARAMS.unbondingDelay);
    assert.equal(quorum, DEVNET_PARAMS.faultQuorum);
    // The manifest says the rest: the extension and the staking, the token's permit, the parameters, who governs.
    const staking = await reader.readContract({ address: registry, abi: providerRegistryAbi, functionName: "attestorStaking" });
    assert.equal(manifest.contracts.attestorStaking, staking);
    assert.equal(manifest.contracts.extension, await reader.readContract({ address: market, abi: leaseMarketAbi, functionName: "extension" }));
    assert.equal(manifest.contracts.timelock, undefined);
    assert.deepEqual(manifest.token, { symbol: "tUSD", decimals: 6, permit: { name: "Suanli Test USD", version: "1" }, origin: "TestToken" });
    assert.equal(manifest.params?.preset, "devnet");
    assert.equal(manifest.params?.values.preemptionNotice, DEVNET_PARAMS.preemptionNotice);
    assert.equal(manifest.params?.values.attestorMinStake, DEVNET_PARAMS.attestorMinStake.toString());
    assert.deepEqual(manifest.governance, { admin: devnetAccount(0).address });
    assert.deepEqual(manifest.roles, { admin: [devnetAccount(0).address], market: [market], attestor: [] });
    // The SessionKeys revocation list (deployed last, so the other contracts keep their addresses): a renter revokes
    // a delegation there and any client reads it as revoked.
    const sessions = manifest.contracts.sessions;
    assert.ok(sessions, "the manifest names the SessionKeys contract");
    assert.deepEqual(
      Object.keys(manifest.contracts).sort(),
      ["attestorStaking", "extension", "market", "registry", "sessions", "token"],
      "every contract deployContracts deploys on a devnet",
    );
    const delegation = `0x${"5e".repeat(32)}` as const;
    const renterKeys = await connectChain({ rpcUrl: chain.rpcUrl, account: devnetAccount(5) });
    await renterKeys.publicClient.waitForTransactionReceipt({
      hash: await renterKeys.walletClient!.writeContract({ address: sessions, abi: sessionKeysAbi, functionName: "revoke", args: [delegation] }),
    });
    assert.equal(await reader.readContract({ address: sessions, abi: sessionKeysAbi, functionName: "isRevoked", args: [devnetAccount(5).address, delegation, 1n] }), true);
    assert.equal(await reader.readContract({ address: sessions, abi: sessionKeysAbi, functionName: "isRevoked", args: [devnetAccount(6).address, delegation, 1n] }), false);

    // The faucet mints to a renter, and the balance is visible to any client.
    const renter = devnetAccount(5).address;
    const hash = await clients.walletClient!.writeContract({
      address: manifest.contracts.token,
      abi: testTokenAbi,
      functionName: "faucet",
      args: [renter, 1_000_000n],
    });
    await clients.publicClient.waitForTransactionReceipt({ hash });
    assert.equal(await reader.readContract({ address: manifest.contracts.token, abi: testTokenAbi, functionName: "balanceOf", args: [renter] }), 1_000_000n);
  });

  it("grants attestors, applies parameter overrides and hands governance over", async () => {
    const clients = await connectChain({ rpcUrl: chain.rpcUrl, account: devnetAccount(0) });
    const reader = createPublicClient({ transport: http(chain.rpcUrl) });
    const attestor = devnetAccount(7).address;
    const withAttestors = await deployContracts({
      publicClient: clients.publicClient,
      walletClient: clients.walletClient!,
      attestors: [attestor],
      params: { faultQuorum: 2, preemptionNotice: 120 },
    });
    const registry = withAttestors.contracts.registry!;
    assert.equal(await reader.readContract({ address: registry, abi: providerRegistryAbi, functionName: "hasRole", args: [ATTESTOR_ROLE, attestor] }), true);
    assert.equal(await reader.readContract({ address: registry, abi: providerRegistryAbi, functionName: "faultQuorum" }), 2);
    // The attestor is staked in the AttestorStaking the registry names, so it counts; an unstaked role holder would not.
    const staking = await reader.readContract({ address: registry, abi: providerRegistryAbi, functionName: "attestorStaking" });
    assert.equal((await reader.readContract({ address: staking, abi: attestorStakingAbi, functionName: "stakeOf", args: [attestor] })).active, DEVNET_PARAMS.attestorMinStake);
    assert.equal(await reader.readContract({ address: registry, abi: providerRegistryAbi, functionName: "isAttestor", args: [attestor] }), true);
    assert.equal((await reader.readContract({ address: withAttestors.contracts.market!, abi: leaseMarketAbi, functionName: "params" })).preemptionNotice, 120);

    const governance = devnetAccount(9).address;
    const handedOver = await deployContracts({ publicClient: clients.publicClient, walletClient: clients.walletClient!, governance });
    const admin = `0x${"00".repeat(32)}` as const;
    const [govIsAdmin, deployerIsAdmin] = await Promise.all(
      [governance, devnetAccount(0).address].map((account) =>
        reader.readContract({ address: handedOver.contracts.registry!, abi: providerRegistryAbi, functionName: "hasRole", args: [admin, account] }),
      ),
    );
    assert.deepEqual([govIsAdmin, deployerIsAdmin], [true, false]);

    await assert.rejects(
      deployContracts({ publicClient: clients.publicClient, walletClient: clients.walletClient!, governance, attestors: [attestor] }),
      (error: unknown) => (error as Error).name === "DeployError",
    );
  });

  it("replaces the attestor staking: the predecessor checked before anything is sent, its parameters carried over, attached only when asked and by governance only; and from the CLI (≈3 s)", async () => {
    const clients = await connectChain({ rpcUrl: chain.rpcUrl, account: devnetAccount(0) });
    const { publicClient, walletClient } = { publicClient: clients.publicClient, walletClient: clients.walletClient! };
    const first = await deployContracts({ publicClient, walletClient });
    const registry = first.contracts.registry!;
    const market = first.contracts.market!;
    const current = await publicClient.readContract({ address: registry, abi: providerRegistryAbi, functionName: "attestorStaking" });
    const currentParams = await publicClient.readContract({ address: current, abi: attestorStakingAbi, functionName: "params" });
    const refused = async (predecessor: `0x${string}`, pattern: RegExp, params = {}) => {
      const nonce = await publicClient.getTransactionCount({ address: walletClient.account.address });
      await assert.rejects(deployAttestorStaking({ publicClient, walletClient, registry, market, predecessor, params }), (error: unknown) => {
        assert.equal((error as Error).name, "DeployError");
        assert.match((error as Error).message, pattern);
        return true;
      });
      assert.equal(await publicClient.getTransactionCount({ address: walletClient.account.address }), nonce); // nothing sent
    };
    await refused(devnetAccount(5).address, /No contract at the predecessor/);
    await refused(first.contracts.token, /is not an AttestorStaking/);
    const other = await deployContracts({ publicClient, walletClient });
    const otherStaking = await publicClient.readContract({ address: other.contracts.registry!, abi: providerRegistryAbi, functionName: "attestorStaking" });
    await refused(otherStaking, /serves the registry/);
    await refused(current, /faultWindow 31 s exceeds its predecessor's 30 s/, { faultWindow: DEVNET_PARAMS.attestorFaultWindow + 1 });

    // Another key may deploy one, but only governance attaches it.
    const stranger = await connectChain({ rpcUrl: chain.rpcUrl, account: devnetAccount(4) });
    const pending = await deployAttestorStaking({ publicClient, walletClient: stranger.walletClient!, registry, market, predecessor: current, attach: true });
    assert.equal(pending.attached, false);
    // Governance's key does not attach unless asked: attestors stake in the replacement first.
    const unattached = await deployAttestorStaking({ publicClient, walletClient, registry, market, predecessor: current });
    assert.equal(unattached.attached, false);
    assert.equal(await publicClient.readContract({ address: registry, abi: providerRegistryAbi, functionName: "attestorStaking" }), current);

    const next = await deployAttestorStaking({ publicClient, walletClient, registry, market, predecessor: current, params: { disputeFee: 20n * 10n ** 6n }, attach: true });
    assert.equal(next.attached, true);
    assert.equal(await publicClient.readContract({ address: registry, abi: providerRegistryAbi, functionName: "attestorStaking" }), next.address);
    assert.equal(await publicClient.readContract({ address: next.address, abi: attestorStakingAbi, functionName: "predecessor" }), current);
    assert.deepEqual(await publicClient.readContract({ address: next.address, abi: attestorStakingAbi, functionName: "params" }), {
      ...currentParams,
      disputeFee: 20n * 10n ** 6n,
    });

    // The CLI replaces the registry's current staking (the one just attached) from the manifest.
    const out = await mkdtemp(path.join(tmpdir(), "suanli-replace-"));
    try {
      await writeDeployment(out, first);
      const cli = (...args: string[]) => promisify(execFile)("npx", ["tsx", "node/chain/deploy-cli.ts", "--rpc-url", chain.rpcUrl, "--out", out, ...args]);
      await assert.rejects(cli("--replace-staking", "--predecessor", "0x1234"), (error: unknown) => {
        assert.match((error as { stderr: string }).stderr, /--predecessor must be an address/);
        return true;
      });
      const { stdout } = await cli("--replace-staking", "--attach");
      assert.match(stdout, new RegExp(`replacing ${next.address}`));
      assert.match(stdout, /Attached/);
      const third = await publicClient.readContract({ address: registry, abi: providerRegistryAbi, functionName: "attestorStaking" });
      assert.equal(await publicClient.readContract({ address: third, abi: attestorStakingAbi, functionName: "predecessor" }), next.address);
    } finally {
      await rm(out, { recursive: true, force: true });
    }
  });

  it("hands every admin power to a timelock and the deployer keeps none; refuses a delay shorter than the unbonding delay before sending anything", async () => {
    const clients = await connectChain({ rpcUrl: chain.rpcUrl, account: devnetAccount(0) });
    const { publicClient, walletClient } = { publicClient: clients.publicClient, walletClient: clients.walletClient! };
    const [proposer, executor, guardian, attestor] = [devnetAccount(1).address, devnetAccount(2).address, devnetAccount(3).address, devnetAccount(7).address];
    const nonce = await publicClient.getTransactionCount({ address: walletClient.account.address });
    const refused = (options: Partial<Parameters<typeof deployContracts>[0]>, pattern: RegExp) =>
      assert.rejects(deployContracts({ publicClient, walletClient, ...options }), (error: Error) => {
        assert.equal(error.name, "DeployError");
        assert.match(error.message, pattern);
        return true;
      });
    await refused({ timelock: { minDelaySeconds: 59, proposers: [proposer], executors: [executor] } }, /timelock delay 59 s is shorter than the providers' unbonding delay 60 s/);
    await refused({ timelock: { minDelaySeconds: 60, proposers: [], executors: [executor] } }, /at least one proposer/);
    await refused({ timelock: { minDelaySeconds: 60, proposers: [proposer], executors: [executor] }, governance: proposer }, /either governance .* or timelock/);
    assert.equal(await publicClient.getTransactionCount({ address: walletClient.account.address }), nonce); // nothing sent

    const deployment = await deployContracts({
      publicClient,
      walletClient,
      attestors: [attestor],
      params: { faultQuorumBps: 6_667 },
      timelock: { minDelaySeconds: 3_600, proposers: [proposer], executors: [ANYONE], cancellers: [guardian] },
    });
    const timelock = deployment.contracts.timelock!;
    const registry = deployment.contracts.registry!;
    const read = <T>(address: `0x${string}`, abi: Abi, functionName: string, args: readonly unknown[] = []) =>
      publicClient.readContract({ address, abi, functionName, args }) as Promise<T>;
    const ADMIN = `0x${"00".repeat(32)}` as const;
    assert.deepEqual(deployment.governance, { admin: timelock, timelock: { minDelaySeconds: 3_600, proposers: [proposer], executors: [ANYONE], cancellers: [guardian] } });
    // The attestor was granted before the handover; the registry's only admin is the timelock.
    assert.deepEqual(deployment.roles, { admin: [timelock], market: [deployment.contracts.market], attestor: [attestor] });
    assert.deepEqual(await read(registry, providerRegistryAbi, "faultQuorumParams"), [DEVNET_PARAMS.faultQuorum, 6_667]);
    assert.equal(await read(registry, providerRegistryAbi, "hasRole", [ADMIN, devnetAccount(0).address]), false);
    // A real deployment has the SessionKeys revocation list too; it has no admin to hand over.
    const sessionsCode = deployment.contracts.sessions && (await publicClient.getCode({ address: deployment.contracts.sessions }));
    assert.ok(sessionsCode && sessionsCode !== "0x", "the SessionKeys contract is deployed");
    // The slashes' sink is governance's timelock when no treasury is set.
    assert.equal((await read<{ sink: string }>(deployment.contracts.attestorStaking!, attestorStakingAbi, "params")).sink, timelock);
    // The timelock: its delay, its roles as asked, and its own admin is itself (the deployer renounced after adding the guardian).
    assert.equal(await read(timelock, timelockControllerAbi, "getMinDelay"), 3_600n);
    const has = (role: `0x${string}`, account: `0x${string}`) => read<boolean>(timelock, timelockControllerAbi, "hasRole", [role, account]);
    assert.deepEqual(
      await Promise.all([
        has(PROPOSER_ROLE, proposer),
        has(CANCELLER_ROLE, proposer),
        has(EXECUTOR_ROLE, ANYONE),
        has(CANCELLER_ROLE, guardian),
        has(PROPOSER_ROLE, guardian),
        has(ADMIN, timelock),
        has(ADMIN, devnetAccount(0).address),
      ]),
      [true, true, true, true, false, true, false],
    );
    // Every admin power from the deployer's key now fails.
    await assert.rejects(
      walletClient.writeContract({ address: registry, abi: providerRegistryAbi, functionName: "setFaultQuorum", args: [3] }),
      /AccessControlUnauthorizedAccount/,
    );
  });

  it("parses the deploy flags: production needs a timelock and an existing token, bad input is refused with what is accepted", () => {
    const refused = (args: string[], pattern: RegExp) =>
      assert.throws(
        () => parseDeployFlags(args, {}),
        (error: Error) => {
          assert.equal(error.name, "DeployFlagError");
          assert.match(error.message, pattern);
          return true;
        },
      );
    const token = devnetAccount(8).address;
    const proposer = devnetAccount(1).address;
    refused(["--params", "production", "--token", token], /--params production hands every admin power to a timelock: pass --proposer/);
    refused(["--params", "production", "--proposer", proposer], /--params production settles in an existing token: pass --token/);
    refused(["--params", "mainnet"], /--params must be one of: devnet, production/);
    refused(["--token", "0x1234"], /--token must be an address/);
    refused(["--executor", proposer], /set up the timelock: pass at least one --proposer/);
    refused(["--proposer", proposer, "--timelock-delay", "8d"], /--timelock-delay must be a whole number of seconds/);
    refused(["--replace-staking", "--token", token], /--replace-staking deploys only a new AttestorStaking: --token do not apply/);
    refused(["--attach"], /--predecessor and --attach go with --replace-staking/);
    refused(["--private-key", "0xabc"], /--private-key must be 0x followed by 64 hex digits/);
    refused(["--bogus"], /Unknown option '--bogus'[\s\S]*Accepted: --rpc-url/);

    // The devnet stays the default: no timelock, the TestToken.
    assert.deepEqual(parseDeployFlags([], {}).deploy, { preset: "devnet", attestors: [] });
    assert.deepEqual(parseDeployFlags(["--account-abstraction"], {}).deploy, { preset: "devnet", attestors: [], accountAbstraction: true });
    // The SponsorPaymaster (docs/aa.md "Gas without ETH"): a signer, optionally a deposit in ETH; only with --account-abstraction.
    assert.deepEqual(parseDeployFlags(["--account-abstraction", "--sponsor-signer", proposer, "--sponsor-deposit", "0.5"], {}).deploy.sponsor, {
      signer: proposer,
      depositWei: 500_000_000_000_000_000n,
    });
    refused(["--sponsor-signer", proposer], /--sponsor-signer and --sponsor-deposit deploy the SponsorPaymaster, which needs --account-abstraction/);
    refused(["--account-abstraction", "--sponsor-deposit", "1"], /--sponsor-deposit funds the SponsorPaymaster: pass --sponsor-signer/);
    refused(["--account-abstraction", "--sponsor-signer", proposer, "--sponsor-deposit", "lots"], /--sponsor-deposit takes ETH as a decimal number/);
    refused(["--account-abstraction", "--sponsor-signer", "0x12"], /--sponsor-signer/);
    const production = parseDeployFlags(["--params", "production", "--token", token, "--proposer", proposer, "--executor", "anyone", "--attestor", token], {});
    assert.deepEqual(production.deploy, {
      preset: "production",
      token,
      attestors: [token],
      timelock: { minDelaySeconds: PRODUCTION_TIMELOCK_DELAY_SECONDS, proposers: [proposer], executors: [ANYONE], cancellers: [] },
    });
    // Without --executor the proposers execute; a devnet timelock waits the devnet's unbonding delay unless told.
    assert.deepEqual(parseDeployFlags(["--proposer", proposer], {}).deploy.timelock, {
      minDelaySeconds: DEVNET_PARAMS.unbondingDelay,
      proposers: [proposer],
      executors: [proposer],
      cancellers: [],
    });
    assert.equal(parseDeployFlags(["--proposer", proposer, "--timelock-delay", "7200"], {}).deploy.timelock?.minDelaySeconds, 7_200);
  });

  it("onboards an attestor on a deployment without a timelock and a token without permit: approve and stake, then the admin grants at once", async () => {
    const clients = await connectChain({ rpcUrl: chain.rpcUrl, account: devnetAccount(0) });
    const { publicClient, walletClient } = { publicClient: clients.publicClient, walletClient: clients.walletClient! };
    const artifact = JSON.parse(await readFile(path.resolve(import.meta.dirname, "../../artifacts/contracts/test/StableToken.sol/StableToken.json"), "utf8")) as {
      abi: Abi;
      bytecode: `0x${string}`;
    };
    const attestor = devnetAccount(7).address;
    const hash = await walletClient.deployContract({ ...artifact, args: ["Plain USD", "pUSD", 6, "", devnetAccount(0).address, 10n ** 12n] });
    const token = (await publicClient.waitForTransactionReceipt({ hash })).contractAddress!;
    const deployment = await deployContracts({ publicClient, walletClient, token });
    assert.deepEqual(deployment.token, { symbol: "pUSD", decimals: 6, permit: null, origin: "existing" });
    await publicClient.waitForTransactionReceipt({
      hash: await walletClient.writeContract({ address: token, abi: erc20Abi, functionName: "transfer", args: [attestor, DEVNET_PARAMS.attestorMinStake] }),
    });
    const out = await mkdtemp(path.join(tmpdir(), "suanli-onboard-"));
    try {
      await writeDeployment(out, deployment);
      const cli = (...args: string[]) => runCli([...args, "--rpc-url", chain.rpcUrl, "--deployments", out, "--json"]);
      const staked = await cli("attestor", "stake", "--devnet-account", "7");
      assert.equal(staked.code, 0, staked.stderr);
      assert.deepEqual(
        (({ amount, permit, transactions, holdsRole }) => ({ amount, permit, transactions: (transactions as string[]).length, holdsRole }))(lastJson(staked.stdout)),
        { amount: DEVNET_PARAMS.attestorMinStake.toString(), permit: false, transactions: 2, holdsRole: false }, // approve + stake
      );
      const scheduled = await cli("governance", "grant-attestor", attestor, "--schedule", "--devnet-account", "0");
      assert.equal(scheduled.code, 2);
      assert.match(scheduled.stderr, /no timelock: governance acts at once/);
      const granted = await cli("governance", "grant-attestor", attestor, "--execute", "--devnet-account", "0");
      assert.equal(granted.code, 0, granted.stderr);
      assert.deepEqual((({ holdsRole, staked, isAttestor }) => ({ holdsRole, staked, isAttestor }))(lastJson(granted.stdout)), { holdsRole: true, staked: true, isAttestor: true });
    } finally {
      await rm(out, { recursive: true, force: true });
    }
  });

  it("refuses a manifest for another chain or a missing one, with a hint", async () => {
    await assert.rejects(readDeployment(dir, 1), (error: unknown) => {
      assert.equal((error as Error).name, "DeploymentError");
      assert.match((error as Error).message, /npm run deploy/);
      return true;
    });
  });
});

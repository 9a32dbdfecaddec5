import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { createPublicClient, http } from "viem";
import { attestorStakingAbi, leaseMarketAbi, providerRegistryAbi, testTokenAbi } from "../../common/abi.js";
import { devnetAccount } from "../../common/devnet.js";
import { connectChain } from "../../node/chain/clients.js";
import { ATTESTOR_ROLE, DEVNET_PARAMS, MARKET_ROLE, deployAttestorStaking, deployContracts } from "../../node/chain/deploy.js";
import { startEmbeddedChain, type EmbeddedChain } from "../../node/chain/embedded.js";
import { readDeployment, writeDeployment } from "../../node/chain/manifest.js";

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

  it("refuses a manifest for another chain or a missing one, with a hint", async () => {
    await assert.rejects(readDeployment(dir, 1), (error: unknown) => {
      assert.equal((error as Error).name, "DeploymentError");
      assert.match((error as Error).message, /npm run deploy/);
      return true;
    });
  });
});

/**
 * A devnet for node-side tests: the in-process Hardhat chain behind a JSON-RPC server on
 * 127.0.0.1, the contracts deployed by the real deploy script, and small helpers that act as
 * devnet wallets through plain viem clients (what nodes and the SDK do).
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { parseEther, type Abi, type Account, type Address, type ContractFunctionName, type Hex } from "viem";
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from "viem/accounts";
import { providerRegistryAbi, testTokenAbi } from "../../common/abi.js";
import type { ContractWrite } from "../../common/chain/tx.js";
import type { Deployment } from "../../common/deployment.js";
import { devnetAccount } from "../../common/devnet.js";
import { modelHash } from "../../common/gpu.js";
import { connectChain, type ChainClients } from "../../node/chain/clients.js";
import { deployContracts, type DeployOptions } from "../../node/chain/deploy.js";
import { startEmbeddedChain, type EmbeddedChain } from "../../node/chain/embedded.js";
import { writeDeployment } from "../../node/chain/manifest.js";

export type Devnet = {
  chain: EmbeddedChain;
  rpcUrl: string;
  deployment: Deployment;
  /** Folder holding `<chainId>.json`. */
  deploymentsDir: string;
  admin: ChainClients;
  /** Clients acting as devnet account `index`. */
  wallet(index: number | Account): Promise<Required<ChainClients>>;
  close(): Promise<void>;
};

export async function startDevnet(
  options: {
    params?: DeployOptions["params"];
    attestors?: Address[];
    wallClockBlocks?: boolean;
    clockOffsetSeconds?: number;
    accountAbstraction?: boolean;
    sponsor?: DeployOptions["sponsor"];
  } = {},
): Promise<Devnet> {
  const chain = await startEmbeddedChain({ wallClockBlocks: options.wallClockBlocks, clockOffsetSeconds: options.clockOffsetSeconds });
  const admin = await connectChain({ rpcUrl: chain.rpcUrl, account: devnetAccount(0), pollingIntervalMs: 50 });
  const deployment = await deployContracts({
    publicClient: admin.publicClient,
    walletClient: admin.walletClient!,
    params: options.params,
    attestors: options.attestors,
    accountAbstraction: options.accountAbstraction,
    sponsor: options.sponsor,
  });
  const deploymentsDir = await mkdtemp(path.join(tmpdir(), "suanli-devnet-"));
  await writeDeployment(deploymentsDir, deployment);
  return {
    chain,
    rpcUrl: chain.rpcUrl,
    deployment,
    deploymentsDir,
    admin,
    async wallet(index) {
      const account = typeof index === "number" ? devnetAccount(index) : index;
      return (await connectChain({ rpcUrl: chain.rpcUrl, chainId: deployment.chainId, account, pollingIntervalMs: 50 })) as Required<ChainClients>;
    },
    async close() {
      await chain.close();
      await rm(deploymentsDir, { recursive: true, force: true });
    },
  };
}

/** Sends a contract write and waits for a successful receipt. */
export async function send<const abi extends Abi, name extends ContractFunctionName<abi, "nonpayable" | "payable">>(
  clients: Required<ChainClients>,
  call: ContractWrite<abi, name>,
): Promise<Hex> {
  // The call is checked against its own ABI above; it is written through the plain ABI, which
  // viem's writeContract overloads accept without seeing through the generic.
  const plain = { address: call.address, abi: call.abi as Abi, functionName: call.functionName as string, args: call.args as readonly unknown[] };
  const hash = await clients.walletClient.writeContract({ ...plain, account: clients.account, chain: clients.chain });
  const receipt = await clients.publicClient.waitForTransactionReceipt({ hash });
  if (receipt.status !== "success") throw new Error(`transaction ${hash} reverted`);
  return hash;
}

/**
 * Moves the devnet's clock `seconds` ahead and mines a block at the new time (e.g. past a held lease's fault window,
 * which a test would otherwise wait 600 s of real time for).
 */
export async function advanceChain(devnet: Pick<Devnet, "admin">, seconds: number): Promise<void> {
  await devnet.admin.publicClient.request({ method: "evm_increaseTime" as never, params: [seconds] as never });
  await devnet.admin.publicClient.request({ method: "evm_mine" as never, params: [] as never });
}

/** Mints devnet tokens to the wallet. */
export async function fund(devnet: Devnet, clients: Required<ChainClients>, amount: bigint): Promise<void> {
  await send(clients, { address: devnet.deployment.contracts.token, abi: testTokenAbi, functionName: "faucet", args: [clients.account.address, amount] });
}

/** A fresh wallet with 1 ETH for gas and `tokens` devnet tokens (a renter no other test shares). */
export async function fundedAccount(devnet: Devnet, tokens: bigint): Promise<PrivateKeyAccount> {
  const account = privateKeyToAccount(generatePrivateKey());
  const gas = await devnet.admin.walletClient!.sendTransaction({ to: account.address, value: parseEther("1") });
  await devnet.admin.publicClient.waitForTransactionReceipt({ hash: gas });
  await fund(devnet, await devnet.wallet(account), tokens);
  return account;
}

/** Registers the wallet as a provider with `stake`, declares machines and returns their ids. */
export async function registerProvider(
  devnet: Devnet,
  clients: Required<ChainClients>,
  options: { peerId: string; stake: bigint; machines: { model: string; units: number; vramMiB: number; region?: string }[] },
): Promise<number[]> {
  const registry = devnet.deployment.contracts.registry!;
  await fund(devnet, clients, options.stake);
  await send(clients, { address: devnet.deployment.contracts.token, abi: testTokenAbi, functionName: "approve", args: [registry, options.stake] });
  await send(clients, { address: registry, abi: providerRegistryAbi, functionName: "register", args: [options.peerId, ""] });
  await send(clients, { address: registry, abi: providerRegistryAbi, functionName: "stake", args: [options.stake] });
  const ids: number[] = [];
  for (const machine of options.machines) {
    const { result } = await clients.publicClient.simulateContract({
      account: clients.account,
      address: registry,
      abi: providerRegistryAbi,
      functionName: "addMachine",
      args: [modelHash(machine.model), machine.units, machine.vramMiB, 1, machine.region ?? "eu-west", `0x${"0".repeat(64)}`],
    });
    await send(clients, {
      address: registry,
      abi: providerRegistryAbi,
      functionName: "addMachine",
      args: [modelHash(machine.model), machine.units, machine.vramMiB, 1, machine.region ?? "eu-west", `0x${"0".repeat(64)}`],
    });
    ids.push(Number(result));
  }
  return ids;
}

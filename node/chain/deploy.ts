import { getAddress, type Account, type Chain, type PublicClient, type Transport, type WalletClient } from "viem";
import { testTokenAbi } from "../../common/abi.js";
import type { Deployment } from "../../common/deployment.js";
import { SuanliError } from "../../common/errors.js";
import { readBytecode } from "./artifacts.js";

export class DeployError extends SuanliError {
  override name = "DeployError";
}

export type DeployOptions = {
  publicClient: PublicClient<Transport, Chain>;
  walletClient: WalletClient<Transport, Chain, Account>;
};

/**
 * Deploys every Suanli contract that exists and returns the manifest (not yet written).
 * Each deployment waits for its receipt; the manifest's deploymentBlock is the first one's.
 */
export async function deployContracts({ publicClient, walletClient }: DeployOptions): Promise<Deployment> {
  const chainId = await publicClient.getChainId();
  const deployer = walletClient.account.address;

  async function deploy(contract: string, abi: readonly unknown[], args: readonly unknown[] = []) {
    const hash = await walletClient.deployContract({ abi, bytecode: await readBytecode(contract), args } as never);
    const receipt = await publicClient.waitForTransactionReceipt({ hash });
    if (receipt.status !== "success" || !receipt.contractAddress) {
      throw new DeployError(`Deploying ${contract} failed (transaction ${hash})`);
    }
    return { address: getAddress(receipt.contractAddress), blockNumber: receipt.blockNumber };
  }

  const token = await deploy("TestToken", testTokenAbi);
  const [symbol, decimals] = await Promise.all([
    publicClient.readContract({ address: token.address, abi: testTokenAbi, functionName: "symbol" }),
    publicClient.readContract({ address: token.address, abi: testTokenAbi, functionName: "decimals" }),
  ]);

  return {
    chainId,
    deploymentBlock: token.blockNumber,
    deployedAt: new Date().toISOString(),
    deployer,
    contracts: { token: token.address },
    token: { symbol, decimals },
  };
}

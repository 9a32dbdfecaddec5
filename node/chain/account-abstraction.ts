/**
 * Puts ERC-4337's EntryPoint v0.8 and SimpleAccountFactory on a chain that lacks them (the devnet, or any EVM chain:
 * docs/aa.md), at their canonical addresses: both go through the deterministic CREATE2 deployer with the bytecode that
 * `@account-abstraction/contracts` ships (compiled by eth-infinitism, not by our solc: another compiler's bytecode
 * would land elsewhere, and bundlers recognise EntryPoint v0.8 by its address).
 */
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import {
  concat,
  encodeAbiParameters,
  getAddress,
  getContractAddress,
  parseEther,
  zeroHash,
  type Account,
  type Address,
  type Chain,
  type Hex,
  type PublicClient,
  type Transport,
  type WalletClient,
} from "viem";
import { z } from "zod";
import { ENTRY_POINT_08, SIMPLE_ACCOUNT_FACTORY_08 } from "../../common/account-abstraction.js";
import { DeployError } from "./deploy-errors.js";

/** The deterministic deployer (github.com/Arachnid/deterministic-deployment-proxy): CREATE2 with a salt, the same address on every chain. */
export const DETERMINISTIC_DEPLOYER: Address = "0x4e59b44847b379578588920ca78fbf26c0b4956c";
/** The one-off signer of its presigned deployment (no chain id, so it replays on any chain), and what that costs it. */
const DEPLOYER_SIGNER: Address = "0x3fab184622dc19b6109349b94811493bf2a45362";
const DEPLOYER_COST = parseEther("0.01");
const DEPLOYER_TRANSACTION: Hex =
  "0xf8a58085174876e800830186a08080b853604580600e600039806000f350fe7fffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffe03601600081602082378035828234f58015156039578182fd5b8082525050506014600cf31ba02222222222222222222222222222222222222222222222222222222222222222a02222222222222222222222222222222222222222222222222222222222222222";
/** The salt eth-infinitism deployed EntryPoint v0.7 and v0.8 with. */
const ENTRY_POINT_SALT: Hex = "0x0a59dbff790c23c976a548690c27297883cc66b4c67024f9117b0238995e35e9";

const artifactSchema = z.object({ bytecode: z.string().regex(/^0x[0-9a-fA-F]+$/) });

/** A creation bytecode from the package's own artifacts (a development dependency: only deploys need it). */
async function packageBytecode(contract: "EntryPoint" | "SimpleAccountFactory"): Promise<Hex> {
  let file: string;
  try {
    file = createRequire(import.meta.url).resolve(`@account-abstraction/contracts/artifacts/${contract}.json`);
  } catch (cause) {
    throw new DeployError(`@account-abstraction/contracts is not installed: it ships the ${contract} to deploy`, {
      cause: cause as Error,
      metaMessages: ["Install the development dependencies (`npm ci`)."],
    });
  }
  return artifactSchema.parse(JSON.parse(await readFile(file, "utf8"))).bytecode as Hex;
}

export type AccountAbstraction = { entryPoint: Address; accountFactory: Address };

type Clients = { publicClient: PublicClient<Transport, Chain>; walletClient: WalletClient<Transport, Chain, Account> };

const hasCode = async (publicClient: Clients["publicClient"], address: Address) => ((await publicClient.getCode({ address })) ?? "0x") !== "0x";

/**
 * Makes sure the deterministic deployer, EntryPoint v0.8 and its SimpleAccountFactory are on the chain, deploying what
 * is missing (a contract at a CREATE2 address is the one its init code names, so what is there is kept), and returns
 * their addresses. The deployer's own presigned transaction needs a chain that accepts transactions without a chain id
 * (Hardhat and Anvil do; Anvil has the deployer from genesis); the wallet pays its 0.01 ETH of gas.
 */
export async function deployAccountAbstraction({ publicClient, walletClient }: Clients): Promise<AccountAbstraction> {
  const confirm = async (what: string, hash: Hex) => {
    const receipt = await publicClient.waitForTransactionReceipt({ hash });
    if (receipt.status !== "success") throw new DeployError(`${what} failed (transaction ${hash})`);
  };
  if (!(await hasCode(publicClient, DETERMINISTIC_DEPLOYER))) {
    const balance = await publicClient.getBalance({ address: DEPLOYER_SIGNER });
    if (balance < DEPLOYER_COST)
      await confirm("Funding the deterministic deployer's signer", await walletClient.sendTransaction({ to: DEPLOYER_SIGNER, value: DEPLOYER_COST - balance }));
    let hash: Hex;
    try {
      hash = await publicClient.request({ method: "eth_sendRawTransaction", params: [DEPLOYER_TRANSACTION] });
    } catch (cause) {
      throw new DeployError(`The chain refused the deterministic deployer's presigned transaction`, {
        cause: cause as Error,
        metaMessages: ["It carries no chain id (EIP-155): a node that refuses such transactions needs the deployer put there another way (docs/aa.md)."],
      });
    }
    await confirm("Deploying the deterministic deployer", hash);
  }
  const create2 = async (what: string, salt: Hex, initCode: Hex, expected: Address) => {
    const address = getContractAddress({ opcode: "CREATE2", from: DETERMINISTIC_DEPLOYER, salt, bytecode: initCode });
    if (getAddress(address) !== getAddress(expected))
      throw new DeployError(`${what}'s bytecode lands at ${address}, not at the canonical ${expected}: is the package another version?`);
    if (await hasCode(publicClient, address)) return address;
    // eth_estimateGas undercounts a CREATE through a proxy that forwards all but 1/64 of its gas: give it room.
    await confirm(`Deploying ${what}`, await walletClient.sendTransaction({ to: DETERMINISTIC_DEPLOYER, data: concat([salt, initCode]), gas: 8_000_000n }));
    if (!(await hasCode(publicClient, address))) throw new DeployError(`Deploying ${what} left no code at ${address}`);
    return address;
  };
  const entryPoint = await create2("EntryPoint v0.8", ENTRY_POINT_SALT, await packageBytecode("EntryPoint"), ENTRY_POINT_08);
  // SimpleAccountFactory's constructor takes the EntryPoint.
  const factoryInit = concat([await packageBytecode("SimpleAccountFactory"), encodeAbiParameters([{ type: "address" }], [entryPoint])]);
  const accountFactory = await create2("SimpleAccountFactory", zeroHash, factoryInit, SIMPLE_ACCOUNT_FACTORY_08);
  return { entryPoint: getAddress(entryPoint), accountFactory: getAddress(accountFactory) };
}

/**
 * Checks an existing ERC-20 before a deployment settles in it (docs/contracts.md, "Deploying for real"): 6
 * decimals, EIP-2612 detected by a permit that actually verifies, and no fee on transfer. Nothing is deployed
 * when a check fails.
 */
import { erc20Abi, getAddress, parseAbi, parseEventLogs, type Account, type Address, type Chain, type PublicClient, type Transport, type WalletClient } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { erc20PermitAbi, signPermitFields } from "../../common/chain/tx.js";
import type { PermitDomain } from "../../common/deployment.js";
import { DeployError } from "./deploy-errors.js";

/** The decimals every deployment's token has: prices, stakes and the parameter presets are in 6-decimal base units. */
export const SETTLEMENT_DECIMALS = 6;
/** What the fee check sends: one token of 6 decimals, so a fee of 0.0001 % or more shows. */
export const FEE_PROBE_BASE_UNITS = 10n ** 6n;

export type SettlementToken = {
  address: Address;
  name: string;
  symbol: string;
  decimals: number;
  /** The EIP-712 domain its permit verifies under; null: no working EIP-2612 permit (deposits are approved instead). */
  permit: PermitDomain | null;
};

const domainAbi = parseAbi([
  "function eip712Domain() view returns (bytes1 fields, string name, string version, uint256 chainId, address verifyingContract, bytes32 salt, uint256[] extensions)",
  "function version() view returns (string)",
]);

/**
 * The EIP-712 domain under which `token`'s EIP-2612 permit verifies, or null when it has none. A token is taken to
 * have a permit only if one signed by a throwaway key passes `permit` in a simulated call: `nonces()` alone says
 * nothing about the domain (USDC's version is "2", OpenZeppelin's "1"). The candidate versions come from the token's
 * EIP-5267 `eip712Domain()`, else its `version()`, else "1" and "2".
 */
export async function detectPermit(publicClient: PublicClient<Transport, Chain>, token: Address): Promise<PermitDomain | null> {
  const read = <T>(call: () => Promise<T>) => call().catch(() => undefined);
  const owner = privateKeyToAccount(generatePrivateKey());
  const nonce = await read(() => publicClient.readContract({ address: token, abi: erc20PermitAbi, functionName: "nonces", args: [owner.address] }));
  if (nonce === undefined) return null;
  const domain = await read(() => publicClient.readContract({ address: token, abi: domainAbi, functionName: "eip712Domain" }));
  const name = domain?.[1] ?? (await read(() => publicClient.readContract({ address: token, abi: erc20PermitAbi, functionName: "name" })));
  if (name === undefined) return null;
  const version = domain?.[2] ?? (await read(() => publicClient.readContract({ address: token, abi: domainAbi, functionName: "version" })));
  const candidates = version !== undefined ? [version] : ["1", "2"];
  const head = await publicClient.getBlock({ blockTag: "latest" });
  const deadline = head.timestamp + 3_600n;
  const chainId = await publicClient.getChainId();
  for (const candidate of candidates) {
    const permit = await signPermitFields(owner, {
      owner: owner.address,
      token,
      tokenName: name,
      version: candidate,
      chainId,
      spender: owner.address,
      value: 1n,
      nonce,
      deadline,
    });
    const works = await publicClient
      .simulateContract({
        address: token,
        abi: erc20PermitAbi,
        functionName: "permit",
        args: [owner.address, owner.address, permit.value, permit.deadline, permit.v, permit.r, permit.s],
        account: owner.address,
      })
      .then(
        () => true,
        () => false,
      );
    if (works) return { name, version: candidate };
  }
  return null;
}

/**
 * Checks `token` as a deployment's settlement token, with the deployer's key: a contract, an ERC-20 with 6
 * decimals, and no fee on transfer. The fee check is a transfer of FEE_PROBE_BASE_UNITS from the deployer to itself,
 * measured by the deployer's balance before and after (in the blocks around it) and by the transaction's Transfer
 * events: anything but one Transfer of the whole amount that leaves the balance unchanged refuses the token. A fee
 * charged only between two other accounts escapes this check; the contracts measure every deposit and stake and
 * refuse a short one (`TokenTransferShortfall`), so such a token fails at its first deposit instead.
 */
export async function checkSettlementToken(o: {
  publicClient: PublicClient<Transport, Chain>;
  walletClient: WalletClient<Transport, Chain, Account>;
  token: Address;
}): Promise<SettlementToken> {
  const { publicClient, walletClient } = o;
  const token = getAddress(o.token);
  const code = await publicClient.getCode({ address: token });
  if (!code || code === "0x") throw new DeployError(`No contract at the token address ${token} on chain ${publicClient.chain.id}`);
  let name: string, symbol: string, decimals: number;
  try {
    [name, symbol, decimals] = await Promise.all([
      publicClient.readContract({ address: token, abi: erc20Abi, functionName: "name" }),
      publicClient.readContract({ address: token, abi: erc20Abi, functionName: "symbol" }),
      publicClient.readContract({ address: token, abi: erc20Abi, functionName: "decimals" }),
    ]);
  } catch (cause) {
    throw new DeployError(`${token} is not an ERC-20 with name(), symbol() and decimals()`, { cause: cause as Error });
  }
  if (decimals !== SETTLEMENT_DECIMALS) {
    throw new DeployError(`The token ${symbol} (${token}) has ${decimals} decimals; a Suanli deployment settles in a token of ${SETTLEMENT_DECIMALS}`, {
      metaMessages: ["Prices, stakes and every parameter preset are in 6-decimal base units (USDC, USDT): pick such a token."],
    });
  }
  const permit = await detectPermit(publicClient, token);
  await probeTransferFee(publicClient, walletClient, token, symbol);
  return { address: token, name, symbol, decimals, permit };
}

async function probeTransferFee(publicClient: PublicClient<Transport, Chain>, walletClient: WalletClient<Transport, Chain, Account>, token: Address, symbol: string) {
  const deployer = walletClient.account.address;
  const held = await publicClient.readContract({ address: token, abi: erc20Abi, functionName: "balanceOf", args: [deployer] });
  if (held < FEE_PROBE_BASE_UNITS) {
    throw new DeployError(`The deployer ${deployer} holds ${held} base units of ${symbol}; the fee-on-transfer check needs ${FEE_PROBE_BASE_UNITS} (1 ${symbol})`, {
      metaMessages: [`Send the deployer 1 ${symbol}: the check transfers it to the deployer itself and measures what arrives (it costs only the gas).`],
    });
  }
  let hash: `0x${string}`;
  try {
    const { request } = await publicClient.simulateContract({
      address: token,
      abi: erc20Abi,
      functionName: "transfer",
      args: [deployer, FEE_PROBE_BASE_UNITS],
      account: walletClient.account,
    });
    hash = await walletClient.writeContract(request);
  } catch (cause) {
    throw new DeployError(`The token ${symbol} refused a plain transfer of ${FEE_PROBE_BASE_UNITS} base units`, { cause: cause as Error });
  }
  const receipt = await publicClient.waitForTransactionReceipt({ hash });
  if (receipt.status !== "success") throw new DeployError(`The fee-on-transfer check's transfer failed (transaction ${hash})`);
  const balanceAt = (blockNumber: bigint) => publicClient.readContract({ address: token, abi: erc20Abi, functionName: "balanceOf", args: [deployer], blockNumber });
  const [before, after] = await Promise.all([balanceAt(receipt.blockNumber - 1n), balanceAt(receipt.blockNumber)]);
  const transfers = parseEventLogs({ abi: erc20Abi, eventName: "Transfer", logs: receipt.logs.filter((log) => getAddress(log.address) === token) });
  const plain = transfers.length === 1 && transfers[0]!.args.value === FEE_PROBE_BASE_UNITS && getAddress(transfers[0]!.args.to) === deployer;
  if (after !== before || !plain) {
    throw new DeployError(
      `The token ${symbol} (${token}) takes a fee on transfer: sending ${FEE_PROBE_BASE_UNITS} base units moved the sender's balance by ${after - before}` +
        ` and emitted ${transfers.length} Transfer event(s) (transaction ${hash})`,
      { metaMessages: ["Escrow and stakes must hold exactly what they record: a fee-on-transfer or rebasing token cannot settle Suanli leases."] },
    );
  }
}

/**
 * The one way node and SDK send a contract transaction and read why it failed: `sendContract`
 * (typed by the ABI: function names and arguments are checked at compile time), one revert
 * decoder for every Suanli contract's custom errors, and the EIP-2612 permit every deposit path
 * signs. Production code talks to the payment token through viem's standard `erc20Abi` (plus the
 * permit's `nonces`), never the test token's ABI: a real deployment's stablecoin is not it.
 */
import {
  BaseError,
  ContractFunctionRevertedError,
  HttpRequestError,
  RpcRequestError,
  TimeoutError,
  decodeErrorResult,
  erc20Abi,
  hexToSignature,
  parseAbi,
  type Abi,
  type Account,
  type Address,
  type Chain,
  type ContractFunctionArgs,
  type ContractFunctionName,
  type Hex,
  type PublicClient,
  type TransactionReceipt,
  type Transport,
  type WalletClient,
} from "viem";
import { SuanliError } from "../errors.js";
import { suanliErrorsAbi } from "./market.js";
import { signTyped, type TypedDataSigner } from "./sign.js";

/**
 * Whether a failed chain request failed for a reason the next try may not meet: the endpoint
 * unreachable, reset, timed out or answering 5xx, or a JSON-RPC internal error. A revert, a bad
 * argument or a refused signature is not transient: retrying it gives the same answer.
 */
export function isTransientRpcError(error: unknown): boolean {
  if (!(error instanceof BaseError)) return false;
  return Boolean(
    error.walk((cause) => {
      if (cause instanceof ContractFunctionRevertedError) return false;
      if (cause instanceof TimeoutError) return true;
      if (cause instanceof HttpRequestError) return cause.status === undefined || cause.status >= 500 || cause.status === 429;
      if (cause instanceof RpcRequestError) return cause.code === -32603 || cause.code === -32000 || cause.code === -32005;
      return false;
    }),
  );
}

/** An ERC-20 with EIP-2612 permit: the standard ABI plus `nonces` (what a permit signer reads) and `permit`. */
export const erc20PermitAbi = [
  ...erc20Abi,
  ...parseAbi([
    "function nonces(address owner) view returns (uint256)",
    "function permit(address owner, address spender, uint256 value, uint256 deadline, uint8 v, bytes32 r, bytes32 s)",
  ]),
] as const;

type Mutating = "nonpayable" | "payable";

/** One contract write, typed by its ABI: `functionName` must be a write of `abi`, `args` its parameters. */
export type ContractWrite<abi extends Abi, name extends ContractFunctionName<abi, Mutating>> = {
  address: Address;
  abi: abi;
  functionName: name;
  args: ContractFunctionArgs<abi, Mutating, name>;
};

/** The clients a transaction needs: a public client to simulate and wait, a wallet client with an account to sign. */
export type TransactionClients = {
  publicClient: PublicClient<Transport, Chain>;
  walletClient: WalletClient<Transport, Chain, Account>;
};

/** A custom error a contract reverted with, decoded: its name and arguments. */
export type Revert = { name: string; args: readonly unknown[] };

/** The transaction was mined but reverted (it passed simulation: the state changed in between). */
export class TransactionRevertedError extends SuanliError {
  override name = "TransactionRevertedError";
  constructor(
    readonly functionName: string,
    readonly hash: Hex,
    readonly blockNumber: bigint,
  ) {
    super(`${functionName}: transaction ${hash} reverted in block ${blockNumber}`);
  }
}

/**
 * The custom error inside a viem error, decoded against every Suanli contract's errors (the
 * market's own, and those bubbling up from the registry and the token), or undefined when the
 * failure was not a contract revert (an unreachable endpoint, a rejected signature).
 */
export function decodeRevert(error: unknown): Revert | undefined {
  if (!(error instanceof BaseError)) return undefined;
  const reverted = error.walk((e) => e instanceof ContractFunctionRevertedError) as ContractFunctionRevertedError | null;
  if (!reverted) return undefined;
  if (reverted.data?.errorName) return { name: reverted.data.errorName, args: reverted.data.args ?? [] };
  if (reverted.raw) {
    try {
      const decoded = decodeErrorResult({ abi: suanliErrorsAbi, data: reverted.raw });
      return { name: decoded.errorName, args: decoded.args ?? [] };
    } catch {
      return undefined;
    }
  }
  return undefined;
}

/** The custom error name a call reverted with, if it did. */
export function revertName(error: unknown): string | undefined {
  return decodeRevert(error)?.name;
}

/** The custom error with its arguments (`InsufficientStake(10, 20)`), or the best short reason viem gives. */
export function revertReason(error: unknown): string {
  const revert = decodeRevert(error);
  if (revert) return `${revert.name}(${revert.args.map((arg) => String(arg)).join(", ")})`;
  if (error instanceof BaseError) return error.shortMessage;
  return error instanceof Error ? error.message : String(error);
}

/**
 * Simulates a contract write (a revert is known, by its custom error, before gas is spent), sends
 * it and waits for its receipt. Throws viem's error for a failed simulation or send (read it with
 * `decodeRevert`), `TransactionRevertedError` for a mined revert.
 *
 * @example
 * import { leaseMarketAbi } from "suanli/common/abi";
 * import { sendContract } from "suanli/common/chain/tx";
 * const receipt = await sendContract({ publicClient, walletClient }, { address: market, abi: leaseMarketAbi, functionName: "close", args: [leaseId] });
 */
export async function sendContract<const abi extends Abi, name extends ContractFunctionName<abi, Mutating>>(
  clients: TransactionClients,
  call: ContractWrite<abi, name>,
  options: { timeoutMs?: number } = {},
): Promise<TransactionReceipt> {
  const { publicClient, walletClient } = clients;
  // The contract's own errors plus those bubbling up from the registry and the token. Once the
  // call is checked against its ABI's types above, it is sent through the untyped ABI below.
  const abi: Abi = [...(call.abi as Abi).filter((item) => item.type !== "error"), ...suanliErrorsAbi];
  const functionName: string = call.functionName;
  const args = (call.args ?? []) as readonly unknown[];
  const { request } = await publicClient.simulateContract({ account: walletClient.account, address: call.address, abi, functionName, args });
  // The estimate is the state the endpoint has now; the transaction runs on the state it lands
  // on (an endpoint lagging behind the chain, claims and accrual in between). A margin keeps a
  // transaction that would succeed from running out of gas and reverting, its gas spent.
  const estimate = await publicClient.estimateContractGas({ account: walletClient.account, address: call.address, abi, functionName, args });
  const hash = await walletClient.writeContract({ ...request, gas: (estimate * (100n + GAS_MARGIN_PERCENT)) / 100n });
  const receipt = await publicClient.waitForTransactionReceipt({ hash, timeout: options.timeoutMs ?? 120_000 });
  if (receipt.status !== "success") throw new TransactionRevertedError(functionName, hash, receipt.blockNumber);
  return receipt;
}

/** Gas added to every estimate, in percent (see sendContract). */
export const GAS_MARGIN_PERCENT = 25n;

/** The EIP-2612 permit arguments of `openLeaseWithPermit` / `extendWithPermit`. */
export type PermitSignature = { value: bigint; deadline: bigint; v: number; r: Hex; s: Hex };

/**
 * Signs an EIP-2612 permit letting `spender` take `value` of the owner's `token` until
 * `deadline` (unix seconds), reading the owner's permit nonce. `domain` is the token's permit domain
 * as the deployment manifest records it (`deployment.token.permit`, found by the deploy: USDC's
 * version is "2"); null there means the token has no permit, and so does a token without `nonces`:
 * then this returns null and the caller approves instead. Without `domain` (a manifest written
 * before it was recorded) the token's `name()` and version "1" are used.
 */
export async function signPermit(
  clients: { publicClient: PublicClient<Transport, Chain>; walletClient: WalletClient<Transport, Chain | undefined, Account | undefined> },
  permit: { owner: Account; token: Address; spender: Address; value: bigint; deadline: bigint; chainId: number; domain?: { name: string; version: string } | null },
): Promise<PermitSignature | null> {
  if (permit.domain === null) return null;
  let name: string;
  let nonce: bigint;
  try {
    [name, nonce] = await Promise.all([
      permit.domain?.name ?? clients.publicClient.readContract({ address: permit.token, abi: erc20PermitAbi, functionName: "name" }),
      clients.publicClient.readContract({ address: permit.token, abi: erc20PermitAbi, functionName: "nonces", args: [permit.owner.address] }),
    ]);
  } catch {
    return null;
  }
  const typedData = permitTypedData({ ...permit, owner: permit.owner.address, tokenName: name, version: permit.domain?.version, nonce });
  const signature = await clients.walletClient.signTypedData({ ...typedData, account: permit.owner });
  return permitArguments(permit, signature);
}

/** What an EIP-2612 permit binds: the token (its name and address make the domain), the owner's nonce and the allowance. */
export type PermitFields = {
  owner: Address;
  token: Address;
  tokenName: string;
  /** The EIP-712 domain version of the token's permit; "1" (OpenZeppelin's ERC20Permit) when not given. */
  version?: string;
  chainId: number;
  spender: Address;
  value: bigint;
  nonce: bigint;
  deadline: bigint;
};

function permitTypedData(permit: PermitFields) {
  return {
    domain: { name: permit.tokenName, version: permit.version ?? "1", chainId: permit.chainId, verifyingContract: permit.token },
    types: {
      Permit: [
        { name: "owner", type: "address" },
        { name: "spender", type: "address" },
        { name: "value", type: "uint256" },
        { name: "nonce", type: "uint256" },
        { name: "deadline", type: "uint256" },
      ],
    },
    primaryType: "Permit",
    message: { owner: permit.owner, spender: permit.spender, value: permit.value, nonce: permit.nonce, deadline: permit.deadline },
  } as const;
}

function permitArguments(permit: { value: bigint; deadline: bigint }, signature: Hex): PermitSignature {
  const { v, r, s } = hexToSignature(signature);
  return { value: permit.value, deadline: permit.deadline, v: Number(v), r, s };
}

/**
 * Signs an EIP-2612 permit whose token name and owner nonce the caller already knows (a test that
 * pins the nonce, or one that signs for a later block); `signPermit` reads them from the chain.
 *
 * @example
 * import { signPermitFields } from "suanli/common/chain/tx";
 * const permit = await signPermitFields(account, { owner: account.address, token, tokenName: "Suanli Test USD", chainId, spender: market, value, nonce: 0n, deadline });
 */
export async function signPermitFields(signer: TypedDataSigner, permit: PermitFields): Promise<PermitSignature> {
  return permitArguments(permit, await signTyped(signer, permitTypedData(permit)));
}

/**
 * The smart-account renter's way of sending (issue 38, docs/aa.md "The SDK with a smart account"): every money-moving
 * step is ONE ERC-4337 user operation through viem's bundler client, its calls run by the account's `executeBatch` (a
 * PasskeyAccount's ERC-7821 `execute`: all or none), its gas paid by the deployment's sponsor (ERC-7677, `createPaymasterClient`) when one is given. A bundler or
 * sponsor that does not answer or refuses is a BundlerError naming its URL; a call that reverts is a TransactionError,
 * as on the wallet's path. Either way nothing of the operation happened.
 */
import { BaseError, HttpRequestError, RpcRequestError, http, type Abi, type Address, type Chain, type Hex, type Log, type PublicClient, type Transport } from "viem";
import { createBundlerClient, createPaymasterClient, type SmartAccount } from "viem/account-abstraction";
import { decodeRevert, revertReason } from "../../common/chain/tx.js";
import { suanliErrorsAbi } from "../../common/chain/market.js";
import { BundlerError, TransactionError } from "../errors.js";
import { PasskeySignatureError } from "./passkey-account.js";

/** One call of a user operation, typed loosely: the ABI is there to decode a revert by its custom error. */
export type UserOpCall = { to: Address; abi: Abi; functionName: string; args: readonly unknown[] };

/** What a sent user operation left: its step, the transaction that included it, its gas and its logs. */
export type SentUserOp = { step: string; gasUsed: bigint; transaction: Hex; blockNumber: bigint; logs: Log[]; userOpHash: Hex };

export type UserOpSender = {
  /** The renter's smart account (its address is the renter's). */
  account: SmartAccount;
  bundlerUrl: string;
  paymasterUrl: string | undefined;
  /** Sends `calls` as one user operation and waits for it; throws BundlerError or TransactionError when it did not happen. */
  send(step: string, calls: readonly UserOpCall[]): Promise<SentUserOp>;
};

/** How long a sent operation may take to be included before BundlerError says so (it may still be included later). */
const RECEIPT_TIMEOUT_MS = 60_000;

/**
 * A sender of the account's user operations through the bundler at `bundlerUrl`, with the ERC-7677 paymaster at
 * `paymasterUrl` (the deployment's sponsor) paying the gas when given; without it the account pays in ETH.
 */
export function userOpSender(options: { publicClient: PublicClient<Transport, Chain>; account: SmartAccount; bundlerUrl: string; paymasterUrl?: string }): UserOpSender {
  const { publicClient, account, bundlerUrl, paymasterUrl } = options;
  const bundler = createBundlerClient({
    client: publicClient,
    account,
    transport: http(bundlerUrl, { retryCount: 0, timeout: 30_000 }),
    ...(paymasterUrl ? { paymaster: createPaymasterClient({ transport: http(paymasterUrl, { retryCount: 0, timeout: 30_000 }) }) } : {}),
    pollingInterval: 250,
  });
  const failed = (step: string, error: unknown, sent?: Hex) => userOpFailure(step, error, { bundlerUrl, paymasterUrl, sent });
  return {
    account,
    bundlerUrl,
    paymasterUrl,
    async send(step, calls) {
      let hash: Hex;
      try {
        // Estimation simulates the whole batch: a revert is known, by its custom error, before anything is signed or paid.
        hash = await bundler.sendUserOperation({
          account,
          calls: calls.map((call) => ({
            to: call.to,
            abi: [...call.abi.filter((item) => item.type !== "error"), ...suanliErrorsAbi],
            functionName: call.functionName,
            args: call.args,
          })),
        } as Parameters<typeof bundler.sendUserOperation>[0]);
      } catch (error) {
        throw failed(step, error);
      }
      let receipt;
      try {
        receipt = await bundler.waitForUserOperationReceipt({ hash, timeout: RECEIPT_TIMEOUT_MS });
      } catch (error) {
        throw failed(step, error, hash);
      }
      if (!receipt.success) {
        throw new TransactionError(step, `its user operation ${hash} reverted in block ${receipt.receipt.blockNumber}${receipt.reason ? ` (${receipt.reason})` : ""}`);
      }
      return {
        step,
        gasUsed: receipt.actualGasUsed,
        transaction: receipt.receipt.transactionHash,
        blockNumber: receipt.receipt.blockNumber,
        logs: receipt.logs,
        userOpHash: hash,
      };
    },
  };
}

/** The SDK's error for a user operation that did not happen: a revert of one of its calls, or the bundler's (or sponsor's) failure. */
export function userOpFailure(step: string, error: unknown, where: { bundlerUrl: string; paymasterUrl: string | undefined; sent?: Hex }): Error {
  // The owner's refusal is no bundler's: say so, with the step (viem wraps it in its own errors).
  let refused: unknown = error;
  while (refused instanceof Error && !(refused instanceof PasskeySignatureError)) refused = refused.cause;
  if (refused instanceof PasskeySignatureError) {
    return new PasskeySignatureError(`The passkey did not sign the user operation for "${step}": its prompt was dismissed or timed out, or user verification was refused`, {
      cause: refused.cause,
      metaMessages: ["Nothing of this operation was sent: approve it on your device to try again."],
    });
  }
  if (decodeRevert(error)) return new TransactionError(step, revertReason(error), error);
  const request =
    error instanceof BaseError ? (error.walk((e) => e instanceof HttpRequestError || e instanceof RpcRequestError) as HttpRequestError | RpcRequestError | null) : null;
  const service = where.paymasterUrl && request && sameUrl(request.url, where.paymasterUrl) ? "paymaster" : "bundler";
  // The URL as the caller gave it (viem's requests name it normalised, with a trailing slash).
  const url = service === "paymaster" ? where.paymasterUrl! : where.bundlerUrl;
  const unreachable =
    request instanceof HttpRequestError || (error instanceof BaseError && /fetch failed|ECONNREFUSED|timed? ?out/i.test(error.message) && !(request instanceof RpcRequestError));
  const reason = unreachable ? `it does not answer (${innermost(error)})` : `it refused: ${innermost(error)}`;
  return new BundlerError({ step, url, service, unreachable, reason, userOpHash: where.sent, cause: error });
}

function sameUrl(a: string, b: string): boolean {
  return a.replace(/\/+$/, "") === b.replace(/\/+$/, "");
}

/** The deepest useful line of a viem error: the JSON-RPC error's own message, or the network's. */
function innermost(error: unknown): string {
  if (!(error instanceof BaseError)) return error instanceof Error ? error.message : String(error);
  const rpc = error.walk((e) => e instanceof RpcRequestError) as RpcRequestError | null;
  if (rpc) return rpc.details;
  const deepest = error.walk() as BaseError | Error;
  const text = deepest instanceof BaseError ? deepest.details || deepest.shortMessage : deepest.message;
  return text.split("\n")[0]!;
}

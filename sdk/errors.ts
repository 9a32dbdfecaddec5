import { SuanliError } from "../common/errors.js";
import type { NoMatchExplanation } from "../common/matching/explain.js";

export { SuanliError, InvalidInputError } from "../common/errors.js";
export { SmartAccountError, PasskeySignatureError } from "./account-errors.js";

/**
 * The client needs a wallet for this action (signing requests, paying deposits): it was created
 * without `account`. Reading offers and matching work without one.
 *
 * @example
 * import { createClient, NoWalletError } from "suanli/sdk";
 * const readOnly = await createClient({ rpcUrl: "http://127.0.0.1:8545", bootstrap });
 * try {
 *   await readOnly.submitTask(parameters);
 * } catch (error) {
 *   if (error instanceof NoWalletError) console.error(error.shortMessage, error.metaMessages); // "No wallet: submitting a task needs one."
 * }
 */
export class NoWalletError extends SuanliError {
  override name = "NoWalletError";
  constructor(action: string) {
    super(`No wallet: ${action} needs one.`, {
      metaMessages: ["Pass `account` to createClient: privateKeyToAccount(key) in Node, or an injected wallet in a browser."],
    });
  }
}

/**
 * Nothing on the market fits the request (thrown by submitTask; `client.match` returns the same
 * explanation instead of throwing). `explanation` says which constraint removed how many offers,
 * and which offers came nearest. No funds were moved.
 *
 * @example
 * import { createClient, NoMatchError } from "suanli/sdk";
 * try {
 *   await client.submitTask(parameters);
 * } catch (error) {
 *   if (!(error instanceof NoMatchError)) throw error;
 *   console.error(error.explanation?.summary ?? error.shortMessage);
 *   for (const step of error.explanation?.steps ?? []) console.error(`${step.label}: removed ${step.removed}, ${step.remaining} left`);
 *   for (const miss of error.explanation?.nearMisses ?? []) console.error(`nearest: ${miss.message}`);
 * }
 */
export class NoMatchError extends SuanliError {
  override name = "NoMatchError";
  constructor(
    /** Why nothing fits (null only when no explanation was produced); `message` is all of it as text. */
    readonly explanation: NoMatchExplanation | null,
    summary: string,
  ) {
    super(explanation?.message ?? summary);
  }
}

/**
 * None of the nodes the client joins through (`bootstrap`) could be reached: each refused the
 * connection or did not answer. `attempts` names each address and why. Nothing was read or sent;
 * an empty offer book would have been a wrong answer.
 *
 * @example
 * import { createClient, NetworkUnreachableError } from "suanli/sdk";
 * try {
 *   await client.queryOffers({});
 * } catch (error) {
 *   if (!(error instanceof NetworkUnreachableError)) throw error;
 *   for (const { addr, reason } of error.attempts) console.error(`${addr}: ${reason}`);
 * }
 */
export class NetworkUnreachableError extends SuanliError {
  override name = "NetworkUnreachableError";
  constructor(readonly attempts: { addr: string; reason: string }[]) {
    super(`No bootstrap node could be reached (${attempts.length} tried).`, {
      metaMessages: [
        ...attempts.map(({ addr, reason }) => `${addr}: ${reason}`),
        "Check that the node is running and that --bootstrap (bootstrap) is its address with its /p2p/<peer id>.",
      ],
    });
  }
}

/**
 * The wallet's settlement-token balance cannot pay the deposit (of a new lease or an
 * extension). No funds were moved.
 *
 * @example
 * import { createClient, InsufficientBalanceError } from "suanli/sdk";
 * import { formatUnits } from "viem";
 * try {
 *   await client.submitTask(parameters);
 * } catch (error) {
 *   if (!(error instanceof InsufficientBalanceError)) throw error;
 *   const missing = formatUnits(error.needed - error.available, error.decimals);
 *   console.error(`Top up ${missing} ${error.symbol}`, error.metaMessages);
 * }
 */
export class InsufficientBalanceError extends SuanliError {
  override name = "InsufficientBalanceError";
  constructor(
    /** The deposit, in the token's base units. */
    readonly needed: bigint,
    /** The wallet's balance, in the token's base units. */
    readonly available: bigint,
    /** The settlement token's symbol (e.g. "USDC"). */
    readonly symbol: string,
    /** The settlement token's decimals (base units per token = 10^decimals). */
    readonly decimals: number,
  ) {
    super(`Insufficient ${symbol} balance: the deposit needs ${format(needed, decimals)} ${symbol}, the wallet holds ${format(available, decimals)}.`, {
      metaMessages: ["Fund the wallet (on the devnet: `npx suanli wallet faucet`), or ask for fewer GPUs, a shorter duration or a lower price cap."],
    });
  }
}

/**
 * The wallet has no native currency to pay gas. No funds were moved.
 *
 * @example
 * import { createClient, InsufficientGasError } from "suanli/sdk";
 * try {
 *   await client.submitTask(parameters);
 * } catch (error) {
 *   if (error instanceof InsufficientGasError) console.error(error.shortMessage, error.metaMessages); // names the wallet address
 * }
 */
export class InsufficientGasError extends SuanliError {
  override name = "InsufficientGasError";
  constructor(address: string) {
    super(`The wallet ${address} has no native currency to pay for gas.`, {
      metaMessages: ["Send it some ETH (on the devnet: `npx suanli wallet faucet` tops up gas too)."],
    });
  }
}

/**
 * Offers matched, but every candidate refused, timed out or failed to open its lease;
 * `shortMessage` lists the attempts. Leases opened along the way were closed and refunded.
 *
 * @example
 * import { createClient, AllocationError } from "suanli/sdk";
 * try {
 *   await client.submitTask(parameters);
 * } catch (error) {
 *   if (error instanceof AllocationError) console.error(error.shortMessage); // retry later, or relax the request
 * }
 */
export class AllocationError extends SuanliError {
  override name = "AllocationError";
}

/**
 * The task id is not one this client knows (not submitted by it, nor kept in its `stateFile`).
 * Thrown by every action that takes a `taskId`.
 *
 * @example
 * import { createClient, UnknownTaskError } from "suanli/sdk";
 * try {
 *   await client.status("task-42-abcdef");
 * } catch (error) {
 *   if (error instanceof UnknownTaskError) console.error(error.shortMessage, error.metaMessages);
 * }
 */
export class UnknownTaskError extends SuanliError {
  override name = "UnknownTaskError";
  constructor(taskId: string) {
    super(`Unknown task ${taskId}.`, { metaMessages: ["Task ids come from submitTask; the CLI keeps them in its state folder (`npx suanli tasks`)."] });
  }
}

/**
 * A transaction failed in simulation or reverted. `reason` is the contract's custom error with
 * its arguments when known (`InvalidLeaseStatus(7, 3)`), else viem's short message; `cause` is viem's error.
 *
 * @example
 * import { createClient, TransactionError } from "suanli/sdk";
 * try {
 *   await client.extend(taskId, { seconds: 600 });
 * } catch (error) {
 *   if (error instanceof TransactionError) console.error(`${error.step} failed: ${error.reason}`, error.cause);
 * }
 */
export class TransactionError extends SuanliError {
  override name = "TransactionError";
  constructor(
    /** The transaction's step, e.g. "approve", "openLease", "extend", "close". */
    readonly step: string,
    /** The custom error name with arguments, or the best short reason known. */
    readonly reason: string,
    cause?: unknown,
  ) {
    super(`The ${step} transaction failed: ${reason}.`, { cause });
  }
}

/**
 * A smart-account client's user operation did not happen because its bundler (or the sponsor, the
 * ERC-7677 paymaster service) does not answer or refused it: `url` names which, `reason` says why.
 * None of the operation's calls ran (an approve never goes without its openLease: they are one
 * operation). With `userOpHash` the operation was sent but not seen included in time: it may still be.
 *
 * @example
 * import { createClient, BundlerError } from "suanli/sdk";
 * try {
 *   await client.submitTask(parameters);
 * } catch (error) {
 *   if (error instanceof BundlerError) console.error(`${error.service} ${error.url}: ${error.reason}`); // "bundler http://127.0.0.1:4337: it does not answer (fetch failed)"
 * }
 */
export class BundlerError extends SuanliError {
  override name = "BundlerError";
  /** The step the operation was for ("approve + openLease", "extend", "close", "approve the session"...). */
  readonly step: string;
  /** The bundler's URL, or the paymaster's when it was the sponsor that failed. */
  readonly url: string;
  readonly service: "bundler" | "paymaster";
  /** True when it did not answer at all (down, unreachable, timed out). */
  readonly unreachable: boolean;
  readonly reason: string;
  /** Set when the operation was sent and its inclusion was not seen in time. */
  readonly userOpHash: `0x${string}` | undefined;
  constructor(parameters: { step: string; url: string; service: "bundler" | "paymaster"; unreachable: boolean; reason: string; userOpHash?: `0x${string}`; cause?: unknown }) {
    const what = parameters.service === "paymaster" ? "The sponsor (paymaster service)" : "The bundler";
    super(`${what} at ${parameters.url} failed the ${parameters.step} user operation: ${parameters.reason}`, {
      cause: parameters.cause,
      metaMessages: [
        parameters.userOpHash
          ? `The operation ${parameters.userOpHash} was sent and not seen included yet: check it before sending it again.`
          : "Nothing of this operation happened on-chain (its calls run together or not at all).",
        parameters.unreachable ? `Is the ${parameters.service} running? \`npm run devnet\` starts a bundler on port 4337.` : "",
      ].filter(Boolean),
    });
    this.step = parameters.step;
    this.url = parameters.url;
    this.service = parameters.service;
    this.unreachable = parameters.unreachable;
    this.reason = parameters.reason;
    this.userOpHash = parameters.userOpHash;
  }
}

/**
 * The provider (or, in browser mode, the node relaying to it) could not be reached or answered
 * with an error. When the task could not be delivered after the lease opened, that lease was
 * closed and refunded before this was thrown. `cause` holds the underlying error.
 *
 * @example
 * import { createClient, ProviderRequestError } from "suanli/sdk";
 * try {
 *   await client.submitTask(parameters);
 * } catch (error) {
 *   if (error instanceof ProviderRequestError) console.error(error.shortMessage, error.details);
 * }
 */
export class ProviderRequestError extends SuanliError {
  override name = "ProviderRequestError";
}

/**
 * An endpoint gateway could not be reached or refused a request (registration, revocation,
 * deletion): the message carries its status and the error it named.
 *
 * @example
 * import { GatewayRequestError } from "suanli/sdk";
 * try {
 *   await client.createEndpoint({ gatewayUrl, taskId, port: 8000 });
 * } catch (error) {
 *   if (error instanceof GatewayRequestError) console.error(error.shortMessage); // "The gateway refused the endpoint (403 ...)"
 * }
 */
export class GatewayRequestError extends SuanliError {
  override name = "GatewayRequestError";
}

/**
 * The provider's signed completion report does not check out (wrong signer or contradicts the
 * chain). The SDK's actions do not throw it: they report `receipt.completion.verified === false`;
 * it is here for callers who want to treat that as an error with a stable name.
 *
 * @example
 * import { createClient, CompletionMismatchError } from "suanli/sdk";
 * const receipt = await client.wait(taskId);
 * if (receipt.completion && !receipt.completion.verified) {
 *   throw new CompletionMismatchError(`Task ${receipt.taskId}: the completion report does not match the chain`, {
 *     metaMessages: ["Do not trust the output digest; compare the task's output yourself."],
 *   });
 * }
 */
export class CompletionMismatchError extends SuanliError {
  override name = "CompletionMismatchError";
}

/**
 * Extending a group task stopped part-way: the chain has no multi-lease extend, so the leases are
 * extended one by one after every extension was checked against the chain; one failed after
 * that check (the provider withdrew its offer, a transaction was dropped). `extended` lists the
 * leases that now end later, `failed` the one that did not, with why, and `notTried` the rest.
 * Nothing is lost: the group runs until its first lease ends, then `wait` closes the others,
 * which refunds every second not yet accrued (their extensions included). Or call `extend` again
 * with `only: error.failed.concat(error.notTried)` (the lease ids) to extend the rest.
 *
 * @example
 * import { createClient, GroupExtendError } from "suanli/sdk";
 * try {
 *   await client.extend(taskId, { seconds: 600 });
 * } catch (error) {
 *   if (!(error instanceof GroupExtendError)) throw error;
 *   console.error(error.shortMessage);
 *   await client.extend(taskId, { seconds: 600, only: [error.failed.leaseId, ...error.notTried] });
 * }
 */
export class GroupExtendError extends SuanliError {
  override name = "GroupExtendError";
  constructor(
    /** The leases extended, with their new end (unix seconds) and added deposit. */
    readonly extended: { leaseId: bigint; newEnd: number; extraDeposit: bigint }[],
    /** The lease whose extension failed, and why. */
    readonly failed: { leaseId: bigint; reason: string },
    /** The leases after it, not tried. */
    readonly notTried: bigint[],
    cause?: unknown,
  ) {
    super(`Extended ${extended.length} lease(s) of the group (${extended.map((lease) => lease.leaseId).join(", ") || "none"}), but not lease ${failed.leaseId}: ${failed.reason}`, {
      cause,
      metaMessages: [
        "The chain cannot undo an extension. The group runs until its first lease ends; `wait` then closes the others and refunds every second not yet accrued, the extensions included.",
        `To extend the rest: client.extend(taskId, { seconds, only: [${[failed.leaseId, ...notTried].join(", ")}] }).`,
      ],
    });
  }
}

/**
 * The action is not possible in the lease's current state: cancelling a lease already over,
 * extending one that is not open or active, or extending when the provider has no current offer.
 *
 * @example
 * import { createClient, TaskStateError } from "suanli/sdk";
 * try {
 *   await client.cancel(taskId);
 * } catch (error) {
 *   if (error instanceof TaskStateError) console.error(error.shortMessage); // "Lease 7 is already Ended; nothing to cancel."
 * }
 */
export class TaskStateError extends SuanliError {
  override name = "TaskStateError";
}

/**
 * `wait` gave up after its `timeoutMs` (or its `signal` was aborted); the task may still be
 * running and its lease is untouched: call `wait`, `status` or `cancel` again.
 *
 * @example
 * import { createClient, WaitTimeoutError } from "suanli/sdk";
 * try {
 *   const receipt = await client.wait(taskId, { timeoutMs: 60_000 });
 *   console.log(receipt.totalCost);
 * } catch (error) {
 *   if (!(error instanceof WaitTimeoutError)) throw error;
 *   console.error(error.shortMessage, (await client.status(taskId)).state);
 * }
 */
export class WaitTimeoutError extends SuanliError {
  override name = "WaitTimeoutError";
}

function format(amount: bigint, decimals: number): string {
  const base = 10n ** BigInt(decimals);
  const whole = amount / base;
  const fraction = (amount % base).toString().padStart(decimals, "0").replace(/0+$/, "");
  return fraction ? `${whole}.${fraction}` : whole.toString();
}

/**
 * The output downloaded does not hash to the digest the provider signed in its completion report
 * (and reported on-chain): the files were altered on the provider or on the way. `expected` is
 * the signed digest, `actual` the one recomputed over the downloaded files. The files are left in
 * the folder for inspection; do not trust them.
 *
 * @example
 * import { createClient, OutputDigestMismatchError } from "suanli/sdk";
 * try {
 *   await client.downloadOutput(taskId, { dir: "./out" });
 * } catch (error) {
 *   if (error instanceof OutputDigestMismatchError) console.error(`signed ${error.expected}, got ${error.actual}`);
 * }
 */
export class OutputDigestMismatchError extends SuanliError {
  override name = "OutputDigestMismatchError";
  constructor(
    readonly expected: `0x${string}`,
    readonly actual: `0x${string}`,
    where: string,
  ) {
    super(`The downloaded output hashes to ${actual}, but the provider's completion report signs ${expected}${where}`, {
      metaMessages: ["The files were altered after the task ended. Do not use them; the provider's signed report and the chain record what the task produced."],
    });
  }
}

/**
 * The output cannot be downloaded as asked: larger than `maxBytes`, a file the provider listed
 * is missing from the stream, or the folder holds something in the way.
 *
 * @example
 * import { createClient, OutputDownloadError } from "suanli/sdk";
 * try {
 *   await client.downloadOutput(taskId, { dir: "./out", maxBytes: 1024 ** 3 });
 * } catch (error) {
 *   if (error instanceof OutputDownloadError) console.error(error.shortMessage);
 * }
 */
export class OutputDownloadError extends SuanliError {
  override name = "OutputDownloadError";
}

/**
 * The task is over (its lease ended on-chain, or its provider reports it ended) but nothing
 * signed binds its output: no CompletionReported event and no completion report signed by the
 * provider. The downloaded files cannot be checked, so they are not handed over (not moved into
 * `dir`, not returned in memory). A running task's snapshot is never this error: it comes back
 * with `snapshot: true, verified: false`.
 *
 * @example
 * import { createClient, OutputUnverifiableError } from "suanli/sdk";
 * try {
 *   await client.downloadOutput(taskId, { dir: "./out" });
 * } catch (error) {
 *   if (error instanceof OutputUnverifiableError) console.error(error.shortMessage);
 * }
 */
export class OutputUnverifiableError extends SuanliError {
  override name = "OutputUnverifiableError";
}

/**
 * This client cannot do the task I/O asked (a browser client, which has no libp2p, cannot
 * forward ports or exec; a group task needs `rank` for exec and forward).
 *
 * @example
 * import { createClient, TaskIoUnsupportedError } from "suanli/sdk";
 * try {
 *   await client.forward(taskId, { port: 8000 });
 * } catch (error) {
 *   if (error instanceof TaskIoUnsupportedError) console.error(error.shortMessage);
 * }
 */
export class TaskIoUnsupportedError extends SuanliError {
  override name = "TaskIoUnsupportedError";
}

/**
 * withdrawOwed found nothing owed to the wallet: no push to it has failed, or it already withdrew.
 * No transaction was sent. Read `client.owed()` first to avoid it.
 *
 * @example
 * import { createClient, NothingOwedError } from "suanli/sdk";
 * try {
 *   await client.withdrawOwed();
 * } catch (error) {
 *   if (error instanceof NothingOwedError) console.log(error.shortMessage); // "The market owes 0x… nothing; no transaction was sent."
 * }
 */
export class NothingOwedError extends SuanliError {
  override name = "NothingOwedError";
  constructor(
    /** The wallet the market owes nothing to. */
    readonly account: `0x${string}`,
  ) {
    super(`The market owes ${account} nothing; no transaction was sent.`, {
      metaMessages: ["Amounts are owed only when a payment to the wallet failed (a token that refused the transfer)."],
    });
  }
}

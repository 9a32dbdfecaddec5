import { SuanliError } from "../common/errors.js";
import type { NoMatchExplanation } from "../common/matching/explain.js";

export { SuanliError, InvalidInputError } from "../common/errors.js";

/**
 * The client needs a wallet for this action (signing requests, paying deposits).
 *
 * @example
 * import { createClient, NoWalletError } from "suanli/sdk";
 * try { await client.submitTask(params); } catch (e) { if (e instanceof NoWalletError) console.log(e.metaMessages); }
 */
export class NoWalletError extends SuanliError {
  override name = "NoWalletError";
  constructor(action: string) {
    super(`No wallet: ${action} needs one.`, {
      metaMessages: ["Pass `account` to createClient: privateKeyToAccount(key) in Node, or an injected wallet in a browser."],
    });
  }
}

/** Nothing on the market fits the request; `explanation` says which constraint removed what. */
export class NoMatchError extends SuanliError {
  override name = "NoMatchError";
  constructor(
    readonly explanation: NoMatchExplanation | null,
    summary: string,
  ) {
    super(explanation?.message ?? summary);
  }
}

/** The wallet's settlement-token balance cannot pay the deposit. No funds were moved. */
export class InsufficientBalanceError extends SuanliError {
  override name = "InsufficientBalanceError";
  constructor(
    readonly needed: bigint,
    readonly available: bigint,
    readonly symbol: string,
    readonly decimals: number,
  ) {
    super(`Insufficient ${symbol} balance: the deposit needs ${format(needed, decimals)} ${symbol}, the wallet holds ${format(available, decimals)}.`, {
      metaMessages: ["Fund the wallet (on the devnet: `suanli wallet faucet`), or ask for fewer GPUs, a shorter duration or a lower price cap."],
    });
  }
}

/** The wallet has no native currency to pay gas. No funds were moved. */
export class InsufficientGasError extends SuanliError {
  override name = "InsufficientGasError";
  constructor(address: string) {
    super(`The wallet ${address} has no native currency to pay for gas.`, {
      metaMessages: ["Send it some ETH (on the devnet: `suanli wallet faucet` tops up gas too)."],
    });
  }
}

/** Every candidate refused, timed out or failed to open; the message lists the attempts. */
export class AllocationError extends SuanliError {
  override name = "AllocationError";
}

/** The task id is not one this client knows. */
export class UnknownTaskError extends SuanliError {
  override name = "UnknownTaskError";
  constructor(taskId: string) {
    super(`Unknown task ${taskId}.`, { metaMessages: ["Task ids come from submitTask; the CLI keeps them in its state folder (`suanli tasks`)."] });
  }
}

/** A transaction reverted; `reason` is the contract's custom error name when known. */
export class TransactionError extends SuanliError {
  override name = "TransactionError";
  constructor(
    readonly step: string,
    readonly reason: string,
    cause?: unknown,
  ) {
    super(`The ${step} transaction failed: ${reason}.`, { cause });
  }
}

/** The provider could not be reached or answered with an error. */
export class ProviderRequestError extends SuanliError {
  override name = "ProviderRequestError";
}

/** The provider's signed completion report does not check out (wrong signer or contradicts the chain). */
export class CompletionMismatchError extends SuanliError {
  override name = "CompletionMismatchError";
}

/** The action is not possible in the lease's current state. */
export class TaskStateError extends SuanliError {
  override name = "TaskStateError";
}

/** `wait` gave up after its timeout; the task may still be running. */
export class WaitTimeoutError extends SuanliError {
  override name = "WaitTimeoutError";
}

function format(amount: bigint, decimals: number): string {
  const base = 10n ** BigInt(decimals);
  const whole = amount / base;
  const fraction = (amount % base).toString().padStart(decimals, "0").replace(/0+$/, "");
  return fraction ? `${whole}.${fraction}` : whole.toString();
}

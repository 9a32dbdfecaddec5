import { getAddress, isAddress, type Address, type Hex } from "viem";
import { z } from "zod";
import { leaseMarketAbi } from "../../common/abi.js";
import { parseInput } from "../../common/validation.js";
import { NoWalletError, NothingOwedError } from "../errors.js";
import { withdrawOwedTo } from "../internal/chain.js";
import type { SuanliContext } from "../internal/context.js";

/**
 * Parameters of withdrawOwed.
 *
 * @example
 * import type { WithdrawOwedParameters } from "suanli/sdk";
 * const parameters: WithdrawOwedParameters = { to: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8" };
 */
export type WithdrawOwedParameters = {
  /** Where the tokens go; defaults to the wallet's own address. */
  to?: Address;
};

/**
 * What withdrawOwed paid and the transaction that paid it.
 *
 * @example
 * import type { WithdrawOwedReturnType } from "suanli/sdk";
 * const { amount, to, transaction, gasUsed }: WithdrawOwedReturnType = await client.withdrawOwed();
 */
export type WithdrawOwedReturnType = {
  /** Settlement-token units paid out (everything that was owed). */
  amount: bigint;
  /** The address that received them. */
  to: Address;
  transaction: Hex;
  gasUsed: bigint;
};

const addressSchema = z.string().refine((value) => isAddress(value), "expected an address: 0x followed by 40 hex digits");
const withdrawSchema = z.strictObject({ to: addressSchema.optional() });

type OwedContext = Pick<SuanliContext, "publicClient" | "market" | "account">;

/**
 * What the market owes `address` (default: the wallet): refunds and payouts whose transfer the
 * token refused (a blocklisted account), kept for withdrawOwed. Settlement-token units.
 *
 * @example
 * import { createClient } from "suanli/sdk";
 * const owed = await client.owed();
 * if (owed > 0n) console.log(`the market owes you ${owed}`);
 */
export async function getOwed(ctx: OwedContext, address?: Address): Promise<bigint> {
  const who = address === undefined ? ctx.account?.address : parseInput(addressSchema, address, "owed address");
  if (!who) throw new NoWalletError("reading what the market owes (or pass an address)");
  return ctx.publicClient.readContract({ address: ctx.market, abi: leaseMarketAbi, functionName: "owed", args: [getAddress(who)] });
}

/**
 * Withdraws everything the market owes the wallet (payments whose push failed) to `to` (default:
 * the wallet itself; pass another address when the wallet cannot receive the token). Throws
 * NothingOwedError, without sending, when nothing is owed; a revert throws TransactionError with
 * the contract's error name.
 *
 * @example
 * import { createClient } from "suanli/sdk";
 * const { amount, to, transaction } = await client.withdrawOwed({ to: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8" });
 * console.log(`withdrew ${amount} to ${to} in ${transaction}`);
 */
export async function withdrawOwed(
  ctx: Pick<SuanliContext, "publicClient" | "walletClient" | "account" | "market" | "userOps">,
  parameters: WithdrawOwedParameters = {},
): Promise<WithdrawOwedReturnType> {
  const { walletClient, account } = ctx;
  if (!walletClient || !account) throw new NoWalletError("withdrawing what the market owes");
  const { to } = parseInput(withdrawSchema, parameters, "withdrawOwed parameters");
  const owed = await getOwed(ctx, account.address);
  if (owed === 0n) throw new NothingOwedError(account.address);
  const sent = await withdrawOwedTo({ publicClient: ctx.publicClient, walletClient, account, market: ctx.market, userOps: ctx.userOps }, getAddress(to ?? account.address));
  return { amount: sent.amount, to: sent.to, transaction: sent.transaction, gasUsed: sent.gasUsed };
}

/**
 * The renter's transactions: deposits (EIP-2612 permit when the token supports it, otherwise
 * approve), openLease, close, extend. Every write is simulated first so a revert is reported by
 * its custom error name without spending gas, then sent and awaited.
 */
import {
  parseEventLogs,
  type Abi,
  type Account,
  type Address,
  type Chain,
  type ContractFunctionName,
  type Hex,
  type Log,
  type PublicClient,
  type Transport,
  type WalletClient,
} from "viem";
import { leaseMarketAbi, sessionKeysAbi } from "../../common/abi.js";
import { suanliErrorsAbi } from "../../common/chain/market.js";
import { erc20PermitAbi, revertReason, sendContract, signPermit, TransactionRevertedError, type ContractWrite } from "../../common/chain/tx.js";
import type { Deployment } from "../../common/deployment.js";
import type { Offer } from "../../common/eip712.js";
import type { LeaseTerms } from "../../common/matching/handshake.js";
import { TransactionError } from "../errors.js";
import type { UserOpCall, UserOpSender } from "./user-ops.js";

export type ChainContext = {
  publicClient: PublicClient<Transport, Chain>;
  walletClient: WalletClient<Transport, Chain, Account>;
  account: Account;
  deployment: Deployment;
  market: Address;
  token: Address;
  /** A smart-account client's sender: every step is one user operation through its bundler (user-ops.ts). */
  userOps?: UserOpSender | undefined;
};

export type SentTransaction = { step: string; gasUsed: bigint; transaction: Hex; blockNumber: bigint };

/** Sends one typed contract write (common/chain/tx.ts), reporting a failure as TransactionError of `step`. */
async function write<const abi extends Abi, name extends ContractFunctionName<abi, "nonpayable" | "payable">>(
  ctx: Pick<ChainContext, "publicClient" | "walletClient" | "userOps">,
  step: string,
  call: ContractWrite<abi, name>,
): Promise<SentTransaction & { logs: Log[] }> {
  // A smart account: the same call as a user operation of its own.
  if (ctx.userOps) return batch(ctx.userOps, step, [call]);
  let receipt;
  try {
    receipt = await sendContract(ctx, call);
  } catch (error) {
    if (error instanceof TransactionRevertedError) throw new TransactionError(step, `reverted in block ${error.blockNumber}`, error);
    throw new TransactionError(step, revertReason(error), error);
  }
  return { step, gasUsed: receipt.gasUsed, transaction: receipt.transactionHash, blockNumber: receipt.blockNumber, logs: receipt.logs };
}

/** Several calls as ONE user operation of the smart account: all of them happen, or none. */
async function batch(userOps: UserOpSender, step: string, calls: readonly ContractWrite<Abi, string>[]): Promise<SentTransaction & { logs: Log[] }> {
  const { userOpHash: _hash, ...sent } = await userOps.send(
    step,
    calls.map((call): UserOpCall => ({ to: call.address, abi: call.abi, functionName: call.functionName, args: call.args as readonly unknown[] })),
  );
  return sent;
}

export async function tokenBalances(ctx: Pick<ChainContext, "publicClient" | "token" | "market">, owner: Address) {
  const [balance, allowance, native] = await Promise.all([
    ctx.publicClient.readContract({ address: ctx.token, abi: erc20PermitAbi, functionName: "balanceOf", args: [owner] }),
    ctx.publicClient.readContract({ address: ctx.token, abi: erc20PermitAbi, functionName: "allowance", args: [owner, ctx.market] }),
    ctx.publicClient.getBalance({ address: owner }),
  ]);
  return { balance, allowance, native };
}

/**
 * The chain's clock as this renter can read it, followed over many reads (a wait): each read of the
 * head moves it on to the head's timestamp when that is later than the estimate, and between reads
 * it advances with the wall clock, so an idle chain (no new block) does not stop it. A chain's clock
 * may run minutes behind or ahead of this host's (a devnet counts from when it started, an idle
 * chain has no new block, a host has no NTP); what the chain checks (an offer's expiry, a permit's
 * deadline, a lease's start deadline and end) is in its time. Between reads it may read low: fine
 * for "has this expired yet" (the contract has the last word), never for a deadline (see permitFor).
 */
export class ChainClockReader {
  private base: { timestamp: number; atMs: number } | undefined;

  constructor(private readonly ctx: Pick<ChainContext, "publicClient">) {}

  /** Reads the head; the chain's time now (unix seconds), as well as this renter can tell. */
  async now(): Promise<number> {
    const block = await this.ctx.publicClient.getBlock({ blockTag: "latest" });
    const timestamp = Number(block.timestamp);
    const atMs = Date.now();
    const projected = this.estimate(atMs);
    if (projected === undefined || timestamp >= projected) this.base = { timestamp, atMs };
    return Math.max(timestamp, projected ?? timestamp);
  }

  /** The chain's time without a read: the last read advanced by the wall time since; undefined before the first read. */
  estimate(atMs = Date.now()): number | undefined {
    return this.base ? this.base.timestamp + Math.floor((atMs - this.base.atMs) / 1000) : undefined;
  }
}

/** Reads the chain's clock once; the function returns its estimate from then on (ChainClockReader.estimate). */
export async function readChainClock(ctx: Pick<ChainContext, "publicClient">): Promise<() => number> {
  const reader = new ChainClockReader(ctx);
  const first = await reader.now();
  return () => reader.estimate() ?? first;
}

/** A permit for the market to take `value`, valid ten minutes of chain time; null when the token has none. */
async function permitFor(ctx: ChainContext, value: bigint) {
  // The deadline is checked against block time: counted from the later of the wall clock and the
  // latest block, so a chain running ahead of this host (a devnet moved on) does not find it past.
  const head = await ctx.publicClient.getBlock({ blockTag: "latest" });
  const from = Math.max(Math.floor(Date.now() / 1000), Number(head.timestamp));
  return signPermit(ctx, {
    owner: ctx.account,
    token: ctx.token,
    spender: ctx.market,
    value,
    deadline: BigInt(from + 600),
    chainId: ctx.deployment.chainId,
    // The permit domain the deploy found (USDC's version is "2"); null: the token has no permit.
    domain: ctx.deployment.token.permit,
  });
}

/**
 * Opens a lease with a provider's acceptance. The deposit is authorized by a permit signature
 * (one transaction) when the token supports it and the allowance is short; otherwise by approve.
 */
export async function openLease(
  ctx: ChainContext,
  offer: Offer,
  signature: Hex,
  terms: LeaseTerms,
  deposit: bigint,
): Promise<{ leaseId: bigint; transactions: SentTransaction[] }> {
  const transactions: SentTransaction[] = [];
  const { allowance } = await tokenBalances(ctx, ctx.account.address);
  const open = { address: ctx.market, abi: leaseMarketAbi, functionName: "openLease", args: [offer, signature, terms] } as const;
  let sent;
  if (ctx.userOps) {
    // A smart account signs no permit (no ERC-1271): approve and openLease are one user operation, so neither happens alone.
    const approve = { address: ctx.token, abi: erc20PermitAbi, functionName: "approve", args: [ctx.market, deposit] } as const;
    sent = allowance >= deposit ? await batch(ctx.userOps, "openLease", [open]) : await batch(ctx.userOps, "approve + openLease", [approve, open]);
  } else if (allowance >= deposit) {
    sent = await write(ctx, "openLease", { address: ctx.market, abi: leaseMarketAbi, functionName: "openLease", args: [offer, signature, terms] });
  } else {
    const permit = await permitFor(ctx, deposit);
    if (permit) {
      sent = await write(ctx, "openLease (permit)", {
        address: ctx.market,
        abi: leaseMarketAbi,
        functionName: "openLeaseWithPermit",
        args: [offer, signature, terms, permit],
      });
    } else {
      transactions.push(await write(ctx, "approve", { address: ctx.token, abi: erc20PermitAbi, functionName: "approve", args: [ctx.market, deposit] }));
      sent = await write(ctx, "openLease", { address: ctx.market, abi: leaseMarketAbi, functionName: "openLease", args: [offer, signature, terms] });
    }
  }
  const opened = parseEventLogs({ abi: leaseMarketAbi, eventName: "LeaseOpened", logs: sent.logs });
  const event = opened[0];
  if (!event) throw new TransactionError("openLease", "no LeaseOpened event in the receipt");
  const { logs: _logs, ...rest } = sent;
  transactions.push(rest);
  return { leaseId: event.args.leaseId, transactions };
}

/**
 * The renter ends a lease: Open → full refund; Active → refund of what has not accrued. A lease that
 * preempted others pays at least its notice period either way (LeaseMarket.close).
 */
export async function closeLease(ctx: ChainContext, leaseId: bigint): Promise<SentTransaction> {
  const { logs: _logs, ...sent } = await write(ctx, "close", { address: ctx.market, abi: leaseMarketAbi, functionName: "close", args: [leaseId] });
  return sent;
}

/** After a missed start deadline: full refund plus the start penalty. */
export async function cancelLease(ctx: ChainContext, leaseId: bigint): Promise<SentTransaction> {
  const { logs: _logs, ...sent } = await write(ctx, "cancel", { address: ctx.market, abi: leaseMarketAbi, functionName: "cancel", args: [leaseId] });
  return sent;
}

/** Adds `extraSeconds` at the lease's price; the provider's current offer is its consent. */
export async function extendLease(ctx: ChainContext, leaseId: bigint, extraSeconds: number, extraDeposit: bigint, offer: Offer, signature: Hex): Promise<SentTransaction[]> {
  const transactions: SentTransaction[] = [];
  const { allowance } = await tokenBalances(ctx, ctx.account.address);
  const extend = { address: ctx.market, abi: leaseMarketAbi, functionName: "extend", args: [leaseId, extraSeconds, offer, signature] } as const;
  if (ctx.userOps) {
    const approve = { address: ctx.token, abi: erc20PermitAbi, functionName: "approve", args: [ctx.market, extraDeposit] } as const;
    const { logs: _logs, ...sent } = allowance < extraDeposit ? await batch(ctx.userOps, "approve + extend", [approve, extend]) : await batch(ctx.userOps, "extend", [extend]);
    return [sent];
  }
  if (allowance < extraDeposit) {
    const { logs: _l, ...approve } = await write(ctx, "approve", { address: ctx.token, abi: erc20PermitAbi, functionName: "approve", args: [ctx.market, extraDeposit] });
    transactions.push(approve);
  }
  const { logs: _logs, ...sent } = await write(ctx, "extend", {
    address: ctx.market,
    abi: leaseMarketAbi,
    functionName: "extend",
    args: [leaseId, extraSeconds, offer, signature],
  });
  transactions.push(sent);
  return transactions;
}

/**
 * Before a group's leases are extended one by one: one approval for all their extra deposits,
 * then every extension simulated against the chain as it is, so that none is sent unless each
 * would pass now (the chain has no multi-lease extend; see extendTask for what a failure after
 * this check leaves). Returns the approval sent, if one was needed.
 */
export async function prepareExtensions(
  ctx: ChainContext,
  plans: readonly { leaseId: bigint; seconds: number; offer: Offer; signature: Hex }[],
  total: bigint,
): Promise<SentTransaction | undefined> {
  let approval: SentTransaction | undefined;
  const { allowance } = await tokenBalances(ctx, ctx.account.address);
  if (allowance < total) {
    const { logs: _l, ...approve } = await write(ctx, "approve", { address: ctx.token, abi: erc20PermitAbi, functionName: "approve", args: [ctx.market, total] });
    approval = approve;
  }
  for (const plan of plans) {
    try {
      await ctx.publicClient.simulateContract({
        account: ctx.account,
        address: ctx.market,
        abi: leaseMarketAbi,
        functionName: "extend",
        args: [plan.leaseId, plan.seconds, plan.offer, plan.signature],
      });
    } catch (error) {
      throw new TransactionError(`extend lease ${plan.leaseId}`, revertReason(error), error);
    }
  }
  return approval;
}

/** Errors of every Suanli contract, for decoding reverts outside simulate. */
export const errorsAbi = suanliErrorsAbi;

/** Pulls what the market owes the wallet (refunds and payouts whose push failed) to `to`. */
export async function withdrawOwedTo(
  ctx: Pick<ChainContext, "publicClient" | "walletClient" | "account" | "market" | "userOps">,
  to: Address,
): Promise<SentTransaction & { amount: bigint; to: Address }> {
  const { logs, ...sent } = await write(ctx, "withdraw", { address: ctx.market, abi: leaseMarketAbi, functionName: "withdraw", args: [to] });
  const withdrawn = parseEventLogs({ abi: leaseMarketAbi, eventName: "OwedWithdrawn", logs });
  const event = withdrawn[0];
  if (!event) throw new TransactionError("withdraw", "no OwedWithdrawn event in the receipt");
  return { ...sent, amount: event.args.amount, to: event.args.to };
}

/** Revokes one session delegation (its EIP-712 hash) or, with "all", every one the wallet has issued so far (SessionKeys). */
export async function revokeSessions(ctx: Pick<ChainContext, "publicClient" | "walletClient" | "userOps">, sessions: Address, which: Hex | "all"): Promise<SentTransaction> {
  const { logs: _logs, ...sent } =
    which === "all"
      ? await write(ctx, "revoke every session", { address: sessions, abi: sessionKeysAbi, functionName: "revokeAll", args: [] })
      : await write(ctx, "revoke the session", { address: sessions, abi: sessionKeysAbi, functionName: "revoke", args: [which] });
  return sent;
}

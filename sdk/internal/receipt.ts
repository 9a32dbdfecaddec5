import type { Hex } from "viem";
import { leaseMarketAbi } from "../../common/abi.js";
import { completionHeldUntil, readLease } from "../../common/chain/market.js";
import { readMinimumCharge } from "../../common/chain/minimum-charge.js";
import { verifyCompletion } from "../../common/attest/completion.js";
import { outputDigestOf } from "../../common/output-cid.js";
import type { TaskStatus as WireTaskStatus } from "../../common/protocols/lease.js";
import type { TaskAttempt, TaskReceipt } from "../types.js";
import type { SuanliContext } from "./context.js";
import { currentAttempt, type TaskRecord } from "./store.js";

type LeaseOutcome = TaskReceipt["leases"][number] & { completion: { exitCode: number; outputDigest: Hex; unitSeconds: bigint } | null };

/** Reads what a lease cost from the chain: its state and the events that ended it. */
export async function leaseOutcome(ctx: SuanliContext, attempt: TaskAttempt): Promise<LeaseOutcome> {
  const lease = await readLease(ctx.publicClient, ctx.market, attempt.leaseId);
  const events = await ctx.publicClient.getContractEvents({
    address: ctx.market,
    abi: leaseMarketAbi,
    args: { leaseId: attempt.leaseId },
    fromBlock: attempt.openedBlock,
    strict: true,
  });
  let refunded = 0n;
  let credit = 0n;
  // Once a lease has ended, the event carries the provider's final total; reading the accrual
  // instead would undercount a preempted lease that still accrues until its notice ends.
  let finalCost: bigint | undefined;
  let completion: LeaseOutcome["completion"] = null;
  for (const event of events) {
    if (event.eventName === "LeaseEnded") {
      refunded += event.args.refund;
      credit += event.args.credit;
      finalCost = event.args.providerTotal;
    } else if (event.eventName === "LeaseSettled") {
      refunded += event.args.refund;
      finalCost = event.args.providerAmount;
    } else if (event.eventName === "LeaseShrunk") {
      refunded += event.args.refund;
    } else if (event.eventName === "CompletionReported") {
      completion = { exitCode: event.args.exitCode, outputDigest: event.args.outputDigest, unitSeconds: event.args.unitSeconds };
    }
  }
  const finished = lease.status === "Ended" || lease.status === "Settled" || lease.status === "Cancelled";
  const stop = finished ? lease.stopAt : Math.floor(Date.now() / 1000);
  // A close that paid a tier's commitment or a preemptor's notice beyond the seconds used says so by name.
  const minimumCharge = finalCost === undefined ? null : await readMinimumCharge(ctx.publicClient, ctx.market, lease, finalCost, attempt.openedBlock);
  return {
    leaseId: attempt.leaseId,
    provider: attempt.provider,
    machineId: attempt.machineId,
    model: attempt.model,
    units: attempt.units,
    status: lease.status,
    endReason: lease.endReason,
    collateralHeldUntil: completionHeldUntil(lease) ?? null,
    earlyCompletion: lease.endReason === "Completed" && refunded > 0n,
    seconds: lease.activatedAt ? Math.max(0, stop - lease.activatedAt) : 0,
    deposit: attempt.deposit,
    cost: finalCost ?? lease.accrued,
    refunded,
    credit,
    minimumCharge,
    gas: attempt.gas,
    resumedFrom: attempt.resumedFrom ?? null,
    completion,
  };
}

/**
 * Checks the provider's signed completion report: signed by the lease's provider (EIP-712
 * Completion on this deployment) and equal to the lease's on-chain CompletionReported event. A
 * signature alone never verifies a completion: a restarted devnet has the same domain (chain id,
 * market address), so a report of an earlier chain's lease with the same id would pass it.
 */
export async function checkCompletion(
  ctx: SuanliContext,
  attempt: TaskAttempt,
  signed: NonNullable<WireTaskStatus["completion"]>,
  onChain: LeaseOutcome["completion"],
): Promise<boolean> {
  if (signed.report.leaseId !== attempt.leaseId) return false;
  const verdict = await verifyCompletion(signed, { domain: ctx.domain, provider: attempt.provider, onChain });
  return verdict.valid;
}

/** A provider's signed completion report as its status carries it, with the output's CID when it names one. */
export type SignedCompletion = NonNullable<WireTaskStatus["completion"]> & { outputCid?: string | null };

/** The signed completion of a provider's status answer, with its output CID. */
export function signedCompletionOf(status: Pick<WireTaskStatus, "completion" | "outputCid">): SignedCompletion | null {
  return status.completion ? { ...status.completion, outputCid: status.outputCid ?? null } : null;
}

/** Builds the receipt of a task from the chain (and the provider's completion report, when given). */
export async function buildReceipt(
  ctx: SuanliContext,
  record: TaskRecord,
  state: TaskReceipt["state"],
  exitCode: number | null,
  signedCompletion: SignedCompletion | null,
  error: TaskReceipt["error"] = null,
): Promise<TaskReceipt> {
  const leases: TaskReceipt["leases"] = [];
  let completion: TaskReceipt["completion"] = null;
  for (const attempt of record.attempts) {
    const { completion: onChain, ...outcome } = await leaseOutcome(ctx, attempt);
    leases.push(outcome);
    // The other machines of a group task: their leases are part of the bill.
    for (const member of attempt.group?.slice(1) ?? []) {
      const { completion: _memberCompletion, ...memberOutcome } = await leaseOutcome(ctx, member);
      leases.push(memberOutcome);
    }
    if (attempt === currentAttempt(record)) {
      if (signedCompletion) {
        const { outputCid, ...signed } = signedCompletion;
        const verified = await checkCompletion(ctx, attempt, signed, onChain);
        // The provider's word for the CID counts only as the CID its signed digest names.
        const named = outputCid ? outputDigestOf(outputCid) : undefined;
        completion = { ...signed.report, verified, outputCid: named && named.toLowerCase() === signed.report.outputDigest.toLowerCase() ? outputCid! : null };
      } else if (onChain) {
        completion = { ...onChain, verified: false, outputCid: null };
      }
    }
  }
  const sum = (pick: (l: TaskReceipt["leases"][number]) => bigint) => leases.reduce((total, l) => total + pick(l), 0n);
  return {
    taskId: record.taskId,
    state,
    exitCode: exitCode ?? completion?.exitCode ?? null,
    error: state === "succeeded" ? null : error,
    completion,
    leases,
    totalCost: sum((l) => l.cost),
    totalRefunded: sum((l) => l.refunded),
    totalCredit: sum((l) => l.credit),
    totalGasUsed: leases.reduce((total, l) => total + l.gas.reduce((g, step) => g + step.gasUsed, 0n), 0n),
  };
}

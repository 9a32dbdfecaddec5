import { TaskStateError } from "../errors.js";
import { closeLease } from "../internal/chain.js";
import { authorize, requireWallet, type SuanliContext } from "../internal/context.js";
import type { TaskReceipt } from "../types.js";
import { getTaskStatus, taskRecord } from "./getTaskStatus.js";
import { buildReceipt } from "../internal/receipt.js";
import { readLease } from "../../common/chain/market.js";
import { currentAttempt } from "../internal/store.js";

/**
 * Stops the task and ends its lease: the provider is asked to stop (signed by the renter), then
 * the lease is closed on-chain, which refunds everything not yet accrued in the same
 * transaction. Returns the receipt.
 *
 * @example
 * import { createClient } from "suanli/sdk";
 * const receipt = await client.cancel(taskId);
 * console.log(`refunded ${receipt.totalRefunded}`);
 */
export async function cancelTask(ctx: SuanliContext, taskId: string): Promise<TaskReceipt> {
  const { walletClient, account } = requireWallet(ctx, "cancelling a task");
  const record = await taskRecord(ctx, taskId);
  const current = currentAttempt(record);
  // A group task: every machine's lease.
  const members = current.group ?? [current];
  const views = await Promise.all(members.map((member) => readLease(ctx.publicClient, ctx.market, member.leaseId)));
  if (views.every((lease) => lease.status !== "Open" && lease.status !== "Active")) {
    throw new TaskStateError(`Lease ${current.leaseId}${members.length > 1 ? " and its group are" : " is"} already ${views[0]?.status}; nothing to cancel.`);
  }
  for (const [index, attempt] of members.entries()) {
    const status = views[index]?.status; // one view per member (read above)
    if (status !== "Open" && status !== "Active") continue;
    // Best effort: the chain transaction below is what ends the lease and refunds.
    await ctx.link.cancel({ peerId: attempt.peerId, addrs: attempt.addrs }, { auth: await authorize(ctx, attempt, "cancel", {}) }).catch(() => undefined);
    let sent: Awaited<ReturnType<typeof closeLease>> | undefined;
    try {
      sent = await closeLease({ ...ctx, walletClient, account }, attempt.leaseId);
    } catch (error) {
      // The provider may end the lease itself once the task has stopped (its cancel grace): the
      // refund then happened in its transaction, and there is nothing left for the renter to close.
      const now = await readLease(ctx.publicClient, ctx.market, attempt.leaseId).catch(() => undefined);
      if (!now || now.status === "Open" || now.status === "Active") throw error;
    }
    if (sent) {
      // The group's copy of rank 0 is the attempt itself in the record.
      const target = index === 0 ? current : attempt;
      target.gas.push({ step: "close (cancel)", gasUsed: sent.gasUsed, transaction: sent.transaction });
      await ctx.tasks.put(record);
    }
  }
  const status = await getTaskStatus(ctx, taskId);
  return buildReceipt(ctx, await taskRecord(ctx, taskId), status.state, status.exitCode, null, status.error);
}

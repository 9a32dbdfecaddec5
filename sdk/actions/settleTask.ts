import { readLease } from "../../common/chain/market.js";
import { closeLease } from "../internal/chain.js";
import { authorize, requireWallet, type SuanliContext } from "../internal/context.js";
import type { TaskReceipt } from "../types.js";
import { getTaskStatus, taskRecord } from "./getTaskStatus.js";
import { buildReceipt, signedCompletionOf } from "../internal/receipt.js";
import { currentAttempt } from "../internal/store.js";

/**
 * Makes sure the task's lease is over and returns the receipt. A lease still open or active
 * (the task finished but the provider did not report it) is closed by the renter, refunding the
 * unaccrued deposit; an ended lease is left as it is. The provider's signed completion report is
 * checked against its on-chain copy (`receipt.completion.verified`).
 *
 * @example
 * import { createClient } from "suanli/sdk";
 * const receipt = await client.settle(taskId);
 */
export async function settleTask(ctx: SuanliContext, taskId: string): Promise<TaskReceipt> {
  const record = await taskRecord(ctx, taskId);
  const attempt = currentAttempt(record);
  const lease = await readLease(ctx.publicClient, ctx.market, attempt.leaseId);
  if (lease.status === "Open" || lease.status === "Active") {
    const { walletClient, account } = requireWallet(ctx, "settling a task");
    const sent = await closeLease({ ...ctx, walletClient, account }, attempt.leaseId);
    attempt.gas.push({ step: "close (settle)", gasUsed: sent.gasUsed, transaction: sent.transaction });
    await ctx.tasks.put(record);
  }
  const status = await getTaskStatus(ctx, taskId);
  const completion = await ctx.link
    .status({ peerId: attempt.peerId, addrs: attempt.addrs }, { auth: await authorize(ctx, attempt, "status", {}) })
    .then(signedCompletionOf)
    .catch(() => null);
  return buildReceipt(ctx, await taskRecord(ctx, taskId), status.state, status.exitCode, completion, status.error);
}

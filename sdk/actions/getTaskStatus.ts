import { completionHeldUntil, readLease } from "../../common/chain/market.js";
import { readMinimumCharge } from "../../common/chain/minimum-charge.js";
import { meteredByNow } from "../internal/metering.js";
import { UnknownTaskError } from "../errors.js";
import { authorize, type SuanliContext } from "../internal/context.js";
import { absorbCheckpoints } from "../internal/resume.js";
import { currentAttempt, type TaskRecord } from "../internal/store.js";
import type { TaskStatus } from "../types.js";

export type GetTaskStatusReturnType = TaskStatus;

export async function taskRecord(ctx: SuanliContext, taskId: string): Promise<TaskRecord> {
  const record = await ctx.tasks.get(taskId);
  if (!record) throw new UnknownTaskError(taskId);
  return record;
}

/**
 * The task's state on its provider (state, heartbeat, GPU metrics, exit code) together with its
 * lease on-chain (status, deposit, what the provider earned so far). When the provider cannot be
 * reached the chain part is still returned, with state "unknown".
 *
 * @example
 * import { createClient } from "suanli/sdk";
 * const status = await client.status(taskId);
 * console.log(status.state, status.lease.accrued);
 */
export async function getTaskStatus(ctx: SuanliContext, taskId: string): Promise<TaskStatus> {
  const record = await taskRecord(ctx, taskId);
  const attempt = currentAttempt(record);
  const [lease, remote] = await Promise.all([
    readLease(ctx.publicClient, ctx.market, attempt.leaseId),
    authorize(ctx, attempt, "status", {})
      .then((auth) => ctx.link.status({ peerId: attempt.peerId, addrs: attempt.addrs }, { auth }))
      .catch(() => undefined),
  ]);
  // The newest verified checkpoint record is kept (and copied to the renter's node) as soon as a status shows it.
  if (remote) await absorbCheckpoints(ctx, attempt, remote);
  // Once ended, the lease's deposit is the provider's final total.
  const ended = lease.status === "Ended" || lease.status === "Settled";
  const minimumCharge = ended ? await readMinimumCharge(ctx.publicClient, ctx.market, lease, lease.deposit, attempt.openedBlock) : null;
  return {
    taskId,
    state: remote?.state ?? "unknown",
    leaseId: attempt.leaseId,
    provider: attempt.provider,
    lease: {
      status: lease.status,
      endReason: lease.endReason,
      collateralHeldUntil: completionHeldUntil(lease) ?? null,
      minimumCharge,
      deposit: lease.deposit,
      accrued: lease.accrued,
      activatedAt: lease.activatedAt,
      startDeadline: lease.startDeadline,
      end: lease.end,
      ...meteredByNow(lease, Date.now() / 1000),
    },
    startedAt: remote?.startedAt ?? null,
    heartbeatAt: remote?.heartbeatAt ?? null,
    exitCode: remote?.exitCode ?? null,
    error: remote?.error ?? null,
    gpus: remote?.gpus ?? [],
    image: remote?.image ?? null,
    attempts: record.attempts,
  };
}

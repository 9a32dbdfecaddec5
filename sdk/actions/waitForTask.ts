import { FINAL_TASK_STATES } from "../../common/protocols/lease.js";
import type { MatchRequestInput } from "../../common/matching/request.js";
import { NoMatchError, TransactionError, WaitTimeoutError } from "../errors.js";
import { cancelLease, ChainClockReader, closeLease } from "../internal/chain.js";
import { authorize, requireWallet, type SuanliContext } from "../internal/context.js";
import { buildReceipt, signedCompletionOf } from "../internal/receipt.js";
import type { TaskAttempt, TaskReceipt, TaskStatus } from "../types.js";
import { readLease } from "../../common/chain/market.js";
import { isTransientRpcError } from "../../common/chain/tx.js";
import { cancelTask } from "./cancelTask.js";
import { runAttempt } from "./submitTask.js";
import { getTaskStatus, taskRecord } from "./getTaskStatus.js";
import { currentAttempt } from "../internal/store.js";
import {
  absorbCheckpoints,
  CHECKPOINT_SETTLE_POLL_MS,
  CHECKPOINT_UNAVAILABLE,
  checkpointUnavailable,
  groupRankSpecs,
  pickCheckpoint,
  pickGroupCheckpoints,
  resumedSpec,
  settledGroupPoint,
  settledPoint,
  takesCheckpoints,
} from "../internal/resume.js";

/**
 * Options of `client.wait`; all optional. Giving up (timeout or abort) throws WaitTimeoutError and
 * leaves the task running.
 *
 * @example
 * import { createClient, type WaitForTaskParameters } from "suanli/sdk";
 * const options: WaitForTaskParameters = {
 *   timeoutMs: 30 * 60_000,
 *   pollIntervalMs: 2_000,
 *   onStatus: (status) => console.log(status.state, status.lease.status),
 *   signal: AbortSignal.timeout(60 * 60_000),
 * };
 * const receipt = await client.wait(taskId, options);
 */
export type WaitForTaskParameters = {
  /** Give up after this long, ms (the task keeps running). Default: until two minutes past the lease's end, on the chain's clock. */
  timeoutMs?: number;
  /** Time between status reads, ms (default 1000). */
  pollIntervalMs?: number;
  /** Called with every status read (progress display). */
  onStatus?: (status: TaskStatus) => void;
  /** Aborting it makes `wait` throw WaitTimeoutError before its next status read. */
  signal?: AbortSignal;
};

const ENDED = new Set(["Ended", "Settled", "Cancelled"]);
/** Lease ends that move an autoMigrate task to another provider. */
const MIGRATE_ON = new Set(["Faulted", "Preempted", "Terminated", "MissedStart"]);
/** How long `wait` rides out a chain endpoint that fails for a transient reason (away, 5xx, timing out) before it gives up with that error. */
const RPC_OUTAGE_TOLERANCE_MS = 5 * 60_000;

/**
 * Waits for the task to finish and its lease to end, then returns the receipt: per lease, who
 * ran it, for how long, what it cost, what was refunded, the gas of each step, and the provider's
 * completion report checked against the chain. A task whose provider finished without ending
 * the lease is closed by the renter (refund of the unused deposit). With `autoMigrate`, a lease
 * that faults or is preempted is replaced by a new match, paid by the refund.
 *
 * @example
 * import { createClient } from "suanli/sdk";
 * const receipt = await client.wait(taskId);
 * console.log(receipt.exitCode, receipt.totalCost, receipt.totalRefunded);
 */
export async function waitForTask(ctx: SuanliContext, taskId: string, parameters: WaitForTaskParameters = {}): Promise<TaskReceipt> {
  const pollIntervalMs = parameters.pollIntervalMs ?? 1_000;
  const started = Date.now();
  let finishedAt: number | null = null;
  let failingSince: number | null = null;
  // The lease's start deadline and end are in chain time, which may be minutes off this host's clock.
  const chainClock = new ChainClockReader(ctx);
  /** The checkpoint seq saved in the task file, per lease. */
  const savedCheckpoints = new Map<bigint, bigint>();
  /** A group's checkpoint seq per rank saved in the task file (-1: none yet). */
  const groupCheckpoints: bigint[] = [];
  for (;;) {
    if (parameters.signal?.aborted) throw new WaitTimeoutError("Stopped waiting: aborted");
    let status: TaskStatus;
    /** The chain's time, read when this pass compares a lease time with it. */
    let chainNow = 0;
    try {
      status = await getTaskStatus(ctx, taskId);
      const { lease } = status;
      if ((lease.status === "Open" && lease.startDeadline) || (parameters.timeoutMs === undefined && (lease.end || lease.activatedAt))) chainNow = await chainClock.now();
      failingSince = null;
    } catch (error) {
      // The chain endpoint away for a moment is not the task's end: read again at the next poll.
      failingSince ??= Date.now();
      const waited = Date.now() - failingSince;
      if (!isTransientRpcError(error) || waited > RPC_OUTAGE_TOLERANCE_MS || (parameters.timeoutMs !== undefined && Date.now() - started > parameters.timeoutMs)) throw error;
      ctx.progress(`Cannot read task ${taskId}'s lease from the chain (${(error as Error).message.split("\n")[0]}); retrying...`);
      await new Promise((resolve) => setTimeout(resolve, pollIntervalMs));
      continue;
    }
    parameters.onStatus?.(status);
    const record = await taskRecord(ctx, taskId);
    const attempt = currentAttempt(record);
    const leaseEnded = ENDED.has(status.lease.status);

    // A group task: its own step (every lease; one failing fails or migrates the group).
    if (attempt.group && attempt.group.length > 1) {
      const outcome = await waitGroupStep(ctx, taskId, attempt.group, groupCheckpoints, pollIntervalMs);
      if (outcome === "done") {
        // The status read at the top of this pass may predate the end the group step just saw (a busy host): read it again.
        const final = await getTaskStatus(ctx, taskId).catch(() => status);
        return buildReceipt(ctx, await taskRecord(ctx, taskId), final.state, final.exitCode, await statusCompletion(ctx, taskId), final.error);
      }
      if (outcome === "waiting") await new Promise((resolve) => setTimeout(resolve, pollIntervalMs));
      continue;
    }
    if (
      leaseEnded &&
      MIGRATE_ON.has(status.lease.endReason) &&
      record.autoMigrate &&
      !(status.state !== "unknown" && FINAL_TASK_STATES.has(status.state) && status.state === "succeeded")
    ) {
      const spec = ctx.tasks.fullSpec(taskId) ?? record.spec;
      ctx.progress(`Lease ${attempt.leaseId} ended (${status.lease.endReason}); migrating the task to another provider...`);
      ctx.feed.avoid(attempt.provider, 600);
      attempt.migratedBecause = status.lease.endReason;
      // A task that takes checkpoints starts its next lease from the newest one (docs/data.md "Resume").
      const point = takesCheckpoints(spec) ? await settledPoint(ctx, record, attempt, Math.min(pollIntervalMs, CHECKPOINT_SETTLE_POLL_MS)) : null;
      if (point) ctx.progress(`Resuming from checkpoint ${point.cid} (lease ${point.leaseId})...`);
      else if (takesCheckpoints(spec)) ctx.progress(`No checkpoint of task ${taskId} verified: the next lease starts from the beginning.`);
      const next = await runAttempt(ctx, record.request as MatchRequestInput, point ? resumedSpec(spec, point) : spec);
      if (point) next.resumedFrom = point.cid;
      record.attempts.push(next);
      await ctx.tasks.put(record);
      continue;
    }
    if (leaseEnded && record.autoMigrate && !attempt.group && checkpointUnavailable(attempt, status)) {
      // No node served the checkpoint (its provider is gone): an older one, or the beginning, rather than a failed task.
      attempt.migratedBecause = CHECKPOINT_UNAVAILABLE;
      const point = await pickCheckpoint(ctx, record);
      ctx.progress(
        `Lease ${attempt.leaseId} could not fetch checkpoint ${attempt.resumedFrom} from any node; starting again from ${point ? `checkpoint ${point.cid}` : "the beginning"}...`,
      );
      // Its provider may be the only one left, its unit still shown taken by the lease that just ended.
      const next = await migrationAttempt(ctx, record.request as MatchRequestInput, resumedSpec(ctx.tasks.fullSpec(taskId) ?? record.spec, point));
      if (point) next.resumedFrom = point.cid;
      record.attempts.push(next);
      await ctx.tasks.put(record);
      continue;
    }
    // The status read kept the newest verified checkpoint (getTaskStatus): saved as it changes, since after a fault its provider may be gone.
    if (attempt.checkpoint && savedCheckpoints.get(attempt.leaseId) !== attempt.checkpoint.record.seq) {
      savedCheckpoints.set(attempt.leaseId, attempt.checkpoint.record.seq);
      await ctx.tasks.put(record);
    }
    if (status.lease.status === "Open" && status.lease.startDeadline && chainNow > status.lease.startDeadline + 2) {
      // The provider missed its start deadline: take the deposit back plus the start penalty.
      const { walletClient, account } = requireWallet(ctx, "cancelling a lease that never started");
      ctx.progress(`Lease ${attempt.leaseId} was not started in time; cancelling it for a refund and the start penalty...`);
      let sent;
      try {
        sent = await cancelLease({ ...ctx, walletClient, account }, attempt.leaseId);
      } catch (error) {
        // The next block's time is not yet past the deadline (the estimate ran a little ahead):
        // refused in simulation, nothing spent; look again at the next poll.
        if (!(error instanceof TransactionError && error.reason.startsWith("StartDeadlineNotPassed"))) throw error;
        await new Promise((resolve) => setTimeout(resolve, pollIntervalMs));
        continue;
      }
      attempt.gas.push({ step: "cancel (missed start)", gasUsed: sent.gasUsed, transaction: sent.transaction });
      await ctx.tasks.put(record);
      continue;
    }
    if (status.state !== "unknown" && FINAL_TASK_STATES.has(status.state)) {
      finishedAt ??= Date.now();
      // The provider reports completion on-chain; if it has not after a grace period, close.
      if (!leaseEnded && Date.now() - finishedAt > 15_000 && status.lease.status !== "None") {
        const { walletClient, account } = requireWallet(ctx, "closing the lease");
        ctx.progress(`The task ended but the lease is still ${status.lease.status}; closing it for a refund...`);
        const sent = await closeLease({ ...ctx, walletClient, account }, attempt.leaseId);
        attempt.gas.push({ step: "close", gasUsed: sent.gasUsed, transaction: sent.transaction });
        await ctx.tasks.put(record);
        continue;
      }
    }
    if (leaseEnded && (status.state === "unknown" || FINAL_TASK_STATES.has(status.state))) {
      return buildReceipt(ctx, await taskRecord(ctx, taskId), status.state, status.exitCode, await statusCompletion(ctx, taskId), status.error);
    }
    // Without a timeout: until two minutes past the lease's end (or activation), in chain time.
    const leaseTime = status.lease.end || status.lease.activatedAt;
    const pastDeadline = parameters.timeoutMs !== undefined ? Date.now() - started > parameters.timeoutMs : leaseTime > 0 && chainNow > leaseTime + 120;
    if (pastDeadline) throw new WaitTimeoutError(`Task ${taskId} still ${status.state} after ${Math.round((Date.now() - started) / 1000)} s`);
    await new Promise((resolve) => setTimeout(resolve, pollIntervalMs));
  }
}

/**
 * One look at every machine of a group task: done once every lease ended with its task over.
 * When one machine failed (its task failed, or its lease ended by a fault, preemption,
 * termination or missed start) while others still run, those are cancelled and refunded — a
 * group job cannot go on without one of its ranks. With `autoMigrate`, a machine lost by its
 * lease (not by its task's own failure) moves the whole group: the others are cancelled and
 * refunded, the failed machines' providers avoided for ten minutes, and the group matched and
 * started anew (new ranks, new rendezvous address) as the task's next attempt. A group that takes
 * checkpoints waits for every member's end snapshot and starts each new rank from the newest
 * checkpoint of the same rank (pickGroupCheckpoints: one attempt's set, all ranks or none). Every
 * look keeps each member's newest verified checkpoint record in the task file.
 */
async function waitGroupStep(ctx: SuanliContext, taskId: string, members: TaskAttempt[], seen: bigint[], pollIntervalMs: number): Promise<"done" | "waiting" | "migrated"> {
  const views = await Promise.all(
    members.map(async (member) => {
      const lease = await readLease(ctx.publicClient, ctx.market, member.leaseId);
      const remote = await authorize(ctx, member, "status", {})
        .then((auth) => ctx.link.status({ peerId: member.peerId, addrs: member.addrs }, { auth }))
        .catch(() => undefined);
      // Each rank's newest verified checkpoint, kept as it appears (after a fault its provider may be gone).
      if (remote) await absorbCheckpoints(ctx, member, remote);
      return { member, lease, state: remote?.state ?? "unknown", error: remote?.error ?? null };
    }),
  );
  const record = await taskRecord(ctx, taskId);
  const seqs = members.map((member) => member.checkpoint?.record.seq ?? -1n);
  if (seqs.some((seq, i) => seq !== seen[i])) {
    seen.splice(0, seen.length, ...seqs);
    await ctx.tasks.put(record);
  }
  const live = (lease: { status: string }) => lease.status === "Open" || lease.status === "Active";
  const lost = views.filter((view) => ENDED.has(view.lease.status) && MIGRATE_ON.has(view.lease.endReason) && view.state !== "succeeded");
  if (lost.length && record.autoMigrate) {
    const reasons = [...new Set(lost.map((view) => view.lease.endReason))].join(", ");
    ctx.progress(`Lease(s) ${lost.map((view) => view.member.leaseId).join(", ")} of group task ${taskId} ended (${reasons}); migrating the whole group...`);
    if (views.some((view) => live(view.lease))) await cancelTask(ctx, taskId);
    const fresh = await taskRecord(ctx, taskId);
    const attempt = currentAttempt(fresh);
    for (const view of lost) ctx.feed.avoid(view.member.provider, 600);
    attempt.migratedBecause = lost[0]?.lease.endReason;
    for (const view of lost) view.member.migratedBecause = view.lease.endReason;
    const spec = ctx.tasks.fullSpec(taskId) ?? fresh.spec;
    // A group that takes checkpoints restarts whole, each rank from its own newest checkpoint of one attempt (docs/data.md "Group tasks").
    const point = takesCheckpoints(spec) ? (await settledGroupPoint(ctx, fresh, members, { pollMs: Math.min(pollIntervalMs, CHECKPOINT_SETTLE_POLL_MS) })).point : null;
    if (point) ctx.progress(`Resuming every rank from its own checkpoint: ${point.ranks.map((rank, i) => `rank ${i} from ${rank.cid}`).join(", ")}...`);
    else if (takesCheckpoints(spec)) ctx.progress(`Not every rank of group task ${taskId} has a verified checkpoint: the group starts again from the beginning.`);
    const next = await runAttempt(ctx, fresh.request as MatchRequestInput, groupRankSpecs(spec, point));
    if (point && (next.group?.length ?? 1) !== point.ranks.length)
      ctx.progress(`The new group has ${next.group?.length ?? 1} machine(s), not ${point.ranks.length}: every rank starts from the beginning.`);
    fresh.attempts.push(next);
    await ctx.tasks.put(fresh);
    return "migrated";
  }
  // A rank whose provider could not fetch its checkpoint from anyone: the group again, from an older complete set of checkpoints or the beginning.
  const unfetched = record.autoMigrate ? views.filter((view) => checkpointUnavailable(view.member, view)) : [];
  if (unfetched.length) {
    if (views.some((view) => live(view.lease))) await cancelTask(ctx, taskId);
    const fresh = await taskRecord(ctx, taskId);
    for (const view of unfetched) view.member.migratedBecause = CHECKPOINT_UNAVAILABLE;
    currentAttempt(fresh).migratedBecause = CHECKPOINT_UNAVAILABLE;
    const point = await pickGroupCheckpoints(ctx, fresh);
    ctx.progress(
      `Lease(s) ${unfetched.map((view) => view.member.leaseId).join(", ")} of group task ${taskId} could not fetch their checkpoint from any node; the group starts again from ${point ? "an older checkpoint of every rank" : "the beginning"}...`,
    );
    const next = await migrationAttempt(ctx, fresh.request as MatchRequestInput, groupRankSpecs(ctx.tasks.fullSpec(taskId) ?? fresh.spec, point));
    fresh.attempts.push(next);
    await ctx.tasks.put(fresh);
    return "migrated";
  }
  const failed = lost.length > 0 || views.some((view) => view.state === "failed" || view.state === "exceeded");
  if (failed && views.some((view) => live(view.lease))) {
    ctx.progress(`A machine of group task ${taskId} failed; cancelling the others for a refund...`);
    await cancelTask(ctx, taskId);
    return "waiting";
  }
  const over = (state: string) => state === "unknown" || (FINAL_TASK_STATES as ReadonlySet<string>).has(state);
  return views.every((view) => ENDED.has(view.lease.status) && over(view.state)) ? "done" : "waiting";
}

async function statusCompletion(ctx: SuanliContext, taskId: string) {
  const record = await taskRecord(ctx, taskId);
  const attempt = currentAttempt(record);

  try {
    const status = await ctx.link.status({ peerId: attempt.peerId, addrs: attempt.addrs }, { auth: await authorize(ctx, attempt, "status", {}) });
    return signedCompletionOf(status);
  } catch {
    return null;
  }
}

/** How long a migration waits for an offer to fit (the book shows a lease that just ended until its provider republishes). */
const MIGRATION_MATCH_WAIT_MS = 30_000;

/**
 * runAttempt for a migration: when nothing fits, it looks again every 2 s for up to
 * MIGRATION_MATCH_WAIT_MS, since the units of the task's own lease that just ended show as taken
 * until its provider's next offer; then NoMatchError as runAttempt throws it.
 */
async function migrationAttempt(ctx: SuanliContext, request: MatchRequestInput, spec: Parameters<typeof runAttempt>[2]): Promise<TaskAttempt> {
  const until = Date.now() + MIGRATION_MATCH_WAIT_MS;
  for (;;) {
    try {
      return await runAttempt(ctx, request, spec);
    } catch (error) {
      if (!(error instanceof NoMatchError) || Date.now() >= until) throw error;
      ctx.progress("No offer fits yet (a lease that just ended frees its units at its provider's next offer); looking again in 2 s...");
      await new Promise((resolve) => setTimeout(resolve, 2_000));
    }
  }
}

import { z } from "zod";
import { readLease } from "../../common/chain/market.js";
import { SuanliError } from "../../common/errors.js";
import { parseMatchRequest, type MatchRequestInput } from "../../common/matching/request.js";
import { taskSpecSchema, type TaskSpec } from "../../common/protocols/task-spec.js";
import { parseInput } from "../../common/validation.js";
import { requireWallet, type SuanliContext } from "../internal/context.js";
import { groupRankSpecs, pickCheckpoint, resumedSpec, settleCheckpoint, settledGroupPoint } from "../internal/resume.js";
import { currentAttempt, storableTaskSpec, type TaskRecord } from "../internal/store.js";
import { TaskStateError } from "../errors.js";
import type { SubmitTaskReturnType, TaskAttempt } from "../types.js";
import { taskRecord } from "./getTaskStatus.js";
import { runAttempt } from "./submitTask.js";

/** How long a resume waits for the ended lease's task to be over on its provider (its end snapshot signed). */
const RESUME_SETTLE_MS = 30_000;

/**
 * What `client.resume` may change from the task's original request; everything else is the task's
 * own (same GPUs, bundle or image, command, environment, inputs). All optional.
 *
 * @example
 * import { type ResumeTaskParameters } from "suanli/sdk";
 * const overrides: ResumeTaskParameters = { maxPricePerGpuHour: "3.00", duration: 1800, interruptible: false };
 */
export const resumeTaskParametersSchema = z.strictObject({
  /** Lease length in seconds for the new lease (default: the task's). */
  duration: z.number().optional(),
  /** Highest price, USD per GPU-hour (default: the task's). */
  maxPricePerGpuHour: z.union([z.string(), z.number()]).optional(),
  /** Run interruptible (at `bidPerGpuHour`) or on demand (default: as before). */
  interruptible: z.boolean().optional(),
  /** The interruptible bid, USD per GPU-hour. */
  bidPerGpuHour: z.union([z.string(), z.number()]).optional(),
  /** A region name or a list (default: the task's). */
  region: z.union([z.string(), z.array(z.string())]).optional(),
  /** Only attested machines (default: the task's). */
  attestedOnly: z.boolean().optional(),
  /** Checkpoint period in seconds for the new lease (at least 10; default: the task's). */
  checkpointPeriodSeconds: z.number().optional(),
  /** Migrate (and resume) again when the new lease faults or is preempted (default: the task's). */
  autoMigrate: z.boolean().optional(),
});

/**
 * The overrides `client.resume` takes (resumeTaskParametersSchema's input): lease length, price,
 * mode, region, attestation, checkpoint period, autoMigrate.
 *
 * @example
 * import { createClient, type ResumeTaskParameters } from "suanli/sdk";
 * const overrides: ResumeTaskParameters = { maxPricePerGpuHour: "3.00" };
 * await client.resume(taskId, overrides);
 */
export type ResumeTaskParameters = z.input<typeof resumeTaskParametersSchema>;

/**
 * What `client.resume` answers: the new lease (the task's newest attempt, same task id) and the
 * checkpoint it starts from.
 *
 * @example
 * import { type ResumeTaskReturnType } from "suanli/sdk";
 * const resumed: ResumeTaskReturnType = await client.resume(taskId);
 * console.log(resumed.leaseId, resumed.resumedFrom.cid, resumed.resumedFrom.leaseId);
 */
export type ResumeTaskReturnType = SubmitTaskReturnType & { resumedFrom: { cid: string; leaseId: bigint; seq: bigint | null } };

/**
 * The task is still running: a resume would run it twice. Cancel it (`client.cancel`) or wait for
 * its end first.
 *
 * @example
 * import { TaskStillRunningError } from "suanli/sdk";
 * try {
 *   await client.resume(taskId);
 * } catch (error) {
 *   if (error instanceof TaskStillRunningError) console.error(error.shortMessage, error.metaMessages);
 * }
 */
export class TaskStillRunningError extends SuanliError {
  override name = "TaskStillRunningError";
}

/**
 * No lease of the task has a verified checkpoint to resume from (it asked for none, its provider
 * signed none, or its provider cannot be reached and none was recorded).
 *
 * @example
 * import { NoCheckpointError } from "suanli/sdk";
 * try {
 *   await client.resume(taskId);
 * } catch (error) {
 *   if (error instanceof NoCheckpointError) console.error(error.shortMessage, error.metaMessages);
 * }
 */
export class NoCheckpointError extends SuanliError {
  override name = "NoCheckpointError";
}

/**
 * The task's secret environment values are not kept in the task file: only the process that
 * submitted the task can resume it with them.
 *
 * @example
 * import { ResumeSecretsError } from "suanli/sdk";
 * try {
 *   await client.resume(taskId);
 * } catch (error) {
 *   if (error instanceof ResumeSecretsError) console.error(error.shortMessage);
 * }
 */
export class ResumeSecretsError extends SuanliError {
  override name = "ResumeSecretsError";
}

/**
 * Re-submits a stopped, failed, cancelled or preempted task on any provider, started from its
 * newest verified checkpoint (docs/data.md "Resume"): the same task id gets a new lease, whose
 * task finds the checkpoint's files in $SUANLI_CHECKPOINT_DIR and its CID in $SUANLI_RESUMED_FROM.
 * Throws TaskStillRunningError while the task's lease is open or active, TaskStateError when its
 * last lease's task succeeded (nothing to resume), NoCheckpointError when no
 * lease of it has a checkpoint, ResumeSecretsError for a task with secrets submitted by another
 * process, InvalidInputError naming a bad override.
 *
 * @example
 * import { createClient } from "suanli/sdk";
 * const resumed = await client.resume(taskId, { maxPricePerGpuHour: "3.00" });
 * console.log(`lease ${resumed.leaseId} resumes from ${resumed.resumedFrom.cid}`);
 * const receipt = await client.wait(taskId);
 */
export async function resumeTask(ctx: SuanliContext, taskId: string, parameters: ResumeTaskParameters = {}): Promise<ResumeTaskReturnType> {
  const overrides = parseInput(resumeTaskParametersSchema, parameters, "resume parameters");
  requireWallet(ctx, "resuming a task");
  const record = await taskRecord(ctx, taskId);
  const current = currentAttempt(record);
  // A group task: every machine's lease must have ended.
  const members = current.group && current.group.length > 1 ? current.group : [current];
  const leases = await Promise.all(members.map((member) => readLease(ctx.publicClient, ctx.market, member.leaseId)));
  const running = leases.findIndex((view) => view.status === "Open" || view.status === "Active");
  const lease = leases[0]!;
  if (running >= 0) {
    throw new TaskStillRunningError(`Task ${taskId} is still running: its lease ${members[running]!.leaseId} is ${leases[running]!.status}`, {
      metaMessages: [`Cancel it first (\`npx suanli cancel ${taskId}\`, client.cancel) or wait for its end, then resume it.`],
    });
  }
  const spec = ctx.tasks.fullSpec(taskId) ?? record.spec;
  const redacted = Object.entries(spec.env).filter(([name, value]) => value === `[secret:${name}]`);
  if (redacted.length > 0) {
    throw new ResumeSecretsError(`Task ${taskId} has secret variables (${redacted.map(([name]) => name).join(", ")}) that the task file does not keep`, {
      metaMessages: ["Resume it from the process that submitted it, or submit it again with its secrets and --resume-from CID (`npx suanli checkpoints TASK`)."],
    });
  }
  if (members.length > 1) return resumeGroup(ctx, record, members, spec, overrides, lease.endReason);
  // The current lease's provider has the newest records (its end snapshot among them, signed once
  // the stopped task has exited), if it is reachable.
  const state = await settleCheckpoint(ctx, current, { settleMs: RESUME_SETTLE_MS });
  if (state === "succeeded") {
    throw new TaskStateError(`Task ${taskId} succeeded on lease ${current.leaseId}: there is nothing to resume`, {
      metaMessages: ["Submit it again to run it anew (--resume-from CID starts it from a checkpoint of your choice)."],
    });
  }
  // Copies to the renter's node asked for so far are done first; the provider never reached, they are preferred.
  await ctx.checkpointCopies?.idle(current.leaseId, RESUME_SETTLE_MS);
  const point = await pickCheckpoint(ctx, record, { preferCopies: state === undefined });
  if (!point) {
    throw new NoCheckpointError(`Task ${taskId} has no verified checkpoint to resume from`, {
      metaMessages: [
        "A task checkpoints when submitted with a checkpoint period (--checkpoint-every S) and writes to $SUANLI_CHECKPOINT_DIR; submit it again to start from the beginning.",
      ],
    });
  }
  const { request, base } = withOverrides(record, spec, overrides);
  const nextSpec = parseInput(taskSpecSchema, resumedSpec(base, point), "task spec");
  await ctx.feed.ready();
  ctx.progress(`Resuming task ${taskId} from checkpoint ${point.cid} (lease ${point.leaseId})...`);
  const attempt = await runAttempt(ctx, request, nextSpec);
  attempt.resumedFrom = point.cid;
  return recordResumed(ctx, record, { request, base, spec, overrides, attempt, endReason: lease.endReason, point });
}

/** The task's request and spec with the caller's overrides applied (validated). */
function withOverrides(record: TaskRecord, spec: TaskSpec, overrides: z.output<typeof resumeTaskParametersSchema>): { request: MatchRequestInput; base: TaskSpec } {
  const request = { ...(record.request as MatchRequestInput) };
  if (overrides.duration !== undefined) request.duration = overrides.duration;
  if (overrides.maxPricePerGpuHour !== undefined) request.maxPricePerGpuHour = overrides.maxPricePerGpuHour;
  if (overrides.region !== undefined) request.region = overrides.region;
  if (overrides.attestedOnly !== undefined) request.attestedOnly = overrides.attestedOnly;
  if (overrides.interruptible !== undefined) request.mode = overrides.interruptible ? "interruptible" : "on-demand";
  if (overrides.bidPerGpuHour !== undefined) request.bidPerGpuHour = overrides.bidPerGpuHour;
  if (request.mode !== "interruptible") delete request.bidPerGpuHour;
  parseMatchRequest(request);
  const base = overrides.checkpointPeriodSeconds !== undefined ? { ...spec, checkpoint: { periodSeconds: overrides.checkpointPeriodSeconds } } : spec;
  return { request, base };
}

/** Saves the resumed attempt in the task file and answers the caller. */
async function recordResumed(
  ctx: SuanliContext,
  record: TaskRecord,
  parts: {
    request: MatchRequestInput;
    base: TaskSpec;
    spec: TaskSpec;
    overrides: z.output<typeof resumeTaskParametersSchema>;
    attempt: TaskAttempt;
    endReason: string;
    point: { cid: string; leaseId: bigint; seq: bigint | null };
  },
): Promise<ResumeTaskReturnType> {
  const { request, base, spec, overrides, attempt, point } = parts;
  currentAttempt(record).migratedBecause ??= `resumed (${parts.endReason})`;
  record.request = JSON.parse(JSON.stringify(request)) as Record<string, unknown>;
  if (overrides.autoMigrate !== undefined) record.autoMigrate = overrides.autoMigrate;
  record.attempts.push(attempt);
  if (base !== spec) record.spec = storableTaskSpec(base);
  await ctx.tasks.put(record, base !== spec && ctx.tasks.fullSpec(record.taskId) ? base : undefined);
  return {
    taskId: record.taskId,
    leaseId: attempt.leaseId,
    provider: attempt.provider,
    status: "submitted",
    attempt,
    resumedFrom: { cid: point.cid, leaseId: point.leaseId, seq: point.seq },
  };
}

/**
 * A group task resumed by hand (docs/data.md "Group tasks"): every member's end snapshot settled,
 * then the whole group re-submitted, each rank from the newest checkpoint of the same rank (one
 * attempt's complete set). `resumedFrom` in the answer is rank 0's.
 */
async function resumeGroup(
  ctx: SuanliContext,
  record: TaskRecord,
  members: TaskAttempt[],
  spec: TaskSpec,
  overrides: z.output<typeof resumeTaskParametersSchema>,
  endReason: string,
): Promise<ResumeTaskReturnType> {
  const { point, states } = await settledGroupPoint(ctx, record, members, { settleMs: RESUME_SETTLE_MS });
  if (states.every((state) => state === "succeeded")) {
    throw new TaskStateError(`Task ${record.taskId} succeeded on every machine of its group: there is nothing to resume`, {
      metaMessages: ["Submit it again to run it anew."],
    });
  }
  if (!point) {
    throw new NoCheckpointError(`Task ${record.taskId} has no verified checkpoint of every rank of one attempt to resume from`, {
      metaMessages: [
        "A group resumes whole, each rank from its own checkpoint: every rank must have one (a task checkpoints when submitted with a checkpoint period, --checkpoint-every S, and writes to $SUANLI_CHECKPOINT_DIR); submit it again to start from the beginning.",
      ],
    });
  }
  const { request, base } = withOverrides(record, spec, overrides);
  const specs = groupRankSpecs(base, point);
  for (const [rank] of point.ranks.entries()) parseInput(taskSpecSchema, specs(rank, point.ranks.length), "task spec");
  await ctx.feed.ready();
  ctx.progress(`Resuming group task ${record.taskId}, every rank from its own checkpoint: ${point.ranks.map((rank, i) => `rank ${i} from ${rank.cid}`).join(", ")}...`);
  const attempt = await runAttempt(ctx, request, specs);
  if ((attempt.group?.length ?? 1) !== point.ranks.length)
    ctx.progress(`The new group has ${attempt.group?.length ?? 1} machine(s), not ${point.ranks.length}: every rank starts from the beginning.`);
  return recordResumed(ctx, record, { request, base, spec, overrides, attempt, endReason, point: point.ranks[0]! });
}

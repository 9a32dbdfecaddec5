/**
 * Resume (issue 36, docs/data.md "Resume"): which checkpoint a task's next lease starts from. The
 * SDK keeps, per lease, the newest checkpoint record its provider signed (verified against that
 * provider and lease), and a re-rented task (autoMigrate after a fault or a preemption, or
 * `client.resume`) gets the newest of them as `resumeFrom`, with the nodes that hold it as
 * `resumeHints`: the renter's own node first when checkpoints are copied there
 * (checkpoint-copies.ts), then the task's providers.
 */
import type { Address } from "viem";
import { checkpointToWire, verifyCheckpoint, type SignedCheckpoint } from "../../common/attest/checkpoint.js";
import { FINAL_TASK_STATES, type TaskStatus as StatusAnswer } from "../../common/protocols/lease.js";
import type { TaskSpec } from "../../common/protocols/task-spec.js";
import type { TaskAttempt } from "../types.js";
import { authorize, type SuanliContext } from "./context.js";
import type { TaskRecord } from "./store.js";

/**
 * How long a re-rent waits, after the lease ended, for the old provider to finish the task and
 * sign its end snapshot (a preempted task runs to the end of its notice, then has SIGTERM and the
 * grace period to flush). Past it, or when the provider cannot be reached, the newest checkpoint
 * already recorded is used.
 */
export const CHECKPOINT_SETTLE_MS = 120_000;

/**
 * How often the settle step asks the old provider, at most (less often when `wait` polls less often):
 * its answer is what the re-rent waits for (a preempted task usually ends within a second of its
 * SIGTERM), and `wait`'s 1 s poll added half a second on average to a resume (bench/resume.ts).
 */
export const CHECKPOINT_SETTLE_POLL_MS = 250;
/** The settle step gives up on an old provider it could not reach twice in a row and for at least this long. */
const UNREACHABLE_GIVE_UP_MS = 1_000;

/** Most provider addresses a resumed spec names as hints (the task spec's cap). */
const MAX_HINTS = 8;

/** Whether a task takes checkpoints: its spec asks for a period or resumed from one (the provider's rule, checkpoint-dir.ts). */
export function takesCheckpoints(spec: Pick<TaskSpec, "checkpoint" | "resumeFrom">): boolean {
  return Boolean(spec.checkpoint || spec.resumeFrom);
}

/** The checkpoint a task resumes from: its CID, the lease that took it, and where it can be fetched. */
export type ResumePoint = {
  cid: string;
  /** The lease whose provider signed the record (or whose task started from it, for `source` "resumedFrom"). */
  leaseId: bigint;
  provider: Address;
  /** "checkpoint": the lease's newest signed record; "resumedFrom": that lease made none of its own and started from this CID. */
  source: "checkpoint" | "resumedFrom";
  /** The record's sequence number and time (unix ms), for "checkpoint". */
  seq: bigint | null;
  time: bigint | null;
  /** The multiaddrs (ending in /p2p/<peer id>) of the task's providers, newest lease first. */
  hints: string[];
};

/**
 * Asks the attempt's provider for its task state and checkpoint records, and keeps the newest
 * record that verifies (signed by the lease's provider, for this lease) in `attempt.checkpoint`.
 * Returns the provider's task state, or undefined when it cannot be reached. A record that does
 * not verify is ignored (the previous one stays) and reported through `ctx.progress`.
 */
export async function refreshCheckpoint(ctx: SuanliContext, attempt: TaskAttempt): Promise<string | undefined> {
  let remote;
  try {
    const auth = await authorize(ctx, attempt, "status", {});
    remote = await ctx.link.status({ peerId: attempt.peerId, addrs: attempt.addrs }, { auth });
  } catch {
    return undefined;
  }
  await absorbCheckpoints(ctx, attempt, remote);
  return remote.state;
}

/**
 * Keeps the newest record of a status answer that verifies in `attempt.checkpoint` (a forged or
 * altered one is ignored, reported through `ctx.progress`), and has a newer one copied to the
 * renter's node when the client was given one (`pinCheckpointsOn`).
 */
export async function absorbCheckpoints(ctx: SuanliContext, attempt: TaskAttempt, remote: Pick<StatusAnswer, "checkpoints">): Promise<void> {
  const wire = remote.checkpoints ?? [];
  const newest = wire.reduce<(typeof wire)[number] | undefined>(
    (best, entry) => (best === undefined || BigInt(entry.record.seq) > BigInt(best.record.seq) ? entry : best),
    undefined,
  );
  if (newest && (!attempt.checkpoint || BigInt(newest.record.seq) > attempt.checkpoint.record.seq)) {
    try {
      attempt.checkpoint = await verifyCheckpoint(newest, { domain: ctx.domain, provider: attempt.provider, leaseId: attempt.leaseId });
      ctx.checkpointCopies?.request(attempt);
    } catch (error) {
      ctx.progress(`Lease ${attempt.leaseId}: a checkpoint record did not verify and was ignored (${(error as Error).message}); the previous one stays the newest.`);
    }
  }
}

/**
 * Waits (at most `settleMs`) until the attempt's provider reports the task over, so that its end
 * snapshot is signed, refreshing `attempt.checkpoint` on every look. Stops early when the provider
 * cannot be reached twice in a row, a second apart at least. Returns the task's last state the provider reported (undefined: never reached).
 */
export async function settleCheckpoint(ctx: SuanliContext, attempt: TaskAttempt, options: { settleMs?: number; pollMs?: number } = {}): Promise<string | undefined> {
  const deadline = Date.now() + (options.settleMs ?? CHECKPOINT_SETTLE_MS);
  let unreachable = 0;
  let unreachableSince = 0;
  let last: string | undefined;
  for (;;) {
    const state = await refreshCheckpoint(ctx, attempt);
    if (state === undefined && unreachable++ === 0) unreachableSince = Date.now();
    if (state !== undefined) unreachable = 0;
    last = state ?? last;
    const givenUp = unreachable >= 2 && Date.now() - unreachableSince >= UNREACHABLE_GIVE_UP_MS;
    if ((state !== undefined && (FINAL_TASK_STATES as ReadonlySet<string>).has(state)) || givenUp || Date.now() >= deadline) return last;
    await new Promise((resolve) => setTimeout(resolve, options.pollMs ?? 1_000));
  }
}

/**
 * The checkpoint an ended lease's task resumes from: waits for its provider's end snapshot
 * (settleCheckpoint), then for the copies to the renter's node asked for so far (at most
 * CHECKPOINT_SETTLE_MS), and picks, preferring those copies when the provider was never reached.
 */
export async function settledPoint(ctx: SuanliContext, record: Pick<TaskRecord, "attempts">, attempt: TaskAttempt, pollMs: number, settleMs?: number): Promise<ResumePoint | null> {
  const state = await settleCheckpoint(ctx, attempt, { pollMs, ...(settleMs !== undefined ? { settleMs } : {}) });
  await ctx.checkpointCopies?.idle(attempt.leaseId, settleMs ?? CHECKPOINT_SETTLE_MS);
  return pickCheckpoint(ctx, record, { preferCopies: state === undefined });
}

/** A stored record verified again (a task file may have been edited by hand); undefined when it does not verify. */
async function reverified(ctx: SuanliContext, attempt: TaskAttempt, stored: SignedCheckpoint | undefined): Promise<SignedCheckpoint | undefined> {
  if (!stored) return undefined;
  return verifyCheckpoint(checkpointToWire(stored), { domain: ctx.domain, provider: attempt.provider, leaseId: attempt.leaseId }).catch(() => undefined);
}

/** The attempt's provider addresses, each ending in /p2p/<peer id>. */
export function addressesOf(attempt: Pick<TaskAttempt, "addrs" | "peerId">): string[] {
  return attempt.addrs.map((addr) => (addr.includes("/p2p/") ? addr : `${addr}/p2p/${attempt.peerId}`));
}

/**
 * The checkpoint the task's next lease starts from: the newest lease (walking back from the
 * current one) that has a verified checkpoint record gives its newest record, or its copy on the
 * renter's node (`checkpointCopy`) first with `preferCopies` (its provider is gone: a newer record
 * only it held cannot be fetched); a lease that made none but itself started from a checkpoint
 * gives that one (nothing newer exists). Null when no lease has either, and for a group task
 * (each rank has its own folder: pickGroupCheckpoints gives one checkpoint per rank).
 */
export async function pickCheckpoint(ctx: SuanliContext, record: Pick<TaskRecord, "attempts">, options: { preferCopies?: boolean } = {}): Promise<ResumePoint | null> {
  if (record.attempts.some((attempt) => attempt.group && attempt.group.length > 1)) return null;
  const newestFirst = [...record.attempts].reverse();
  // The renter's node first: it holds the copies, and outlives the providers.
  const copyHolders = newestFirst.flatMap((attempt) => attempt.checkpointCopy?.addrs ?? []);
  const hints = [...new Set([...copyHolders, ...newestFirst.flatMap(addressesOf)])].slice(0, MAX_HINTS);
  // CIDs a lease could not fetch from anyone: never picked again.
  const unavailable = new Set(record.attempts.filter((attempt) => attempt.migratedBecause === CHECKPOINT_UNAVAILABLE).map((attempt) => attempt.resumedFrom));
  for (const attempt of newestFirst) {
    const newest = await reverified(ctx, attempt, attempt.checkpoint);
    const copy = await reverified(ctx, attempt, attempt.checkpointCopy?.checkpoint);
    const checkpoint = (options.preferCopies ? [copy, newest] : [newest, copy]).find((found) => found && !unavailable.has(found.record.cid));
    if (checkpoint) {
      return {
        cid: checkpoint.record.cid,
        leaseId: attempt.leaseId,
        provider: attempt.provider,
        source: "checkpoint",
        seq: checkpoint.record.seq,
        time: checkpoint.record.time,
        hints,
      };
    }
    if (attempt.resumedFrom && !unavailable.has(attempt.resumedFrom))
      return { cid: attempt.resumedFrom, leaseId: attempt.leaseId, provider: attempt.provider, source: "resumedFrom", seq: null, time: null, hints };
  }
  return null;
}

/** The spec a resumed lease gets: the same task, started from `point`, or from the beginning when null. */
export function resumedSpec(spec: TaskSpec, point: ResumePoint | null): TaskSpec {
  const { resumeFrom: _from, resumeHints: _hints, ...rest } = spec;
  if (!point) return rest;
  return { ...rest, resumeFrom: point.cid, ...(point.hints.length ? { resumeHints: point.hints } : {}) };
}

/**
 * `migratedBecause` of a resumed lease whose provider could not fetch its checkpoint from anyone
 * (the task did not start: DataNotFoundError, the renter's side). Its CID is not picked again.
 */
export const CHECKPOINT_UNAVAILABLE = "CheckpointUnavailable";

/** Whether the lease's task did not start because no node served the checkpoint it was to resume from. */
export function checkpointUnavailable(attempt: TaskAttempt, status: { state: string; error: { name: string } | null }): boolean {
  return Boolean(attempt.resumedFrom) && status.state === "failed" && status.error?.name === "DataNotFoundError";
}

/**
 * A group task's resume point: one checkpoint per rank, all from the same attempt of the group
 * (docs/data.md "Group tasks: the whole group resumes"), by rank.
 */
export type GroupResumePoint = { leaseIds: bigint[]; ranks: ResumePoint[] };

/**
 * The checkpoints a group task's next attempt starts from: walking back from the newest attempt,
 * the first group attempt whose every rank has a verified checkpoint record (its newest) or itself
 * started from one gives them, rank by rank. All or nothing: a set with a rank missing is never
 * mixed with another attempt's (their steps differ), so an attempt where one rank has none falls
 * back to an older complete set, or to the beginning (null). CIDs a lease could not fetch
 * (CheckpointUnavailable) are not picked again. Hints: every provider of the task's groups (and the
 * renter's node first, when it holds copies).
 */
export async function pickGroupCheckpoints(
  ctx: SuanliContext,
  record: Pick<TaskRecord, "attempts">,
  options: { unreachable?: ReadonlySet<bigint> } = {},
): Promise<GroupResumePoint | null> {
  const newestFirst = [...record.attempts].reverse().filter((attempt) => attempt.group && attempt.group.length > 1);
  const members = newestFirst.flatMap((attempt) => attempt.group!);
  const copyHolders = members.flatMap((member) => member.checkpointCopy?.addrs ?? []);
  const hints = [...new Set([...copyHolders, ...members.flatMap(addressesOf)])].slice(0, MAX_HINTS);
  const unavailable = new Set(members.filter((member) => member.migratedBecause === CHECKPOINT_UNAVAILABLE).map((member) => member.resumedFrom));
  for (const attempt of newestFirst) {
    const ranks: ResumePoint[] = [];
    for (const member of attempt.group!) {
      const newest = await reverified(ctx, member, member.checkpoint);
      const copy = await reverified(ctx, member, member.checkpointCopy?.checkpoint);
      // A member whose provider was not reached at the end: its copy on the renter's node first (a newer record only that provider held cannot be fetched).
      const checkpoint = (options.unreachable?.has(member.leaseId) ? [copy, newest] : [newest, copy]).find((found) => found && !unavailable.has(found.record.cid));
      const base = { leaseId: member.leaseId, provider: member.provider, hints };
      if (checkpoint) ranks.push({ ...base, cid: checkpoint.record.cid, source: "checkpoint", seq: checkpoint.record.seq, time: checkpoint.record.time });
      else if (member.resumedFrom && !unavailable.has(member.resumedFrom)) ranks.push({ ...base, cid: member.resumedFrom, source: "resumedFrom", seq: null, time: null });
      else break;
    }
    if (ranks.length === attempt.group!.length) return { leaseIds: attempt.group!.map((member) => member.leaseId), ranks };
  }
  return null;
}

/**
 * Each rank's spec for a group's next attempt: rank r starts from the checkpoint of rank r. A group
 * matched with another number of machines than the checkpointed one starts every rank from the
 * beginning (a rank's state is its shard of the job; it cannot be split or merged here).
 */
export function groupRankSpecs(spec: TaskSpec, point: GroupResumePoint | null): (rank: number, worldSize: number) => TaskSpec {
  return (rank, worldSize) => resumedSpec(spec, point && point.ranks.length === worldSize ? point.ranks[rank]! : null);
}

/**
 * Waits for every member of an ended group to be over on its provider (their end snapshots signed,
 * settleCheckpoint on each, at once), then for the copies to the renter's node, and picks the
 * group's checkpoints. A member whose provider was never reached prefers its copy. `states` are the
 * members' final task states (undefined: its provider was not reached).
 */
export async function settledGroupPoint(
  ctx: SuanliContext,
  record: Pick<TaskRecord, "attempts">,
  members: TaskAttempt[],
  options: { pollMs?: number; settleMs?: number } = {},
): Promise<{ point: GroupResumePoint | null; states: (string | undefined)[] }> {
  const states = await Promise.all(members.map((member) => settleCheckpoint(ctx, member, options)));
  for (const member of members) await ctx.checkpointCopies?.idle(member.leaseId, options.settleMs ?? CHECKPOINT_SETTLE_MS);
  const point = await pickGroupCheckpoints(ctx, record, { unreachable: new Set(members.filter((_, i) => states[i] === undefined).map((member) => member.leaseId)) });
  return { point, states };
}

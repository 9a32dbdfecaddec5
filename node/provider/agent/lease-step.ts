/**
 * The provider's lease loop decides here, and only here, what to do next about a lease: a pure
 * function of what this node knows (its record, its task), what the chain says (one read of the
 * lease per pass) and the time. `LeaseController.reconcile` reads both, asks `nextStep` and
 * carries the actions out in order; the table test (test/node/provider-lease-step.test.ts)
 * covers every record phase against every chain status without a chain.
 *
 * Open/Active lease:
 *   task state lost in a restart → recover (then plan again);
 *   preparing, start deadline near → activate (metering starts; the task runs the time left);
 *   waiting for a spec, deadline near → activate and hold the units; Active without units → hold;
 *   task over → its end action: terminate (the node failed), complete (report; an Open lease is
 *   activated first), await_close (the renter cancelled: complete once its grace ends), none.
 * Ended/Settled/Cancelled lease:
 *   a task still runs → stop it (a preempted one got SIGTERM as its notice began, and is stopped at its end);
 *   otherwise → mark the task ended, hand the units back, and close the record once paid out.
 */
import { completionHeldUntil, type LeaseView } from "../../../common/chain/market.js";
import { FINAL_TASK_STATES, type TaskState } from "../../../common/protocols/lease.js";
import type { TaskHandle } from "../runtime/runtime.js";
import { chainFields, type EndAction, type LeaseRecord, type TaskError } from "./records.js";

/** This node's side of a lease: its record, the task in this process (if any), whether the node is stopping. */
export type LocalLease = {
  record: LeaseRecord;
  /** The task pipeline in this process; undefined when none runs (never started, over, or lost in a restart). */
  task?: { handleState: TaskHandle["state"] | undefined; aborted: boolean; abortReason: AbortReason | undefined } | undefined;
  /** The node is shutting down: nothing new starts. */
  stopping: boolean;
  /** provider.leases.activateMarginSeconds: how long before the start deadline the node activates anyway. */
  activateMarginSeconds: number;
};

/** Why a task pipeline was aborted. */
/** "silent": the renter's task went without its liveness heartbeat past its allowance (liveness-watch.ts). */
export type AbortReason = "cancel" | "lease-ended" | "shutdown" | "silent";

/** When the step is taken: the chain's time as this node estimates it (ms, see chain-clock.ts; not its raw wall clock) and the latest block's timestamp. */
export type StepClock = { wallMs: number; blockTimestamp: number };

export type LeaseAction =
  /** Write the chain's view (status, end, units…) into the record. */
  | { kind: "sync" }
  /** The renter released units: give back those no task uses (keep all while a task does). */
  | { kind: "shrink"; units: number }
  /** An extension moved the lease's end: the running task may run until the new end. */
  | { kind: "extend" }
  /** The record says a task was preparing or running but none is in this process (restart). */
  | { kind: "recover" }
  | { kind: "activate"; why: "preparing" | "no-spec" }
  /** Take the lease's units from the idle workload without a task. */
  | { kind: "hold-units" }
  | { kind: "set-end-action"; endAction: EndAction }
  | { kind: "terminate" }
  /** Report the completion (sign it first if not yet signed); an Open lease is activated first. */
  | { kind: "complete"; activateFirst: boolean }
  /** The lease was preempted: the task gets SIGTERM now (the notice begins) and is stopped at `stopAt`. */
  | { kind: "preempt-task"; noticeMs: number }
  | { kind: "stop-task" }
  /** No task runs for a lease that ended on-chain: the record says the task is over, nothing to send. */
  | { kind: "mark-ended"; state: TaskState | null; error: TaskError | null }
  | { kind: "release-units" }
  /** The lease is paid out: nothing is left to do about it. */
  | { kind: "close" };

/** The time the next block will carry, at least: the chain's clock may run ahead of ours (a devnet mines a block per transaction). */
export function chainNowOf(now: StepClock): number {
  return Math.max(Math.floor(now.wallMs / 1000), now.blockTimestamp + 1);
}

/** The chain's time now, as well as we can tell: for notices, which must not be cut short. */
export function chainTimeOf(now: StepClock): number {
  return Math.max(now.wallMs / 1000, now.blockTimestamp);
}

/** The actions that bring a lease's record and task in line with the chain, in order. After `recover`, plan again. */
export function nextStep(local: LocalLease, chain: LeaseView, now: StepClock): LeaseAction[] {
  const { record } = local;
  if (record.closed || chain.status === "None") return [];
  const actions: LeaseAction[] = [];
  const fields = chainFields(chain);
  if (record.units !== chain.units || (Object.keys(fields) as (keyof typeof fields)[]).some((key) => record.chain[key] !== fields[key])) actions.push({ kind: "sync" });
  if (record.unitIds.length > chain.units) actions.push({ kind: "shrink", units: chain.units });
  return [...actions, ...(chain.status === "Open" || chain.status === "Active" ? openStep(local, chain, now) : endedStep(local, chain, now))];
}

function openStep({ record, task, stopping, activateMarginSeconds }: LocalLease, chain: LeaseView, now: StepClock): LeaseAction[] {
  const actions: LeaseAction[] = [];
  const previousEnd = record.chain.end;
  if (task?.handleState === "running" && chain.status === "Active" && chain.end !== previousEnd && previousEnd !== 0) actions.push({ kind: "extend" });
  // While stopping, only a lease whose task is over still gets its end on-chain.
  if (stopping && record.phase !== "ended") return actions;
  if ((record.phase === "preparing" || record.phase === "starting" || record.phase === "running") && !task) return [...actions, { kind: "recover" }];
  const deadlineNear = chain.status === "Open" && chainNowOf(now) >= record.startDeadline - activateMarginSeconds;
  if (record.phase === "preparing") {
    // The renter's bundle is taking long to fetch: start metering before the deadline rather
    // than be penalised for a late start; the task runs for the time left once ready.
    if (deadlineNear) actions.push({ kind: "activate", why: "preparing" });
    return actions;
  }
  if (record.phase === "waiting_spec") {
    // No task yet and the start deadline is near: activate anyway, so the renter keeps the
    // units it pays for and this node is not penalised for a start the renter held up.
    if (deadlineNear) actions.push({ kind: "activate", why: "no-spec" }, { kind: "hold-units" });
    else if (chain.status === "Active" && record.unitIds.length === 0) actions.push({ kind: "hold-units" });
    return actions;
  }
  if (record.phase !== "ended") return actions;
  let action = record.endAction;
  if (action === "await_close" && record.endAfter !== null && now.wallMs >= record.endAfter) action = "complete";
  if (action === "await_close" && deadlineNear) action = "complete";
  // Too late to activate: anyone may cancel the lease now (the renter is refunded with the start
  // penalty). Nothing is left for this node to send.
  if (chain.status === "Open" && action !== "terminate" && chainNowOf(now) > record.startDeadline) action = "none";
  if (action !== record.endAction) actions.push({ kind: "set-end-action", endAction: action });
  if (action === "terminate") actions.push({ kind: "terminate" });
  else if (action === "complete") {
    // A task stopped at the end of its time is reported once the end has come (a devnet's
    // clock can run ahead of ours): the report then covers all the time the renter paid for.
    const endNotYet = record.result?.status === "exceeded" && chain.status === "Active" && now.wallMs / 1000 < chain.end;
    if (!endNotYet) actions.push({ kind: "complete", activateFirst: chain.status === "Open" });
  }
  return actions;
}

function endedStep({ record, task }: LocalLease, chain: LeaseView, now: StepClock): LeaseAction[] {
  if (task) {
    if (task.aborted || task.abortReason === "lease-ended") return [];
    const chainTime = chainTimeOf(now);
    if (chain.endReason === "Preempted" && task.handleState === "running" && chain.stopAt > chainTime) {
      return [{ kind: "preempt-task", noticeMs: Math.max(0, Math.round((chain.stopAt - chainTime) * 1000)) }];
    }
    return [{ kind: "stop-task" }];
  }
  const actions: LeaseAction[] = [];
  if (record.phase !== "ended" || record.endAction !== "none") {
    actions.push(
      record.phase === "ended"
        ? { kind: "mark-ended", state: null, error: null }
        : {
            kind: "mark-ended",
            state: chain.endReason === "Preempted" ? "preempted" : "stopped",
            error: record.error ?? { name: "LeaseEndedError", message: `The lease ended on-chain (${chain.endReason}) before its task ran` },
          },
    );
  }
  if (!record.released) actions.push({ kind: "release-units" });
  // A completion holds the collateral for the fault window: the record stays open until the claimer releases it.
  if ((chain.status === "Settled" && completionHeldUntil(chain) === undefined) || chain.status === "Cancelled") actions.push({ kind: "close" });
  return actions;
}

/** Marks a record's task over (a final state; what was not final reads `stopped`). */
export function markEnded(record: LeaseRecord, state: TaskState, error: TaskError | null, nowMs = Date.now()): void {
  record.phase = "ended";
  record.state = FINAL_TASK_STATES.has(state) ? state : "stopped";
  record.error = error;
  record.endedAt ??= nowMs;
}

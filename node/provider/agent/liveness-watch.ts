/**
 * Task liveness on the provider's side (issue #34, finding 2). A renter that submits with
 * `taskLiveness` wants a task that hangs to stop costing it money: the task rewrites its nonce into
 * $SUANLI_LIVENESS_FILE at least every `silenceSeconds` (its heartbeat), and once it has been
 * silent for longer the provider's node stops it and completes the lease as the renter's
 * (`TaskSilentError`: paid until then, the rest of the deposit refunded, no SLA credit, no fault).
 *
 * The heartbeat decides only the renter's own task: the node answers attestors' liveness probes for
 * every lease it serves whatever the file holds, so nothing a task writes can fault its provider
 * or pay a collateral credit (docs/attestation.md, "Task liveness").
 *
 * @example
 * import { watchLiveness } from "./liveness-watch.js";
 * const watch = watchLiveness({ workspace, nonce, silenceMs: 120_000, onSilent: (silentForMs) => stop(silentForMs) });
 * await task.wait();
 * watch.stop();
 */
import { runDetached } from "../../../common/detached.js";
import { livenessHeartbeatAt } from "../runtime/task.js";

/** How often the file is looked at, at most: a quarter of the silence allowed, never more often than once a second. */
const MAX_CHECK_INTERVAL_MS = 5_000;

export type LivenessWatchOptions = {
  /** The task's workspace on the host (the liveness file is at its root). */
  workspace: string;
  nonce: string;
  /** How long the task may go without a heartbeat. */
  silenceMs: number;
  /** Called once, when the task has been silent for longer than `silenceMs`. */
  onSilent: (silentForMs: number) => void;
  /** The clock (ms); the file's modification time is on the same wall clock. */
  now?: () => number;
};

/** Watches a running task's heartbeat until `stop()` or until it reports the task silent. */
export function watchLiveness(options: LivenessWatchOptions): { stop(): void } {
  const now = options.now ?? Date.now;
  // The task is given the whole silence allowance from its start for its first heartbeat.
  let lastHeartbeat = now();
  let stopped = false;
  let checking = false;
  const intervalMs = Math.max(1_000, Math.min(MAX_CHECK_INTERVAL_MS, Math.floor(options.silenceMs / 4)));
  const check = async () => {
    if (stopped || checking) return;
    checking = true;
    try {
      const at = await livenessHeartbeatAt(options.workspace, options.nonce).catch(() => undefined);
      if (at !== undefined && at > lastHeartbeat) lastHeartbeat = at;
      const silentFor = now() - lastHeartbeat;
      if (!stopped && silentFor > options.silenceMs) {
        stopped = true;
        clearInterval(timer);
        options.onSilent(silentFor);
      }
    } finally {
      checking = false;
    }
  };
  const timer = setInterval(() => runDetached(check(), undefined, "Checking a task's heartbeat"), intervalMs);
  timer.unref();
  return {
    stop() {
      stopped = true;
      clearInterval(timer);
    },
  };
}

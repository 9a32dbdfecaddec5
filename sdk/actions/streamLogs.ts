import { FINAL_TASK_STATES, type LogLine } from "../../common/protocols/lease.js";
import { authorize, type SuanliContext } from "../internal/context.js";
import { taskRecord } from "./getTaskStatus.js";

/**
 * Options of `client.logs`; all optional.
 *
 * @example
 * import { createClient, type StreamLogsParameters } from "suanli/sdk";
 * const controller = new AbortController();
 * const options: StreamLogsParameters = { fromSeq: 0, follow: true, waitMs: 5_000, signal: controller.signal };
 * for await (const line of client.logs(taskId, options)) {
 *   if (line.text.includes("epoch 3")) controller.abort(); // the iteration ends after the lines already fetched
 * }
 */
export type StreamLogsParameters = {
  /** First sequence number wanted, a whole number >= 0 (default 0: everything the provider still holds). */
  fromSeq?: number;
  /** Keep waiting for new lines until the task ends (default true); false reads what is there and returns. */
  follow?: boolean;
  /** Long-poll wait per request while following, ms, 0 to 20000 (default 5000). */
  waitMs?: number;
  /** Aborting it ends the iteration (checked before each request). */
  signal?: AbortSignal;
};

/**
 * One log line of a task: the provider's line (`seq`, `ts` in unix ms, `stream` "stdout",
 * "stderr" or "system", `text`) and the lease it came from (it changes after a migration).
 *
 * @example
 * import { createClient, type TaskLogLine } from "suanli/sdk";
 * for await (const line of client.logs(taskId)) {
 *   const l: TaskLogLine = line;
 *   console.log(`${new Date(l.ts).toISOString()} #${l.seq} lease ${l.leaseId} [${l.stream}] ${l.text}`);
 * }
 */
export type TaskLogLine = LogLine & { leaseId: bigint };

/**
 * The task's log lines (stdout, stderr and the provider's system lines), as an async iterator.
 * With `follow`, it waits for new lines and ends when the task is over and every line was read.
 * After a migration it continues with the new lease's logs.
 *
 * @example
 * import { createClient } from "suanli/sdk";
 * for await (const line of client.logs(taskId)) console.log(`[${line.stream}] ${line.text}`);
 */
export async function* streamLogs(ctx: SuanliContext, taskId: string, parameters: StreamLogsParameters = {}): AsyncGenerator<TaskLogLine> {
  const follow = parameters.follow ?? true;
  const waitMs = parameters.waitMs ?? 5_000;
  let attemptIndex = -1;
  let fromSeq = parameters.fromSeq ?? 0;
  let failures = 0;
  for (;;) {
    if (parameters.signal?.aborted) return;
    const record = await taskRecord(ctx, taskId);
    const latest = record.attempts.length - 1;
    if (attemptIndex === -1) attemptIndex = latest;
    else if (attemptIndex < latest) {
      attemptIndex = latest;
      fromSeq = 0;
    }
    const attempt = record.attempts[attemptIndex]!;
    const body = { fromSeq, waitMs: follow ? waitMs : 0, limit: 500 };
    let answer;
    try {
      answer = await ctx.link.logs({ peerId: attempt.peerId, addrs: attempt.addrs }, { auth: await authorize(ctx, attempt, "logs", body), ...body });
      failures = 0;
    } catch (error) {
      // A provider that stays unreachable ends the stream; `wait` and `status` still report the lease.
      if (!follow || ++failures >= 5) throw error;
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      continue;
    }
    for (const line of answer.lines) yield { ...line, leaseId: attempt.leaseId };
    fromSeq = answer.nextSeq;
    if (answer.done || !follow) {
      // A migration may have started a new attempt meanwhile: follow it.
      const after = await taskRecord(ctx, taskId);
      if (after.attempts.length - 1 > attemptIndex && follow) continue;
      if (answer.done || !follow) return;
    }
  }
}

export { FINAL_TASK_STATES };

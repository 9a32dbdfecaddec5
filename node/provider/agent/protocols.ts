/**
 * The lease protocols a provider serves over libp2p: reserve, task, status, logs and cancel.
 * Bodies are parsed with the shared schemas of common/protocols/lease.ts before anything reads
 * them; every request about a lease is checked against the lease's renter by the controller,
 * which hands back the lease's record and task; the status and logs answers are built here.
 */
import { handleProtocol } from "../../../common/p2p/reqresp.js";
import { CANCEL_PROTOCOL, LOGS_PROTOCOL, RESERVE_PROTOCOL, STATUS_PROTOCOL, TASK_PROTOCOL } from "../../../common/p2p/protocols.js";
import {
  cancelAnswerSchema,
  cancelBodySchema,
  logsAnswerSchema,
  logsBodySchema,
  reserveBodySchema,
  reserveReplySchema,
  statusBodySchema,
  taskAnswerSchema,
  taskBodySchema,
  taskStatusSchema,
  type LogLine as WireLogLine,
  type TaskStatus,
} from "../../../common/protocols/lease.js";
import type { SuanliHost } from "../../../common/p2p/host.js";
import type { Logger } from "../../log/logger.js";
import type { Metrics } from "../../metrics/metrics.js";
import type { Inventory } from "../inventory/inventory.js";
import type { LeaseController, LeaseTaskView } from "./leases.js";
import { answerReserve, type ReserveContext } from "./reserve.js";
import type { CheckpointBook } from "./checkpoints.js";
import { checkpointBook } from "./task-inputs.js";
import { MAX_CHECKPOINTS_LISTED } from "../../../common/attest/checkpoint.js";

/** Most bytes of log text in one logs answer (the renter asks again from nextSeq). */
export const LOGS_ANSWER_MAX_BYTES = 256 * 1024;
/** Most GPUs listed in one status answer. */
const STATUS_MAX_GPUS = 64;

/** A task spec may carry up to 256 variables of up to 32 KiB: allow a generous body. */
export const TASK_MAX_MESSAGE_BYTES = 1024 * 1024;
/** A logs answer: LOGS_ANSWER_MAX_BYTES of text plus the JSON around it. */
export const LOGS_MAX_MESSAGE_BYTES = LOGS_ANSWER_MAX_BYTES * 2 + 64 * 1024;
/** Long-polls wait up to 20 s (logsBodySchema.waitMs) before answering. */
const LOGS_TIMEOUT_MS = 30_000;

/** Registers the five protocols; returns a function that unregisters them. */
export async function serveLeaseProtocols(
  host: SuanliHost,
  parts: { reserve: ReserveContext; leases: LeaseController; inventory: Inventory; metrics: Metrics; logger: Logger },
): Promise<() => Promise<void>> {
  const { leases, metrics, logger } = parts;
  const onError = (protocol: string) => (error: { name: string; message: string }, peer: { toString(): string }) => {
    metrics.p2pRequestErrors.inc({ protocol, name: error.name });
    logger.debug("Lease request refused", { protocol, peer: peer.toString(), error: error.name });
  };
  const stops = [
    await handleProtocol(host, RESERVE_PROTOCOL, {
      requestSchema: reserveBodySchema,
      responseSchema: reserveReplySchema,
      handler: (body, context) => answerReserve(parts.reserve, body, context.peer.toString()),
      onError: onError(RESERVE_PROTOCOL),
    }),
    await handleProtocol(host, TASK_PROTOCOL, {
      requestSchema: taskBodySchema,
      responseSchema: taskAnswerSchema,
      maxMessageBytes: TASK_MAX_MESSAGE_BYTES,
      handler: (body) => leases.submitTask(body.auth, body.spec),
      onError: onError(TASK_PROTOCOL),
    }),
    await handleProtocol(host, STATUS_PROTOCOL, {
      requestSchema: statusBodySchema,
      responseSchema: taskStatusSchema,
      handler: async (body) => statusAnswer(await leases.task(body.auth, "status", {}), parts.inventory, checkpointBook(leases.ctx.inputs)),
      onError: onError(STATUS_PROTOCOL),
    }),
    await handleProtocol(host, LOGS_PROTOCOL, {
      requestSchema: logsBodySchema,
      responseSchema: logsAnswerSchema,
      timeoutMs: LOGS_TIMEOUT_MS,
      handler: async (body, context) => {
        const page = { fromSeq: body.fromSeq, waitMs: body.waitMs, limit: body.limit };
        return logsAnswer(await leases.task(body.auth, "logs", page), page, context.signal);
      },
      onError: onError(LOGS_PROTOCOL),
    }),
    await handleProtocol(host, CANCEL_PROTOCOL, {
      requestSchema: cancelBodySchema,
      responseSchema: cancelAnswerSchema,
      handler: (body) => leases.cancel(body.auth),
      onError: onError(CANCEL_PROTOCOL),
    }),
  ];
  return async () => {
    for (const stop of stops) await stop();
  };
}

/** What the renter sees of its lease's task: state, times, usage while it runs, the completion report. */
export async function statusAnswer(task: LeaseTaskView, inventory: Inventory, checkpoints?: CheckpointBook): Promise<TaskStatus> {
  const { record, handle, logs } = task;
  let unitSeconds = record.result?.unitSeconds ?? 0;
  let gpus: TaskStatus["gpus"] = [];
  if (handle && record.phase === "running") {
    const usage = await handle.usage();
    unitSeconds = usage.unitSeconds;
    const devices = new Map(inventory.units.map((unit) => [unit.id, unit.device]));
    gpus = (usage.gpus ?? []).slice(0, STATUS_MAX_GPUS).map((gpu) => ({
      device: devices.get(gpu.unitId) ?? gpu.unitId,
      utilizationPct: gpu.utilizationPct,
      memoryUsedMiB: gpu.memoryUsedMiB,
      temperatureC: gpu.temperatureC,
      powerW: gpu.powerDrawW,
    }));
  }
  return {
    leaseId: record.leaseId,
    state: record.state,
    startedAt: record.startedAt,
    endedAt: record.endedAt,
    heartbeatAt: Date.now(),
    unitSeconds,
    gpus,
    exitCode: record.exitCode,
    error: record.error,
    completion: record.completion,
    nextLogSeq: logs ? logs.read(Number.MAX_SAFE_INTEGER).nextSeq : record.nextLogSeq,
    // Only when there is one: a renter older than the field (strict schema) still parses a bundle task's status.
    ...(record.image ? { image: record.image } : {}),
    ...(record.outputCid ? { outputCid: record.outputCid } : {}),
    ...(await checkpointFields(record.leaseId, checkpoints)),
  };
}

/** The lease's newest signed checkpoint records and the latest snapshot error; nothing when there are neither (older renters' strict schema). */
async function checkpointFields(leaseId: bigint, book: CheckpointBook | undefined): Promise<Pick<TaskStatus, "checkpoints" | "checkpointError">> {
  if (!book) return {};
  const records = (await book.records(leaseId)).slice(-MAX_CHECKPOINTS_LISTED);
  const error = book.lastError(leaseId);
  return { ...(records.length ? { checkpoints: records } : {}), ...(error ? { checkpointError: error } : {}) };
}

/**
 * One page of a task's log from `fromSeq`: at most `limit` lines and LOGS_ANSWER_MAX_BYTES of
 * text. With nothing new yet and the task still running, waits up to `waitMs` for a line.
 */
export async function logsAnswer(
  task: LeaseTaskView,
  page: { fromSeq: number; waitMs: number; limit: number },
  signal: AbortSignal,
): Promise<{ lines: WireLogLine[]; nextSeq: number; done: boolean; firstAvailableSeq: number }> {
  const { record, logs: source } = task;
  if (!source) {
    const ended = record.phase === "ended";
    return { lines: [], nextSeq: ended ? record.nextLogSeq : 0, done: ended, firstAvailableSeq: ended ? record.nextLogSeq : 0 };
  }
  let read = source.read(page.fromSeq);
  if (read.lines.length === 0 && !source.closed() && page.waitMs > 0) {
    const wait = AbortSignal.any([signal, AbortSignal.timeout(page.waitMs)]);
    try {
      for await (const _line of source.follow(page.fromSeq, wait)) break;
    } catch {
      // timed out or the requester left: answer with what there is
    }
    read = source.read(page.fromSeq);
  }
  const lines: WireLogLine[] = [];
  let bytes = 0;
  for (const line of read.lines) {
    if (lines.length >= page.limit) break;
    bytes += Buffer.byteLength(line.text) + 64;
    if (lines.length > 0 && bytes > LOGS_ANSWER_MAX_BYTES) break;
    lines.push({ seq: line.seq, ts: line.at, stream: line.stream, text: line.text });
  }
  const firstAvailableSeq = read.lines[0]?.seq ?? read.nextSeq;
  const last = lines[lines.length - 1];
  const nextSeq = last ? last.seq + 1 : Math.min(Math.max(page.fromSeq, firstAvailableSeq), read.nextSeq);
  return { lines, nextSeq, done: source.closed() && nextSeq >= read.nextSeq, firstAvailableSeq };
}

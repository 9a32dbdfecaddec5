/**
 * The lease protocols a provider serves over libp2p: reserve, task, status, logs and cancel.
 * Bodies are parsed with the shared schemas of common/protocols/lease.ts before anything reads
 * them; every request about a lease is checked against the lease's renter by the controller.
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
} from "../../../common/protocols/lease.js";
import type { SuanliHost } from "../../../common/p2p/host.js";
import type { Logger } from "../../log/logger.js";
import type { Metrics } from "../../metrics/metrics.js";
import type { LeaseController } from "./leases.js";
import { LOGS_ANSWER_MAX_BYTES } from "./leases.js";
import { answerReserve, type ReserveContext } from "./reserve.js";

/** A task spec may carry up to 256 variables of up to 32 KiB: allow a generous body. */
export const TASK_MAX_MESSAGE_BYTES = 1024 * 1024;
/** A logs answer: LOGS_ANSWER_MAX_BYTES of text plus the JSON around it. */
export const LOGS_MAX_MESSAGE_BYTES = LOGS_ANSWER_MAX_BYTES * 2 + 64 * 1024;
/** Long-polls wait up to 20 s (logsBodySchema.waitMs) before answering. */
const LOGS_TIMEOUT_MS = 30_000;

/** Registers the five protocols; returns a function that unregisters them. */
export async function serveLeaseProtocols(
  host: SuanliHost,
  parts: { reserve: ReserveContext; leases: LeaseController; metrics: Metrics; logger: Logger },
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
      handler: (body) => leases.status(body.auth),
      onError: onError(STATUS_PROTOCOL),
    }),
    await handleProtocol(host, LOGS_PROTOCOL, {
      requestSchema: logsBodySchema,
      responseSchema: logsAnswerSchema,
      timeoutMs: LOGS_TIMEOUT_MS,
      handler: (body, context) => leases.logs(body.auth, { fromSeq: body.fromSeq, waitMs: body.waitMs, limit: body.limit }, context.signal),
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

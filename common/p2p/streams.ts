/**
 * Streaming protocols: like reqresp (one length-prefixed JSON request, one JSON answer in the
 * `{ ok, body | error }` envelope), but the stream stays open afterwards for the protocol's own
 * length-prefixed frames (file bytes, a forwarded TCP connection, a command's output). Used by
 * the task I/O protocols (common/protocols/task-io.ts).
 */
import type { Connection, Libp2p, PeerId, Stream } from "@libp2p/interface";
import { lpStream, type LengthPrefixedStream } from "@libp2p/utils";
import type { Multiaddr } from "@multiformats/multiaddr";
import { z } from "zod";
import { SuanliError } from "../errors.js";
import { stringifyPlain } from "../json.js";
import { describeIssues } from "../validation.js";
import {
  ERROR_NAME_PATTERN,
  InternalError,
  InvalidMessageError,
  PeerUnreachableError,
  ProtocolNotSupportedError,
  RequestTimeoutError,
  TooManyStreamsError,
  fromWireError,
  toWireError,
} from "./errors.js";

const encoder = new TextEncoder();
const decoder = new TextDecoder("utf-8", { fatal: true });

const envelopeSchema = z.union([
  z.strictObject({ ok: z.literal(true), body: z.unknown() }),
  z.strictObject({
    ok: z.literal(false),
    error: z.strictObject({
      name: z.string().regex(ERROR_NAME_PATTERN),
      message: z.string().max(2_000),
      details: z.string().max(4_000).optional(),
      metaMessages: z.array(z.string().max(500)).max(16).optional(),
      fields: z.array(z.string().max(200)).max(64).optional(),
    }),
  }),
]);

/** Encodes a JSON frame. */
export function jsonFrame(value: unknown): Uint8Array {
  return encoder.encode(stringifyPlain(value));
}

/** Decodes and validates a JSON frame; InvalidMessageError naming the field otherwise. */
export function parseJsonFrame<S extends z.ZodType>(schema: S, bytes: Uint8Array, what: string): z.output<S> {
  let value: unknown;
  try {
    value = JSON.parse(decoder.decode(bytes));
  } catch {
    throw new InvalidMessageError(`The ${what} is not valid UTF-8 JSON`);
  }
  const result = schema.safeParse(value);
  if (result.success) return result.data as z.output<S>;
  const issues = describeIssues(schema, result.error);
  throw new InvalidMessageError(`Invalid ${what}: ${issues.map((issue) => `${issue.path || "(root)"}: ${issue.message}`).join("; ")}`.slice(0, 1_900));
}

export type StreamSession = {
  lp: LengthPrefixedStream<Stream>;
  stream: Stream;
  connection: Connection;
  peer: PeerId;
  /** Writes the success answer; after it the handler owns the stream. */
  accept(body: unknown): Promise<void>;
};

export type HandleStreamOptions<Req extends z.ZodType> = {
  requestSchema: Req;
  /** Largest control frame (request and answer) and data frame, bytes. */
  maxFrameBytes: number;
  /** Deadline for the request frame and the answer, ms (default 10 s). */
  requestTimeoutMs?: number;
  /** Concurrent streams of this protocol per peer (default 64). */
  maxInboundStreamsPerPeer?: number;
  /** Validates, authorizes, answers with `session.accept(body)` and then streams. Throwing before accept answers the error. */
  handler: (request: z.output<Req>, session: StreamSession) => Promise<void>;
  onError?: (error: SuanliError, peer: PeerId) => void;
};

/** Serves a streaming protocol until the returned function is called. */
export async function handleStreamProtocol<Req extends z.ZodType>(
  host: Pick<Libp2p, "handle" | "unhandle">,
  protocolId: string,
  options: HandleStreamOptions<Req>,
): Promise<() => Promise<void>> {
  const timeoutMs = options.requestTimeoutMs ?? 10_000;
  const perPeer = options.maxInboundStreamsPerPeer ?? 64;
  const open = new Map<string, number>();
  const serve = async (stream: Stream, connection: Connection): Promise<void> => {
    const peer = connection.remotePeer;
    const key = peer.toString();
    const count = (open.get(key) ?? 0) + 1;
    open.set(key, count);
    const lp = lpStream(stream, { maxDataLength: options.maxFrameBytes });
    let accepted = false;
    try {
      if (count > perPeer) throw new TooManyStreamsError(`At most ${perPeer} concurrent ${protocolId} streams per peer`);
      let raw: Uint8Array;
      try {
        raw = (await lp.read({ signal: AbortSignal.timeout(timeoutMs) })).subarray();
      } catch (error) {
        throw new RequestTimeoutError(`No complete request within ${timeoutMs} ms`, { cause: error });
      }
      const request = parseJsonFrame(options.requestSchema, raw, "request");
      await options.handler(request, {
        lp,
        stream,
        connection,
        peer,
        accept: async (body) => {
          accepted = true;
          await lp.write(jsonFrame({ ok: true, body }), { signal: AbortSignal.timeout(timeoutMs) });
        },
      });
    } catch (error) {
      const failure = error instanceof SuanliError ? error : new InternalError("The peer failed to handle the request", { cause: error });
      options.onError?.(failure, peer);
      if (!accepted) {
        try {
          await lp.write(jsonFrame({ ok: false, error: toWireError(failure) }), { signal: AbortSignal.timeout(1_000) });
          await stream.close({ signal: AbortSignal.timeout(1_000) });
        } catch {
          stream.abort(failure);
        }
      } else {
        stream.abort(failure);
      }
    } finally {
      const left = (open.get(key) ?? 1) - 1;
      if (left <= 0) open.delete(key);
      else open.set(key, left);
    }
  };
  await host.handle(protocolId, serve, { maxInboundStreams: perPeer * 2 + 2 });
  return async () => {
    await host.unhandle(protocolId);
  };
}

/**
 * Opens a streaming exchange: sends the request, reads the answer (throws the peer's error by
 * name), and returns the stream for the protocol's frames.
 */
export async function openStreamProtocol<Res extends z.ZodType>(
  host: Pick<Libp2p, "dialProtocol">,
  peer: PeerId | Multiaddr,
  protocolId: string,
  body: unknown,
  options: { responseSchema: Res; maxFrameBytes: number; timeoutMs?: number; signal?: AbortSignal },
): Promise<{ answer: z.output<Res>; lp: LengthPrefixedStream<Stream>; stream: Stream }> {
  const timeoutMs = options.timeoutMs ?? 15_000;
  const timeout = AbortSignal.timeout(timeoutMs);
  const signal = options.signal ? AbortSignal.any([timeout, options.signal]) : timeout;
  let stream: Stream;
  try {
    stream = await host.dialProtocol(peer, protocolId, { signal });
  } catch (error) {
    const name = (error as Error)?.name;
    if (name === "UnsupportedProtocolError" || name === "ProtocolError")
      throw new ProtocolNotSupportedError(`Peer ${peer.toString()} does not serve ${protocolId}`, { cause: error });
    if (signal.aborted) throw new RequestTimeoutError(`Could not open ${protocolId} to ${peer.toString()} within ${timeoutMs} ms`);
    throw new PeerUnreachableError(`Cannot reach peer ${peer.toString()}`, { cause: error });
  }
  const lp = lpStream(stream, { maxDataLength: options.maxFrameBytes });
  try {
    await lp.write(jsonFrame(body), { signal });
    let raw: Uint8Array;
    try {
      raw = (await lp.read({ signal })).subarray();
    } catch (error) {
      if (signal.aborted) throw new RequestTimeoutError(`No answer to ${protocolId} within ${timeoutMs} ms`);
      throw new PeerUnreachableError(`The stream broke before the answer was complete`, { cause: error });
    }
    const envelope = parseJsonFrame(envelopeSchema, raw, "answer");
    if (!envelope.ok) throw fromWireError(envelope.error, peer.toString());
    return { answer: parseJsonFrame(options.responseSchema, jsonFrame(envelope.body), `${protocolId} answer`), lp, stream };
  } catch (error) {
    stream.abort(error instanceof Error ? error : new Error(String(error)));
    throw error;
  }
}

/**
 * Request/response over libp2p streams, the plumbing every Suanli protocol uses: one
 * length-prefixed JSON request, one length-prefixed JSON answer, then the stream closes.
 *
 * - Both sides validate with zod: the server parses the request with the protocol's request
 *   schema and checks its own answer against the response schema; the client checks the answer.
 * - Every read and write has a deadline; every message has a size cap.
 * - A peer may hold only so many streams of one protocol open with us at once.
 * - Failures are answered, not dropped: `{ ok: false, error: { name, message, ... } }`, which the
 *   client throws as an error with the same `name` (see errors.ts).
 */
import type { Connection, Libp2p, PeerId, Stream } from "@libp2p/interface";
import { lpStream } from "@libp2p/utils";
import type { Multiaddr } from "@multiformats/multiaddr";
import { z } from "zod";
import { SuanliError } from "../errors.js";
import { stringifyPlain } from "../json.js";
import { describeIssues, parseInput } from "../validation.js";
import {
  ERROR_NAME_PATTERN,
  InternalError,
  InvalidMessageError,
  MessageTooLargeError,
  PeerUnreachableError,
  ProtocolNotSupportedError,
  RequestTimeoutError,
  TooManyStreamsError,
  fromWireError,
  toWireError,
  type WireError,
} from "./errors.js";

/** Default cap on one request or answer. Protocols that move more say so. */
export const DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024;
/** Default deadline of one exchange (dial, write, handler, read). */
export const DEFAULT_TIMEOUT_MS = 10_000;
/**
 * Default deadline for reading the request, whatever the exchange's deadline: a protocol whose
 * handler may work for minutes (a challenge) still gets its request within seconds, so an idle
 * stream cannot hold a slot for the whole exchange.
 */
export const DEFAULT_REQUEST_READ_TIMEOUT_MS = 10_000;
/** Default number of concurrent inbound streams of one protocol from one peer. */
export const DEFAULT_MAX_INBOUND_STREAMS_PER_PEER = 4;
/** How long a server tries to deliver an error answer once the exchange's own deadline has passed. */
const ERROR_WRITE_GRACE_MS = 1_000;
/** Answers are bounded too: a handler that builds a larger one has a bug, reported as InternalError. */
const MAX_ANSWER_BYTES = 16 * 1024 * 1024;

const wireErrorSchema = z.strictObject({
  name: z.string().regex(ERROR_NAME_PATTERN),
  message: z.string().max(2_000),
  details: z.string().max(4_000).optional(),
  metaMessages: z.array(z.string().max(500)).max(16).optional(),
  fields: z.array(z.string().max(200)).max(64).optional(),
});

const envelopeSchema = z.union([z.strictObject({ ok: z.literal(true), body: z.unknown() }), z.strictObject({ ok: z.literal(false), error: wireErrorSchema })]);
type Envelope = { ok: true; body: unknown } | { ok: false; error: WireError };

export type RequestContext = {
  /** The peer that sent the request (authenticated by Noise). */
  peer: PeerId;
  connection: Connection;
  /** Aborted when the exchange's deadline passes. */
  signal: AbortSignal;
};

export type HandleProtocolOptions<Req extends z.ZodType, Res extends z.ZodType> = {
  requestSchema: Req;
  responseSchema: Res;
  /** Answers one request. Throw a SuanliError to answer with it; anything else answers InternalError. */
  handler: (request: z.output<Req>, context: RequestContext) => Promise<z.input<Res>> | z.input<Res>;
  /** Largest request read, in bytes (default 64 KiB). */
  maxMessageBytes?: number;
  /** Deadline of the whole exchange on this side, in ms (default 10 s). */
  timeoutMs?: number;
  /** Deadline for reading the request, in ms (default: the smaller of timeoutMs and 10 s). */
  requestTimeoutMs?: number;
  /** Concurrent streams of this protocol one peer may hold open with us (default 4). */
  maxInboundStreamsPerPeer?: number;
  /** Called with every failure the handler answered (for logs and metrics). */
  onError?: (error: SuanliError, peer: PeerId) => void;
};

type Handling = Pick<Libp2p, "handle" | "unhandle">;
type Dialing = Pick<Libp2p, "dialProtocol">;

const encoder = new TextEncoder();
const decoder = new TextDecoder("utf-8", { fatal: true });

function encode(value: unknown): Uint8Array {
  return encoder.encode(stringifyPlain(value));
}

function decodeJson(bytes: Uint8Array, what: string): unknown {
  let text: string;
  try {
    text = decoder.decode(bytes);
  } catch {
    throw new InvalidMessageError(`The ${what} is not valid UTF-8`);
  }
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new InvalidMessageError(`The ${what} is not valid JSON`, { details: (error as Error).message });
  }
}

function parseMessage<S extends z.ZodType>(schema: S, value: unknown, what: string): z.output<S> {
  const result = schema.safeParse(value);
  if (result.success) return result.data as z.output<S>;
  const issues = describeIssues(schema, result.error);
  throw new InvalidMessageError(`Invalid ${what}: ${issues.map((issue) => `${issue.path || "(root)"}: ${issue.message}`).join("; ")}`.slice(0, 1_900), {
    fields: issues.map((issue) => issue.path).slice(0, 64),
  });
}

function isAbort(error: unknown, signal: AbortSignal): boolean {
  return signal.aborted || (error as Error)?.name === "AbortError" || (error as Error)?.name === "TimeoutError";
}

/** Maps what libp2p's framing throws to our errors. */
function streamError(error: unknown, signal: AbortSignal, what: string, maxBytes: number, timeoutMs: number): SuanliError {
  if (error instanceof SuanliError) return error;
  const name = (error as Error)?.name;
  if (name === "InvalidDataLengthError" || name === "InvalidDataLengthLengthError") {
    return new MessageTooLargeError(`The ${what} is larger than ${maxBytes} bytes`);
  }
  if (isAbort(error, signal)) return new RequestTimeoutError(`No complete ${what} within ${timeoutMs} ms`);
  if (name === "InvalidMessageLengthError") return new InvalidMessageError(`The ${what} has an invalid length prefix`);
  return new PeerUnreachableError(`The stream broke before the ${what} was complete`, { cause: error });
}

function raceSignal<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason as Error);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason as Error);
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(error as Error);
      },
    );
  });
}

/**
 * Serves a request/response protocol on `host` until the returned `unhandle` is called.
 *
 * @example
 * import { z } from "zod";
 * import { handleProtocol } from "suanli/common/p2p/reqresp";
 * const stop = await handleProtocol(host, "/suanli/echo/1.0.0", {
 *   requestSchema: z.strictObject({ text: z.string().max(100) }),
 *   responseSchema: z.strictObject({ text: z.string() }),
 *   handler: ({ text }) => ({ text }),
 * });
 * // later: await stop();
 */
export async function handleProtocol<Req extends z.ZodType, Res extends z.ZodType>(
  host: Handling,
  protocolId: string,
  options: HandleProtocolOptions<Req, Res>,
): Promise<() => Promise<void>> {
  const maxBytes = options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const readTimeoutMs = Math.min(timeoutMs, options.requestTimeoutMs ?? DEFAULT_REQUEST_READ_TIMEOUT_MS);
  const perPeer = options.maxInboundStreamsPerPeer ?? DEFAULT_MAX_INBOUND_STREAMS_PER_PEER;
  const open = new Map<string, number>();

  const serve = async (stream: Stream, connection: Connection): Promise<void> => {
    const peer = connection.remotePeer;
    const key = peer.toString();
    // The exchange ends at its deadline, or earlier when the peer resets or closes the stream:
    // a handler never works on for a requester that is gone.
    const gone = new AbortController();
    const onClose = () => gone.abort(new PeerUnreachableError("The requester closed the stream"));
    stream.addEventListener("close", onClose, { once: true });
    const signal = AbortSignal.any([AbortSignal.timeout(timeoutMs), gone.signal]);
    const count = (open.get(key) ?? 0) + 1;
    open.set(key, count);
    const lp = lpStream(stream, { maxDataLength: maxBytes });
    let answer: Envelope;
    try {
      if (count > perPeer) {
        throw new TooManyStreamsError(`At most ${perPeer} concurrent ${protocolId} streams per peer`, {
          metaMessages: ["Wait for an answer before sending the next request."],
        });
      }
      let raw: Uint8Array;
      const readSignal = AbortSignal.any([signal, AbortSignal.timeout(readTimeoutMs)]);
      try {
        raw = (await lp.read({ signal: readSignal })).subarray();
      } catch (error) {
        // A request cut short (the peer closed its side before the length its prefix announced)
        // is a malformed message, not a network failure.
        if ((error as Error)?.name === "UnexpectedEOFError") throw new InvalidMessageError("The request ended before the length its prefix announced");
        throw streamError(error, readSignal, "request", maxBytes, readTimeoutMs);
      }
      const request = parseMessage(options.requestSchema, decodeJson(raw, "request"), "request");
      let result: unknown;
      try {
        result = await raceSignal(Promise.resolve(options.handler(request, { peer, connection, signal })), signal);
      } catch (error) {
        if (error instanceof SuanliError) throw error;
        if (isAbort(error, signal)) throw new RequestTimeoutError(`No answer within ${timeoutMs} ms`);
        throw new InternalError("The peer failed to handle the request", { cause: error });
      }
      const checked = options.responseSchema.safeParse(result);
      if (!checked.success) {
        throw new InternalError("The peer produced an answer that does not match the protocol", {
          details: describeIssues(options.responseSchema, checked.error)
            .map((issue) => `${issue.path}: ${issue.message}`)
            .join("; "),
        });
      }
      answer = { ok: true, body: result };
    } catch (error) {
      const failure = error instanceof SuanliError ? error : new InternalError("The peer failed to handle the request", { cause: error });
      options.onError?.(failure, peer);
      answer = { ok: false, error: toWireError(failure) };
    }
    try {
      let bytes = encode(answer);
      if (answer.ok && bytes.byteLength > MAX_ANSWER_BYTES) {
        const failure = new InternalError("The answer is too large for the protocol");
        options.onError?.(failure, peer);
        bytes = encode({ ok: false, error: toWireError(failure) });
      }
      // An error answer gets a short grace period of its own: it matters most exactly when the
      // exchange's deadline has already passed.
      const writeSignal = answer.ok ? signal : AbortSignal.timeout(ERROR_WRITE_GRACE_MS);
      await lp.write(bytes, { signal: writeSignal });
      await stream.close({ signal: writeSignal });
    } catch (error) {
      stream.abort(error instanceof Error ? error : new Error(String(error)));
    } finally {
      stream.removeEventListener("close", onClose);
      const left = (open.get(key) ?? 1) - 1;
      if (left <= 0) open.delete(key);
      else open.set(key, left);
    }
  };
  await host.handle(protocolId, serve, {
    // libp2p's own per-connection cap sits above ours, so that the stream over our cap still gets
    // a TooManyStreamsError answer; beyond libp2p's cap streams are reset.
    maxInboundStreams: perPeer * 2 + 2,
  });
  return async () => {
    await host.unhandle(protocolId);
  };
}

export type RequestOptions<Req extends z.ZodType, Res extends z.ZodType> = {
  /** Validates the body before anything is sent (InvalidInputError naming the field). */
  requestSchema?: Req;
  responseSchema: Res;
  /** Deadline of the whole exchange, in ms (default 10 s). */
  timeoutMs?: number;
  /** Largest answer read, in bytes (default 64 KiB). */
  maxMessageBytes?: number;
  signal?: AbortSignal;
};

/**
 * Sends one request and returns the validated answer. Throws the peer's error (same `name`),
 * RequestTimeoutError, MessageTooLargeError, InvalidMessageError (bad answer),
 * ProtocolNotSupportedError or PeerUnreachableError.
 *
 * @example
 * import { z } from "zod";
 * import { request } from "suanli/common/p2p/reqresp";
 * const answer = await request(host, peerId, "/suanli/echo/1.0.0", { text: "hi" }, {
 *   responseSchema: z.strictObject({ text: z.string() }),
 *   timeoutMs: 5_000,
 * });
 */
export async function request<Req extends z.ZodType, Res extends z.ZodType>(
  host: Dialing,
  peer: PeerId | Multiaddr,
  protocolId: string,
  body: Req extends z.ZodType ? z.input<Req> : unknown,
  options: RequestOptions<Req, Res>,
): Promise<z.output<Res>> {
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const maxBytes = options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
  // Checked here so a bad body fails before anything is sent; the body itself goes out as given
  // (the server parses it with the same schema).
  if (options.requestSchema) parseInput(options.requestSchema, body, `${protocolId} request`);
  const payload = body;
  const timeout = AbortSignal.timeout(timeoutMs);
  const signal = options.signal ? AbortSignal.any([timeout, options.signal]) : timeout;
  const peerName = peer.toString();

  let stream: Stream;
  try {
    stream = await host.dialProtocol(peer, protocolId, { signal });
  } catch (error) {
    const name = (error as Error)?.name;
    if (name === "UnsupportedProtocolError" || name === "ProtocolError") {
      throw new ProtocolNotSupportedError(`Peer ${peerName} does not serve ${protocolId}`, { cause: error });
    }
    if (isAbort(error, signal)) throw new RequestTimeoutError(`Could not open ${protocolId} to ${peerName} within ${timeoutMs} ms`);
    throw new PeerUnreachableError(`Cannot reach peer ${peerName}`, { cause: error });
  }

  const lp = lpStream(stream, { maxDataLength: maxBytes });
  try {
    try {
      await lp.write(encode(payload), { signal });
    } catch (error) {
      throw streamError(error, signal, "request", maxBytes, timeoutMs);
    }
    let raw: Uint8Array;
    try {
      raw = (await lp.read({ signal })).subarray();
    } catch (error) {
      throw streamError(error, signal, "answer", maxBytes, timeoutMs);
    }
    const envelope = parseMessage(envelopeSchema, decodeJson(raw, "answer"), "answer") as Envelope;
    await stream.close({ signal }).catch(() => undefined);
    if (!envelope.ok) throw fromWireError(envelope.error, peerName);
    return parseMessage(options.responseSchema, envelope.body, `${protocolId} answer`);
  } catch (error) {
    stream.abort(error instanceof Error ? error : new Error(String(error)));
    throw error;
  }
}

/**
 * Errors of the request/response layer. Every one has a stable `name`. A handler's error travels
 * to the requester as `{ name, message, details?, metaMessages?, fields? }` and is thrown there
 * again as an error with the same `name`: the known classes below are rebuilt as themselves,
 * any other name as a RemoteError carrying that name.
 */
import { InvalidInputError, SuanliError, type SuanliErrorParameters } from "../errors.js";

/** A read or write did not finish before its deadline. */
export class RequestTimeoutError extends SuanliError {
  override name = "RequestTimeoutError";
}

/** A message was larger than the protocol allows. */
export class MessageTooLargeError extends SuanliError {
  override name = "MessageTooLargeError";
}

/** A message was not valid JSON, or did not match the protocol's schema. */
export class InvalidMessageError extends SuanliError {
  override name = "InvalidMessageError";
  /** The offending fields as dotted paths, when the schema named them. */
  readonly fields: string[];
  constructor(shortMessage: string, parameters: SuanliErrorParameters & { fields?: string[] } = {}) {
    super(shortMessage, parameters);
    this.fields = parameters.fields ?? [];
  }
}

/** The remote peer already has as many streams of this protocol open with us as it allows. */
export class TooManyStreamsError extends SuanliError {
  override name = "TooManyStreamsError";
}

/** The remote peer does not speak the protocol (or not this version of it). */
export class ProtocolNotSupportedError extends SuanliError {
  override name = "ProtocolNotSupportedError";
}

/** The remote peer could not be reached, or the stream broke before an answer arrived. */
export class PeerUnreachableError extends SuanliError {
  override name = "PeerUnreachableError";
}

/** The handler failed in a way it did not explain; details stay on the serving node. */
export class InternalError extends SuanliError {
  override name = "InternalError";
}

/** An error answered by the remote peer whose name has no class here; `name` is the remote one. */
export class RemoteError extends SuanliError {
  override name: string;
  /** The peer that answered. */
  readonly peer: string;
  /** Fields the remote named as wrong (for input errors). */
  readonly fields: string[];
  constructor(name: string, shortMessage: string, peer: string, parameters: SuanliErrorParameters & { fields?: string[] } = {}) {
    super(shortMessage, parameters);
    this.name = name;
    this.peer = peer;
    this.fields = parameters.fields ?? [];
  }
}

/** The wire form of an error answer. */
export type WireError = {
  name: string;
  message: string;
  details?: string | undefined;
  metaMessages?: string[] | undefined;
  fields?: string[] | undefined;
};

/** Error names are identifiers ending in "Error"; anything else is replaced, never echoed. */
export const ERROR_NAME_PATTERN = /^[A-Z][A-Za-z0-9]{0,62}Error$/;

/** Turns an error thrown by a handler into its wire form. Unknown errors are not described. */
export function toWireError(error: unknown): WireError {
  // What went wrong inside the handler stays on this node (logs); the peer learns only that it did.
  if (error instanceof InternalError) return { name: "InternalError", message: error.shortMessage };
  if (error instanceof SuanliError && ERROR_NAME_PATTERN.test(error.name)) {
    const fields = error instanceof InvalidInputError || error instanceof InvalidMessageError ? error.fields : undefined;
    return {
      name: error.name,
      message: error.shortMessage,
      details: error.details,
      metaMessages: error.metaMessages,
      fields,
    };
  }
  return { name: "InternalError", message: "The peer failed to handle the request" };
}

const KNOWN: Record<string, (wire: WireError) => SuanliError> = {
  RequestTimeoutError: (w) => new RequestTimeoutError(w.message, { details: w.details, metaMessages: w.metaMessages }),
  MessageTooLargeError: (w) => new MessageTooLargeError(w.message, { details: w.details, metaMessages: w.metaMessages }),
  InvalidMessageError: (w) => new InvalidMessageError(w.message, { details: w.details, metaMessages: w.metaMessages, fields: w.fields }),
  TooManyStreamsError: (w) => new TooManyStreamsError(w.message, { details: w.details, metaMessages: w.metaMessages }),
  ProtocolNotSupportedError: (w) => new ProtocolNotSupportedError(w.message, { details: w.details, metaMessages: w.metaMessages }),
  InternalError: (w) => new InternalError(w.message, { details: w.details, metaMessages: w.metaMessages }),
};

/** Rebuilds the error a peer answered with. */
export function fromWireError(wire: WireError, peer: string): SuanliError {
  const known = KNOWN[wire.name];
  if (known) return known(wire);
  return new RemoteError(wire.name, wire.message, peer, { details: wire.details, metaMessages: wire.metaMessages, fields: wire.fields });
}

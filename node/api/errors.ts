/**
 * Errors the HTTP API answers with. Each has a stable `name` (what clients match on) and the
 * HTTP status it maps to; the body is `{ error: { name, message, fields? } }` (common/api/market.ts).
 */
import { InvalidInputError, SuanliError, type SuanliErrorParameters } from "../../common/errors.js";
import type { InputIssue } from "../../common/validation.js";

export class ApiError extends SuanliError {
  override name = "ApiError";
  constructor(
    readonly statusCode: number,
    shortMessage: string,
    parameters?: SuanliErrorParameters,
  ) {
    super(shortMessage, parameters);
  }
}

/** A query string, path parameter or body did not match its schema (400). Keeps each issue. */
export class RequestInputError extends InvalidInputError {
  // Same stable name as everywhere else in Suanli: a 400 always reads InvalidInputError.
  override name = "InvalidInputError";
  readonly statusCode = 400;
  constructor(
    what: string,
    readonly issues: InputIssue[],
  ) {
    super(what, issues);
  }
}

export class OfferNotFoundError extends ApiError {
  override name = "OfferNotFoundError";
  constructor(key: string) {
    super(404, `No live offer ${key}`, { metaMessages: ["Offers expire; list the live ones with GET /v1/offers."] });
  }
}

export class ProviderNotFoundError extends ApiError {
  override name = "ProviderNotFoundError";
  constructor(address: string) {
    super(404, `No provider registered at ${address}`);
  }
}

export class MachineNotFoundError extends ApiError {
  override name = "MachineNotFoundError";
  constructor(machineId: number) {
    super(404, `No machine ${machineId} in the registry`);
  }
}

export class LeaseNotFoundError extends ApiError {
  override name = "LeaseNotFoundError";
  constructor(id: bigint) {
    super(404, `No lease ${id}`);
  }
}

export class RouteNotFoundError extends ApiError {
  override name = "RouteNotFoundError";
  constructor(method: string, url: string) {
    super(404, `No route ${method} ${url.split("?")[0]}; the routes are listed in /openapi.json`);
  }
}

export class InvalidSignatureError extends ApiError {
  override name = "InvalidSignatureError";
  constructor(message: string) {
    super(401, message);
  }
}

/** A session delegation refused (expired, revoked, out of its scope, another renter's): 401 and the same name as a bad signature for clients, counted apart (`delegation`) in the metrics. */
export class DelegationRefusedError extends InvalidSignatureError {}

export class StaleSignatureError extends ApiError {
  override name = "StaleSignatureError";
  constructor(message: string) {
    super(401, message);
  }
}

export class ReplayedRequestError extends ApiError {
  override name = "ReplayedRequestError";
  constructor() {
    super(409, "This signed request was already received; sign a new one with a fresh nonce");
  }
}

export class RateLimitedError extends ApiError {
  override name = "RateLimitedError";
  constructor(retryAfterSeconds: number, max: number) {
    super(429, `Rate limit of ${max} requests per minute exceeded; retry in ${retryAfterSeconds} s (see Retry-After)`);
  }
}

export class TooManyStreamsError extends ApiError {
  override name = "TooManyStreamsError";
  constructor(message: string, statusCode = 429) {
    super(statusCode, message);
  }
}

export class OutputTooLargeError extends ApiError {
  override name = "OutputTooLargeError";
  constructor(message: string) {
    super(413, message, { metaMessages: ["Download it with the Node SDK or the CLI over libp2p (`npx suanli output <taskId> --out DIR`)."] });
  }
}

export class ServiceUnavailableError extends ApiError {
  override name = "ServiceUnavailableError";
  constructor(message: string) {
    super(503, message);
  }
}

export class ExplorerNotBuiltError extends ApiError {
  override name = "ExplorerNotBuiltError";
  constructor() {
    super(503, "The explorer bundle is missing; run `npm run build` on this node");
  }
}

export class ConsoleNotBuiltError extends ApiError {
  override name = "ConsoleNotBuiltError";
  constructor() {
    super(503, "The renter console bundle is missing; run `npm run build` on this node");
  }
}

/** The provider of a relayed request could not be dialled, or does not serve the protocol (502). */
export class ProviderUnreachableError extends ApiError {
  override name = "ProviderUnreachableError";
  constructor(message: string) {
    super(502, message, { metaMessages: ["The provider's node may be down; try again later, or another offer."] });
  }
}

/**
 * The provider's node is up but rents nothing: it publishes offers and does not serve the reserve
 * protocol (a node without a provider agent, such as the devnet's `--demo-offers` providers) (409).
 */
export class ProviderNotRentingError extends ApiError {
  override name = "ProviderNotRentingError";
  constructor(message: string) {
    super(409, message, { metaMessages: ["Its offers can be browsed but not rented: choose another offer (on a devnet, start a provider as in the README's Provider section)."] });
  }
}

/** The provider did not answer a relayed request before the deadline (504). */
export class ProviderTimeoutError extends ApiError {
  override name = "ProviderTimeoutError";
  constructor(message: string) {
    super(504, message);
  }
}

/**
 * The HTTP status of an error a provider answered with, by its name: what the answer means (nothing
 * there, the wrong state, bad input), not 502 "bad gateway", which said the provider failed when it
 * answered correctly, e.g. "no output folder yet" (issue #40 item 6). A name not listed here (a newer
 * provider's, or an answer that breaks the protocol) stays 502.
 */
export const PROVIDER_ANSWER_STATUS: Readonly<Record<string, number>> = {
  InvalidInputError: 400,
  RenterAuthError: 403,
  LeaseNotFoundError: 404,
  UnknownLeaseError: 404,
  OutputNotAvailableError: 404,
  PortNotDeclaredError: 404,
  LeaseStateError: 409,
  ReservationConflictError: 409,
  TaskNotRunningError: 409,
  TaskPortClosedError: 409,
  TaskStateError: 409,
  UnitsBusyError: 409,
  TaskIoLimitError: 429,
  TaskIoUnavailableError: 503,
};

/**
 * The provider answered a relayed request with an error. `name` is the provider's own error name,
 * passed through so that a client can match on it exactly as a libp2p client would; the status is
 * the name's meaning (PROVIDER_ANSWER_STATUS), 502 for a name this node does not know.
 */
export class ProviderAnsweredError extends ApiError {
  override name: string;
  constructor(name: string, message: string, statusCode = PROVIDER_ANSWER_STATUS[name] ?? 502) {
    // The name is the error's own (clients print "name: message"): not repeated in the message (issue #40 item 6).
    super(statusCode, `The provider answered: ${message}`);
    this.name = name;
  }
}

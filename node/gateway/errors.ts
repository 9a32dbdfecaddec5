/**
 * The gateway's answers that are not the task's: each error names its HTTP status; the body is
 * `{ error: { name, message, reason? } }` as the API's (node/api/errors.ts).
 */
import type { TokenRefusal } from "../../common/endpoints.js";
import { ApiError } from "../api/errors.js";

/** 404: no endpoint with this id on this gateway (never registered, deleted, or expired). */
export class EndpointNotFoundError extends ApiError {
  override name = "EndpointNotFoundError";
  constructor(endpointId: string) {
    super(404, `No endpoint ${endpointId} on this gateway (never registered here, deleted, or expired)`);
  }
}

/** 403: a registration or management request the renter's signatures do not back. */
export class EndpointRefusedError extends ApiError {
  override name = "EndpointRefusedError";
  constructor(message: string, options: { cause?: unknown } = {}) {
    super(403, message, options);
  }
}

const TOKEN_REASONS: Record<TokenRefusal, string> = {
  missing: "this endpoint is not public: send `Authorization: Bearer <token>` with a token its renter minted",
  malformed: "the bearer token is not a Suanli endpoint token",
  "bad-signature": "the bearer token is not signed by this endpoint's token signer",
  expired: "the bearer token has expired",
  revoked: "the bearer token was revoked by the endpoint's renter",
  "wrong-endpoint": "the bearer token is for another endpoint",
};

/** 401: a request to a token endpoint without a token it accepts; `reason` says why. */
export class TokenRefusedError extends ApiError {
  override name = "TokenRefusedError";
  constructor(readonly reason: TokenRefusal) {
    super(401, `Unauthorized: ${TOKEN_REASONS[reason]}`);
  }
}

/** 503 with Retry-After: no lease of the endpoint could take the request (ended, provider unreachable or refusing, task not listening). */
export class UpstreamUnavailableError extends ApiError {
  override name = "UpstreamUnavailableError";
  constructor(message: string, options: { cause?: unknown } = {}) {
    super(503, message, options);
  }
}

/** 504: the task did not answer in time. */
export class UpstreamTimeoutError extends ApiError {
  override name = "UpstreamTimeoutError";
  constructor(message: string) {
    super(504, message);
  }
}

/** 429 with Retry-After: a token made more requests this minute than `gateway.tokenRateLimitPerMinute`. */
export class TokenRateLimitedError extends ApiError {
  override name = "TokenRateLimitedError";
  constructor(
    limit: number,
    readonly retryAfterSeconds: number,
  ) {
    super(429, `This token made ${limit} requests this minute, the gateway's limit per token; try again in ${retryAfterSeconds} s`);
  }
}

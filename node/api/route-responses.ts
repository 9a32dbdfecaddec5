/**
 * The error answers the HTTP API's routes share, as OpenAPI response specs.
 */
import { apiErrorSchema } from "../../common/api/market.js";
import type { ResponseSpec } from "./route.js";

export const error = (description: string): ResponseSpec => ({ description, schema: apiErrorSchema });
export const rateLimited: ResponseSpec = {
  description: "Rate limit exceeded",
  schema: apiErrorSchema,
  headers: { "Retry-After": "Seconds until the client may send again" },
};
export const badInput = error("A query parameter, path parameter or body field is invalid; `fields` names each one");
export const tooLarge = error("The request body is larger than api.maxBodyBytes");
export const badMediaType = error("The body is not application/json");
export const badSignature = error("The signature is not the renter's, or issuedAt is too far from the node's clock");
export const providerUnreachable = error(
  "The provider could not be reached (ProviderUnreachableError), or its answer broke the protocol or named an error this node does not know: `name` is the provider's own",
);
/** A provider's answered errors, by what they mean (node/api/errors.ts PROVIDER_ANSWER_STATUS). */
export const providerRefused = error("The provider answered that the renter's signature is not the lease's renter (RenterAuthError)");
export const providerWrongState = error(
  "The provider answered that the task is not in a state for this (TaskNotRunningError, TaskStateError, TaskPortClosedError, UnitsBusyError, ReservationConflictError, LeaseStateError)",
);
export const providerTimeout = error("The provider did not answer in time (ProviderTimeoutError)");
export const noRelay = error("This node cannot relay (no LeaseMarket in its deployment, or no p2p host)");

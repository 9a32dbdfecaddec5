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
export const providerUnreachable = error("The provider could not be reached (ProviderUnreachableError), or it answered with an error: `name` is the provider's own");
export const providerTimeout = error("The provider did not answer in time (ProviderTimeoutError)");
export const noRelay = error("This node cannot relay (no LeaseMarket in its deployment, or no p2p host)");

/**
 * The HTTP API's wire schemas, shared by the node's server and the SDK's browser client.
 * Amounts are bigints in code and decimal strings in JSON (zod codecs): decode responses with
 * `schema.decode(json)`.
 */
export * from "./primitives.js";
export * from "./offers.js";
export * from "./chain.js";
export * from "./market.js";
export * from "./events.js";
export * from "./relay.js";
export * from "./console.js";
export * from "./data.js";

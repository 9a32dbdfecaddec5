/**
 * The matching engine of Suanli, shared by the SDK (in-process matching and allocation) and the
 * node (which answers match requests from its offer book). Never imports node/ or sdk/.
 * See docs/matching.md.
 */
export * from "./allocator.js";
export { type ConstraintId, CONSTRAINT_ORDER, type Exclusions } from "./constraints.js";
export * from "./engine.js";
export * from "./entry.js";
export * from "./explain.js";
export * from "./gpu-type.js";
export * from "./handshake.js";
export * from "./money.js";
export * from "./options.js";
export * from "./request.js";
export * from "./reservations.js";
export { knowledgeFromValidated, type ReputationCounters } from "./knowledge.js";
export * from "./offer-index.js";

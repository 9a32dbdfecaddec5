/**
 * The attestor's memory phase (entry point of node/attest/memory/): the state machine
 * (memory-attestor.ts) and its run inside a challenge session (memory-exchange.ts). The provider's
 * side is runner/memory-runner.ts. Depends on nothing else in node/attest but errors.ts.
 */
export { runMemoryPhase } from "./memory-exchange.js";
export { MemoryPhase, type MemoryOutcome } from "./memory-attestor.js";
export { memoryOptionsSchema, type MemoryOptions } from "./options.js";

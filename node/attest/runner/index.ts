/**
 * The runner (entry point of node/attest/runner/): what computes a provider's answers to challenges,
 * the GEMM phase (CpuRunner on worker threads, or ExternalRunner: a program speaking the runner
 * contract, contract.ts) and the memory phase (CpuMemoryRunner, and MemoryResponder that drives a
 * runner through the phase's messages). Depends on nothing else in node/attest but errors.ts.
 */
export { CpuRunner } from "./cpu.js";
export { ExternalRunner } from "./external.js";
export type { Runner, RunnerChallenge, RunnerCommitment } from "./types.js";
export { CpuMemoryRunner, MemoryResponder, type MemoryBuffers, type MemoryRunner, type MemoryWalked, type UnitWork } from "./memory-runner.js";
export { attestRunnerOptionsSchema, type AttestRunnerOptions } from "./options.js";

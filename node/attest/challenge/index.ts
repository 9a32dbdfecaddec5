/**
 * Proof-of-capacity challenges (entry point of node/attest/challenge/): both sides of one challenge
 * (attestor.ts, provider.ts), the attestor's challenges over libp2p on a schedule and on request
 * (challenger.ts, challenge-session.ts, request-answers.ts), their results (results.ts), each
 * machine's failure history and backoff (failure-history.ts) and the failure notices it gossips
 * (failure-notify.ts). Depends on cc/, memory/ and runner/.
 */
export { Attestor, AttestorChallenge, type ChallengeFailure, type ChallengeOutcome, type ChallengePass, type CommitResult, type MachineClaim } from "./attestor.js";
export { ChallengeResponder, OPEN_WAIT_MS, type ChallengeResponderOptions, type ProviderLease, type ProviderMachine } from "./provider.js";
export { Challenger } from "./challenger.js";
export { ChallengeResults, type ChallengeRecord } from "./results.js";
export { FailureHistory } from "./failure-history.js";
export { FailureNotifier } from "./failure-notify.js";
export { attestorRoleOptionsSchema, type AttestorRoleOptions } from "./options.js";

/**
 * Leases and their faults (entry point of node/attest/faults/): the active leases an attestor
 * watches (leases.ts), liveness probes of their providers (liveness.ts), and faults: signed
 * (faults.ts), co-signed by other attestors on their own evidence (fault-exchange, fault-cosigner,
 * fault-evidence, fault-transcript), kept (fault-records.ts) and submitted on chain
 * (fault-submit.ts). Depends on nothing else in node/attest.
 */
export { FaultCoordinator, type FaultRecord, type FaultStatus } from "./faults.js";
export type { EvidenceVerdict, FaultEvidence, FaultLease } from "./fault-evidence.js";
export { LeaseTracker, type TrackedLease } from "./leases.js";
export { LivenessProber, MAX_FAULT_WINDOW_SECONDS, nonDecreasingClock } from "./liveness.js";
export { faultPeeringWarning, livenessOptionsSchema, type LivenessOptions } from "./options.js";

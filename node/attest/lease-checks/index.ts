/**
 * In-lease capacity checks (entry point of node/attest/lease-checks/): light challenges of leased
 * machines within the lease's announced check share (in-lease.ts), how their results are judged
 * (light-verdict.ts), and the on-chain attestor count the share is split over (attestor-count.ts).
 * Depends on challenge/ (the challenger, results) and faults/ (leases, the fault coordinator).
 */
export { CapacityEvidence, InLeaseChecker } from "./in-lease.js";
export { AttestorCount } from "./attestor-count.js";
export { leaseChecksOptionsSchema, type LeaseChecksOptions } from "./options.js";

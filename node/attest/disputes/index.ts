/**
 * On-chain disputes (entry point of node/attest/disputes/), both ways: the attestor answers
 * disputes of its attestations (disputes.ts); the provider disputes false faults (false-faults.ts)
 * with the probe receipts and passed attestations it keeps (probe-receipts.ts,
 * passed-attestations.ts). Both scan AttestorStaking's events (staking-scanner.ts). Depends on
 * challenge/ (the results a dispute is answered from).
 */
export { DisputeAnswerer } from "./disputes.js";
export { FalseFaultDisputer } from "./false-faults.js";
export { ProbeReceipts } from "./probe-receipts.js";
export { PassedAttestations } from "./passed-attestations.js";

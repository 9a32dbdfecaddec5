/**
 * Key-prefix buckets of the node's level database. Every entity has its own bucket; a number is
 * never reused for something else once released, so an old database cannot be misread.
 */
export enum Bucket {
  /** Store metadata (schema version). */
  meta = 0,
  /** Test-only bucket used by the store's own tests. */
  scratch = 1,
  /** The offer book: book key (`provider:machineId`) → the offer message as received, plus its attestation state. */
  offers = 2,
  /** The provider's own offer sequence numbers: machine id → last seq published (never reused). */
  offerSeq = 3,
  // 4..15: the provider agent (node/provider/agent/). Written before the node acts on them.
  /** The provider's leases: lease id (78 digits, zero-padded) → lease record (task state, result, claims). Specs are stored without secret values. */
  providerLeases = 4,
  /** Declared machines: inventory machine key → the on-chain machine id and the declaration sent. */
  providerMachines = 5,
  /** Reservations: "table" → the reservation table snapshot, hold terms and recently used reserve nonces. */
  providerReservations = 6,
  /** Agent state: "cursor" → next block to read, "offerNonce" → next renter-bound offer nonce. */
  providerState = 7,
  /**
   * Attestors' signed probe receipts (node/attest/disputes/probe-receipts.ts): `<lease id, 78 digits>/<attestor lowercase>`
   * → the last 64 receipts and the disputes sent. Evidence against a false liveness fault.
   */
  providerProbeReceipts = 12,
  /**
   * Attestations the provider's machines passed (node/attest/disputes/passed-attestations.ts):
   * `<machine id, 10 digits>/<attestor lowercase>/<issuedAt, 10 digits>` → the signed attestation, kept for
   * PASSES_SPAN_SECONDS. Evidence against a false capacity fault (AttestorStaking.disputeCapacityFault).
   */
  providerPassedAttestations = 14,
  // 16..19: the HTTP API's market index (node/api/market-index.ts), rebuilt from chain events.
  /** Registered providers: address (lowercase) → the block of their first registration. */
  apiProviders = 16,
  /** Declared machines: machine id (10 digits, zero-padded) → owner address. Removed machines are deleted. */
  apiMachines = 17,
  /** Leases: lease id (78 digits, zero-padded) → renter, provider, machine and last status seen. */
  apiLeases = 18,
  /** Leases by address: `<address lowercase>:<r|p>:<lease id, 78 digits>` → 1 (r: as renter, p: as provider). */
  apiLeasesByAddress = 19,
  // 20..29: the attestor role. Numbered apart from the provider's buckets so branches built in
  // parallel never pick the same number.
  /** Challenge results: `<machineId, 10 digits>/<startedAtMs, 15 digits>` → pass or fail, throughput, attestation. */
  attestResults = 20,
  /** Leases the attestor probes: lease id → provider, machine, activation and end. */
  attestLeases = 21,
  /** Faults this attestor proposed or co-signed: lease id → the Fault, signatures collected, submission. */
  attestFaults = 22,
  /** Probe state per lease (last heartbeat, current outage's first failed probe, failures): lease id → ProbeState. */
  attestProbes = 23,
  /**
   * Which machine presented each GPU last (node/attest/cc/device-registry.ts): `uuid:<uuid>` or
   * `cc:<chip>:<device id>` → {machine, atMs}. 28, well apart from 24..27, which other branches may take.
   */
  attestDevices = 28,
  /**
   * Failed challenges, kept for `attest.attestor.failureHistorySeconds` whatever passes after them
   * (node/attest/challenge/failure-history.ts): `m/<machineId, 10 digits>/<finishedAtMs, 15 digits>` and
   * `p/<provider lowercase>/<finishedAtMs, 15 digits>/<machineId, 10 digits>` → the failure.
   */
  attestFailures = 29,
  /**
   * Attestors' failure notices an offer book holds (node/offers/notice-book.ts; issue 35 item 9):
   * `<observedAt, 10 digits>/<attestor lowercase>/<challengeId>` → the notice as received. 44, well
   * apart from the numbers other branches may take.
   */
  attestFailureNotices = 44,
  // 48..49: the gateway (node/gateway/), apart from the numbers other branches may take.
  /** Endpoints registered on this gateway: endpoint id → the registration as received (record, signature, delegation). */
  gatewayEndpoints = 48,
  /** Revoked tokens: `<endpoint id>/<nonce>` → the token's expiry (unix seconds): kept until then. */
  gatewayRevocations = 49,
  /** The sponsor's daily budget per account (node/sponsor/): `<account lowercase>/<UTC day number>` → {operations, wei}. */
  sponsorBudget = 50,
}

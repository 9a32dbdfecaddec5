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
  // 20..29: the attestor role. Numbered apart from the provider's buckets so branches built in
  // parallel never pick the same number.
  /** Challenge results: `<machineId, 10 digits>/<startedAtMs, 15 digits>` → pass or fail, throughput, attestation. */
  attestResults = 20,
  /** Leases the attestor probes: lease id → provider, machine, activation and end. */
  attestLeases = 21,
  /** Faults this attestor proposed or co-signed: lease id → the Fault, signatures collected, submission. */
  attestFaults = 22,
}

/**
 * The faults an attestor proposed or co-signed, kept in level (Bucket.attestFaults) so a
 * restarted attestor keeps collecting or submitting where it stopped. One record per lease and
 * fault kind: an unresponsive fault keeps the key it always had (the lease id), a capacity fault
 * is keyed `<leaseId>/<kind>`.
 */
import { getAddress, type Address, type Hex } from "viem";
import type { FaultSignature, FaultTranscript } from "../../../common/attest/wire.js";
import { FaultKind, type Fault } from "../../../common/eip712.js";
import { Bucket } from "../../store/buckets.js";
import type { Repository, Store } from "../../store/store.js";

export type FaultStatus =
  /** Collecting signatures, or holding a quorum waiting to submit. */
  | "collecting"
  /** submitFault succeeded (by this attestor or another). */
  | "landed"
  /** The lease ended another way (renter closed, completed, expired...). */
  | "ended"
  /** The provider answered again (or passed again) before a quorum was reached. */
  | "abandoned";

/** A fault this attestor proposed or co-signed. */
export type FaultRecord = {
  leaseId: bigint;
  provider: Address;
  /** The leased machine (records before it was kept: absent, read as every machine of the provider). */
  machineId?: number;
  fault: Fault;
  /** Distinct attestor signatures of exactly `fault`, this attestor's included. */
  signatures: FaultSignature[];
  /**
   * Capacity faults: the provider's signed wrong answer to a challenge started during the lease
   * (fault-transcript.ts), sent with every proposal so co-signers need no failed challenge of their own.
   */
  evidence?: FaultTranscript;
  role: "proposer" | "cosigner";
  status: FaultStatus;
  createdAtMs: number;
  updatedAtMs: number;
  lastAskedAtMs: number;
  /** observedAt may not be earlier than this: another attestor heard from the provider (or saw it pass) just before. */
  minObservedAt: number;
  submittedTx: Hex | null;
  landedBy: "self" | "other" | null;
  note: string | null;
};

/** The store key of a lease's fault of `kind`. */
export function faultKey(leaseId: bigint, kind: number): string {
  return kind === FaultKind.unresponsive ? leaseId.toString() : `${leaseId}/${kind}`;
}

/**
 * Until when (unix s) `self` must not pass `machineId` of `provider`: the latest observedAt + `windowSeconds` of the
 * capacity faults of that machine `self` signed (any status: a signature given out can be submitted by anyone within
 * the market's window). A pass issued in (observedAt, observedAt + W] would prove its own fault false on chain
 * (AttestorStaking.disputeCapacityFault). A record without `machineId` (kept before it was) holds every machine of
 * its provider. Undefined: no hold.
 */
export function capacityPassHeldUntil(records: Iterable<FaultRecord>, self: Address, provider: Address, machineId: number, windowSeconds: number): number | undefined {
  let until: number | undefined;
  for (const record of records) {
    if (record.fault.kind !== FaultKind.capacity || getAddress(record.provider) !== getAddress(provider)) continue;
    if (record.machineId !== undefined && record.machineId !== machineId) continue;
    if (!record.signatures.some((entry) => getAddress(entry.signer) === getAddress(self))) continue;
    const end = record.fault.observedAt + windowSeconds;
    if (until === undefined || end > until) until = end;
  }
  return until;
}

export class FaultRecords {
  private readonly records = new Map<string, FaultRecord>();
  private readonly repo: Repository<FaultRecord>;

  constructor(
    store: Store,
    private readonly now: () => number,
  ) {
    this.repo = store.repository<FaultRecord>(Bucket.attestFaults);
  }

  /** Reads every record kept before a restart. */
  async load(): Promise<void> {
    for await (const [key, record] of this.repo.entries()) this.records.set(key, record);
  }

  /** Every record, newest first. */
  list(): FaultRecord[] {
    return [...this.records.values()].sort((a, b) => b.createdAtMs - a.createdAtMs);
  }

  /** Records still collecting signatures. */
  open(): FaultRecord[] {
    return [...this.records.values()].filter((record) => record.status === "collecting");
  }

  get(leaseId: bigint, kind: number = FaultKind.unresponsive): FaultRecord | undefined {
    return this.records.get(faultKey(leaseId, kind));
  }

  /** The lease's records of every kind. */
  ofLease(leaseId: bigint): FaultRecord[] {
    return [...this.records.values()].filter((record) => record.leaseId === leaseId);
  }

  async save(record: FaultRecord): Promise<void> {
    const key = faultKey(record.leaseId, record.fault.kind);
    this.records.set(key, record);
    await this.repo.put(key, record);
  }

  async update(record: FaultRecord, changes: Partial<FaultRecord>): Promise<void> {
    Object.assign(record, changes, { updatedAtMs: this.now() });
    await this.repo.put(faultKey(record.leaseId, record.fault.kind), record);
  }
}

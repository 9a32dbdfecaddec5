/**
 * What the provider agent keeps in level about each lease, and the repository over it. A record
 * is written before the node acts on what it says (a spec accepted, a task about to start, a
 * result to report), so a restarted node knows what it promised, what ran and what it is owed.
 * Specs are stored as `storableSpec` (secret values replaced): a secret never reaches the disk.
 */
import type { Address, Hex } from "viem";
import type { EndReasonName, LeaseStatusName, LeaseView } from "../../../common/chain/market.js";
import type { TaskImage, TaskState } from "../../../common/protocols/lease.js";
import type { Repository, Store } from "../../store/store.js";
import { Bucket } from "../../store/buckets.js";
import type { storableSpec } from "../runtime/task.js";

/**
 * Where the node is with a lease's task:
 * - `waiting_spec`: no task spec yet;
 * - `preparing`: spec accepted, units being freed, bundle being fetched;
 * - `starting`: about to start the process (written before the spawn: from here on a task is
 *   never started again, whatever happens);
 * - `running`: the process runs (its pid is recorded);
 * - `ended`: the task is over, or will never run; `state` says how.
 */
export type LeasePhase = "waiting_spec" | "preparing" | "starting" | "running" | "ended";

/**
 * How the node ends the lease on-chain once the task is over:
 * - `none`: nothing to do (the lease ended on-chain, or the renter closes it);
 * - `complete`: report the completion (`complete`; an Open lease is activated first);
 * - `terminate`: end it without cause and pay the penalty (the node failed the renter);
 * - `await_close`: the renter cancelled: it has until `endAfter` to close, then `complete`.
 */
export type EndAction = "none" | "complete" | "terminate" | "await_close";

export type StoredSpec = ReturnType<typeof storableSpec>;

export type TaskError = { name: string; message: string };

export type CompletionRecord = {
  report: { leaseId: bigint; exitCode: number; outputDigest: Hex; unitSeconds: bigint };
  signature: Hex;
};

export type LeaseRecord = {
  leaseId: bigint;
  machineId: number;
  renter: Address;
  units: number;
  interruptible: boolean;
  pricePerUnitSecond: bigint;
  offerNonce: bigint;
  /** Unix seconds. */
  startDeadline: number;

  /** The chain's view, as last read. */
  chain: {
    status: LeaseStatusName;
    endReason: EndReasonName;
    activatedAt: number;
    end: number;
    stopAt: number;
    deposit: bigint;
    paid: bigint;
    duration: number;
  };

  phase: LeasePhase;
  /** What the renter sees (status protocol). */
  state: TaskState;
  spec: StoredSpec | null;
  /** Whether the stored spec is the whole spec (it had no secrets), so a restart can prepare it again. */
  specResumable: boolean;
  /** Inventory unit ids the lease's task runs on, and their CUDA device ids. */
  unitIds: string[];
  devices: string[];
  /** The task's process group leader and its start time, to find it after a crash. */
  pid: number | null;
  pidStartTicks: number | null;
  /** Unix ms when this node saw its activation confirmed: the task's time runs from here. */
  activatedWallMs: number | null;
  /** Unix ms. */
  startedAt: number | null;
  endedAt: number | null;
  exitCode: number | null;
  error: TaskError | null;
  result: { status: string; chainExitCode: number; outputDigest: Hex; unitSeconds: number } | null;
  completion: CompletionRecord | null;
  endAction: EndAction;
  /** Unix ms: when an `await_close` turns into `complete`. */
  endAfter: number | null;
  /** The task's container image and whether it came from the cache (absent in records from before). */
  image?: TaskImage | null;
  /** The output's CID (issue 36) when the data plane pinned it and the completion digest is its digest. */
  outputCid?: string | null;
  /** Next log sequence number once the task is over (the log itself lives in memory). */
  nextLogSeq: number;
  /** Units handed back and workspace removed. */
  released: boolean;
  /** Nothing left to do: ended on-chain, paid out, cleaned up. */
  closed: boolean;
  /** Unix ms of the last change. */
  updatedAt: number;
  /**
   * Unix ms when the node saw the lease open, when it saw that live (its LeaseOpened event as it
   * came, a follower's lag behind the block); null (or absent, in records from before) when it
   * learned of it late (a backfill after downtime, a renter's request before the event). The
   * sealing keys a lease may use follow from it (sealing.ts).
   */
  openedAtMs?: number | null;
  /**
   * Ids of the sealing keys the accepted spec's secrets opened with (empty: it had none); null (or
   * absent) while no spec was accepted. The lease keeps only these keys alive (sealing.ts).
   */
  sealingKeyIds?: number[] | null;
};

/** Lease ids sort as numbers: 78 digits covers uint256. */
export function leaseKey(leaseId: bigint): string {
  return leaseId.toString().padStart(78, "0");
}

/** The chain fields of a record from a LeaseView. */
export function chainFields(view: LeaseView): LeaseRecord["chain"] {
  return {
    status: view.status,
    endReason: view.endReason,
    activatedAt: view.activatedAt,
    end: view.end,
    stopAt: view.stopAt,
    deposit: view.deposit,
    paid: view.paid,
    duration: view.duration,
  };
}

/** A new record for a lease just seen on-chain. */
/** `seenLive`: the node saw the lease open as it happened (its event delivered live), so `now` is when it opened. */
export function newLeaseRecord(view: LeaseView, offerNonce: bigint, now = Date.now(), opened: { seenLive: boolean } = { seenLive: false }): LeaseRecord {
  return {
    openedAtMs: opened.seenLive ? now : null,
    leaseId: view.leaseId,
    machineId: view.machineId,
    renter: view.renter,
    units: view.units,
    interruptible: view.interruptible,
    pricePerUnitSecond: view.pricePerUnitSecond,
    offerNonce,
    startDeadline: view.startDeadline,
    chain: chainFields(view),
    phase: "waiting_spec",
    state: "waiting_spec",
    spec: null,
    specResumable: false,
    unitIds: [],
    devices: [],
    pid: null,
    pidStartTicks: null,
    activatedWallMs: null,
    startedAt: null,
    endedAt: null,
    exitCode: null,
    error: null,
    result: null,
    completion: null,
    endAction: "none",
    endAfter: null,
    nextLogSeq: 0,
    released: false,
    closed: false,
    updatedAt: now,
  };
}

/** The leases repository plus an in-memory mirror; writes go to level first. */
export class LeaseRecords {
  private readonly repo: Repository<LeaseRecord>;
  private readonly cache = new Map<bigint, LeaseRecord>();

  constructor(private readonly store: Store) {
    this.repo = store.repository<LeaseRecord>(Bucket.providerLeases);
  }

  async load(): Promise<LeaseRecord[]> {
    for await (const [, record] of this.repo.entries()) this.cache.set(record.leaseId, record);
    return [...this.cache.values()];
  }

  get(leaseId: bigint): LeaseRecord | undefined {
    return this.cache.get(leaseId);
  }

  all(): LeaseRecord[] {
    return [...this.cache.values()];
  }

  open(): LeaseRecord[] {
    return this.all().filter((record) => !record.closed);
  }

  /** Writes the record to level, then to the mirror. */
  async put(record: LeaseRecord): Promise<LeaseRecord> {
    record.updatedAt = Date.now();
    await this.repo.put(leaseKey(record.leaseId), record);
    this.cache.set(record.leaseId, record);
    return record;
  }

  /** Applies a change to a copy, writes it, and returns it. */
  async update(leaseId: bigint, change: (record: LeaseRecord) => void): Promise<LeaseRecord> {
    const current = this.cache.get(leaseId);
    if (!current) throw new Error(`no record of lease ${leaseId}`);
    const next = structuredClone(current);
    change(next);
    return this.put(next);
  }
}

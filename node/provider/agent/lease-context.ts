/**
 * What the lease controller (leases.ts) and its task pipeline (task-pipeline.ts) share: the
 * node's parts they act through, and the in-process state of a task being prepared or run.
 */
import type { Account, Address, Chain, PublicClient, Transport, TypedDataDomain } from "viem";
import type { LeaseView } from "../../../common/chain/market.js";
import type { SealingKeyRing } from "./sealing.js";
import type { ProviderInputs } from "./task-inputs.js";
import type { Logger } from "../../log/logger.js";
import type { Metrics } from "../../metrics/metrics.js";
import type { CapacityManager } from "../capacity/capacity-manager.js";
import type { Inventory } from "../inventory/inventory.js";
import type { ProviderOptions } from "../options.js";
import type { Runtime, TaskHandle } from "../runtime/runtime.js";
import type { TxSender } from "./chain-tx.js";
import type { AbortReason } from "./lease-step.js";
import type { FinishedLogs } from "./log-sources.js";
import type { MachineMarket } from "./offers.js";
import type { OutputStore } from "./outputs.js";
import type { LeaseRecord, LeaseRecords } from "./records.js";
import type { RenterRequestVerifier } from "./renter-auth.js";
import type { ReservationBook } from "./reservations.js";
import type { UnitLedger } from "./unit-ledger.js";

export type LeaseControllerContext = {
  publicClient: PublicClient<Transport, Chain>;
  market: Address;
  domain: TypedDataDomain;
  /** The provider's wallet (signs completion reports). */
  account: Account & { signTypedData: NonNullable<Account["signTypedData"]> };
  tx: TxSender;
  records: LeaseRecords;
  runtime: Runtime;
  capacity: CapacityManager;
  machines: MachineMarket;
  reservations: ReservationBook;
  inventory: Inventory;
  verifier: RenterRequestVerifier;
  options: ProviderOptions;
  metrics: Metrics;
  logger: Logger;
  /** Keeps each ended task's output/ folder for its renter (node/provider/agent/outputs.ts). */
  outputs?: OutputStore;
  /**
   * chain.confirmations: a renter request about a lease the node has no record of yet is served
   * from the lease as it is this many blocks below the head (default 0: the latest block).
   */
  confirmations?: number;
  /** chain.confirmationWaitMs: how long such a request waits for the lease's block to be that deep (default 6 s). */
  confirmationWaitMs?: number;
  /** Opens secret env values sealed to this node's key (common/sealed.ts). */
  sealing?: { ring: SealingKeyRing; chainId: number };
  /** Task inputs through the node's data plane (task-inputs.ts); absent: tasks with inputs are refused. */
  inputs?: ProviderInputs;
};

/** A task pipeline running in this process. */
export type Live = {
  abort: AbortController;
  /** Why the pipeline was aborted. */
  abortReason?: AbortReason;
  handle?: TaskHandle;
  pipeline?: Promise<void>;
};

/** What the task pipeline uses of the controller. */
export type LeaseHost = {
  ctx: LeaseControllerContext;
  units: UnitLedger;
  finishedLogs: FinishedLogs;
  live: Map<bigint, Live>;
  withLock<T>(leaseId: bigint, fn: () => Promise<T>): Promise<T>;
  schedule(leaseId: bigint): void;
  /** Reconciles a lease; the caller holds its lock. */
  reconcileLocked(leaseId: bigint): Promise<void>;
  readChain(leaseId: bigint): Promise<LeaseView>;
  remainingMs(record: LeaseRecord): Promise<number>;
  groupMaster(): { addr: string; port: number };
  /** Hands a lease's units back (unit ledger) and updates the gauges. */
  releaseUnits(leaseId: bigint): Promise<void>;
  updateGauges(): void;
};

/**
 * The provider agent's public shape (node/provider/agent.ts starts it): its options, the summary it
 * prints and the parts it exposes to the node, the CLI and the tests.
 */
import type { Address } from "viem";
import { SuanliError } from "../../../common/errors.js";
import type { SignedAttestation } from "../../../common/offers/message.js";
import type { Subscription } from "../../chain/follower.js";
import type { DaemonModule } from "../../daemon.js";
import type { CapacityManager } from "../capacity/capacity-manager.js";
import type { CommandRunner, Inventory } from "../inventory/inventory.js";
import type { PriceEngine } from "../pricing/engine.js";
import type { Runtime, RuntimeIsolation } from "../runtime/runtime.js";
import type { Claimer } from "./claims.js";
import type { LeaseController } from "./leases.js";
import type { MachineMarket } from "./offers.js";
import type { LeaseRecord } from "./records.js";
import type { ReservationBook } from "./reservations.js";
import type { DeclaredMachine } from "./setup.js";

export class ProviderAgentError extends SuanliError {
  override name = "ProviderAgentError";
}

export type ProviderAgentOptions = {
  /** Runs nvidia-smi (tests play recordings through it); the default spawns the real binary. */
  commandRunner?: CommandRunner;
  /** More of the node's own files kept out of task sandboxes (the CLI passes the config file). */
  hiddenPaths?: string[];
  /** The sealing keys' clock (unix ms, lease open times too) and maintenance interval: tests move them. */
  sealingKeys?: { now?: () => number; maintainIntervalMs?: number };
};

export type ProviderAgentSummary = {
  address: Address;
  peerId: string;
  addrs: string[];
  inventorySource: Inventory["source"];
  runtime: Runtime["kind"];
  /** What the runtime verified about task isolation at start, and its warnings (unsandboxed). */
  isolation: RuntimeIsolation;
  machines: { machineId: number; model: string; units: number; vramMiB: number; region: string; pricePerUnitSecond: bigint; minBidPerUnitSecond: bigint; offered: boolean }[];
  problems: string[];
};

export type ProviderAgent = DaemonModule & {
  inventory: Inventory;
  machines: readonly DeclaredMachine[];
  capacity: CapacityManager;
  leases: LeaseController;
  claimer: Claimer;
  market: MachineMarket;
  /** Prices by the configured policy, each evaluation explained. */
  pricing: PriceEngine;
  /** The agent's subscription on the node's chain follower. */
  chainSubscription: Subscription;
  /** Units held for renters (reserve protocol), with their terms. */
  reservations: ReservationBook;
  /** Signed hardware attestations to publish with a machine's offer (from the attestor), replacing earlier ones. */
  setAttestations(machineId: number, attestations: readonly SignedAttestation[]): void;
  /** What level holds about a lease. */
  lease(leaseId: bigint): LeaseRecord | undefined;
  /** Leases active on-chain (metering), as last read: what liveness probes ask about. */
  activeLeases(): LeaseRecord[];
  summary(): ProviderAgentSummary;
};

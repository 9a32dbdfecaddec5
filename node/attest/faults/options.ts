import { z } from "zod";

/**
 * Liveness probes of providers that hold active leases, and the QoS window after which an
 * unresponsive provider is faulted. Defaults suit a devnet; see docs/attestation.md ("Liveness").
 */
export const livenessOptionsSchema = z.strictObject({
  /** Probe providers of active leases (attestor role). */
  enabled: z.boolean().default(true),
  /** Time between two probes of one lease. */
  probeIntervalMs: z.number().int().min(100).max(3_600_000).default(2_000),
  /** A probe not answered within this counts as failed. */
  probeTimeoutMs: z.number().int().min(100).max(60_000).default(5_000),
  /**
   * A provider that has not answered for longer than this is faulted. 30 s suits a devnet; on a
   * real network choose minutes: it is the outage a renter pays for before the SLA credit applies.
   * At most 300 s: observedAt is the start of the outage, and the market refuses a fault more than
   * FAULT_SUBMISSION_WINDOW (600 s) after it, so the window plus the backup delay must leave time to
   * collect the quorum and land the transaction.
   */
  qosWindowSeconds: z.number().int().min(1).max(300).default(30),
  /** Failed probes in a row needed before a fault is proposed, whatever the window. */
  minFailedProbes: z.number().int().min(1).max(1_000).default(2),
  /** Probes in flight at once. */
  maxConcurrentProbes: z.number().int().min(1).max(1_024).default(32),
  /**
   * An attestor that co-signed a fault submits the quorum itself when the lease is still active
   * this long after it signed (the proposer may have gone away). A minute leaves the proposer's
   * own transaction time to be mined first, so two submitters rarely both pay gas.
   */
  backupSubmitDelayMs: z.number().int().min(0).max(120_000).default(60_000),
});
export type LivenessOptions = z.output<typeof livenessOptionsSchema>;

/**
 * Why this attestor may never reach a fault quorum, or undefined. Attestors find each other only
 * through `attest.attestor.peers` and the peers they are connected to (identify): with the DHT off
 * and no peers listed, nothing connects one attestor to another (a shared bootstrap node connects
 * each to it, not to each other), so every fault it proposes keeps its own signature alone.
 */
export function faultPeeringWarning(o: { peers: readonly string[]; dhtEnabled: boolean; quorum: number; livenessEnabled: boolean }): string | undefined {
  if (!o.livenessEnabled || o.quorum <= 1 || o.peers.length > 0 || o.dhtEnabled) return undefined;
  return (
    `faults need ${o.quorum} attestor signatures, but attest.attestor.peers is empty and the DHT is off (p2p.dht.enabled): ` +
    "this attestor meets another only if that one connects to it, and a fault it proposes may never reach the quorum. " +
    "List the other attestors in attest.attestor.peers (/ip4/…/tcp/…/p2p/<peer id>)"
  );
}

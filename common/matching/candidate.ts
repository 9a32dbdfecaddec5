/**
 * A match's answer (engine.ts): one machine, or a group of machines on a cluster's fast
 * interconnect, with what it costs and how its rank was computed.
 */
import type { OfferEntry } from "./entry.js";

export type CandidatePart = {
  readonly entry: OfferEntry;
  /** Units to lease on this machine. */
  readonly units: number;
  /** True when some of these units are held by interruptible leases that the lease would preempt. */
  readonly preempt: boolean;
  /** What the lease costs per unit-second: the offer price on demand, the bid when interruptible. */
  readonly pricePerUnitSecond: bigint;
  /**
   * Which of the machine's offers this is, in words: "on-demand", or the reserved-term tier the
   * lease's duration qualifies for ("reserved tier 2: leases of 604800 s or more, 3000 base units/s").
   */
  readonly terms?: string;
};

export type CostBreakdown = {
  /** weights.price × premium over the cheapest fitting offer. */
  price: number;
  /** weights.reputation × (1 − score). */
  reputation: number;
  /** weights.freshness × attestation age / horizon. */
  freshness: number;
  /** weights.latency × latency / ceiling. */
  latency: number;
  /** PREEMPT_PENALTY when the candidate needs preemption. */
  preempt: number;
  /** multiMachinePenalty for a group of machines. */
  multiMachine: number;
};

export type Candidate = {
  /** One part for a single machine; several for a group on a cluster's fast interconnect. */
  readonly parts: readonly CandidatePart[];
  readonly units: number;
  readonly preempt: boolean;
  /** Units-weighted mean price per GPU-hour, base units. */
  readonly pricePerGpuHour: bigint;
  /** Lower is better. */
  readonly cost: number;
  readonly breakdown: CostBreakdown;
};

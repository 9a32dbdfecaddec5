/**
 * What a co-signer must hold of its own before it signs a fault of a given kind. Every signer,
 * proposer and co-signer alike, signs only what it observed itself: one lying attestor, or an
 * honest one cut off from a live provider, cannot fault it.
 *
 * - unresponsive (kind 1, LivenessEvidence): this attestor's own probes failed `minFailedProbes`
 *   times in a row over the whole QoS window, from no later than observedAt, it heard nothing
 *   from the provider after observedAt, a probe on receipt of the proposal fails too, and the
 *   whole fault window W after observedAt has passed (`too_early` otherwise, with the second it
 *   will sign): a receipt it gave inside that window would make its signature slashable.
 * - capacity (kind 2, CapacityEvidence in lease-checks/in-lease.ts): this attestor's own in-lease challenge of
 *   the leased machine failed, started no later than observedAt, with no pass since; or, instead,
 *   the proposal's transcript of the provider's signed wrong answer (fault-transcript.ts), which
 *   proves the fault to anyone, so no attestor's word is taken for it. Either way a co-signer signs
 *   only while it holds no attestation of the machine passing issued after observedAt: one inside
 *   the fault window proves the fault false on chain (AttestorStaking.disputeCapacityFault, issue
 *   #34 finding 3).
 */
import { getAddress, type Address } from "viem";
import type { FaultDeclineReason } from "../../../common/attest/wire.js";
import { FaultKind, type Fault } from "../../../common/eip712.js";
import { faultSignableAt, hasOutageEvidence, mayFaultAt, type LivenessProber, type PendingReceipt } from "./liveness.js";
import type { LivenessOptions } from "./options.js";

/** The lease a fault names, as the co-signer read it on-chain. */
export type FaultLease = { leaseId: bigint; provider: Address; machineId: number; activatedAt: number; end: number };

export type EvidenceVerdict =
  | { ok: true }
  | {
      ok: false;
      reason: FaultDeclineReason;
      detail: string;
      lastSeenAt?: number | null;
      earliestObservedAt?: number | null;
      signsAt?: number | null;
      /** With `seen_alive`: this attestor's signed receipt of the heartbeat it last counted (the only thing a proposer moves a fault for). */
      receipt?: PendingReceipt;
    };

export interface FaultEvidence {
  readonly kind: number;
  /** Whether this attestor holds its own evidence of `fault` now (it may probe or challenge to find out). */
  check(lease: FaultLease, fault: Fault): Promise<EvidenceVerdict>;
  /**
   * When this attestor signed a receipt after `observedAt` that contradicts a fault of this kind on
   * chain (unix s), if it did: checked before it signs on any evidence, a transcript included.
   */
  contradictedAt?(lease: FaultLease, observedAt: number): Promise<number | undefined>;
}

/** Kind 1: the provider does not answer this attestor's liveness probes either. */
export class LivenessEvidence implements FaultEvidence {
  readonly kind = FaultKind.unresponsive;

  constructor(
    private readonly prober: LivenessProber,
    private readonly liveness: LivenessOptions,
    private readonly now: () => number,
    /** The fault window W (s): max(qosWindowSeconds, AttestorStaking's faultWindow). */
    private readonly windowSeconds: () => number = () => liveness.qosWindowSeconds,
  ) {}

  async check(lease: FaultLease, fault: Fault): Promise<EvidenceVerdict> {
    const own = this.prober.state(fault.leaseId);
    if (own?.lastSuccessAt !== undefined && own.lastSuccessAt > fault.observedAt) return this.seenAlive(fault.leaseId, own.lastSuccessAt);
    const probe = await this.prober.probe({ leaseId: fault.leaseId, provider: getAddress(lease.provider) });
    if (probe.ok) return { ok: false, reason: "provider_alive", detail: "the provider answered this attestor's probe just now", lastSeenAt: Math.floor(this.now() / 1000) };
    // This attestor's own evidence: its probes failed over the whole QoS window, from no later than observedAt.
    const evidence = this.prober.state(fault.leaseId);
    const nowS = Math.floor(this.now() / 1000);
    const firstFailureAt = evidence?.firstFailureAt ?? null;
    if (firstFailureAt === null || fault.observedAt < firstFailureAt) {
      return {
        ok: false,
        reason: "no_evidence",
        detail: `observedAt ${fault.observedAt} is before this attestor's own first failed probe${firstFailureAt === null ? "" : ` at ${firstFailureAt}`}`,
        earliestObservedAt: firstFailureAt,
      };
    }
    if (!hasOutageEvidence(evidence, nowS, this.liveness)) {
      return {
        ok: false,
        reason: "no_evidence",
        detail: `this attestor's probes failed ${evidence?.failures ?? 0} times since ${firstFailureAt}; it signs after ${this.liveness.minFailedProbes} failures over ${this.liveness.qosWindowSeconds} s`,
        earliestObservedAt: firstFailureAt,
      };
    }
    // Last, right before the signature: no heartbeat counted after observedAt's second, and the
    // whole fault window after observedAt has passed, so no receipt this attestor gave or will
    // give contradicts the fault (liveness.ts mayFaultAt).
    const latest = this.prober.state(fault.leaseId);
    if (latest?.lastSuccessAt !== undefined && latest.lastSuccessAt > fault.observedAt) return this.seenAlive(fault.leaseId, latest.lastSuccessAt);
    const window = this.windowSeconds();
    if (!mayFaultAt(latest, fault.observedAt, this.now(), window)) {
      const signsAt = faultSignableAt(fault.observedAt, window);
      return {
        ok: false,
        reason: "too_early",
        detail: `this attestor signs a liveness fault only after the ${window} s fault window after observedAt ${fault.observedAt}: from ${signsAt}`,
        signsAt,
      };
    }
    return { ok: true };
  }

  /** `seen_alive` with the signed receipt of the heartbeat this attestor last counted: the proposer moves observedAt past it. */
  private async seenAlive(leaseId: bigint, lastSeenAt: number): Promise<EvidenceVerdict> {
    const receipt = await this.prober.lastReceipt(leaseId).catch(() => undefined);
    return { ok: false, reason: "seen_alive", detail: `this attestor got a heartbeat at ${lastSeenAt}, after observedAt`, lastSeenAt, ...(receipt ? { receipt } : {}) };
  }
}

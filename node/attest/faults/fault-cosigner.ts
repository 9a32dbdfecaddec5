/**
 * The co-signer's side of `/suanli/fault/1.0.0`: co-sign only what this attestor observed
 * itself (fault-evidence.ts), or, for a capacity fault, what the proposal's transcript proves to
 * anyone: the provider's signed wrong answer to a challenge started during the lease
 * (fault-transcript.ts). A co-signer signs an `observedAt` only within [the start of its
 * own evidence, now]: never in the future, never before what it saw itself; a decline tells the
 * proposer the earliest observedAt it could sign, and the proposer moves forward and asks again.
 */
import { getAddress, type Address, type LocalAccount, type PublicClient, type Transport, type Chain, type TypedDataDomain } from "viem";
import { signFault } from "../../../common/chain/sign.js";
import type { FaultAnswerInput, FaultDeclineReason, FaultProposal, FaultSignature } from "../../../common/attest/wire.js";
import { readLease } from "../../../common/chain/market.js";
import { FaultKind, type Fault } from "../../../common/eip712.js";
import type { CachedChainView } from "../../../common/offers/chain-view.js";
import type { Logger } from "../../log/logger.js";
import type { Metrics } from "../../metrics/metrics.js";
import type { FaultEvidence } from "./fault-evidence.js";
import type { FaultExchange } from "./fault-exchange.js";
import type { TranscriptVerifier } from "./fault-transcript.js";
import type { PendingReceipt } from "./liveness.js";
import type { FaultRecords } from "./fault-records.js";

export type FaultCosignerOptions = {
  chainId: number;
  domain: TypedDataDomain;
  market: Address;
  account: LocalAccount;
  address: Address;
  publicClient: PublicClient<Transport, Chain>;
  chainView: CachedChainView;
  records: FaultRecords;
  exchange: FaultExchange;
  /** The evidence this attestor can hold, one per fault kind it co-signs. */
  evidence: readonly FaultEvidence[];
  /** Checks a capacity fault's transcript (bounded recompute per peer). */
  transcripts: TranscriptVerifier;
  metrics: Metrics;
  logger: Logger;
  now: () => number;
};

export class FaultCosigner {
  constructor(private readonly o: FaultCosignerOptions) {}

  /** Answers a proposal from `peer` (who pays for any transcript recompute): this attestor's signature, or why not. */
  async answer(proposal: FaultProposal, peer = "local"): Promise<FaultAnswerInput> {
    const decline = (
      reason: FaultDeclineReason,
      detail: string,
      lastSeenAt: number | null = null,
      earliestObservedAt: number | null = null,
      signsAt: number | null = null,
      receipt?: PendingReceipt,
    ): FaultAnswerInput => {
      this.o.metrics.attestFaults.inc({ event: "declined", reason });
      return { v: 1, outcome: "declined", reason, detail: detail.slice(0, 500), lastSeenAt, earliestObservedAt, signsAt, ...(receipt ? { receipt } : {}) };
    };
    if (proposal.chainId !== this.o.chainId) return decline("wrong_chain", `this attestor serves chain ${this.o.chainId}`);
    const fault: Fault = { leaseId: proposal.fault.leaseId, kind: proposal.fault.kind, observedAt: proposal.fault.observedAt };
    const evidence = this.o.evidence.find((entry) => entry.kind === fault.kind);
    const transcript = proposal.evidence;
    if (transcript && fault.kind !== FaultKind.capacity)
      return decline("bad_evidence", `a transcript is evidence of a capacity fault (kind ${FaultKind.capacity}) only, not kind ${fault.kind}`);
    if (!evidence && !transcript) {
      return decline(
        "unsupported_kind",
        `this attestor co-signs fault kinds ${this.o.evidence.map((entry) => entry.kind).join(", ")} from its own evidence, and kind ${FaultKind.capacity} with a transcript`,
      );
    }
    if (!(await this.o.chainView.isAttestor(this.o.address))) return decline("not_attestor", "this node's wallet does not hold ATTESTOR_ROLE");
    // Work only for proposals some attestor really signed.
    const offered: FaultSignature[] = [];
    for (const entry of proposal.signatures) {
      const signer = this.o.exchange.signer(fault, entry.signature);
      if (signer && signer === entry.signer && signer !== this.o.address && (await this.o.chainView.isAttestor(signer))) offered.push({ signer, signature: entry.signature });
    }
    if (!offered.length) return decline("bad_proposal", "no signature of an attestor over this fault");

    const lease = await readLease(this.o.publicClient, this.o.market, fault.leaseId);
    if (lease.status !== "Active") return decline("lease_not_active", `lease ${fault.leaseId} is ${lease.status}`);
    // Never in the future: an observedAt ahead of this attestor's clock claims what nobody saw yet.
    const latest = Math.floor(this.o.now() / 1000);
    if (fault.observedAt < lease.activatedAt || fault.observedAt >= lease.end || fault.observedAt > latest) {
      return decline("out_of_range", `observedAt ${fault.observedAt} is outside [${lease.activatedAt}, ${Math.min(lease.end - 1, latest)}]`);
    }
    const faultLease = { leaseId: fault.leaseId, provider: getAddress(lease.provider), machineId: lease.machineId, activatedAt: lease.activatedAt, end: lease.end };
    // A transcript is checked instead of this attestor's own evidence: it proves the fault to
    // anyone, so this attestor need not wait for a check of its own (a pass of its own since does
    // not wash a signed wrong answer either, but one after observedAt stops it signing, below).
    // A bad transcript is declined, never ignored.
    const verdict = transcript ? await this.o.transcripts.check(faultLease, fault, transcript, peer) : await evidence!.check(faultLease, fault);
    if (!verdict.ok) return decline(verdict.reason, verdict.detail, verdict.lastSeenAt ?? null, verdict.earliestObservedAt ?? null, verdict.signsAt ?? null, verdict.receipt);
    // A receipt of its own after observedAt (a capacity fault: an attestation of the machine
    // passing) would prove its signature false on chain, whatever the evidence: never sign then.
    const contradictedAt = await evidence?.contradictedAt?.(faultLease, fault.observedAt);
    if (contradictedAt !== undefined) {
      return decline(
        "seen_alive",
        `this attestor signed an attestation of machine ${lease.machineId} passing at ${contradictedAt}, after observedAt ${fault.observedAt}`,
        contradictedAt,
      );
    }

    const signature = await signFault(this.o.account, this.o.domain, fault);
    const mine: FaultSignature = { signer: this.o.address, signature };
    const existing = this.o.records.get(fault.leaseId, fault.kind);
    const sameFault = existing && existing.fault.observedAt === fault.observedAt;
    if (existing?.status === "collecting" && !sameFault) {
      // This attestor is collecting for its own observedAt: it signs the other one too and lets
      // whichever reaches a quorum first land.
    } else if (!existing || existing.status !== "collecting") {
      const nowMs = this.o.now();
      await this.o.records.save({
        leaseId: fault.leaseId,
        provider: getAddress(lease.provider),
        machineId: lease.machineId,
        fault,
        signatures: [mine, ...offered],
        ...(transcript ? { evidence: transcript } : {}),
        role: "cosigner",
        status: "collecting",
        createdAtMs: nowMs,
        updatedAtMs: nowMs,
        lastAskedAtMs: 0,
        minObservedAt: 0,
        submittedTx: null,
        landedBy: null,
        note: null,
      });
    } else {
      const merged = [...existing.signatures];
      for (const entry of [mine, ...offered]) if (!merged.some((held) => held.signer === entry.signer)) merged.push(entry);
      await this.o.records.update(existing, { signatures: merged });
    }
    this.o.metrics.attestFaults.inc({ event: "cosigned", reason: transcript ? "transcript" : "" });
    this.o.logger.warn(transcript ? "Co-signed a fault from the proposal's verified transcript" : "Co-signed a fault from this attestor's own evidence", {
      leaseId: fault.leaseId,
      kind: fault.kind,
      provider: lease.provider,
      observedAt: fault.observedAt,
      proposers: offered.map((entry) => entry.signer),
      ...(transcript ? { challengeId: transcript.challenge.id, challengeStartedAt: Math.floor(transcript.challenge.issuedAtMs / 1000) } : {}),
    });
    return { v: 1, outcome: "signed", signer: this.o.address, signature };
  }
}

/**
 * Faults: when a lease's provider has not answered this attestor's probes for longer than the
 * QoS window (kind 1, unresponsive), or the leased machine failed this attestor's in-lease
 * capacity challenge (kind 2, capacity: lease-checks/in-lease.ts), the attestor signs `Fault {leaseId, kind,
 * observedAt}` and asks the other attestors to co-sign that exact struct over
 * `/suanli/fault/1.0.0` (fault-exchange.ts). Once it holds `faultQuorum` signatures of distinct
 * on-chain attestors it submits them (fault-submit.ts) to `LeaseMarket.submitFault`, which stops
 * accrual at `observedAt` and pays the renter back with the SLA credit in the same transaction.
 *
 * Never faulting a live or honest provider: every signer, proposer and co-signer alike, holds its
 * own evidence (fault-evidence.ts, fault-cosigner.ts). If a co-signer heard from the provider
 * after `observedAt` it declines with its signed receipt of that heartbeat (`seen_alive`); if its
 * own evidence began later it declines with that start (`no_evidence`); the proposer moves
 * `observedAt` forward and asks again. Only staked attestors receive a proposal (never the
 * provider), an unsigned "seen alive" moves nothing, and a quorum already held is submitted
 * whatever else the round brought (fault-exchange.ts).
 *
 * `observedAt` is the start of the proposer's evidence (its first failed probe since its last
 * heartbeat, or its failed challenge; never before the lease's activation), moved later to the
 * latest co-signer's: the renter pays up to the moment every signer saw the fault.
 *
 * Every record is in level (fault-records.ts): a restarted attestor keeps collecting or
 * submitting where it stopped. Any attestor that co-signed also submits once it holds a quorum
 * and the lease is still active `backupSubmitDelayMs` later, so a proposer that goes away does
 * not strand the renter.
 */
import { getAddress, type Account, type Address, type Chain, type LocalAccount, type PublicClient, type Transport, type TypedDataDomain, type WalletClient } from "viem";
import { signFault } from "../../../common/chain/sign.js";
import type { CommitFraudProof } from "../../../common/attest/commit.js";
import type { RowRecomputer } from "../../../common/attest/verify.js";
import { FAULT_PROPOSAL_MAX_BYTES, faultAnswerSchema, faultProposalSchema } from "../../../common/attest/wire.js";
import type { TypedDataRecoverer } from "../../../common/eip712-recover.js";
import { FaultKind, type Fault } from "../../../common/eip712.js";
import type { CachedChainView } from "../../../common/offers/chain-view.js";
import type { SuanliHost } from "../../../common/p2p/host.js";
import { FAULT_PROTOCOL } from "../../../common/p2p/protocols.js";
import { handleProtocol } from "../../../common/p2p/reqresp.js";
import type { Logger } from "../../log/logger.js";
import type { Metrics } from "../../metrics/metrics.js";
import type { Store } from "../../store/store.js";
import { FaultCosigner } from "./fault-cosigner.js";
import { LivenessEvidence, type FaultEvidence } from "./fault-evidence.js";
import { FaultExchange } from "./fault-exchange.js";
import { capacityPassHeldUntil, FaultRecords, faultKey, type FaultRecord } from "./fault-records.js";
import { FaultSubmitter } from "./fault-submit.js";
import { TranscriptVerifier, transcriptOf } from "./fault-transcript.js";
import type { LeaseTracker, TrackedLease } from "./leases.js";
import { hasOutageEvidence, livenessFaultWindow, mayFaultAt, type LivenessProber, type ProbeResult, type ProbeState } from "./liveness.js";
import type { LivenessOptions } from "./options.js";
import { runDetached } from "../../../common/detached.js";

export type { FaultRecord, FaultStatus } from "./fault-records.js";

export type FaultCoordinatorOptions = {
  host: SuanliHost;
  chainId: number;
  domain: TypedDataDomain;
  market: Address;
  recoverer: TypedDataRecoverer;
  account: LocalAccount;
  publicClient: PublicClient<Transport, Chain>;
  walletClient: WalletClient<Transport, Chain, Account>;
  chainView: CachedChainView;
  store: Store;
  tracker: LeaseTracker;
  prober: LivenessProber;
  liveness: LivenessOptions;
  /** Evidence of further fault kinds this attestor co-signs (the capacity evidence of in-lease challenges). */
  evidence?: readonly FaultEvidence[];
  /** Recomputes opened rows of capacity faults' transcripts (the node's worker pool; inline without). */
  recompute?: RowRecomputer;
  /** Configured attestor addresses (`…/p2p/<peer id>`). */
  peers: readonly string[];
  /**
   * Reads AttestorStaking's current `faultWindow` (s), when staking is deployed: a liveness fault
   * is signed only once max(qosWindowSeconds, it) has passed after its observedAt (liveness.ts
   * mayFaultAt). Read at start and every FAULT_WINDOW_REFRESH_MS: a raise applies to faults
   * observed a day after it (FAULT_WINDOW_RAISE_NOTICE), so an attestor learns it in time; while
   * no read has succeeded for half a day, the longest window is assumed (livenessFaultWindow).
   */
  readFaultWindow?: () => Promise<number>;
  metrics: Metrics;
  logger: Logger;
  now?: () => number;
};

/** How often the staking's faultWindow is read again (well inside the contract's one-day raise notice). */
const FAULT_WINDOW_REFRESH_MS = 10 * 60_000;

export class FaultCoordinator {
  private faultWindowSeconds = 0;
  private faultWindowReadAtMs = 0;
  private readonly records: FaultRecords;
  private readonly exchange: FaultExchange;
  private readonly submitter: FaultSubmitter;
  private readonly cosigner: FaultCosigner;
  private readonly busy = new Set<string>();
  private timer: ReturnType<typeof setInterval> | undefined;
  private progressing: Promise<void> | undefined;
  private unhandle: (() => Promise<void>) | undefined;
  private readonly now: () => number;
  readonly address: Address;

  constructor(private readonly o: FaultCoordinatorOptions) {
    this.now = o.now ?? Date.now;
    this.address = getAddress(o.account.address);
    this.records = new FaultRecords(o.store, this.now);
    // A co-signer probes the provider before answering.
    const answerTimeoutMs = o.liveness.probeTimeoutMs + 10_000;
    this.exchange = new FaultExchange({
      host: o.host,
      chainId: o.chainId,
      domain: o.domain,
      account: o.account,
      recoverer: o.recoverer,
      chainView: o.chainView,
      answerTimeoutMs,
      logger: o.logger,
      now: this.now,
    });
    this.submitter = new FaultSubmitter({ ...o, records: this.records, now: this.now, resign: (record) => this.resign(record) });
    this.cosigner = new FaultCosigner({
      ...o,
      address: this.address,
      records: this.records,
      exchange: this.exchange,
      evidence: [new LivenessEvidence(o.prober, o.liveness, this.now, () => this.windowSeconds()), ...(o.evidence ?? [])],
      transcripts: new TranscriptVerifier({ domain: o.domain, isAttestor: (address) => o.chainView.isAttestor(address), recompute: o.recompute, now: this.now }),
      now: this.now,
    });
  }

  async start(): Promise<void> {
    await this.refreshFaultWindow();
    await this.records.load();
    await this.exchange.configure(this.o.peers);
    await this.exchange.serveIdentity();
    this.unhandle = await handleProtocol(this.o.host, FAULT_PROTOCOL, {
      requestSchema: faultProposalSchema,
      responseSchema: faultAnswerSchema,
      // A capacity fault's transcript carries opened rows (FAULT_EVIDENCE_MAX_ROWS of them at most).
      maxMessageBytes: FAULT_PROPOSAL_MAX_BYTES,
      timeoutMs: this.o.liveness.probeTimeoutMs + 10_000,
      maxInboundStreamsPerPeer: 4,
      handler: (proposal, context) => this.cosigner.answer(proposal, context.peer.toString()),
    });
    this.timer = setInterval(() => runDetached(this.progressAll(), this.o.logger, "Fault progress"), Math.max(200, this.o.liveness.probeIntervalMs));
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.unhandle?.();
    await this.exchange.stop();
    await this.progressing;
  }

  /** W: a liveness fault is signed only once this many seconds after its observedAt have passed. */
  windowSeconds(): number {
    return livenessFaultWindow({
      qosWindowSeconds: this.o.liveness.qosWindowSeconds,
      ...(this.o.readFaultWindow ? { staking: { windowSeconds: this.faultWindowSeconds, readAtMs: this.faultWindowReadAtMs } } : {}),
      nowMs: this.now(),
    });
  }

  private async refreshFaultWindow(): Promise<void> {
    if (!this.o.readFaultWindow) return;
    const nowMs = this.now();
    if (this.faultWindowReadAtMs && nowMs - this.faultWindowReadAtMs < FAULT_WINDOW_REFRESH_MS) return;
    const window = await this.o.readFaultWindow();
    if (window !== this.faultWindowSeconds && this.faultWindowReadAtMs) this.o.logger.info("The staking's fault window changed", { from: this.faultWindowSeconds, to: window });
    this.faultWindowSeconds = window;
    this.faultWindowReadAtMs = nowMs;
  }

  /** Whether this attestor may sign the liveness fault observed at `observedAt` of `leaseId` now. */
  private maySignLiveness(leaseId: bigint, observedAt: number): boolean {
    return mayFaultAt(this.o.prober.state(leaseId), observedAt, this.now(), this.windowSeconds());
  }

  /**
   * Until when (unix s) this attestor must not pass `machineId` of `provider`: a capacity fault of it that this
   * attestor signed (proposed or co-signed, landed or not: a signature given out can be submitted by anyone) is proved
   * false on chain by its own attestation issued in (observedAt, observedAt + W] (AttestorStaking.disputeCapacityFault),
   * so a pass then, e.g. to a requested challenge, would make its true fault slashable. W is the window this attestor
   * signs liveness faults by (max of the QoS window and the staking's), never below the staking's. Undefined: no hold.
   */
  passHeldUntil(provider: Address, machineId: number): number | undefined {
    return capacityPassHeldUntil(this.records.list(), this.address, provider, machineId, this.windowSeconds());
  }

  /** Every fault record, newest first. */
  list(): FaultRecord[] {
    return this.records.list();
  }

  /** The lease's fault of `kind` (unresponsive by default) this attestor proposed or co-signed. */
  get(leaseId: bigint, kind: number = FaultKind.unresponsive): FaultRecord | undefined {
    return this.records.get(leaseId, kind);
  }

  /** The prober's report after each probe of a tracked lease. */
  async onProbe(lease: TrackedLease, result: ProbeResult, state: ProbeState): Promise<void> {
    const record = this.records.get(lease.leaseId);
    if (result.ok) {
      // Back before a quorum agreed: the outage did not outlast the window for enough attestors.
      if (record?.status === "collecting" && (await this.validSignatures(record)).length < (await this.quorum())) {
        await this.records.update(record, { status: "abandoned", note: "the provider answered again before a quorum agreed" });
        this.o.metrics.attestFaults.inc({ event: "abandoned", reason: "" });
        this.o.logger.info("Fault abandoned: the provider answered again", { leaseId: lease.leaseId, provider: lease.provider });
      }
      return;
    }
    if (record?.status === "collecting" || record?.status === "landed" || record?.status === "ended") return;
    if (!hasOutageEvidence(state, Math.floor(this.now() / 1000), this.o.liveness)) return;
    // Quiet until the fault window after the outage's start has passed too (propose() checks it again).
    if (!this.maySignLiveness(lease.leaseId, Math.max(state.firstFailureAt ?? 0, lease.activatedAt))) return;
    this.o.logger.warn("Provider unresponsive beyond the QoS window: proposing a fault", {
      leaseId: lease.leaseId,
      provider: lease.provider,
      failedProbes: state.failures,
      lastSeenAt: state.lastSuccessAt ?? null,
    });
    await this.propose(lease, FaultKind.unresponsive, state.firstFailureAt ?? Math.floor(this.now() / 1000));
  }

  /**
   * Proposes a fault of `kind` observed from `evidenceAt` (unix s, the start of this attestor's
   * own evidence), unless one is already open, landed or ended for the lease. Returns the record.
   * A capacity fault from a wrong answer carries its transcript (`proof`: the failure's signed
   * transcript, trimmed to its wrong rows), observed no earlier than the challenge's start.
   */
  async propose(lease: TrackedLease, kind: number, evidenceAt: number, proof?: CommitFraudProof): Promise<FaultRecord | undefined> {
    const previous = this.records.get(lease.leaseId, kind);
    if (previous && previous.status !== "abandoned") return previous;
    const evidence = proof && kind === FaultKind.capacity ? await transcriptOf(this.o.domain, proof, this.o.recompute) : undefined;
    const from = evidence ? Math.max(evidenceAt, Math.floor(evidence.challenge.issuedAtMs / 1000)) : evidenceAt;
    const observedAt = Math.max(from, lease.activatedAt, previous?.minObservedAt ?? 0);
    if (observedAt >= lease.end) return undefined;
    if (!(await this.o.chainView.isAttestor(this.address))) {
      this.o.logger.warn("Cannot sign a fault: this wallet no longer holds ATTESTOR_ROLE", { leaseId: lease.leaseId });
      return undefined;
    }
    // A liveness fault waits out the fault window after observedAt (the next failed probe proposes again).
    if (kind === FaultKind.unresponsive && !this.maySignLiveness(lease.leaseId, observedAt)) return undefined;
    const fault: Fault = { leaseId: lease.leaseId, kind, observedAt };
    const signature = await signFault(this.o.account, this.o.domain, fault);
    const nowMs = this.now();
    const record: FaultRecord = {
      leaseId: lease.leaseId,
      provider: lease.provider,
      machineId: lease.machineId,
      fault,
      signatures: [{ signer: this.address, signature }],
      ...(evidence ? { evidence } : {}),
      role: "proposer",
      status: "collecting",
      createdAtMs: nowMs,
      updatedAtMs: nowMs,
      lastAskedAtMs: 0,
      minObservedAt: previous?.minObservedAt ?? 0,
      submittedTx: null,
      landedBy: null,
      note: null,
    };
    await this.records.save(record);
    this.o.metrics.attestFaults.inc({ event: "proposed", reason: "" });
    this.o.logger.warn("Fault proposed", { leaseId: lease.leaseId, kind, provider: lease.provider, observedAt, transcript: evidence ? evidence.challenge.id : null });
    // Not awaited: the prober (and a co-signer answering a proposal) must not wait for the
    // other attestors' answers.
    runDetached(this.progress(record), this.o.logger, "Fault progress", { leaseId: record.leaseId });
    return record;
  }

  /** The lease ended on-chain. */
  async onLeaseEnded(leaseId: bigint, reason: string): Promise<void> {
    this.o.prober.forget(leaseId);
    for (const record of this.records.ofLease(leaseId)) {
      if (record.status === "landed") continue;
      if (reason === "Faulted") {
        await this.records.update(record, { status: "landed", landedBy: record.landedBy ?? "other" });
        this.o.metrics.attestFaults.inc({ event: "landed", reason: "other" });
      } else if (record.status === "collecting") {
        await this.records.update(record, { status: "ended", note: `the lease ended: ${reason}` });
      }
    }
  }

  /** Moves every open record forward: ask for signatures, submit a quorum. */
  progressAll(): Promise<void> {
    if (this.progressing) return this.progressing;
    this.progressing = (async () => {
      await this.refreshFaultWindow().catch((error: unknown) => this.o.logger.warn("Could not read the staking's fault window; keeping the last one", {}, error));
      for (const record of this.records.open()) {
        try {
          await this.progress(record);
        } catch (error) {
          this.o.logger.warn("Fault progress failed", { leaseId: record.leaseId }, error);
        }
      }
    })().finally(() => {
      this.progressing = undefined;
    });
    return this.progressing;
  }

  private async progress(record: FaultRecord): Promise<void> {
    const key = faultKey(record.leaseId, record.fault.kind);
    if (record.status !== "collecting" || this.busy.has(key)) return;
    this.busy.add(key);
    try {
      if (!record.signatures.some((entry) => entry.signer === this.address)) {
        // A liveness fault moved to a later observedAt waits out its fault window before this attestor signs it.
        if (record.fault.kind !== FaultKind.unresponsive || !this.maySignLiveness(record.leaseId, record.fault.observedAt)) return;
        const signature = await signFault(this.o.account, this.o.domain, record.fault);
        await this.records.update(record, { signatures: [{ signer: this.address, signature }], lastAskedAtMs: 0 });
        this.o.logger.info("Signed the moved fault once its window passed", { leaseId: record.leaseId, observedAt: record.fault.observedAt });
      }
      const quorum = await this.quorum();
      let signatures = await this.validSignatures(record);
      if (signatures.length !== record.signatures.length) await this.records.update(record, { signatures });
      const nowMs = this.now();
      const mayAct = record.role === "proposer" || nowMs - record.createdAtMs >= this.o.liveness.backupSubmitDelayMs;
      if (signatures.length >= quorum) {
        if (mayAct) await this.submitter.submit(record);
        return;
      }
      // A co-signer asks the others too once the proposer has had its chance (it may have gone away).
      if (!mayAct || nowMs - record.lastAskedAtMs < Math.max(1_000, this.o.liveness.probeIntervalMs)) return;
      await this.records.update(record, { lastAskedAtMs: nowMs });
      await this.records.update(record, await this.exchange.ask(record));
      // A quorum held is submitted before any decline is acted on: what the others signed stands,
      // and no answer can make this attestor drop it (a move restarts the collection).
      signatures = record.signatures;
      if (signatures.length >= quorum) {
        await this.submitter.submit(record);
        return;
      }
      if (record.minObservedAt > record.fault.observedAt) await this.resign(record);
    } finally {
      this.busy.delete(key);
    }
  }

  /** Another attestor's evidence starts later than observedAt: sign a later one and start over. */
  private async resign(record: FaultRecord): Promise<void> {
    const tracked = this.o.tracker.get(record.leaseId);
    const observedAt = record.minObservedAt;
    if (!tracked || observedAt >= tracked.end) {
      await this.records.update(record, { status: "abandoned", note: "no time left in the lease for a later observedAt" });
      return;
    }
    const fault: Fault = { ...record.fault, observedAt };
    if (fault.kind === FaultKind.unresponsive && !this.maySignLiveness(record.leaseId, observedAt)) {
      // Not yet: progress() signs it once the fault window after the new observedAt has passed.
      await this.records.update(record, { fault, signatures: [], lastAskedAtMs: 0 });
      this.o.logger.info("Fault moved past another attestor's evidence; signing once its window passes", { leaseId: record.leaseId, kind: fault.kind, observedAt });
      return;
    }
    const signature = await signFault(this.o.account, this.o.domain, fault);
    await this.records.update(record, { fault, signatures: [{ signer: this.address, signature }], lastAskedAtMs: 0 });
    this.o.logger.info("Fault moved past another attestor's evidence", { leaseId: record.leaseId, kind: fault.kind, observedAt });
  }

  private async validSignatures(record: FaultRecord): Promise<FaultRecord["signatures"]> {
    const valid: FaultRecord["signatures"] = [];
    for (const entry of record.signatures) if (await this.o.chainView.isAttestor(entry.signer)) valid.push(entry);
    return valid;
  }

  private async quorum(): Promise<number> {
    return this.o.chainView.attestationQuorum();
  }
}

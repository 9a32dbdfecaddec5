/**
 * Faults: when a lease's provider has not answered this attestor's probes for longer than the
 * QoS window, the attestor signs `Fault {leaseId, kind: unresponsive, observedAt}` and asks the
 * other attestors to co-sign that exact struct over `/suanli/fault/1.0.0`. Once it holds
 * `faultQuorum` signatures of distinct on-chain attestors it submits them (ordered by signer) to
 * `LeaseMarket.submitFault`, which stops accrual at `observedAt` and pays the renter back with
 * the SLA credit in the same transaction.
 *
 * Never faulting a live provider: every signer, proposer and co-signer alike, holds its own
 * evidence (hasOutageEvidence): at least `minFailedProbes` failed probes in a row, the first
 * started at least `qosWindowSeconds` ago, watched without a gap; a co-signer also probes on
 * receipt of the proposal and that probe must fail too. A co-signer signs an `observedAt` only
 * within [its own first failed probe of the current outage, now]: never in the future, never
 * before what it saw itself. If it heard from the provider after `observedAt` it declines with
 * the time it last heard (`seen_alive`); if its own outage began later it declines with that
 * start (`no_evidence`); the proposer moves `observedAt` forward and asks again. So one lying
 * attestor, or an honest one cut off from a live provider, cannot fault it: the others answer
 * that they hear from it, and a blip shorter than the QoS window at another attestor is no
 * evidence either.
 *
 * `observedAt` is the start of the proposer's first failed probe since its last heartbeat
 * (never before the lease's activation), moved later to the latest co-signer's: the renter pays
 * up to the moment every signer saw the outage.
 *
 * Every record is in level: a restarted attestor keeps collecting or submitting where it stopped.
 * Any attestor that co-signed also submits once it holds a quorum and the lease is still active
 * `backupSubmitDelayMs` later, so a proposer that goes away does not strand the renter. Two
 * submitters racing is harmless: the loser's transaction is not sent (its simulation sees the
 * lease no longer active) or reverts with InvalidLeaseStatus, and it records the fault as landed.
 */
import type { PeerId } from "@libp2p/interface";
import { peerIdFromString } from "@libp2p/peer-id";
import { multiaddr } from "@multiformats/multiaddr";
import {
  getAddress,
  type Account,
  type Address,
  type Chain,
  type Hex,
  type LocalAccount,
  type PublicClient,
  type Transport,
  type TypedDataDomain,
  type WalletClient,
} from "viem";
import { signFaultAs } from "../../common/attest/liveness.js";
import { revertName } from "../../common/chain/tx.js";
import {
  faultAnswerSchema,
  faultProposalSchema,
  type FaultAnswerInput,
  type FaultDeclineReason,
  type FaultProposal,
  type FaultSignature,
} from "../../common/attest/wire.js";
import { leaseMarketAbi } from "../../common/abi.js";
import { orderFaultSignatures, readLease } from "../../common/chain/market.js";
import type { TypedDataRecoverer } from "../../common/eip712-recover.js";
import { FaultKind, type Fault } from "../../common/eip712.js";
import type { CachedChainView } from "../../common/offers/chain-view.js";
import type { SuanliHost } from "../../common/p2p/host.js";
import { FAULT_PROTOCOL } from "../../common/p2p/protocols.js";
import { handleProtocol, request } from "../../common/p2p/reqresp.js";
import type { Logger } from "../log/logger.js";
import type { Metrics } from "../metrics/metrics.js";
import { Bucket } from "../store/buckets.js";
import type { Repository, Store } from "../store/store.js";
import type { LeaseTracker, TrackedLease } from "./leases.js";
import { hasOutageEvidence, type LivenessProber, type ProbeResult, type ProbeState } from "./liveness.js";
import type { LivenessOptions } from "./options.js";
import { runDetached } from "../../common/detached.js";

/** How long a connected peer that does not serve the fault protocol is not asked again. */
const NOT_ATTESTOR_TTL_MS = 60_000;
/** Most attestors asked per round. */
const MAX_PEERS_ASKED = 64;
/**
 * Gas limit of a submitFault sent without a simulation: about 128,000 are used with two
 * signatures (README, "Gas"); each further signature costs a recovery and a role lookup.
 */
const SUBMIT_FAULT_GAS_BASE = 250_000n;
const SUBMIT_FAULT_GAS_PER_SIGNATURE = 30_000n;

export type FaultStatus =
  /** Collecting signatures, or holding a quorum waiting to submit. */
  | "collecting"
  /** submitFault succeeded (by this attestor or another). */
  | "landed"
  /** The lease ended another way (renter closed, completed, expired...). */
  | "ended"
  /** The provider answered again before a quorum was reached. */
  | "abandoned";

/** A fault this attestor proposed or co-signed. */
export type FaultRecord = {
  leaseId: bigint;
  provider: Address;
  fault: Fault;
  /** Distinct attestor signatures of exactly `fault`, this attestor's included. */
  signatures: FaultSignature[];
  role: "proposer" | "cosigner";
  status: FaultStatus;
  createdAtMs: number;
  updatedAtMs: number;
  lastAskedAtMs: number;
  /** observedAt may not be earlier than this: another attestor heard from the provider just before. */
  minObservedAt: number;
  submittedTx: Hex | null;
  landedBy: "self" | "other" | null;
  note: string | null;
};

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
  /** Configured attestor addresses (`…/p2p/<peer id>`). */
  peers: readonly string[];
  metrics: Metrics;
  logger: Logger;
  now?: () => number;
};

export class FaultCoordinator {
  private readonly records = new Map<string, FaultRecord>();
  private readonly repo: Repository<FaultRecord>;
  private readonly busy = new Set<string>();
  private readonly configuredPeers: PeerId[] = [];
  /** Peer id → the attestor address it signed as, learnt from its answers. */
  private readonly peerSigners = new Map<string, Address>();
  /** Connected peers that do not serve the fault protocol → until when they are not asked again (unix ms). */
  private readonly notAttestors = new Map<string, number>();
  private timer: ReturnType<typeof setInterval> | undefined;
  private progressing: Promise<void> | undefined;
  private unhandle: (() => Promise<void>) | undefined;
  private readonly now: () => number;
  readonly address: Address;

  constructor(private readonly o: FaultCoordinatorOptions) {
    this.repo = o.store.repository<FaultRecord>(Bucket.attestFaults);
    this.now = o.now ?? Date.now;
    this.address = getAddress(o.account.address);
  }

  async start(): Promise<void> {
    for await (const [key, record] of this.repo.entries()) this.records.set(key, record);
    for (const addr of this.o.peers) {
      const ma = multiaddr(addr);
      const peerId = ma.getComponents().find((component) => component.name === "p2p")?.value;
      if (!peerId) continue;
      const peer = peerIdFromString(peerId);
      if (peer.equals(this.o.host.peerId)) continue;
      this.configuredPeers.push(peer);
      await this.o.host.peerStore.merge(peer, { multiaddrs: [ma.decapsulateCode(421)] }).catch(() => undefined);
    }
    this.unhandle = await handleProtocol(this.o.host, FAULT_PROTOCOL, {
      requestSchema: faultProposalSchema,
      responseSchema: faultAnswerSchema,
      maxMessageBytes: 8 * 1024,
      // The co-signer probes the provider before answering.
      timeoutMs: this.o.liveness.probeTimeoutMs + 10_000,
      maxInboundStreamsPerPeer: 4,
      handler: (proposal) => this.answerProposal(proposal),
    });
    this.timer = setInterval(() => runDetached(this.progressAll(), this.o.logger, "Fault progress"), Math.max(200, this.o.liveness.probeIntervalMs));
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.unhandle?.();
    await this.progressing;
  }

  /** Every fault record, newest first. */
  list(): FaultRecord[] {
    return [...this.records.values()].sort((a, b) => b.createdAtMs - a.createdAtMs);
  }

  get(leaseId: bigint): FaultRecord | undefined {
    return this.records.get(leaseId.toString());
  }

  /** The prober's report after each probe of a tracked lease. */
  async onProbe(lease: TrackedLease, result: ProbeResult, state: ProbeState): Promise<void> {
    const record = this.records.get(lease.leaseId.toString());
    if (result.ok) {
      // Back before a quorum agreed: the outage did not outlast the window for enough attestors.
      if (record?.status === "collecting" && (await this.validSignatures(record)).length < (await this.quorum())) {
        await this.update(record, { status: "abandoned", note: "the provider answered again before a quorum agreed" });
        this.o.metrics.attestFaults.inc({ event: "abandoned", reason: "" });
        this.o.logger.info("Fault abandoned: the provider answered again", { leaseId: lease.leaseId, provider: lease.provider });
      }
      return;
    }
    if (record?.status === "collecting" || record?.status === "landed" || record?.status === "ended") return;
    if (!hasOutageEvidence(state, Math.floor(this.now() / 1000), this.o.liveness)) return;
    await this.propose(lease, state);
  }

  /** The lease ended on-chain. */
  async onLeaseEnded(leaseId: bigint, reason: string): Promise<void> {
    this.o.prober.forget(leaseId);
    const record = this.records.get(leaseId.toString());
    if (!record || record.status === "landed") return;
    if (reason === "Faulted") {
      await this.update(record, { status: "landed", landedBy: record.landedBy ?? "other" });
      this.o.metrics.attestFaults.inc({ event: "landed", reason: "other" });
    } else if (record.status === "collecting") {
      await this.update(record, { status: "ended", note: `the lease ended: ${reason}` });
    }
  }

  private async propose(lease: TrackedLease, state: ProbeState): Promise<void> {
    const previous = this.records.get(lease.leaseId.toString());
    const observedAt = Math.max(state.firstFailureAt ?? Math.floor(this.now() / 1000), lease.activatedAt, previous?.minObservedAt ?? 0);
    if (observedAt >= lease.end) return;
    if (!(await this.o.chainView.isAttestor(this.address))) {
      this.o.logger.warn("Cannot sign a fault: this wallet no longer holds ATTESTOR_ROLE", { leaseId: lease.leaseId });
      return;
    }
    const fault: Fault = { leaseId: lease.leaseId, kind: FaultKind.unresponsive, observedAt };
    const signature = await signFaultAs(this.o.account, this.o.domain, fault);
    const nowMs = this.now();
    const record: FaultRecord = {
      leaseId: lease.leaseId,
      provider: lease.provider,
      fault,
      signatures: [{ signer: this.address, signature }],
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
    await this.save(record);
    this.o.metrics.attestFaults.inc({ event: "proposed", reason: "" });
    this.o.logger.warn("Provider unresponsive beyond the QoS window: fault proposed", {
      leaseId: lease.leaseId,
      provider: lease.provider,
      observedAt,
      failedProbes: state.failures,
      lastSeenAt: state.lastSuccessAt ?? null,
    });
    // Not awaited: the prober (and a co-signer answering a proposal) must not wait for the
    // other attestors' answers.
    runDetached(this.progress(record), this.o.logger, "Fault progress", { leaseId: record.leaseId });
  }

  /** Moves every open record forward: ask for signatures, submit a quorum. */
  progressAll(): Promise<void> {
    if (this.progressing) return this.progressing;
    this.progressing = (async () => {
      for (const record of this.records.values()) {
        if (record.status !== "collecting") continue;
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
    const key = record.leaseId.toString();
    if (record.status !== "collecting" || this.busy.has(key)) return;
    this.busy.add(key);
    try {
      const quorum = await this.quorum();
      let signatures = await this.validSignatures(record);
      if (signatures.length !== record.signatures.length) await this.update(record, { signatures });
      const nowMs = this.now();
      if (signatures.length >= quorum) {
        if (record.role === "proposer" || nowMs - record.createdAtMs >= this.o.liveness.backupSubmitDelayMs) await this.submit(record);
        return;
      }
      // A co-signer asks the others too once the proposer has had its chance (it may have gone away).
      const mayAsk = record.role === "proposer" || nowMs - record.createdAtMs >= this.o.liveness.backupSubmitDelayMs;
      if (!mayAsk || nowMs - record.lastAskedAtMs < Math.max(1_000, this.o.liveness.probeIntervalMs)) return;
      await this.update(record, { lastAskedAtMs: nowMs });
      await this.askPeers(record);
      if (record.minObservedAt > record.fault.observedAt) {
        await this.resign(record);
        return;
      }
      signatures = record.signatures;
      if (signatures.length >= quorum) await this.submit(record);
    } finally {
      this.busy.delete(key);
    }
  }

  /** Another attestor heard from the provider after observedAt: sign a later one and start over. */
  private async resign(record: FaultRecord): Promise<void> {
    const tracked = this.o.tracker.get(record.leaseId);
    const observedAt = record.minObservedAt;
    if (!tracked || observedAt >= tracked.end) {
      await this.update(record, { status: "abandoned", note: "no time left in the lease for a later observedAt" });
      return;
    }
    const fault: Fault = { ...record.fault, observedAt };
    const signature = await signFaultAs(this.o.account, this.o.domain, fault);
    await this.update(record, { fault, signatures: [{ signer: this.address, signature }], lastAskedAtMs: 0 });
    this.o.logger.info("Fault moved past another attestor's last heartbeat", { leaseId: record.leaseId, observedAt });
  }

  /**
   * The attestors to ask: configured ones, known peers that serve the fault protocol, and the
   * other connected peers. Identify tells a peer's protocols only as they were when the
   * connection opened, and a node starts its attestor role after joining the network, so a
   * connected attestor may not be listed as one yet; a connected peer that turns out not to
   * serve the protocol is left alone for a while.
   */
  private async attestorPeers(): Promise<PeerId[]> {
    const nowMs = this.now();
    const peers = new Map<string, PeerId>();
    for (const peer of this.configuredPeers) peers.set(peer.toString(), peer);
    const known = await this.o.host.peerStore.all({ filters: [(peer) => peer.protocols.includes(FAULT_PROTOCOL)], limit: 1_000 }).catch(() => []);
    for (const peer of known) if (!peer.id.equals(this.o.host.peerId)) peers.set(peer.id.toString(), peer.id);
    for (const peer of this.o.host.getPeers()) {
      const key = peer.toString();
      if ((this.notAttestors.get(key) ?? 0) > nowMs) continue;
      peers.set(key, peer);
    }
    return [...peers.values()].slice(0, MAX_PEERS_ASKED);
  }

  private async askPeers(record: FaultRecord): Promise<void> {
    const held = new Set(record.signatures.map((entry) => entry.signer));
    const peers = (await this.attestorPeers()).filter((peer) => {
      const signer = this.peerSigners.get(peer.toString());
      return !signer || !held.has(signer);
    });
    if (!peers.length) {
      this.o.logger.debug("No other attestor to ask for a fault signature", { leaseId: record.leaseId });
      return;
    }
    const proposal = { v: 1 as const, chainId: this.o.chainId, fault: record.fault, signatures: record.signatures };
    const answers = await Promise.allSettled(
      peers.map(async (peer) => ({
        peer,
        answer: await request(this.o.host, peer, FAULT_PROTOCOL, proposal, {
          responseSchema: faultAnswerSchema,
          timeoutMs: this.o.liveness.probeTimeoutMs + 10_000,
          maxMessageBytes: 2_048,
        }),
      })),
    );
    const signatures = [...record.signatures];
    let minObservedAt = record.minObservedAt;
    for (const [index, settled] of answers.entries()) {
      if (settled.status === "rejected") {
        if ((settled.reason as Error)?.name === "ProtocolNotSupportedError") this.notAttestors.set(peers[index]!.toString(), this.now() + NOT_ATTESTOR_TTL_MS);
        continue;
      }
      const { peer, answer } = settled.value;
      this.notAttestors.delete(peer.toString());
      if (answer.outcome === "declined") {
        this.o.logger.info("Attestor declined to co-sign a fault", { leaseId: record.leaseId, peer: peer.toString(), reason: answer.reason, detail: answer.detail });
        if (answer.reason === "seen_alive" && answer.lastSeenAt !== null && answer.lastSeenAt >= record.fault.observedAt) {
          minObservedAt = Math.max(minObservedAt, answer.lastSeenAt + 1);
        }
        // Its own outage began later: it can sign from then on, once it has watched the whole window.
        if (answer.reason === "no_evidence" && answer.earliestObservedAt !== null && answer.earliestObservedAt > record.fault.observedAt) {
          minObservedAt = Math.max(minObservedAt, Math.min(answer.earliestObservedAt, Math.floor(this.now() / 1000)));
        }
        continue;
      }
      const signer = this.faultSigner(record.fault, answer.signature);
      if (!signer || signer !== answer.signer || !(await this.o.chainView.isAttestor(signer))) {
        this.o.logger.warn("Ignored a fault signature that is not an attestor's", { leaseId: record.leaseId, peer: peer.toString(), claimed: answer.signer });
        continue;
      }
      this.peerSigners.set(peer.toString(), signer);
      if (signatures.some((entry) => entry.signer === signer)) continue;
      signatures.push({ signer, signature: answer.signature });
    }
    await this.update(record, { signatures, minObservedAt });
  }

  private async submit(record: FaultRecord): Promise<void> {
    const lease = await readLease(this.o.publicClient, this.o.market, record.leaseId);
    if (lease.status !== "Active") {
      await this.settleFromChain(record, lease.status, lease.endReason);
      return;
    }
    const signatures = orderFaultSignatures(record.signatures);
    try {
      const hash = await this.send(record.fault, signatures);
      await this.update(record, { submittedTx: hash });
      this.o.metrics.attestFaults.inc({ event: "submitted", reason: "" });
      const receipt = await this.o.publicClient.waitForTransactionReceipt({ hash });
      if (receipt.status === "success") {
        await this.update(record, { status: "landed", landedBy: "self", note: null });
        this.o.metrics.attestFaults.inc({ event: "landed", reason: "self" });
        this.o.logger.warn("Fault submitted: the lease ended and the renter was credited", {
          leaseId: record.leaseId,
          provider: record.provider,
          observedAt: record.fault.observedAt,
          signers: record.signatures.map((entry) => entry.signer),
          transaction: hash,
        });
        return;
      }
      const after = await readLease(this.o.publicClient, this.o.market, record.leaseId);
      await this.settleFromChain(record, after.status, after.endReason);
    } catch (error) {
      const name = revertName(error);
      if (name === "InvalidLeaseStatus") {
        const after = await readLease(this.o.publicClient, this.o.market, record.leaseId);
        await this.settleFromChain(record, after.status, after.endReason);
        return;
      }
      if (name === "FaultQuorumNotMet" || name === "NotAttestor") this.o.chainView.invalidateAttestors();
      if (name === "FaultObservedOutOfRange") {
        const tracked = this.o.tracker.get(record.leaseId);
        if (tracked && record.fault.observedAt >= tracked.end) {
          await this.update(record, { status: "abandoned", note: "observedAt is past the lease's end" });
          return;
        }
        // The chain's clock has not reached observedAt yet: the next round tries again.
      }
      if (name === "FaultSubmissionClosed") {
        // LeaseMarket.FAULT_SUBMISSION_WINDOW after observedAt this fault can no longer land: sign one observed
        // now and collect again (co-signers only sign it if the provider is still silent to them too).
        await this.update(record, { minObservedAt: Math.max(record.minObservedAt, Math.floor(this.now() / 1000)), note: "the fault's submission window closed" });
        await this.resign(record);
        return;
      }
      await this.update(record, { note: `submitFault failed: ${name ?? (error as Error)?.message?.split("\n")[0] ?? String(error)}` });
      this.o.logger.warn("submitFault failed; retrying", { leaseId: record.leaseId, error: name }, name ? undefined : error);
    }
  }

  /**
   * Simulates submitFault, then sends it. A simulation runs against the latest block, whose
   * timestamp on an idle chain (a devnet mines only when a transaction comes) can lag our clock:
   * observedAt then looks "in the future" although the block this transaction opens will be
   * later. In exactly that case the transaction is sent without a simulation, with a fixed gas limit.
   */
  private async send(fault: Fault, signatures: Hex[]): Promise<Hex> {
    const call = { account: this.o.account, address: this.o.market, abi: leaseMarketAbi, functionName: "submitFault" as const, args: [fault, signatures] as const };
    try {
      const { request: simulated } = await this.o.publicClient.simulateContract(call);
      return await this.o.walletClient.writeContract(simulated);
    } catch (error) {
      if (revertName(error) !== "FaultObservedOutOfRange") throw error;
      const head = await this.o.publicClient.getBlock({ blockTag: "latest" });
      const nowS = Math.floor(this.now() / 1000);
      if (!(Number(head.timestamp) < fault.observedAt && fault.observedAt <= nowS)) throw error;
      this.o.logger.debug("The chain's latest block is older than observedAt; sending without a simulation", { leaseId: fault.leaseId, head: head.timestamp });
      return this.o.walletClient.writeContract({ ...call, chain: this.o.walletClient.chain, gas: SUBMIT_FAULT_GAS_BASE + SUBMIT_FAULT_GAS_PER_SIGNATURE * BigInt(signatures.length) });
    }
  }

  private async settleFromChain(record: FaultRecord, status: string, endReason: string): Promise<void> {
    if (endReason === "Faulted") {
      await this.update(record, { status: "landed", landedBy: record.landedBy ?? "other" });
      this.o.metrics.attestFaults.inc({ event: "landed", reason: "other" });
    } else if (status !== "Active") {
      await this.update(record, { status: "ended", note: `the lease is ${status} (${endReason})` });
    }
  }

  /** The fault exchange's server side: co-sign only what this attestor observed itself. */
  private async answerProposal(proposal: FaultProposal): Promise<FaultAnswerInput> {
    const decline = (reason: FaultDeclineReason, detail: string, lastSeenAt: number | null = null, earliestObservedAt: number | null = null): FaultAnswerInput => {
      this.o.metrics.attestFaults.inc({ event: "declined", reason });
      return { v: 1, outcome: "declined", reason, detail, lastSeenAt, earliestObservedAt };
    };
    if (proposal.chainId !== this.o.chainId) return decline("wrong_chain", `this attestor serves chain ${this.o.chainId}`);
    const fault: Fault = { leaseId: proposal.fault.leaseId, kind: proposal.fault.kind, observedAt: proposal.fault.observedAt };
    if (fault.kind !== FaultKind.unresponsive) return decline("unsupported_kind", "only unresponsive faults are co-signed from liveness probes");
    if (!(await this.o.chainView.isAttestor(this.address))) return decline("not_attestor", "this node's wallet does not hold ATTESTOR_ROLE");
    // Work only for proposals some attestor really signed.
    const offered: FaultSignature[] = [];
    for (const entry of proposal.signatures) {
      const signer = this.faultSigner(fault, entry.signature);
      if (signer && signer === entry.signer && signer !== this.address && (await this.o.chainView.isAttestor(signer))) offered.push({ signer, signature: entry.signature });
    }
    if (!offered.length) return decline("bad_proposal", "no signature of an attestor over this fault");

    const lease = await readLease(this.o.publicClient, this.o.market, fault.leaseId);
    if (lease.status !== "Active") return decline("lease_not_active", `lease ${fault.leaseId} is ${lease.status}`);
    // Never in the future: an observedAt ahead of this attestor's clock claims an outage nobody saw yet.
    const latest = Math.floor(this.now() / 1000);
    if (fault.observedAt < lease.activatedAt || fault.observedAt >= lease.end || fault.observedAt > latest) {
      return decline("out_of_range", `observedAt ${fault.observedAt} is outside [${lease.activatedAt}, ${Math.min(lease.end - 1, latest)}]`);
    }
    const own = this.o.prober.state(fault.leaseId);
    if (own?.lastSuccessAt !== undefined && own.lastSuccessAt > fault.observedAt) {
      return decline("seen_alive", `this attestor got a heartbeat at ${own.lastSuccessAt}, after observedAt`, own.lastSuccessAt);
    }
    const probe = await this.o.prober.probe({ leaseId: fault.leaseId, provider: getAddress(lease.provider) });
    if (probe.ok) return decline("provider_alive", "the provider answered this attestor's probe just now", Math.floor(this.now() / 1000));
    // This attestor's own evidence: its probes failed over the whole QoS window, from no later than observedAt.
    const evidence = this.o.prober.state(fault.leaseId);
    const nowS = Math.floor(this.now() / 1000);
    const firstFailureAt = evidence?.firstFailureAt ?? null;
    if (firstFailureAt === null || fault.observedAt < firstFailureAt) {
      return decline("no_evidence", `observedAt ${fault.observedAt} is before this attestor's own first failed probe${firstFailureAt === null ? "" : ` at ${firstFailureAt}`}`, null, firstFailureAt);
    }
    if (!hasOutageEvidence(evidence, nowS, this.o.liveness)) {
      return decline(
        "no_evidence",
        `this attestor's probes failed ${evidence?.failures ?? 0} times since ${firstFailureAt}; it signs after ${this.o.liveness.minFailedProbes} failures over ${this.o.liveness.qosWindowSeconds} s`,
        null,
        firstFailureAt,
      );
    }

    const signature = await signFaultAs(this.o.account, this.o.domain, fault);
    const mine: FaultSignature = { signer: this.address, signature };
    const key = fault.leaseId.toString();
    const existing = this.records.get(key);
    const sameFault = existing && existing.fault.observedAt === fault.observedAt && existing.fault.kind === fault.kind;
    if (existing?.status === "collecting" && !sameFault) {
      // This attestor is collecting for its own observedAt: it signs the other one too and lets
      // whichever reaches a quorum first land.
    } else if (!existing || existing.status !== "collecting") {
      const nowMs = this.now();
      await this.save({
        leaseId: fault.leaseId,
        provider: getAddress(lease.provider),
        fault,
        signatures: [mine, ...offered],
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
      await this.update(existing, { signatures: merged });
    }
    this.o.metrics.attestFaults.inc({ event: "cosigned", reason: "" });
    this.o.logger.warn("Co-signed a fault: the provider does not answer this attestor either", {
      leaseId: fault.leaseId,
      provider: lease.provider,
      observedAt: fault.observedAt,
      proposers: offered.map((entry) => entry.signer),
    });
    return { v: 1, outcome: "signed", signer: this.address, signature };
  }

  private faultSigner(fault: Fault, signature: Hex): Address | undefined {
    return this.o.recoverer.recover(this.o.recoverer.digest("Fault", fault), signature);
  }

  private async validSignatures(record: FaultRecord): Promise<FaultSignature[]> {
    const valid: FaultSignature[] = [];
    for (const entry of record.signatures) if (await this.o.chainView.isAttestor(entry.signer)) valid.push(entry);
    return valid;
  }

  private async quorum(): Promise<number> {
    return this.o.chainView.attestationQuorum();
  }

  private async save(record: FaultRecord): Promise<void> {
    this.records.set(record.leaseId.toString(), record);
    await this.repo.put(record.leaseId.toString(), record);
  }

  private async update(record: FaultRecord, changes: Partial<FaultRecord>): Promise<void> {
    Object.assign(record, changes, { updatedAtMs: this.now() });
    await this.repo.put(record.leaseId.toString(), record);
  }
}

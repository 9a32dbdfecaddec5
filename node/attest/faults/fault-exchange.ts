/**
 * The proposer's side of `/suanli/fault/1.0.0`: which attestors to ask, and what their answers
 * mean (docs/attestation.md, "Who receives a fault proposal").
 *
 * - A proposal goes only to peers that proved they speak for a staked attestor: each is asked
 *   first, over `/suanli/attestor-identity/1.0.0`, for its signed peer binding
 *   (common/attest/attestor-peer.ts), which must name the Noise-authenticated peer that sent it
 *   and recover to an address the chain counts as an attestor, neither the lease's provider nor
 *   at the provider's registered peer id. The provider, and any other connected peer, never sees
 *   a proposal (it could otherwise answer it, or end the lease first).
 * - A signature counts only if it recovers to the attestor that claims it and that attestor holds
 *   ATTESTOR_ROLE.
 * - A decline moves the earliest observedAt the others will sign only on what its sender stands
 *   behind: `seen_alive` only with a signed ProbeReceipt of an on-chain attestor, for this lease,
 *   taken after observedAt's second (an unsigned "seen alive" time moves nothing);
 *   `no_evidence` from a verified attestor peer (the start of its own evidence). faults.ts submits
 *   a quorum it holds before acting on any move, so no answer can make it drop one.
 */
import type { PeerId } from "@libp2p/interface";
import { peerIdFromString } from "@libp2p/peer-id";
import { multiaddr } from "@multiformats/multiaddr";
import type { Address, Hex, TypedDataDomain } from "viem";
import { attestorIdentitySchema, checkAttestorIdentity, signAttestorPeer, attestorIdentityRequestSchema } from "../../../common/attest/attestor-peer.js";
import { recoverProbeReceiptSigner } from "../../../common/attest/liveness.js";
import { faultAnswerSchema, type FaultAnswer, type FaultSignature } from "../../../common/attest/wire.js";
import type { TypedDataRecoverer } from "../../../common/eip712-recover.js";
import type { Fault } from "../../../common/eip712.js";
import type { CachedChainView } from "../../../common/offers/chain-view.js";
import type { SuanliHost } from "../../../common/p2p/host.js";
import { ATTESTOR_IDENTITY_PROTOCOL, FAULT_PROTOCOL } from "../../../common/p2p/protocols.js";
import { handleProtocol, request } from "../../../common/p2p/reqresp.js";
import type { LocalSigner } from "../../../common/chain/sign.js";
import type { Logger } from "../../log/logger.js";
import type { FaultRecord } from "./fault-records.js";

/** How long a connected peer that does not serve the protocols, or whose binding fails, is not asked again. */
const NOT_ATTESTOR_TTL_MS = 60_000;
/** How often "No other attestor to ask" is logged at warn (at debug in between). */
const NO_PEERS_WARNING_INTERVAL_MS = 60_000;
/** Most attestors asked per round. */
const MAX_PEERS_ASKED = 64;
/** How long a peer may take to show its binding. */
const IDENTITY_TIMEOUT_MS = 5_000;
/** Verified bindings remembered (peer id → attestor). */
const MAX_BINDINGS = 1_024;

export type FaultExchangeOptions = {
  host: SuanliHost;
  chainId: number;
  /** suanliDomain(chainId, market): peer bindings and probe receipts are signed in it. */
  domain: TypedDataDomain;
  /** This attestor's key: signs its own peer binding. */
  account: LocalSigner;
  recoverer: TypedDataRecoverer;
  chainView: CachedChainView;
  /** How long one peer may take to answer (it probes the provider first). */
  answerTimeoutMs: number;
  logger: Logger;
  now: () => number;
};

/** What one round of asking learnt: the signatures held now and the earliest observedAt the others would sign. */
export type AskResult = { signatures: FaultSignature[]; minObservedAt: number };

export class FaultExchange {
  private readonly configuredPeers: PeerId[] = [];
  /** Connected peers that do not serve the fault protocol, or showed no valid binding → until when they are not asked again (unix ms). */
  private readonly notAttestors = new Map<string, number>();
  /** Peer id → the attestor its signed binding names (checked against the chain each round). */
  private readonly bindings = new Map<string, Address>();
  private unhandle: (() => Promise<void>) | undefined;
  /** When "No other attestor to ask" was last logged at warn (unix ms). */
  private lastNoPeersWarningMs = -Infinity;

  constructor(private readonly o: FaultExchangeOptions) {}

  /** Adds the configured attestor addresses (`…/p2p/<peer id>`) to the peer store. */
  async configure(peers: readonly string[]): Promise<void> {
    for (const addr of peers) {
      const ma = multiaddr(addr);
      const peerId = ma.getComponents().find((component) => component.name === "p2p")?.value;
      if (!peerId) continue;
      const peer = peerIdFromString(peerId);
      if (peer.equals(this.o.host.peerId)) continue;
      this.configuredPeers.push(peer);
      await this.o.host.peerStore.merge(peer, { multiaddrs: [ma.decapsulateCode(421)] }).catch(() => undefined);
    }
  }

  /** Answers `/suanli/attestor-identity/1.0.0` with this attestor's binding to this node's peer id (signed once). */
  async serveIdentity(): Promise<void> {
    const attestor = this.o.account.address;
    const peerId = this.o.host.peerId.toString();
    const signature = await signAttestorPeer(this.o.account, this.o.domain, { attestor, peerId });
    const identity = { v: 1 as const, attestor, peerId, signature };
    this.unhandle = await handleProtocol(this.o.host, ATTESTOR_IDENTITY_PROTOCOL, {
      requestSchema: attestorIdentityRequestSchema,
      responseSchema: attestorIdentitySchema,
      maxMessageBytes: 1_024,
      timeoutMs: IDENTITY_TIMEOUT_MS,
      maxInboundStreamsPerPeer: 2,
      handler: (body) => {
        if (body.chainId !== this.o.chainId) throw new Error(`this attestor serves chain ${this.o.chainId}`);
        return identity;
      },
    });
  }

  async stop(): Promise<void> {
    await this.unhandle?.();
    this.unhandle = undefined;
  }

  /** The attestor that signed `fault`, if the signature recovers. */
  signer(fault: Fault, signature: Hex): Address | undefined {
    return this.o.recoverer.recover(this.o.recoverer.digest("Fault", fault), signature);
  }

  /**
   * The peers that might be attestors: configured ones, known peers that serve the fault protocol,
   * and the other connected peers. Identify tells a peer's protocols only as they were when the
   * connection opened, and a node starts its attestor role after joining the network, so a
   * connected attestor may not be listed as one yet; a connected peer that turns out not to be one
   * is left alone for a while. None of them is sent a proposal before its binding checks out.
   */
  private async candidatePeers(): Promise<PeerId[]> {
    const nowMs = this.o.now();
    const peers = new Map<string, PeerId>();
    for (const peer of this.configuredPeers) peers.set(peer.toString(), peer);
    const known = await this.o.host.peerStore.all({ filters: [(peer) => peer.protocols.includes(FAULT_PROTOCOL)], limit: 1_000 }).catch(() => []);
    for (const peer of known) if (!peer.id.equals(this.o.host.peerId)) peers.set(peer.id.toString(), peer.id);
    for (const peer of this.o.host.getPeers()) peers.set(peer.toString(), peer);
    for (const key of peers.keys()) if ((this.notAttestors.get(key) ?? 0) > nowMs) peers.delete(key);
    return [...peers.values()].slice(0, MAX_PEERS_ASKED);
  }

  /** The attestor `peer` speaks for, asking it for its binding when not known yet; undefined when it shows none that checks out. */
  private async attestorOf(peer: PeerId): Promise<Address | undefined> {
    const key = peer.toString();
    const known = this.bindings.get(key);
    if (known) return known;
    let detail: string;
    try {
      const answer = await request(
        this.o.host,
        peer,
        ATTESTOR_IDENTITY_PROTOCOL,
        { v: 1, chainId: this.o.chainId },
        {
          responseSchema: attestorIdentitySchema,
          timeoutMs: IDENTITY_TIMEOUT_MS,
          maxMessageBytes: 1_024,
        },
      );
      const checked = await checkAttestorIdentity(this.o.domain, answer, key);
      if (checked.ok) {
        this.bindings.set(key, checked.attestor);
        while (this.bindings.size > MAX_BINDINGS) this.bindings.delete(this.bindings.keys().next().value!);
        return checked.attestor;
      }
      detail = checked.detail;
    } catch (error) {
      detail =
        (error as Error)?.name === "ProtocolNotSupportedError" ? "it serves no attestor identity" : `${(error as Error)?.name ?? "Error"}: ${(error as Error)?.message ?? error}`;
    }
    this.notAttestors.set(key, this.o.now() + NOT_ATTESTOR_TTL_MS);
    this.o.logger.debug("Not sending fault proposals to a peer that shows no attestor binding", { peer: key, detail });
    return undefined;
  }

  /**
   * The peers to send `record`'s proposal to, with the attestor each speaks for: a binding that
   * checks out, to an on-chain attestor other than the lease's provider, at a peer other than
   * the provider's registered one, whose signature the record does not hold yet.
   */
  private async cosignerPeers(record: FaultRecord): Promise<{ peer: PeerId; attestor: Address }[]> {
    const held = new Set(record.signatures.map((entry) => entry.signer));
    const providerPeer = (await this.o.chainView.getProvider(record.provider).catch(() => undefined))?.peerId;
    const candidates = (await this.candidatePeers()).filter((peer) => peer.toString() !== providerPeer);
    const checked = await Promise.all(
      candidates.map(async (peer) => {
        const attestor = await this.attestorOf(peer);
        if (!attestor || held.has(attestor) || attestor === record.provider || attestor === this.o.account.address) return undefined;
        return (await this.o.chainView.isAttestor(attestor)) ? { peer, attestor } : undefined;
      }),
    );
    return checked.filter((entry) => entry !== undefined);
  }

  /**
   * The second a decline moves the fault past, when it stands behind it: `seen_alive` with a
   * receipt of this lease signed by an on-chain attestor and taken after observedAt's second
   * (the fault then starts the second after that receipt); `no_evidence` with the start of its
   * sender's own evidence (only verified attestors are asked).
   */
  private async movesTo(record: FaultRecord, answer: Extract<FaultAnswer, { outcome: "declined" }>): Promise<number | undefined> {
    const fault = record.fault;
    if (answer.reason === "seen_alive") {
      if (!answer.receipt) return undefined;
      const receipt = { leaseId: fault.leaseId, challenge: answer.receipt.challenge as Hex, receivedAtMs: BigInt(answer.receipt.receivedAtMs) };
      if (receipt.receivedAtMs < BigInt(fault.observedAt + 1) * 1000n || receipt.receivedAtMs > BigInt(this.o.now()) + 300_000n) return undefined;
      const signer = await recoverProbeReceiptSigner(this.o.domain, receipt, answer.receipt.signature);
      if (!signer || !(await this.o.chainView.isAttestor(signer))) return undefined;
      return Number(receipt.receivedAtMs / 1000n) + 1;
    }
    // Its own evidence began later: it can sign from then on, once that evidence is complete.
    if (answer.reason === "no_evidence" && answer.earliestObservedAt !== null && answer.earliestObservedAt > fault.observedAt) {
      return Math.min(answer.earliestObservedAt, Math.floor(this.o.now() / 1000));
    }
    return undefined;
  }

  /** Asks every staked attestor peer that has not signed yet to co-sign the record's fault. */
  async ask(record: FaultRecord): Promise<AskResult> {
    const peers = await this.cosignerPeers(record);
    const signatures = [...record.signatures];
    let minObservedAt = record.minObservedAt;
    if (!peers.length) {
      // At warn once a minute: a fault that cannot reach the quorum is what an operator must see (docs/attestation.md).
      const nowMs = this.o.now();
      const warn = nowMs - this.lastNoPeersWarningMs >= NO_PEERS_WARNING_INTERVAL_MS;
      if (warn) this.lastNoPeersWarningMs = nowMs;
      this.o.logger[warn ? "warn" : "debug"]("No other attestor to ask for a fault signature: it cannot reach the quorum (list the others in attest.attestor.peers)", {
        leaseId: record.leaseId,
      });
      return { signatures, minObservedAt };
    }
    const proposal = { v: 1 as const, chainId: this.o.chainId, fault: record.fault, signatures: record.signatures, ...(record.evidence ? { evidence: record.evidence } : {}) };
    const answers = await Promise.allSettled(
      peers.map(async ({ peer, attestor }) => ({
        peer,
        attestor,
        answer: await request(this.o.host, peer, FAULT_PROTOCOL, proposal, { responseSchema: faultAnswerSchema, timeoutMs: this.o.answerTimeoutMs, maxMessageBytes: 2_048 }),
      })),
    );
    for (const [index, settled] of answers.entries()) {
      if (settled.status === "rejected") {
        const peer = peers[index]?.peer;
        if ((settled.reason as Error)?.name === "ProtocolNotSupportedError" && peer) this.notAttestors.set(peer.toString(), this.o.now() + NOT_ATTESTOR_TTL_MS);
        continue;
      }
      const { peer, attestor, answer } = settled.value;
      if (answer.outcome === "declined") {
        const moveTo = await this.movesTo(record, answer);
        this.o.logger.info("Attestor declined to co-sign a fault", {
          leaseId: record.leaseId,
          kind: record.fault.kind,
          peer: peer.toString(),
          attestor,
          reason: answer.reason,
          detail: answer.detail,
          movesTo: moveTo ?? null,
        });
        if (moveTo !== undefined) minObservedAt = Math.max(minObservedAt, moveTo);
        continue;
      }
      const signer = this.signer(record.fault, answer.signature);
      if (!signer || signer !== answer.signer || !(await this.o.chainView.isAttestor(signer))) {
        this.o.logger.warn("Ignored a fault signature that is not an attestor's", { leaseId: record.leaseId, peer: peer.toString(), claimed: answer.signer });
        continue;
      }
      if (signatures.some((entry) => entry.signer === signer)) continue;
      signatures.push({ signer, signature: answer.signature });
    }
    return { signatures, minObservedAt };
  }
}

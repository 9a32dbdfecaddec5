/**
 * The proposer's side of `/suanli/fault/1.0.0`: which attestors to ask, and what their answers
 * mean. A signature counts only if it recovers to the attestor that claims it and that attestor
 * holds ATTESTOR_ROLE; a decline may move the earliest observedAt the others will sign later
 * (`seen_alive`: the time it last heard from the provider; `no_evidence`: the start of its own
 * evidence).
 */
import type { PeerId } from "@libp2p/interface";
import { peerIdFromString } from "@libp2p/peer-id";
import { multiaddr } from "@multiformats/multiaddr";
import type { Address, Hex } from "viem";
import { faultAnswerSchema, type FaultSignature } from "../../common/attest/wire.js";
import type { TypedDataRecoverer } from "../../common/eip712-recover.js";
import type { Fault } from "../../common/eip712.js";
import type { CachedChainView } from "../../common/offers/chain-view.js";
import type { SuanliHost } from "../../common/p2p/host.js";
import { FAULT_PROTOCOL } from "../../common/p2p/protocols.js";
import { request } from "../../common/p2p/reqresp.js";
import type { Logger } from "../log/logger.js";
import type { FaultRecord } from "./fault-records.js";

/** How long a connected peer that does not serve the fault protocol is not asked again. */
const NOT_ATTESTOR_TTL_MS = 60_000;
/** How often "No other attestor to ask" is logged at warn (at debug in between). */
const NO_PEERS_WARNING_INTERVAL_MS = 60_000;
/** Most attestors asked per round. */
const MAX_PEERS_ASKED = 64;

export type FaultExchangeOptions = {
  host: SuanliHost;
  chainId: number;
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
  /** Peer id → the attestor address it signed as, learnt from its answers. */
  private readonly peerSigners = new Map<string, Address>();
  /** Connected peers that do not serve the fault protocol → until when they are not asked again (unix ms). */
  private readonly notAttestors = new Map<string, number>();
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

  /** The attestor that signed `fault`, if the signature recovers. */
  signer(fault: Fault, signature: Hex): Address | undefined {
    return this.o.recoverer.recover(this.o.recoverer.digest("Fault", fault), signature);
  }

  /**
   * The attestors to ask: configured ones, known peers that serve the fault protocol, and the
   * other connected peers. Identify tells a peer's protocols only as they were when the
   * connection opened, and a node starts its attestor role after joining the network, so a
   * connected attestor may not be listed as one yet; a connected peer that turns out not to
   * serve the protocol is left alone for a while.
   */
  private async attestorPeers(): Promise<PeerId[]> {
    const nowMs = this.o.now();
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

  /** Asks every attestor that has not signed yet to co-sign the record's fault. */
  async ask(record: FaultRecord): Promise<AskResult> {
    const held = new Set(record.signatures.map((entry) => entry.signer));
    const peers = (await this.attestorPeers()).filter((peer) => {
      const signer = this.peerSigners.get(peer.toString());
      return !signer || !held.has(signer);
    });
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
      peers.map(async (peer) => ({
        peer,
        answer: await request(this.o.host, peer, FAULT_PROTOCOL, proposal, { responseSchema: faultAnswerSchema, timeoutMs: this.o.answerTimeoutMs, maxMessageBytes: 2_048 }),
      })),
    );
    for (const [index, settled] of answers.entries()) {
      if (settled.status === "rejected") {
        const peer = peers[index];
        if ((settled.reason as Error)?.name === "ProtocolNotSupportedError" && peer) this.notAttestors.set(peer.toString(), this.o.now() + NOT_ATTESTOR_TTL_MS);
        continue;
      }
      const { peer, answer } = settled.value;
      this.notAttestors.delete(peer.toString());
      if (answer.outcome === "declined") {
        this.o.logger.info("Attestor declined to co-sign a fault", {
          leaseId: record.leaseId,
          kind: record.fault.kind,
          peer: peer.toString(),
          reason: answer.reason,
          detail: answer.detail,
        });
        if (answer.reason === "seen_alive" && answer.lastSeenAt !== null && answer.lastSeenAt >= record.fault.observedAt) {
          minObservedAt = Math.max(minObservedAt, answer.lastSeenAt + 1);
        }
        // Its own evidence began later: it can sign from then on, once that evidence is complete.
        if (answer.reason === "no_evidence" && answer.earliestObservedAt !== null && answer.earliestObservedAt > record.fault.observedAt) {
          minObservedAt = Math.max(minObservedAt, Math.min(answer.earliestObservedAt, Math.floor(this.o.now() / 1000)));
        }
        continue;
      }
      const signer = this.signer(record.fault, answer.signature);
      if (!signer || signer !== answer.signer || !(await this.o.chainView.isAttestor(signer))) {
        this.o.logger.warn("Ignored a fault signature that is not an attestor's", { leaseId: record.leaseId, peer: peer.toString(), claimed: answer.signer });
        continue;
      }
      this.peerSigners.set(peer.toString(), signer);
      if (signatures.some((entry) => entry.signer === signer)) continue;
      signatures.push({ signer, signature: answer.signature });
    }
    return { signatures, minObservedAt };
  }
}

/**
 * Three corrections to @libp2p/gossipsub 17.1.1 (pinned in package.json; test/p2p/gossip-hostile
 * pins each behaviour, so an upgrade that changes the internals fails there first):
 *
 * 1. Retained scores survive a reconnect. The library keeps a disconnected peer's non-positive
 *    score for `retainScore`, then overwrites it in `addPeer` when the peer comes back, so a
 *    penalised peer redials and starts at 0. Here a retained entry is revived instead (what
 *    go-libp2p-pubsub does).
 * 2. Our RPCs stay below the peer's frame limit. The library answers a batch of IWANTs with one
 *    RPC carrying every message asked for; 65 offers of 16 KiB exceed the 1 MiB a peer reads, and
 *    the peer then drops us from gossip. Here an RPC whose messages exceed `maxOutboundRpcBytes`
 *    is sent as several RPCs.
 * 3. An oversized frame is a scored offence, not a silent cut. The library's reader throws on a
 *    frame over `maxInboundDataLength` and removes the sender from gossip while the connection
 *    stays open (no offers either way until it reconnects). Here the sender gets a behaviour
 *    penalty, its (retained) score is remembered, and the connection is closed so an honest
 *    peer redials and resumes.
 */
import type { GossipSub } from "@libp2p/gossipsub";
import { RPC } from "@libp2p/gossipsub/message";
import type { PeerId } from "@libp2p/interface";

type RpcLike = { subscriptions?: unknown[]; messages?: RPC.Message[]; control?: unknown };

type PeerStats = { connected: boolean; expire: number };

/** The gossipsub internals the corrections touch (all present in 17.1.1). */
type GossipInternals = {
  score: {
    peerStats: Map<string, PeerStats>;
    addPeer(id: string): void;
    addPenalty(id: string, penalty: number, label: string): void;
    score(id: string): number;
    scoreCache?: Map<string, unknown>;
  };
  sendRpc(id: string, rpc: RpcLike): boolean;
  handlePeerReadStreamError(error: unknown, peerId: PeerId): void;
};

export type GossipHardeningOptions = {
  /** Largest RPC we send; keep it well below the peers' maxInboundDataLength (piggybacked control rides on the first part). */
  maxOutboundRpcBytes: number;
  /** Behaviour penalty (gossipsub P7, squared and weighted) for one oversized frame. */
  oversizedFramePenalty?: number;
  /** Called after an oversized frame from `peer` was penalised; `score` is its score now. */
  onOversizedFrame?: (peer: PeerId, score: number) => void;
};

function internalsOf(pubsub: GossipSub): GossipInternals {
  const internals = pubsub as unknown as Partial<GossipInternals>;
  if (
    typeof internals.sendRpc !== "function" ||
    typeof internals.handlePeerReadStreamError !== "function" ||
    !(internals.score?.peerStats instanceof Map) ||
    typeof internals.score.addPeer !== "function" ||
    typeof internals.score.addPenalty !== "function"
  ) {
    throw new Error("@libp2p/gossipsub internals changed: review common/p2p/gossip-hardening.ts for the new version");
  }
  return internals as GossipInternals;
}

/** Splits messages into groups whose encoded size stays within `budget` (a single larger message goes alone). */
export function splitMessages(messages: readonly RPC.Message[], budget: number): RPC.Message[][] {
  const groups: RPC.Message[][] = [];
  let current: RPC.Message[] = [];
  let size = 0;
  for (const message of messages) {
    // Field tag and length prefix of the embedded message: at most 6 bytes.
    const bytes = RPC.Message.encode(message).byteLength + 6;
    if (current.length > 0 && size + bytes > budget) {
      groups.push(current);
      current = [];
      size = 0;
    }
    current.push(message);
    size += bytes;
  }
  if (current.length > 0) groups.push(current);
  return groups;
}

/** Applies the corrections to a gossipsub instance (before it starts). */
export function hardenGossipsub(pubsub: GossipSub, options: GossipHardeningOptions): void {
  const internals = internalsOf(pubsub);
  const score = internals.score;

  // 1. A peer with retained stats comes back with them.
  const addPeer = score.addPeer.bind(score);
  score.addPeer = (id: string) => {
    const kept = score.peerStats.get(id);
    if (kept && !kept.connected) {
      kept.connected = true;
      kept.expire = 0;
      return;
    }
    addPeer(id);
  };

  // 2. Large RPCs go out in parts.
  const sendRpc = internals.sendRpc.bind(pubsub);
  internals.sendRpc = (id: string, rpc: RpcLike) => {
    const messages = rpc.messages ?? [];
    if (messages.length <= 1) return sendRpc(id, rpc);
    const groups = splitMessages(messages, options.maxOutboundRpcBytes);
    if (groups.length === 1) return sendRpc(id, rpc);
    let sent = sendRpc(id, { ...rpc, messages: groups[0] });
    for (const group of groups.slice(1)) sent = sendRpc(id, { subscriptions: [], messages: group }) && sent;
    return sent;
  };

  // 3. An oversized frame is penalised, remembered, and the connection closed.
  const onReadError = internals.handlePeerReadStreamError.bind(pubsub);
  internals.handlePeerReadStreamError = (error: unknown, peerId: PeerId) => {
    const name = (error as Error)?.name;
    if (name === "InvalidDataLengthError" || name === "InvalidDataLengthLengthError") {
      const id = peerId.toString();
      score.addPenalty(id, options.oversizedFramePenalty ?? 2, "oversized_frame");
      // The score is cached per heartbeat: drop it, so the removal below sees the penalty and
      // retains the peer's stats.
      score.scoreCache?.delete(id);
      onReadError(error, peerId);
      options.onOversizedFrame?.(peerId, score.score(id));
      return;
    }
    onReadError(error, peerId);
  };
}

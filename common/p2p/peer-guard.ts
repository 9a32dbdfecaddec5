/**
 * Our own memory of misbehaving peers, kept apart from gossipsub's score: gossipsub 17.1.1
 * forgets a peer's score when the peer reconnects (its `addPeer` overwrites the retained stats),
 * so a graylisted peer could hang up, redial and start clean. The guard remembers the worst
 * score seen for each peer id and each IP address, lets it decay linearly to zero over the
 * retention period, and as a connection gater refuses a peer (or an address) while its memory is
 * below the refusal threshold (gossipsub's graylist threshold).
 *
 * Addresses in the whitelist (many honest nodes behind one IP: a devnet, a NAT) are remembered
 * per peer id only, never refused as an address.
 *
 * Memory is bounded: at most `maxEntries` peers and as many addresses, least recently
 * penalised forgotten first.
 */
import type { ConnectionGater, MultiaddrConnection, PeerId } from "@libp2p/interface";
import type { Multiaddr } from "@multiformats/multiaddr";
import { LRUCache } from "lru-cache";

export type PeerGuardOptions = {
  /** How long a bad score takes to decay to zero (default 1 h, gossipsub's retainScore). */
  retentionMs?: number;
  /** Peers and addresses remembered at or below this are refused (default −80, the graylist threshold). */
  refuseAtOrBelow?: number;
  /** IPs never refused as addresses (their peers still are, by id). */
  addressWhitelist?: Iterable<string>;
  maxEntries?: number;
  /** Called whenever a connection is refused (metrics, logs). */
  onRefused?: (match: "peer" | "address", who: string) => void;
  /** Unix ms. */
  now?: () => number;
};

type Memory = { score: number; at: number };

/** The IP of a multiaddr (`/ip4/1.2.3.4/...` or `/ip6/.../...`), or undefined. */
export function ipOf(addr: Multiaddr | undefined): string | undefined {
  if (!addr) return undefined;
  const parts = addr.toString().split("/");
  return parts[1] === "ip4" || parts[1] === "ip6" ? parts[2] : undefined;
}

export class PeerGuard {
  private readonly peers: LRUCache<string, Memory>;
  private readonly addresses: LRUCache<string, Memory>;
  private readonly retentionMs: number;
  private readonly threshold: number;
  private readonly whitelist: Set<string>;
  private readonly now: () => number;

  constructor(private readonly options: PeerGuardOptions = {}) {
    this.retentionMs = options.retentionMs ?? 3_600_000;
    this.threshold = options.refuseAtOrBelow ?? -80;
    this.whitelist = new Set(options.addressWhitelist ?? []);
    this.now = options.now ?? Date.now;
    const max = options.maxEntries ?? 10_000;
    this.peers = new LRUCache({ max, ttl: this.retentionMs });
    this.addresses = new LRUCache({ max, ttl: this.retentionMs });
  }

  /**
   * Remembers a (negative) score of a peer, seen from `ip`. The memory keeps the worse of what
   * it held (decayed) and the new score; non-negative scores change nothing (good behaviour
   * does not wash out an offence early).
   */
  remember(peer: string, ip: string | undefined, score: number): void {
    if (!(score < 0) || !Number.isFinite(score)) return;
    this.keep(this.peers, peer, score);
    if (ip && !this.whitelist.has(ip)) this.keep(this.addresses, ip, score);
  }

  /** Adds an offence of `points` (negative) to what is held against a peer and its address. */
  penalize(peer: string, ip: string | undefined, points: number): void {
    if (!(points < 0)) return;
    this.peers.set(peer, { score: this.scoreOf(peer) + points, at: this.now() });
    if (ip && !this.whitelist.has(ip)) this.addresses.set(ip, { score: this.scoreOfAddress(ip) + points, at: this.now() });
  }

  /** Forgets what is held against a peer (an operator's pardon; a healed test partition). */
  forgive(peer: string): void {
    this.peers.delete(peer);
  }

  /** The remembered score of a peer, decayed to now; 0 when nothing is held against it. */
  scoreOf(peer: string): number {
    return this.decayed(this.peers.get(peer));
  }

  /** The remembered score of an address, decayed to now. */
  scoreOfAddress(ip: string): number {
    return this.decayed(this.addresses.get(ip));
  }

  refusesPeer(peer: string): boolean {
    return this.scoreOf(peer) <= this.threshold;
  }

  refusesAddress(ip: string | undefined): boolean {
    return ip !== undefined && !this.whitelist.has(ip) && this.scoreOfAddress(ip) <= this.threshold;
  }

  /** The libp2p connection gater that applies the memory (inbound and outbound). */
  gater(): ConnectionGater {
    const refuse = (match: "peer" | "address", who: string) => {
      this.options.onRefused?.(match, who);
      return true;
    };
    const byPeer = (peerId: PeerId) => (this.refusesPeer(peerId.toString()) ? refuse("peer", peerId.toString()) : false);
    const byAddress = (maConn: MultiaddrConnection) => {
      const ip = ipOf(maConn.remoteAddr);
      return this.refusesAddress(ip) ? refuse("address", ip!) : false;
    };
    return {
      denyInboundConnection: byAddress,
      denyInboundEncryptedConnection: (peerId) => byPeer(peerId),
      denyDialPeer: (peerId) => byPeer(peerId),
      denyOutboundEncryptedConnection: (peerId) => byPeer(peerId),
    };
  }

  private keep(cache: LRUCache<string, Memory>, key: string, score: number): void {
    const held = this.decayed(cache.get(key));
    cache.set(key, { score: Math.min(held, score), at: this.now() });
  }

  private decayed(memory: Memory | undefined): number {
    if (!memory) return 0;
    const left = 1 - (this.now() - memory.at) / this.retentionMs;
    return left <= 0 ? 0 : memory.score * left;
  }
}

/**
 * Memory of holds that ended without a lease, per renter wallet and per requesting peer. A hold
 * costs its renter nothing, so a wallet (or a peer with many wallets) could keep a provider's
 * units held forever without ever opening a lease. Every hold that expires unopened counts
 * against its wallet and its peer for `windowSeconds`; past `limit` counts (wallet) or
 * `peerLimit` (peer), new reserve requests from them are refused until old counts age out.
 *
 * Memory is bounded: at most `maxKeys` wallets and peers are remembered (least recently
 * penalised ones are forgotten first), each with at most `max(limit, peerLimit)` timestamps.
 */
import { LRUCache } from "lru-cache";

export type HoldThrottleOptions = {
  /** Unopened holds one wallet may leave within the window. */
  limit: number;
  /** Unopened holds one peer may leave within the window (a relay node sends for many wallets). */
  peerLimit: number;
  windowSeconds: number;
  maxKeys?: number;
  /** Unix ms. */
  now?: () => number;
};

export class HoldThrottle {
  private readonly marks: LRUCache<string, number[]>;
  private readonly now: () => number;

  constructor(private readonly options: HoldThrottleOptions) {
    this.now = options.now ?? Date.now;
    this.marks = new LRUCache({ max: options.maxKeys ?? 50_000, ttl: options.windowSeconds * 1000, updateAgeOnGet: false });
  }

  /** Records a hold that ended without a lease. */
  record(renter: string, peer: string | undefined): void {
    this.push(`w:${renter.toLowerCase()}`, this.options.limit);
    if (peer) this.push(`p:${peer}`, this.options.peerLimit);
  }

  /** Unopened holds within the window, by wallet and by peer. */
  counts(renter: string, peer: string | undefined): { wallet: number; peer: number } {
    return { wallet: this.count(`w:${renter.toLowerCase()}`), peer: peer ? this.count(`p:${peer}`) : 0 };
  }

  /** Why a request from this wallet or peer is throttled now, or undefined. */
  refusal(renter: string, peer: string | undefined): string | undefined {
    const { wallet, peer: byPeer } = this.counts(renter, peer);
    const hours = this.options.windowSeconds / 3600;
    const window = hours >= 1 ? `${Math.round(hours * 10) / 10} h` : `${this.options.windowSeconds} s`;
    if (wallet >= this.options.limit)
      return `Renter ${renter} let ${wallet} holds expire without opening a lease in the last ${window}: it may reserve here again once older ones age out`;
    if (byPeer >= this.options.peerLimit)
      return `Peer ${peer} let ${byPeer} holds expire without opening a lease in the last ${window}: it may reserve here again once older ones age out`;
    return undefined;
  }

  private live(key: string): number[] {
    const since = this.now() - this.options.windowSeconds * 1000;
    const list = (this.marks.get(key) ?? []).filter((at) => at > since);
    return list;
  }

  private count(key: string): number {
    return this.live(key).length;
  }

  private push(key: string, cap: number): void {
    const list = this.live(key);
    list.push(this.now());
    // Only the newest `cap` matter: the refusal needs `cap` of them inside the window.
    this.marks.set(key, list.slice(-Math.max(1, cap)));
  }
}

/**
 * Per-peer serving limits of the data plane (docs/data.md, "Serving limits"). Bitswap has no
 * per-peer budget of its own: a peer's want list is served as fast as the store reads. Helia is
 * given a view of the node's libp2p host in which
 * - bitswap streams this node opens to a peer (the messages that carry blocks it serves) are
 *   charged to that peer in bytes and blocks per second (libp2p's `RateLimiter`); a message over
 *   budget waits, and past `maxThrottleMs` is sent without its blocks. Messages without blocks
 *   (this node's own wants) pass at once, so the node's own fetches are never held;
 * - bitswap streams a peer opens to this node are bounded per peer (across its connections);
 *   libp2p's per-connection cap stays the backstop.
 * Each peer waits only for its own budget: one greedy peer holds one of bitswap's send slots, never
 * the others' turn.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { isPeerId, type Connection, type Libp2p, type Stream, type StreamHandler } from "@libp2p/interface";
import { RateLimiter } from "@libp2p/utils";
import type { Metrics } from "../metrics/metrics.js";
import { readBitswapFrame, readBitswapFrameParts } from "./bitswap-frame.js";
import { ServingLimitError } from "./errors.js";
import type { DataServingOptions } from "./options.js";

/** Protocol ids bitswap speaks (`/ipfs/bitswap/1.0.0` … `1.2.0`). */
const isBitswap = (protocols: string | string[]) => [protocols].flat().some((protocol) => protocol.startsWith("/ipfs/bitswap/"));

/** Why a peer's request was held or refused (`suanli_data_serve_limited_total{reason}`). */
export type LimitReason = "bytes_per_second" | "blocks_per_second" | "streams_per_peer";

type Budget = { limiter: RateLimiter; perSecond: number; reason: LimitReason };

/** Milliseconds `key` must wait before `amount` fits its budget (0: now). */
function waitFor(budget: Budget, key: string, amount: number): number {
  if (amount === 0) return 0;
  const record = budget.limiter.get(key);
  // A fresh second admits anything, even a message larger than a second's budget: its window is
  // then stretched to the time that message is worth (see charge), so the average still holds.
  if (!record || record.consumedPoints <= 0 || record.msBeforeNext <= 0) return 0;
  if (record.consumedPoints + amount <= budget.perSecond) return 0;
  return record.msBeforeNext;
}

function charge(budget: Budget, key: string, amount: number): void {
  if (amount === 0) return;
  budget.limiter.penalty(key, amount, { customDuration: Math.max(1, amount / budget.perSecond) });
}

export class ServingLimits {
  private readonly bytes: Budget;
  private readonly blocks: Budget;
  private readonly inbound = new Map<string, number>();

  constructor(
    readonly options: DataServingOptions,
    private readonly metrics?: Metrics,
  ) {
    this.bytes = { limiter: new RateLimiter({ points: options.bytesPerSecondPerPeer, duration: 1 }), perSecond: options.bytesPerSecondPerPeer, reason: "bytes_per_second" };
    this.blocks = { limiter: new RateLimiter({ points: options.blocksPerSecondPerPeer, duration: 1 }), perSecond: options.blocksPerSecondPerPeer, reason: "blocks_per_second" };
  }

  /**
   * Waits until `peer` may be sent `blocks` blocks of `bytes` bytes and charges it. False when the
   * wait would pass `maxThrottleMs` (refused: nothing charged).
   */
  async admit(peer: string, bytes: number, blocks: number, signal?: AbortSignal): Promise<boolean> {
    const started = Date.now();
    let throttled: LimitReason | undefined;
    for (;;) {
      const byBytes = waitFor(this.bytes, peer, bytes);
      const byBlocks = waitFor(this.blocks, peer, blocks);
      const wait = Math.max(byBytes, byBlocks);
      if (wait === 0) break;
      const reason = byBytes >= byBlocks ? this.bytes.reason : this.blocks.reason;
      if (Date.now() - started + wait > this.options.maxThrottleMs) {
        this.metrics?.dataServeLimited.inc({ action: "refused", reason });
        return false;
      }
      if (!throttled) this.metrics?.dataServeLimited.inc({ action: "throttled", reason });
      throttled = reason;
      await sleep(wait, undefined, { signal });
    }
    charge(this.bytes, peer, bytes);
    charge(this.blocks, peer, blocks);
    return true;
  }

  /** Counts a peer's open inbound bitswap stream; false (and counted as refused) past the bound. */
  openInbound(peer: string): boolean {
    const open = this.inbound.get(peer) ?? 0;
    if (open >= this.options.maxStreamsPerPeer) {
      this.metrics?.dataServeLimited.inc({ action: "refused", reason: "streams_per_peer" });
      return false;
    }
    this.inbound.set(peer, open + 1);
    return true;
  }

  closeInbound(peer: string): void {
    const open = (this.inbound.get(peer) ?? 1) - 1;
    if (open <= 0) this.inbound.delete(peer);
    else this.inbound.set(peer, open);
  }

  /** Inbound bitswap streams `peer` has open now. */
  inboundOf(peer: string): number {
    return this.inbound.get(peer) ?? 0;
  }

  /**
   * A view of `libp2p` for Helia: everything passes through, except bitswap's handler (bounded
   * streams per peer) and the bitswap streams it dials (charged per peer).
   */
  wrap(libp2p: Libp2p): Libp2p {
    return new Proxy(libp2p, {
      get: (target, property) => {
        if (property === "handle") {
          return (protocols: string | string[], handler: StreamHandler, options?: Parameters<Libp2p["handle"]>[2]) =>
            target.handle(protocols, isBitswap(protocols) ? this.boundedHandler(handler) : handler, options);
        }
        if (property === "dialProtocol") {
          return async (peer: Parameters<Libp2p["dialProtocol"]>[0], protocols: string | string[], options?: Parameters<Libp2p["dialProtocol"]>[2]) => {
            const stream = await target.dialProtocol(peer, protocols, options);
            return isBitswap(protocols) ? this.chargedStream(stream, isPeerId(peer) ? peer.toString() : String(peer)) : stream;
          };
        }
        const value: unknown = Reflect.get(target, property, target);
        return typeof value === "function" ? (value as (...args: unknown[]) => unknown).bind(target) : value;
      },
    });
  }

  private boundedHandler(handler: StreamHandler): StreamHandler {
    return (stream: Stream, connection: Connection) => {
      const peer = connection.remotePeer.toString();
      if (!this.openInbound(peer)) {
        stream.abort(new ServingLimitError(peer, this.options.maxStreamsPerPeer));
        return;
      }
      stream.addEventListener("close", () => this.closeInbound(peer), { once: true });
      return handler(stream, connection);
    };
  }

  /** The stream, with `send` holding a message of blocks until `peer`'s budget admits it. */
  private chargedStream(stream: Stream, peer: string): Stream {
    let pending: Promise<void> | undefined;
    const metrics = this.metrics;
    const send = (data: Parameters<Stream["send"]>[0]): boolean => {
      // Bitswap sends a frame as a list (length prefix, message): read in place, not joined (a copy of every block served).
      const frame = data instanceof Uint8Array ? readBitswapFrame(data) : readBitswapFrameParts([...data]);
      if (!frame || frame.blocks === 0) return stream.send(data);
      const served = () => {
        metrics?.dataServedBytes.inc(frame.blockBytes);
        metrics?.dataServedBlocks.inc(frame.blocks);
      };
      if (waitFor(this.bytes, peer, frame.blockBytes) === 0 && waitFor(this.blocks, peer, frame.blocks) === 0) {
        charge(this.bytes, peer, frame.blockBytes);
        charge(this.blocks, peer, frame.blocks);
        served();
        return stream.send(data);
      }
      // Held: bitswap awaits onDrain() before its next send or close, which is when this lands.
      pending = (async () => {
        const admitted = await this.admit(peer, frame.blockBytes, frame.blocks);
        const out = admitted ? data : frame.withoutBlocks();
        if (admitted) served();
        if (out && !stream.send(out)) await stream.onDrain();
      })().finally(() => {
        pending = undefined;
      });
      // Bitswap hears a failure through onDrain() or close(); one it stopped waiting for (its own
      // timeout aborted the stream) must not become an unhandled rejection.
      pending.catch(() => undefined);
      return false;
    };
    return new Proxy(stream, {
      get: (target, property) => {
        if (property === "send") return send;
        if (property === "onDrain") return (options?: { signal?: AbortSignal }) => (pending ? raceSignal(pending, options?.signal) : target.onDrain(options));
        if (property === "close")
          return async (options?: { signal?: AbortSignal }) => {
            if (pending) await raceSignal(pending, options?.signal);
            return target.close(options);
          };
        const value: unknown = Reflect.get(target, property, target);
        return typeof value === "function" ? (value as (...args: unknown[]) => unknown).bind(target) : value;
      },
    });
  }
}

/** `promise`, or the signal's reason once it aborts first. */
function raceSignal(promise: Promise<void>, signal?: AbortSignal): Promise<void> {
  if (!signal) return promise;
  if (signal.aborted) return Promise.reject(signal.reason as Error);
  return new Promise<void>((resolve, reject) => {
    const onAbort = () => reject(signal.reason as Error);
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}

/**
 * A forwarded connection (the forward protocol, common/protocols/task-io.ts and
 * common/p2p/socket-pipe.ts) as a Node Duplex that looks enough like a socket for `http.Agent`:
 * node's own HTTP client then speaks HTTP/1.1 over the libp2p stream (keep-alive, chunked and
 * streamed responses, upgrades) as it would over TCP. Frames: DATA (type 0, bytes follow; none:
 * a half-close) and ACK (type 1: the receiver wrote FORWARD_ACK_BYTES more); each side keeps at
 * most FORWARD_WINDOW_BYTES unacknowledged.
 */
import { Duplex } from "node:stream";
import type { Stream } from "@libp2p/interface";
import type { LengthPrefixedStream } from "@libp2p/utils";
import { FORWARD_FRAME_BYTES } from "../../common/protocols/task-io.js";
import { runDetached } from "../../common/detached.js";
import { FORWARD_ACK_BYTES, FORWARD_EOF_FRAME, FORWARD_WINDOW_BYTES } from "../../common/p2p/socket-pipe.js";

const DATA = 0;
const ACK = 1;

export class ForwardDuplex extends Duplex {
  private unacked = 0;
  private ackWaiter: (() => void) | undefined;
  private readWaiter: (() => void) | undefined;
  private sentEof = false;
  private gotEof = false;
  private idleMs = 0;
  private idleTimer: NodeJS.Timeout | undefined;
  /** What http.Agent and ClientRequest look at on a socket. */
  readonly connecting = false;
  readonly remoteAddress = "127.0.0.1";

  constructor(
    private readonly lp: LengthPrefixedStream<Stream>,
    private readonly stream: Stream,
  ) {
    super({ allowHalfOpen: true });
    runDetached(this.readLoop(), undefined, "Reading a forwarded connection");
  }

  private touch(): void {
    if (!this.idleMs) return;
    clearTimeout(this.idleTimer);
    this.idleTimer = setTimeout(() => this.emit("timeout"), this.idleMs);
    this.idleTimer.unref();
  }

  private async readLoop(): Promise<void> {
    let consumed = 0;
    try {
      for (;;) {
        const frame = (await this.lp.read()).subarray();
        this.touch();
        if (frame.length === 0) throw new Error("empty frame");
        if (frame[0] === ACK) {
          this.unacked = Math.max(0, this.unacked - FORWARD_ACK_BYTES);
          const waiter = this.ackWaiter;
          this.ackWaiter = undefined;
          waiter?.();
          continue;
        }
        if (frame.length === 1) {
          // The task closed the connection: HTTP has no use for the half left open, so this side
          // ends too, and the agent must not hand the connection to another request.
          this.gotEof = true;
          this.push(null);
          this.emit("agentRemove");
          if (!this.writableEnded) this.end();
          this.maybeClose();
          continue;
        }
        const payload = Buffer.from(frame.subarray(1));
        if (!this.push(payload)) await new Promise<void>((resolve) => (this.readWaiter = resolve));
        consumed += payload.length;
        while (consumed >= FORWARD_ACK_BYTES) {
          consumed -= FORWARD_ACK_BYTES;
          await this.lp.write(Uint8Array.of(ACK));
        }
      }
    } catch (error) {
      if (!(this.sentEof && this.gotEof) && !this.destroyed) this.destroy(error instanceof Error ? error : new Error(String(error)));
    }
  }

  private maybeClose(): void {
    if (this.sentEof && this.gotEof) void this.stream.close().catch(() => this.stream.abort(new Error("close failed")));
  }

  override _read(): void {
    const waiter = this.readWaiter;
    this.readWaiter = undefined;
    waiter?.();
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    this.touch();
    this.send(chunk).then(
      () => callback(),
      (error: unknown) => callback(error instanceof Error ? error : new Error(String(error))),
    );
  }

  private async send(chunk: Buffer): Promise<void> {
    for (let at = 0; at < chunk.length; at += FORWARD_FRAME_BYTES) {
      while (this.unacked >= FORWARD_WINDOW_BYTES) {
        if (this.destroyed) throw new Error("The forwarded connection closed");
        await new Promise<void>((resolve) => (this.ackWaiter = resolve));
      }
      const slice = chunk.subarray(at, at + FORWARD_FRAME_BYTES);
      const frame = new Uint8Array(slice.length + 1);
      frame[0] = DATA;
      frame.set(slice, 1);
      await this.lp.write(frame);
      this.unacked += slice.length;
    }
  }

  override _final(callback: (error?: Error | null) => void): void {
    this.lp.write(FORWARD_EOF_FRAME).then(
      () => {
        this.sentEof = true;
        this.maybeClose();
        callback();
      },
      (error: unknown) => callback(error instanceof Error ? error : new Error(String(error))),
    );
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    clearTimeout(this.idleTimer);
    this.ackWaiter?.();
    this.readWaiter?.();
    if (this.stream.status === "open") {
      if (this.sentEof && this.gotEof) void this.stream.close().catch(() => undefined);
      else this.stream.abort(error ?? new Error("The forwarded connection was closed"));
    }
    callback(error);
  }

  // The socket methods http.Agent and ClientRequest call.
  setTimeout(ms: number, callback?: () => void): this {
    this.idleMs = ms;
    if (callback) this.once("timeout", callback);
    if (ms === 0) clearTimeout(this.idleTimer);
    else this.touch();
    return this;
  }
  setKeepAlive(): this {
    return this;
  }
  setNoDelay(): this {
    return this;
  }
  ref(): this {
    return this;
  }
  unref(): this {
    return this;
  }
}

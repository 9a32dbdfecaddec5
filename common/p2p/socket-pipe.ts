/**
 * A TCP connection carried over a framed libp2p stream (the forward protocol,
 * common/protocols/task-io.ts): the provider pipes the task's port, the renter its local
 * connection. Node only (node:net).
 */
import type { Socket } from "node:net";
import type { Stream } from "@libp2p/interface";
import type { LengthPrefixedStream } from "@libp2p/utils";
import { FORWARD_FRAME_BYTES } from "../protocols/task-io.js";
import { runDetached } from "../detached.js";

/** Frame types of a forwarded connection: the first byte of every frame. */
const DATA = 0;
const ACK = 1;
/** Bytes a side may send before the other acknowledges them: the peer's buffers stay bounded. */
export const FORWARD_WINDOW_BYTES = 1024 * 1024;
/** One ACK frame acknowledges this many bytes written to the socket. */
export const FORWARD_ACK_BYTES = 256 * 1024;

/** The frame that tells the other side this one sends no more bytes (a TCP half-close). */
export const FORWARD_EOF_FRAME = Uint8Array.of(DATA);

/**
 * Copies bytes both ways between a TCP socket and a framed libp2p stream until both sides are
 * done. Each frame starts with its type: DATA (the bytes follow; none means a half-close) or ACK
 * (the receiver wrote FORWARD_ACK_BYTES more to its socket). A sender keeps at most
 * FORWARD_WINDOW_BYTES unacknowledged, so a slow reader never makes the stream's buffers
 * overflow. Resolves when the connection is over.
 */
export async function pipeSocket(
  socket: Socket,
  lp: LengthPrefixedStream<Stream>,
  stream: Stream,
  limiter: { take(bytes: number): Promise<void> } | undefined,
  idleMs: number,
): Promise<void> {
  const done = new Promise<void>((resolve) => {
    socket.once("close", () => resolve());
  });
  socket.setTimeout(idleMs, () => socket.destroy());
  let unacked = 0;
  let ackWaiter: (() => void) | undefined;
  let sentEof = false;
  let gotEof = false;
  let broken = false;
  const maybeClose = () => {
    if (sentEof && gotEof)
      runDetached(
        stream.close().catch(() => stream.abort(new Error("close failed"))),
        undefined,
        "Closing a piped stream",
      );
  };
  const fail = () => {
    broken = true;
    ackWaiter?.();
    socket.destroy();
    if (stream.status === "open") stream.abort(new Error("The forwarded connection broke"));
  };
  // socket -> stream
  const outbound = (async () => {
    try {
      for await (const chunk of socket as AsyncIterable<Buffer>) {
        await limiter?.take(chunk.length);
        for (let at = 0; at < chunk.length; at += FORWARD_FRAME_BYTES) {
          for (let waits = 0; unacked >= FORWARD_WINDOW_BYTES && !broken && waits < Number.MAX_SAFE_INTEGER; waits++) {
            await new Promise<void>((resolve) => (ackWaiter = resolve));
          }
          if (broken) return;
          const slice = chunk.subarray(at, at + FORWARD_FRAME_BYTES);
          const frame = new Uint8Array(slice.length + 1);
          frame[0] = DATA;
          frame.set(slice, 1);
          await lp.write(frame);
          unacked += slice.length;
        }
      }
      await lp.write(FORWARD_EOF_FRAME);
      sentEof = true;
      maybeClose();
    } catch {
      fail();
    }
  })();
  // stream -> socket
  const inbound = (async () => {
    let consumed = 0;
    try {
      for (let frames = 0; frames < Number.MAX_SAFE_INTEGER; frames++) {
        const frame = (await lp.read()).subarray();
        if (frame.length === 0) throw new Error("empty frame");
        if (frame[0] === ACK) {
          unacked = Math.max(0, unacked - FORWARD_ACK_BYTES);
          const waiter = ackWaiter;
          ackWaiter = undefined;
          waiter?.();
          continue;
        }
        if (frame.length === 1) {
          gotEof = true;
          socket.end();
          maybeClose();
          continue;
        }
        const payload = frame.subarray(1);
        await limiter?.take(payload.length);
        if (!socket.write(payload)) await new Promise((resolve) => socket.once("drain", resolve));
        consumed += payload.length;
        while (consumed >= FORWARD_ACK_BYTES) {
          consumed -= FORWARD_ACK_BYTES;
          await lp.write(Uint8Array.of(ACK));
        }
      }
    } catch {
      // The stream ended: cleanly once both sides half-closed, otherwise the connection broke.
      if (!(sentEof && gotEof)) fail();
    }
  })();
  await Promise.all([outbound, inbound, done]);
}

/**
 * A TCP connection carried over a framed libp2p stream (the forward protocol,
 * common/protocols/task-io.ts): the provider pipes the task's port, the renter its local
 * connection. Node only (node:net).
 */
import type { Socket } from "node:net";
import type { Stream } from "@libp2p/interface";
import type { LengthPrefixedStream } from "@libp2p/utils";
import { FORWARD_FRAME_BYTES } from "../protocols/task-io.js";

/**
 * Copies bytes both ways between a TCP socket and a framed libp2p stream until both sides are
 * done; an empty frame is a half-close. Resolves when the connection is over.
 */
export async function pipeSocket(socket: Socket, lp: LengthPrefixedStream<Stream>, stream: Stream, limiter: { take(bytes: number): Promise<void> } | undefined, idleMs: number): Promise<void> {
  const done = new Promise<void>((resolve) => {
    socket.once("close", () => resolve());
  });
  socket.setTimeout(idleMs, () => socket.destroy());
  // socket -> stream
  const outbound = (async () => {
    try {
      for await (const chunk of socket as AsyncIterable<Buffer>) {
        await limiter?.take(chunk.length);
        for (let at = 0; at < chunk.length; at += FORWARD_FRAME_BYTES) await lp.write(chunk.subarray(at, at + FORWARD_FRAME_BYTES));
      }
      await lp.write(new Uint8Array(0));
    } catch {
      stream.abort(new Error("The forwarded connection broke"));
    }
  })();
  // stream -> socket
  const inbound = (async () => {
    try {
      for (let frames = 0; frames < Number.MAX_SAFE_INTEGER; frames++) {
        const frame = (await lp.read()).subarray();
        if (frame.length === 0) {
          socket.end();
          return;
        }
        await limiter?.take(frame.length);
        if (!socket.write(frame)) await new Promise((resolve) => socket.once("drain", resolve));
      }
    } catch {
      socket.destroy();
    }
  })();
  await Promise.all([outbound, inbound, done]);
  if (stream.status === "open") await stream.close().catch(() => stream.abort(new Error("close failed")));
}

/**
 * How long an HTTP server of the node (the API, the metrics endpoint) holds a connection, and how
 * many it holds. Node's own defaults hold a client that sends its headers one byte at a time for
 * 60 s (checked only every 30 s) and accept connections until the process runs out of file
 * descriptors: 300 slow-loris connections were held 65 s, and 4,000 idle ones from one address
 * kept (issue #33, item 11). Here:
 *
 * - `headersTimeoutMs`: the whole request head must arrive within it (slow loris), checked every
 *   `min(1 s, headersTimeoutMs / 2)`; `requestTimeoutMs` the same for head and body together;
 * - `keepAliveTimeoutMs`: an idle keep-alive connection between requests is closed after it;
 * - `idleTimeoutMs`: a socket with no traffic either way for that long is destroyed (a response
 *   that streams, such as an event stream with its heartbeats, is traffic);
 * - `maxPerAddress`: connections open at once from one client address; past it a new one is
 *   closed at once (not applied behind a reverse proxy, `trustProxy`, where every connection
 *   comes from the proxy);
 * - `maxTotal`: connections open at once, all clients together;
 * - `maxRequestsPerSocket`: requests one connection may carry, then it is closed (0: no limit).
 *
 * test/node/http-connection-limits.test.ts runs slow-loris and idle floods with real sockets.
 */
import type { Server as HttpServer, ServerOptions } from "node:http";
import type { Socket } from "node:net";
import { z } from "zod";

export type ConnectionLimits = {
  headersTimeoutMs: number;
  requestTimeoutMs: number;
  keepAliveTimeoutMs: number;
  idleTimeoutMs: number;
  maxPerAddress: number;
  maxTotal: number;
  maxRequestsPerSocket: number;
};

/** The schema of a server's `connections` options, with that server's defaults. */
export function connectionLimitsSchema(defaults: ConnectionLimits) {
  return z
    .strictObject({
      /** The request head (line and headers) must arrive within this. */
      headersTimeoutMs: z.number().int().min(100).max(600_000).default(defaults.headersTimeoutMs),
      /** The whole request (head and body) must arrive within this; at least headersTimeoutMs. */
      requestTimeoutMs: z.number().int().min(100).max(3_600_000).default(defaults.requestTimeoutMs),
      /** An idle keep-alive connection between two requests is closed after this. */
      keepAliveTimeoutMs: z.number().int().min(100).max(600_000).default(defaults.keepAliveTimeoutMs),
      /** A connection with no traffic in either direction for this long is closed. */
      idleTimeoutMs: z.number().int().min(1000).max(3_600_000).default(defaults.idleTimeoutMs),
      /** Connections open at once from one client address (not applied behind a reverse proxy). */
      maxPerAddress: z.number().int().min(1).max(100_000).default(defaults.maxPerAddress),
      /** Connections open at once, all clients together. */
      maxTotal: z.number().int().min(1).max(1_000_000).default(defaults.maxTotal),
      /** Requests one connection may carry before it is closed; 0: no limit. */
      maxRequestsPerSocket: z.number().int().min(0).max(1_000_000).default(defaults.maxRequestsPerSocket),
    })
    .refine((limits) => limits.requestTimeoutMs >= limits.headersTimeoutMs, {
      message: "requestTimeoutMs must be at least headersTimeoutMs (the head is part of the request)",
      path: ["requestTimeoutMs"],
    })
    .refine((limits) => limits.maxPerAddress <= limits.maxTotal, { message: "maxPerAddress must be at most maxTotal", path: ["maxPerAddress"] })
    .prefault({});
}

/** The options of `http.createServer` that carry the timeouts (pass them at creation: Node validates them together). */
export function httpServerOptions(limits: ConnectionLimits): ServerOptions {
  return {
    headersTimeout: limits.headersTimeoutMs,
    requestTimeout: limits.requestTimeoutMs,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    // Node checks the two timeouts above only this often (30 s by default): a slow client would be
    // held up to that long past its deadline.
    connectionsCheckingInterval: Math.max(50, Math.min(1000, Math.floor(limits.headersTimeoutMs / 2))),
  };
}

export type RefusedConnection = "per_address" | "total";

/**
 * Applies the idle timeout, the per-request cap and the connection caps to a listening or
 * not-yet-listening server. `onRefused` hears each connection closed by a cap.
 */
export function limitConnections(server: HttpServer, limits: ConnectionLimits, options: { perAddress: boolean; onRefused?: (reason: RefusedConnection) => void }): void {
  server.setTimeout(limits.idleTimeoutMs, (socket: Socket) => socket.destroy());
  if (limits.maxRequestsPerSocket > 0) server.maxRequestsPerSocket = limits.maxRequestsPerSocket;
  // Past maxConnections Node closes a new connection before any byte is read, and says so with 'drop'.
  server.maxConnections = limits.maxTotal;
  server.on("drop", () => options.onRefused?.("total"));
  if (!options.perAddress) return;
  const open = new Map<string, number>();
  // First in line, before the HTTP parser is attached to a connection that is about to be closed.
  server.prependListener("connection", (socket: Socket) => {
    const address = socket.remoteAddress ?? "unknown";
    const count = open.get(address) ?? 0;
    if (count >= limits.maxPerAddress) {
      options.onRefused?.("per_address");
      socket.destroy();
      return;
    }
    open.set(address, count + 1);
    socket.once("close", () => {
      const left = (open.get(address) ?? 1) - 1;
      if (left <= 0) open.delete(address);
      else open.set(address, left);
    });
  });
}

import { z } from "zod";
import { connectionLimitsSchema } from "../http/limits.js";

const httpUrl = z
  .string()
  .url()
  .refine((value) => /^https?:\/\//i.test(value), "expected an http(s):// URL");

/**
 * Options of the HTTP API (`api.*` in the node's configuration, docs/configuration.md).
 */
export const apiOptionsSchema = z
  .strictObject({
    /** Serve the API at all. */
    enabled: z.boolean().default(false),
    /**
     * Interface to listen on. Loopback by default: exposing a node to the internet is a decision
     * (put it behind a reverse proxy and set trustProxy).
     */
    host: z.string().min(1).default("127.0.0.1"),
    /** TCP port; 0 picks a free one. */
    port: z.number().int().min(0).max(65_535).default(8080),
    /**
     * Origins allowed by CORS (`https://app.example`), or `*` for any. The API uses no cookies and
     * every write carries a wallet signature, so any origin is safe to allow; restrict it to keep
     * other sites from spending this node's rate limits.
     */
    corsOrigins: z.array(z.string().regex(/^(\*|https?:\/\/[^/\s]+)$/, "expected * or an origin like https://app.example")).default(["*"]),
    /** Requests per client (IP address) per minute, over all routes except /metrics. */
    rateLimitPerMinute: z.number().int().min(1).max(1_000_000).default(600),
    /** Match dry-runs, reservations and relayed task/cancel requests per client per minute, each route its own budget; they cost more. */
    writeRateLimitPerMinute: z.number().int().min(1).max(100_000).default(60),
    /** Largest request body accepted, bytes; larger ones get 413. */
    maxBodyBytes: z
      .number()
      .int()
      .min(1024)
      .max(16 * 1024 * 1024)
      .default(64 * 1024),
    /** Take the client address from X-Forwarded-For (only behind a reverse proxy you run). */
    trustProxy: z.boolean().default(false),
    /** Serve the explorer page at /explorer/. */
    explorer: z.boolean().default(true),
    /** The renter console at /console/ (docs/console.md): a page where a renter's own wallet submits and watches tasks. */
    console: z
      .strictObject({
        /** Serve it. It holds no key: every signature and transaction is the visitor's wallet's. */
        enabled: z.boolean().default(true),
        /**
         * The chain JSON-RPC URL the page reads from (the browser's requests, so a public endpoint:
         * it must send CORS headers). Unset: the node's own chain.rpcUrl when that is a loopback
         * address (a devnet, or a node on the renter's machine), none otherwise: the node's RPC URL
         * may carry an API key, so it is never published unless set here.
         */
        rpcUrl: httpUrl.optional(),
        /**
         * The ERC-4337 bundler (docs/aa.md) the page's "Sign in with a passkey" sends the passkey
         * account's user operations to, from the browser: an endpoint browsers may call (CORS; the
         * devnet's Alto allows any origin). Unset: the page offers no passkey sign-in.
         */
        bundlerUrl: httpUrl.optional(),
        /**
         * The deployment's sponsor (an ERC-7677 paymaster service, `sponsor.*` of the node that runs
         * it: docs/aa.md "Gas without ETH") that pays those operations' gas, so a passkey renter
         * needs no ETH; it must allow the page's origin (`sponsor.corsOrigins`). Unset: the passkey
         * account pays its own gas in ETH.
         */
        paymasterUrl: httpUrl.optional(),
      })
      .prefault({}),
    sse: z
      .strictObject({
        /** Event streams open at once, all clients together. */
        maxClients: z.number().int().min(1).max(100_000).default(1000),
        /** Event streams open at once from one client address. */
        maxClientsPerIp: z.number().int().min(1).max(10_000).default(16),
        /** A comment line is sent this often so proxies keep the stream open. */
        heartbeatMs: z.number().int().min(1000).max(300_000).default(15_000),
        /** Events queued for a client that reads too slowly before it is disconnected. */
        clientBufferEvents: z.number().int().min(1).max(100_000).default(512),
        /** Recent events kept for clients that reconnect with Last-Event-ID. */
        replayEvents: z.number().int().min(0).max(100_000).default(1000),
      })
      .prefault({}),
    /** GET /v1/health reports `down` when the checks take longer than this. */
    healthTimeoutMs: z.number().int().min(100).max(60_000).default(5000),
    /**
     * Relayed output downloads (POST /v1/leases/{id}/output/read, for browsers): the largest output
     * this node streams through, and how many downloads it relays at once (all clients together).
     */
    output: z
      .strictObject({
        maxBytes: z
          .number()
          .int()
          .min(0)
          .max(Number.MAX_SAFE_INTEGER)
          .default(4 * 1024 ** 3),
        maxConcurrent: z.number().int().min(1).max(10_000).default(16),
      })
      .prefault({}),
    /** How far a signed request's issuedAt may be from the node's clock, seconds. */
    signatureMaxAgeSeconds: z.number().int().min(10).max(3600).default(300),
    /**
     * How long and how many connections the server holds (node/http/limits.ts): a client that sends
     * its headers slowly, idles, or opens connection after connection is bounded.
     */
    connections: connectionLimitsSchema({
      headersTimeoutMs: 10_000,
      requestTimeoutMs: 30_000,
      keepAliveTimeoutMs: 5_000,
      // Longer than the event streams' heartbeat (a stream writes at least that often).
      idleTimeoutMs: 120_000,
      maxPerAddress: 64,
      maxTotal: 4096,
      maxRequestsPerSocket: 0,
    }),
  })
  .refine((options) => options.sse.heartbeatMs < options.connections.idleTimeoutMs, {
    message: "sse.heartbeatMs must be shorter than connections.idleTimeoutMs, or idle event streams are closed between heartbeats",
    path: ["sse", "heartbeatMs"],
  });
export type ApiOptions = z.output<typeof apiOptionsSchema>;

import { z } from "zod";
import { connectionLimitsSchema } from "../http/limits.js";

/**
 * Options of the gateway (`gateway.*` in the node's configuration, docs/configuration.md and
 * docs/endpoints.md): renters' endpoints served over HTTP at `/e/<endpointId>/`, each request
 * carried over libp2p to the task's port.
 */
export const gatewayOptionsSchema = z.strictObject({
  /** Serve endpoints at all. */
  enabled: z.boolean().default(false),
  /** Interface to listen on: loopback by default, behind the operator's TLS reverse proxy. */
  host: z.string().min(1).default("127.0.0.1"),
  /** TCP port; 0 picks a free one. */
  port: z.number().int().min(0).max(65_535).default(8090),
  /** The base URL the world reaches this gateway at (`https://gw.example`), printed in endpoint URLs; unset: `http://host:port`. */
  publicUrl: z
    .string()
    .url()
    .refine((value) => /^https?:\/\/[^/?#]+(\/[^?#]*)?$/i.test(value), "expected an http(s):// URL without query or fragment")
    .transform((value) => value.replace(/\/+$/, ""))
    .optional(),
  /** How long the task may take to send a response's headers before the caller gets 504, ms. */
  responseTimeoutMs: z.number().int().min(100).max(600_000).default(30_000),
  /** Idle kept-alive connections to one endpoint's task kept open at most (each a libp2p stream). */
  maxIdleStreamsPerEndpoint: z.number().int().min(0).max(1000).default(16),
  /** Endpoints registered on this gateway at most. */
  maxEndpoints: z.number().int().min(1).max(1_000_000).default(10_000),
  /** Seconds a 503 asks the caller to wait (`Retry-After`). */
  retryAfterSeconds: z.number().int().min(1).max(3600).default(5),
  /** Requests one bearer token may make per minute (a fixed one-minute window per token); past it: 429 with Retry-After. */
  tokenRateLimitPerMinute: z.number().int().min(1).max(1_000_000).default(600),
  /**
   * Health checks of replicas (each lease of an endpoint whose record names a `healthPath`): a GET
   * of the path every `intervalMs`, answered 2xx or 3xx within `timeoutMs`; `unhealthyAfter` misses
   * in a row (or one failed request) stop routing to it until a check passes again.
   */
  health: z
    .strictObject({
      intervalMs: z.number().int().min(200).max(600_000).default(5_000),
      timeoutMs: z.number().int().min(100).max(60_000).default(2_000),
      unhealthyAfter: z.number().int().min(1).max(100).default(2),
    })
    .prefault({}),
  /** A replica of an endpoint without a health path whose request failed before its answer is not routed to for this long, ms. */
  ejectMs: z.number().int().min(0).max(3_600_000).default(10_000),
  /** A replica whose lease stops within this many seconds (its deposit runs out, a preemption notice) gets no new requests. */
  drainSeconds: z.number().int().min(0).max(3600).default(30),
  /** Answers carry `suanli-endpoint-ends-at` (unix seconds) once the endpoint's last lease stops within this many seconds. */
  endsAtNoticeSeconds: z
    .number()
    .int()
    .min(0)
    .max(7 * 24 * 3600)
    .default(3600),
  /** Behind the operator's reverse proxy: every connection comes from it, so no per-address cap. */
  trustProxy: z.boolean().default(false),
  /**
   * What one client may hold (node/http/limits.ts): slow heads, idle connections, connection
   * floods. The request timeout bounds uploads to the task; responses are not bounded by it.
   */
  connections: connectionLimitsSchema({
    headersTimeoutMs: 10_000,
    requestTimeoutMs: 300_000,
    keepAliveTimeoutMs: 5_000,
    idleTimeoutMs: 120_000,
    maxPerAddress: 64,
    maxTotal: 4096,
    maxRequestsPerSocket: 0,
  }),
});
export type GatewayOptions = z.output<typeof gatewayOptionsSchema>;

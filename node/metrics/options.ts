import { z } from "zod";
import { connectionLimitsSchema, type ConnectionLimits } from "../http/limits.js";

/** A scraper opens a connection or two: small caps, the same timeouts as the API (node/http/limits.ts). */
export const METRICS_CONNECTION_DEFAULTS: ConnectionLimits = {
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  keepAliveTimeoutMs: 5_000,
  idleTimeoutMs: 60_000,
  maxPerAddress: 16,
  maxTotal: 128,
  maxRequestsPerSocket: 0,
};

/**
 * The node's own Prometheus endpoint (`metrics.*`, docs/configuration.md). A node that runs the
 * HTTP API serves the same registry at the API's `/metrics` too; this endpoint is for nodes that
 * do not expose the API (a provider on a GPU server).
 */
export const metricsOptionsSchema = z.strictObject({
  /** Serve `GET /metrics` on host:port. */
  enabled: z.boolean().default(false),
  /** Loopback by default: let the Prometheus server reach it through your own network setup. */
  host: z.string().min(1).default("127.0.0.1"),
  /** TCP port; 0 picks a free one. 9464 is the usual port of a Prometheus exporter. */
  port: z.number().int().min(0).max(65_535).default(9464),
  /** How long and how many connections the endpoint holds. */
  connections: connectionLimitsSchema(METRICS_CONNECTION_DEFAULTS),
});
export type MetricsOptions = z.output<typeof metricsOptionsSchema>;

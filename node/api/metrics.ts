import { Counter, Gauge, Histogram, type Registry } from "prom-client";

/**
 * Metrics of the HTTP API, all declared here and registered on the registry the node passes in
 * (the same registry /metrics serves, so the node's other metrics appear there too).
 * Route labels are route templates (`/v1/offers/:key`), never raw URLs, to bound cardinality.
 */
export function createApiMetrics(registry: Registry) {
  const registers = [registry];
  return {
    requests: new Counter({
      name: "suanli_api_requests_total",
      help: "HTTP requests answered, by method, route template and status code",
      labelNames: ["method", "route", "status"] as const,
      registers,
    }),
    requestDuration: new Histogram({
      name: "suanli_api_request_duration_seconds",
      help: "Time to answer HTTP requests, by method and route template",
      labelNames: ["method", "route"] as const,
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers,
    }),
    rateLimited: new Counter({
      name: "suanli_api_rate_limited_total",
      help: "Requests refused with 429, by route template",
      labelNames: ["route"] as const,
      registers,
    }),
    sseClients: new Gauge({
      name: "suanli_api_sse_clients",
      help: "Event-stream clients connected now",
      registers,
    }),
    sseEvents: new Counter({
      name: "suanli_api_sse_events_total",
      help: "Events written to event-stream clients, by event name",
      labelNames: ["event"] as const,
      registers,
    }),
    sseDisconnects: new Counter({
      name: "suanli_api_sse_disconnects_total",
      help: "Event-stream clients gone, by reason (closed, slow, shutdown)",
      labelNames: ["reason"] as const,
      registers,
    }),
    connectionsRefused: new Counter({
      name: "suanli_api_connections_refused_total",
      help: "Connections closed at once by a cap (api.connections), by reason (per_address, total)",
      labelNames: ["reason"] as const,
      registers,
    }),
    signatureFailures: new Counter({
      name: "suanli_api_signature_failures_total",
      help: "Signed requests refused, by reason (signer, delegation, malformed, stale, replay)",
      labelNames: ["reason"] as const,
      registers,
    }),
  };
}
export type ApiMetrics = ReturnType<typeof createApiMetrics>;

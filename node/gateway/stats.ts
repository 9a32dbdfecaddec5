/**
 * What the gateway counts per endpoint (docs/endpoints.md): requests by status, the time to the
 * answer's head, and the bytes sent back. Prometheus series on the node's registry
 * (`suanli_gateway_*`, labelled by endpoint id) and a summary for `GET /v1/endpoints/{id}/stats`
 * with latency percentiles over the last LATENCY_SAMPLES requests. Per replica (one lease of an
 * endpoint), read from the endpoints' replica sets at each scrape: its state, requests in flight,
 * requests and failures (`suanli_gateway_replica_*`, labelled by endpoint and lease).
 */
import { Counter, Gauge, Histogram, type Registry } from "prom-client";
import type { EndpointStats } from "../../common/endpoints.js";

/** Every endpoint's replicas as its stats show them (`EndpointProxy.replicaViews`). */
export type ReplicaSource = () => Iterable<{ endpointId: string; replicas: EndpointStats["replicas"] }>;

const REPLICA_STATES: EndpointStats["replicas"][number]["state"][] = ["ready", "starting", "unhealthy", "ending", "ended", "unknown"];

const LATENCY_SAMPLES = 1024;

type Summary = { byStatus: Map<number, number>; total: number; bytes: number; latencies: number[]; next: number };

/** The endpoint-wide part of its stats; the replicas' part comes from its ReplicaSet. */
export type EndpointStatsView = Omit<EndpointStats, "replicas" | "endsAt">;

function percentile(sorted: number[], p: number): number | null {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

export class GatewayStats {
  private readonly summaries = new Map<string, Summary>();
  private readonly requests: Counter<"endpoint" | "status">;
  private readonly head: Histogram<"endpoint">;
  private readonly bytes: Counter<"endpoint">;

  constructor(registry: Registry, replicas?: ReplicaSource) {
    if (replicas) registerReplicaSeries(registry, replicas);
    this.requests = new Counter({
      name: "suanli_gateway_requests_total",
      help: "Requests to endpoints, by endpoint and status",
      labelNames: ["endpoint", "status"],
      registers: [registry],
    });
    this.head = new Histogram({
      name: "suanli_gateway_response_head_seconds",
      help: "Time from a request to its answer's head, by endpoint",
      labelNames: ["endpoint"],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers: [registry],
    });
    this.bytes = new Counter({
      name: "suanli_gateway_response_bytes_total",
      help: "Body bytes the tasks sent back through endpoints",
      labelNames: ["endpoint"],
      registers: [registry],
    });
  }

  record(endpointId: string, status: number, headMs: number, bytes: number): void {
    let summary = this.summaries.get(endpointId);
    if (!summary) this.summaries.set(endpointId, (summary = { byStatus: new Map(), total: 0, bytes: 0, latencies: [], next: 0 }));
    summary.total++;
    summary.byStatus.set(status, (summary.byStatus.get(status) ?? 0) + 1);
    summary.bytes += bytes;
    if (summary.latencies.length < LATENCY_SAMPLES) summary.latencies.push(headMs);
    else summary.latencies[summary.next] = headMs;
    summary.next = (summary.next + 1) % LATENCY_SAMPLES;
    this.requests.inc({ endpoint: endpointId, status: String(status) });
    this.head.observe({ endpoint: endpointId }, headMs / 1000);
    if (bytes > 0) this.bytes.inc({ endpoint: endpointId }, bytes);
  }

  view(endpointId: string): EndpointStatsView {
    const summary = this.summaries.get(endpointId);
    const sorted = [...(summary?.latencies ?? [])].sort((a, b) => a - b);
    const round = (value: number | null) => (value === null ? null : Math.round(value * 10) / 10);
    return {
      endpointId,
      requests: { total: summary?.total ?? 0, byStatus: Object.fromEntries([...(summary?.byStatus ?? new Map<number, number>())].map(([k, v]) => [String(k), v])) },
      latencyMs: { p50: round(percentile(sorted, 50)), p90: round(percentile(sorted, 90)), p99: round(percentile(sorted, 99)) },
      bytesOut: summary?.bytes ?? 0,
    };
  }

  /** Drops a deleted endpoint's series. */
  forget(endpointId: string): void {
    for (const status of this.summaries.get(endpointId)?.byStatus.keys() ?? []) this.requests.remove({ endpoint: endpointId, status: String(status) });
    this.summaries.delete(endpointId);
    this.head.remove({ endpoint: endpointId });
    this.bytes.remove({ endpoint: endpointId });
  }
}

/**
 * The per-replica series, set from `source` at each scrape (so a deleted endpoint's replicas are
 * gone from the next one): `suanli_gateway_replica_state` (1 for the replica's state, 0 for the
 * others), `_outstanding` (requests in flight), `_requests_total` and `_failures_total` (since the
 * gateway started).
 */
function registerReplicaSeries(registry: Registry, source: ReplicaSource): void {
  const labelNames = ["endpoint", "lease"] as const;
  type View = EndpointStats["replicas"][number];
  /** Each series sets itself from `source` when scraped (prom-client calls `collect` before reading it). */
  const each = (write: (labels: { endpoint: string; lease: string }, replica: View) => void) => {
    for (const { endpointId, replicas } of source()) for (const replica of replicas) write({ endpoint: endpointId, lease: replica.leaseId }, replica);
  };
  new Gauge({
    name: "suanli_gateway_replica_state",
    help: "Each replica's state (1 for the one it is in): ready, starting, unhealthy, ending, ended, unknown",
    labelNames: ["endpoint", "lease", "state"],
    registers: [registry],
    collect() {
      this.reset();
      each((labels, replica) => {
        for (const state of REPLICA_STATES) this.set({ ...labels, state }, replica.state === state ? 1 : 0);
      });
    },
  });
  new Gauge({
    name: "suanli_gateway_replica_outstanding",
    help: "Requests in flight to each replica of an endpoint",
    labelNames,
    registers: [registry],
    collect() {
      this.reset();
      each((labels, replica) => this.set(labels, replica.outstanding));
    },
  });
  new Counter({
    name: "suanli_gateway_replica_requests_total",
    help: "Requests sent to each replica of an endpoint since the gateway started",
    labelNames,
    registers: [registry],
    collect() {
      this.reset();
      each((labels, replica) => this.inc(labels, replica.requests));
    },
  });
  new Counter({
    name: "suanli_gateway_replica_failures_total",
    help: "Requests to each replica of an endpoint refused or broken before their answer, since the gateway started",
    labelNames,
    registers: [registry],
    collect() {
      this.reset();
      each((labels, replica) => this.inc(labels, replica.failures));
    },
  });
}

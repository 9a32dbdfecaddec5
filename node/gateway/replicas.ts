/**
 * An endpoint's replicas at the gateway (docs/endpoints.md "Replicas"): one per lease of the
 * signed record, each with its own kept-alive connections (forward streams to that lease), its
 * requests in flight, its health and its lease as last read from the chain. The proxy sends a
 * request to the ready replica with the fewest requests in flight; a replica whose lease stops
 * within `gateway.drainSeconds` (a preemption notice, its deposit running out) gets no new ones,
 * while those in flight finish on their open streams.
 */
import http from "node:http";
import type { LeaseView } from "../../common/chain/market.js";
import type { EndpointStats } from "../../common/endpoints.js";
import { runDetached } from "../../common/detached.js";
import type { Logger } from "../log/logger.js";
import { UpstreamTimeoutError, UpstreamUnavailableError } from "./errors.js";
import type { GatewayOptions } from "./options.js";
import type { GatewayEndpoint } from "./registry.js";

export type ReplicaState = EndpointStats["replicas"][number]["state"];
type ReplicaView = EndpointStats["replicas"][number];

/** One lease of an endpoint, as the gateway sees it. */
export class Replica {
  /** Requests (and upgraded connections) in flight. */
  outstanding = 0;
  requests = 0;
  /** Requests that failed before the task's answer, and failed health checks. */
  failures = 0;
  /** Health checks missed in a row. */
  misses = 0;
  /** A health check has passed since the replica was last found unhealthy (endpoints with a health path). */
  passed = false;
  /** Not routed to: its checks or a request failed. */
  unhealthy = false;
  /** Without a health path, an unhealthy replica is tried again from then (ms). */
  retryAtMs = 0;
  lastCheck: { ok: boolean; at: number; detail: string } | null = null;
  /** The lease as last read (kept when a read fails). */
  lease: LeaseView | undefined;
  /** The health check under way. */
  checking: Promise<void> | undefined;
  /** When it was last picked, in picks of its endpoint: ties go to the one picked longest ago. */
  lastPick = 0;

  constructor(
    readonly leaseId: bigint,
    readonly agent: http.Agent,
  ) {}
}

export type ReplicaSetOptions = {
  options: GatewayOptions;
  logger: Logger;
  /** The lease, read from the chain (cached by the caller). */
  readLease: (leaseId: bigint) => Promise<LeaseView>;
  /** The replica's kept-alive connections: forward streams to that lease's port. */
  agentFor: (leaseId: bigint) => http.Agent;
  /** Unix seconds. */
  now?: () => number;
};

/** When a lease stops: when its deposit runs out while Active, its stop (the end of a notice) once ended; null when it never ran. */
function leaseEndsAt(lease: LeaseView): number | null {
  if (lease.status === "Active") return lease.end;
  return lease.stopAt > 0 ? lease.stopAt : null;
}

export class ReplicaSet {
  readonly replicas: Replica[];
  private timer: NodeJS.Timeout | undefined;
  private closed = false;
  private picks = 0;

  constructor(
    readonly endpoint: GatewayEndpoint,
    private readonly options: ReplicaSetOptions,
  ) {
    this.replicas = endpoint.endpoint.leaseIds.map((leaseId) => new Replica(leaseId, options.agentFor(leaseId)));
  }

  private nowSeconds(): number {
    return this.options.now?.() ?? Math.floor(Date.now() / 1000);
  }

  /** Reads every replica's lease (each read cached by the caller); a failed read keeps the last one. */
  async refresh(): Promise<void> {
    await Promise.all(
      this.replicas.map(async (replica) => {
        try {
          replica.lease = await this.options.readLease(replica.leaseId);
        } catch (error) {
          this.options.logger.debug("Gateway could not read a replica's lease", { endpoint: this.endpoint.id, leaseId: String(replica.leaseId), reason: (error as Error).message });
        }
      }),
    );
  }

  state(replica: Replica): ReplicaState {
    const lease = replica.lease;
    if (!lease) return "unknown";
    const now = this.nowSeconds();
    if (lease.status === "Ended" && lease.stopAt > now) return "ending";
    if (lease.status !== "Active") return "ended";
    if (lease.end - now <= this.options.options.drainSeconds) return "ending";
    if (this.endpoint.endpoint.healthPath) {
      if (replica.unhealthy) return "unhealthy";
      return replica.passed ? "ready" : "starting";
    }
    return replica.unhealthy && Date.now() < replica.retryAtMs ? "unhealthy" : "ready";
  }

  /** When the endpoint's last running lease stops (unix seconds), or null when none runs. */
  endsAt(): number | null {
    let last: number | null = null;
    for (const replica of this.replicas) {
      const state = this.state(replica);
      if (state === "ended" || state === "unknown") continue;
      const at = leaseEndsAt(replica.lease!);
      if (at !== null && (last === null || at > last)) last = at;
    }
    return last;
  }

  /**
   * The ready replica with the fewest requests in flight (then the one picked longest ago), not one of
   * `tried`. Replicas still waiting for their first health check are waited for once.
   * UpstreamUnavailableError (503) saying each replica's state when none is ready.
   */
  async pick(tried: ReadonlySet<Replica> = new Set()): Promise<Replica> {
    await this.refresh();
    let ready = this.ready(tried);
    if (ready.length === 0) {
      const starting = this.replicas.filter((replica) => !tried.has(replica) && this.state(replica) === "starting");
      if (starting.length > 0) {
        await Promise.all(starting.map((replica) => this.check(replica)));
        ready = this.ready(tried);
      }
    }
    if (ready.length === 0) {
      const states = this.replicas.map((replica) => `lease ${replica.leaseId} ${tried.has(replica) ? "failed this request" : this.state(replica)}`);
      throw new UpstreamUnavailableError(`No replica of endpoint ${this.endpoint.id} can take the request now (${states.join("; ")})`);
    }
    const best = ready.reduce((chosen, replica) =>
      replica.outstanding < chosen.outstanding || (replica.outstanding === chosen.outstanding && replica.lastPick < chosen.lastPick) ? replica : chosen,
    );
    best.lastPick = ++this.picks;
    return best;
  }

  private ready(tried: ReadonlySet<Replica>): Replica[] {
    return this.replicas.filter((replica) => !tried.has(replica) && this.state(replica) === "ready");
  }

  /**
   * A request to the replica failed before its answer. A connection it refused or broke stops
   * routing to it at once; a time-out counts as a missed check (`health.unhealthyAfter` in a row).
   * It is routed to again once a health check passes, or after `ejectMs` without a health path.
   */
  failed(replica: Replica, error: Error & { shortMessage?: string }): void {
    replica.failures++;
    replica.misses++;
    if (!(error instanceof UpstreamTimeoutError) || replica.misses >= this.options.options.health.unhealthyAfter) {
      replica.unhealthy = true;
      replica.passed = false;
      replica.retryAtMs = Date.now() + this.options.options.ejectMs;
      this.options.logger.info("Gateway stopped routing to a replica: a request to it failed", {
        endpoint: this.endpoint.id,
        leaseId: String(replica.leaseId),
        reason: error.shortMessage ?? error.message,
      });
    }
  }

  /** A request to the replica got its answer's head: without a health path, that is what says it works. */
  answered(replica: Replica): void {
    if (this.endpoint.endpoint.healthPath) return;
    replica.unhealthy = false;
    replica.misses = 0;
  }

  /** One health check of a replica (GET the health path over its own connections); concurrent calls share it. */
  check(replica: Replica): Promise<void> {
    replica.checking ??= this.runCheck(replica).finally(() => (replica.checking = undefined));
    return replica.checking;
  }

  private async runCheck(replica: Replica): Promise<void> {
    const { timeoutMs, unhealthyAfter } = this.options.options.health;
    const outcome = await new Promise<{ ok: boolean; detail: string }>((resolve) => {
      const request = http.request({
        agent: replica.agent,
        method: "GET",
        path: this.endpoint.endpoint.healthPath,
        headers: { host: `127.0.0.1:${this.endpoint.endpoint.port}`, "user-agent": "suanli-gateway-health" },
        setHost: false,
      });
      const timer = setTimeout(() => request.destroy(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
      request.once("error", (error) => {
        clearTimeout(timer);
        resolve({ ok: false, detail: (error as { shortMessage?: string }).shortMessage ?? error.message });
      });
      request.once("response", (answer) => {
        clearTimeout(timer);
        answer.resume();
        const status = answer.statusCode ?? 0;
        resolve({ ok: status >= 200 && status < 400, detail: `HTTP ${status}` });
      });
      request.end();
    });
    replica.lastCheck = { ...outcome, at: Math.floor(Date.now() / 1000) };
    if (outcome.ok) {
      replica.misses = 0;
      if (replica.unhealthy || !replica.passed) this.options.logger.info("Gateway replica ready", { endpoint: this.endpoint.id, leaseId: String(replica.leaseId) });
      replica.unhealthy = false;
      replica.passed = true;
      return;
    }
    replica.failures++;
    replica.misses++;
    if (replica.misses >= unhealthyAfter && !replica.unhealthy) {
      replica.unhealthy = true;
      this.options.logger.info("Gateway stopped routing to a replica: its health checks failed", {
        endpoint: this.endpoint.id,
        leaseId: String(replica.leaseId),
        detail: outcome.detail,
      });
    }
  }

  /** Checks every running replica now and then every `gateway.health.intervalMs`, while the endpoint has a health path and is served. */
  startHealthChecks(): void {
    if (!this.endpoint.endpoint.healthPath || this.timer || this.closed) return;
    const round = async () => {
      if (this.closed) return;
      if (this.endpoint.servedUntil <= this.nowSeconds()) return this.close();
      await this.refresh();
      await Promise.all(this.replicas.filter((replica) => !["ended", "unknown"].includes(this.state(replica))).map((replica) => this.check(replica)));
      if (!this.closed) this.timer = setTimeout(next, this.options.options.health.intervalMs).unref();
    };
    // A round never throws (each check records its own outcome); a lease read that fails keeps the last one.
    const next = () => runDetached(round(), this.options.logger, "Gateway health checks");
    this.timer = setTimeout(next, 0).unref();
  }

  /** What `GET /v1/endpoints/{id}/stats` says of each replica. */
  view(): ReplicaView[] {
    return this.replicas.map((replica) => ({
      leaseId: String(replica.leaseId),
      provider: replica.lease?.provider ?? null,
      state: this.state(replica),
      outstanding: replica.outstanding,
      requests: replica.requests,
      failures: replica.failures,
      lastCheck: replica.lastCheck,
      endsAt: replica.lease ? leaseEndsAt(replica.lease) : null,
    }));
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
    for (const replica of this.replicas) replica.agent.destroy();
  }
}

/**
 * The gateway's request path: `/e/<endpointId>/<path>` → an HTTP/1.1 request to the task's port,
 * over a forward stream (common/protocols/task-io.ts) to the provider of one of the endpoint's
 * leases (its replicas, replicas.ts: the ready one with the fewest requests in flight), signed by
 * the gateway's key with the renter's delegation attached. Each replica has its own `http.Agent`
 * whose connections are those streams (ForwardDuplex): node's HTTP client keeps them alive
 * between requests and streams chunked and event-stream responses through as they arrive. A
 * request that fails before its answer is sent once more to another replica when it changes
 * nothing (GET or HEAD without a body).
 */
import http, { type IncomingMessage, type ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import type { PrivateKeyAccount } from "viem/accounts";
import type { Chain, PublicClient, Transport, TypedDataDomain } from "viem";
import type { Address } from "viem";
import { readLease, type LeaseView } from "../../common/chain/market.js";
import type { CachedChainView } from "../../common/offers/chain-view.js";
import type { SuanliHost } from "../../common/p2p/host.js";
import { FORWARD_PROTOCOL } from "../../common/p2p/protocols.js";
import { openStreamProtocol } from "../../common/p2p/streams.js";
import { signLeaseRequest } from "../../common/protocols/lease.js";
import { FORWARD_FRAME_BYTES, TASK_IO_CONTROL_MAX_BYTES, forwardOpenedSchema } from "../../common/protocols/task-io.js";
import type { Logger } from "../log/logger.js";
import type { OfferBook } from "../offers/book.js";
import { resolveProviderPeer } from "../api/relay.js";
import { UpstreamTimeoutError, UpstreamUnavailableError } from "./errors.js";
import { ForwardDuplex } from "./forward-duplex.js";
import type { GatewayOptions } from "./options.js";
import type { GatewayEndpoint } from "./registry.js";
import { ReplicaSet, type Replica } from "./replicas.js";

/** Headers that describe one hop, not the message (RFC 9110 §7.6.1): never passed on. */
const HOP_BY_HOP = new Set(["connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade"]);
/** A lease's state is read from the chain at most this often per lease. */
const LEASE_CACHE_MS = 2000;

/** The headers of `message` without hop-by-hop ones (and those its Connection header names), and without `drop`. */
export function endToEndHeaders(headers: http.IncomingHttpHeaders, drop: readonly string[] = []): http.OutgoingHttpHeaders {
  const named = new Set(
    String(headers.connection ?? "")
      .split(",")
      .map((name) => name.trim().toLowerCase())
      .filter(Boolean),
  );
  const out: http.OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || HOP_BY_HOP.has(name) || named.has(name) || drop.includes(name)) continue;
    out[name] = value;
  }
  return out;
}

/** How a proxied request went: the status sent, ms to the answer's head, body bytes passed back. */
export type ProxyOutcome = { status: number; headMs: number; bytes: number };

export type EndpointProxyOptions = {
  host: SuanliHost;
  book: OfferBook;
  chainView: CachedChainView;
  publicClient: PublicClient<Transport, Chain>;
  market: Address;
  domain: TypedDataDomain;
  account: PrivateKeyAccount;
  options: GatewayOptions;
  logger: Logger;
};

export class EndpointProxy {
  private readonly sets = new Map<string, ReplicaSet>();
  private readonly leases = new Map<bigint, { atMs: number; lease: Promise<LeaseView> }>();
  /** Forward streams opened, all endpoints together (the keep-alive test reads it). */
  streamsOpened = 0;

  constructor(private readonly options: EndpointProxyOptions) {}

  private lease(leaseId: bigint): Promise<LeaseView> {
    const cached = this.leases.get(leaseId);
    if (cached && Date.now() - cached.atMs < LEASE_CACHE_MS) return cached.lease;
    const lease = readLease(this.options.publicClient, this.options.market, leaseId);
    this.leases.set(leaseId, { atMs: Date.now(), lease });
    lease.catch(() => this.leases.delete(leaseId));
    return lease;
  }

  /** Opens a connection to the endpoint's port on one of its leases; UpstreamUnavailableError when the lease is not running or its provider does not take it. */
  async connect(endpoint: GatewayEndpoint, leaseId: bigint): Promise<ForwardDuplex> {
    const { port } = endpoint.endpoint;
    try {
      const lease = await this.lease(leaseId);
      if (lease.status !== "Active") throw new UpstreamUnavailableError(`lease ${leaseId} is ${lease.status.toLowerCase()}`);
      const peer = await resolveProviderPeer(this.options, lease.provider, lease.machineId);
      // libp2p does not dial itself: a gateway serves the tasks of other nodes.
      if (peer.equals(this.options.host.peerId))
        throw new UpstreamUnavailableError(`lease ${leaseId} runs on this gateway's own node: run the gateway on another node (docs/endpoints.md)`);
      const auth = await signLeaseRequest((p) => this.options.account.signTypedData(p), this.options.domain, {
        leaseId,
        provider: lease.provider,
        action: "forward",
        body: { port },
      });
      const { lp, stream } = await openStreamProtocol(
        this.options.host,
        peer,
        FORWARD_PROTOCOL,
        { auth: { ...auth, delegation: endpoint.delegation }, params: { port } },
        { responseSchema: forwardOpenedSchema, maxFrameBytes: Math.max(FORWARD_FRAME_BYTES, TASK_IO_CONTROL_MAX_BYTES), timeoutMs: this.options.options.responseTimeoutMs },
      );
      this.streamsOpened++;
      return new ForwardDuplex(lp, stream);
    } catch (error) {
      const reason = (error as { shortMessage?: string }).shortMessage ?? (error as Error).message;
      this.options.logger.debug("Gateway could not open a forward stream", { endpoint: endpoint.id, leaseId: String(leaseId), reason });
      throw error instanceof UpstreamUnavailableError ? error : new UpstreamUnavailableError(`lease ${leaseId}: ${reason}`, { cause: error });
    }
  }

  /** An agent whose connections are forward streams to one lease of the endpoint. */
  private agentFor(endpoint: GatewayEndpoint, leaseId: bigint): http.Agent {
    const agent = new http.Agent({ keepAlive: true, maxFreeSockets: Math.max(1, this.options.options.maxIdleStreamsPerEndpoint) });
    (agent as unknown as { createConnection: unknown }).createConnection = (_options: unknown, callback: (error: Error | null, socket?: Duplex) => void) => {
      this.connect(endpoint, leaseId).then(
        (socket) => callback(null, socket),
        (error: unknown) => callback(error as Error),
      );
      return undefined;
    };
    return agent;
  }

  /** The endpoint's replicas (made at its first use or registration, health checks started). */
  replicas(endpoint: GatewayEndpoint): ReplicaSet {
    let set = this.sets.get(endpoint.id);
    if (!set) {
      set = new ReplicaSet(endpoint, {
        options: this.options.options,
        logger: this.options.logger,
        readLease: (leaseId) => this.lease(leaseId),
        agentFor: (leaseId) => this.agentFor(endpoint, leaseId),
      });
      this.sets.set(endpoint.id, set);
      set.startHealthChecks();
    }
    return set;
  }

  /** Every endpoint's replicas as its stats show them (the per-replica Prometheus series read them at each scrape). */
  *replicaViews(): Iterable<{ endpointId: string; replicas: ReturnType<ReplicaSet["view"]> }> {
    for (const [endpointId, set] of this.sets) yield { endpointId, replicas: set.view() };
  }

  /** Closes an endpoint's kept-alive connections and stops its health checks (it was deleted). */
  forget(endpointId: string): void {
    this.sets.get(endpointId)?.close();
    this.sets.delete(endpointId);
  }

  close(): void {
    for (const set of this.sets.values()) set.close();
    this.sets.clear();
  }

  /**
   * Sends `req` to the task as `path` (the part after `/e/<id>`, with the query) on the ready
   * replica with the fewest requests in flight, and streams the answer back. Errors before the
   * answer's head are thrown (503 or 504) after one more try on another replica for a request that
   * changes nothing; after the head, the response is cut.
   */
  async forward(endpoint: GatewayEndpoint, req: IncomingMessage, res: ServerResponse, path: string, drop: readonly string[]): Promise<ProxyOutcome> {
    const idempotent = (req.method === "GET" || req.method === "HEAD") && !req.headers["content-length"] && !req.headers["transfer-encoding"];
    const headers = endToEndHeaders(req.headers, drop);
    headers["x-forwarded-for"] = [req.headers["x-forwarded-for"], req.socket.remoteAddress].filter(Boolean).join(", ");
    headers["x-forwarded-prefix"] = `/e/${endpoint.id}`;
    const set = this.replicas(endpoint);
    const tried = new Set<Replica>();
    let replica = await set.pick(tried);
    for (;;) {
      tried.add(replica);
      try {
        return await this.onReplica(set, replica, req, res, path, headers, idempotent);
      } catch (error) {
        if (!(error instanceof UpstreamUnavailableError || error instanceof UpstreamTimeoutError)) throw error;
        set.failed(replica, error);
        if (!idempotent || tried.size > 1 || res.headersSent) throw error;
        // Once more on another replica: the first one's error when there is none.
        replica = await set.pick(tried).catch(() => {
          throw error;
        });
        this.options.logger.debug("Gateway retries a request on another replica", { endpoint: endpoint.id, leaseId: String(replica.leaseId) });
      }
    }
  }

  /** One replica's try: a kept-alive connection the task closed meanwhile is retried on a new one when the request changes nothing. */
  private async onReplica(
    set: ReplicaSet,
    replica: Replica,
    req: IncomingMessage,
    res: ServerResponse,
    path: string,
    headers: http.OutgoingHttpHeaders,
    idempotent: boolean,
  ): Promise<ProxyOutcome> {
    replica.outstanding++;
    replica.requests++;
    try {
      for (let attempt = 0; ; attempt++) {
        try {
          const outcome = await this.once(set, replica, req, res, path, headers);
          set.answered(replica);
          return outcome;
        } catch (error) {
          if (attempt === 0 && idempotent && (error as { reused?: boolean }).reused) continue;
          throw error;
        }
      }
    } finally {
      replica.outstanding--;
    }
  }

  /**
   * An Upgrade request (WebSocket): a new connection to the task, the request head written as
   * received (path rewritten, hop-by-hop headers but Connection/Upgrade dropped), then the bytes
   * both ways until either side closes. The task's own answer (101, or a refusal) goes back as is.
   */
  async upgrade(endpoint: GatewayEndpoint, req: IncomingMessage, socket: Duplex, head: Buffer, path: string, drop: readonly string[]): Promise<void> {
    const set = this.replicas(endpoint);
    const replica = await set.pick();
    const upstream = await this.connect(endpoint, replica.leaseId).catch((error: unknown) => {
      set.failed(replica, error as Error);
      throw error;
    });
    replica.requests++;
    replica.outstanding++;
    upstream.once("close", () => replica.outstanding--);
    const headers = endToEndHeaders(req.headers, drop);
    headers.connection = "Upgrade";
    headers.upgrade = req.headers.upgrade ?? "websocket";
    headers["x-forwarded-for"] = [req.headers["x-forwarded-for"], req.socket.remoteAddress].filter(Boolean).join(", ");
    headers["x-forwarded-prefix"] = `/e/${endpoint.id}`;
    const lines = [`${req.method ?? "GET"} ${path} HTTP/1.1`];
    for (const [name, value] of Object.entries(headers)) for (const one of [value].flat()) if (one !== undefined) lines.push(`${name}: ${String(one)}`);
    upstream.write(`${lines.join("\r\n")}\r\n\r\n`);
    if (head.length > 0) upstream.write(head);
    const close = () => {
      socket.destroy();
      upstream.destroy();
    };
    for (const side of [socket, upstream]) {
      side.once("close", close);
      side.on("error", close);
    }
    socket.pipe(upstream);
    upstream.pipe(socket);
  }

  private once(set: ReplicaSet, replica: Replica, req: IncomingMessage, res: ServerResponse, path: string, headers: http.OutgoingHttpHeaders): Promise<ProxyOutcome> {
    const { responseTimeoutMs } = this.options.options;
    const startedMs = performance.now();
    return new Promise<ProxyOutcome>((settle, reject) => {
      let answered = false;
      let headMs = 0;
      let bytes = 0;
      const resolve = () => settle({ status: res.statusCode, headMs, bytes });
      const upstream = http.request({ agent: replica.agent, method: req.method, path, headers, setHost: false });
      const timer = setTimeout(() => {
        upstream.destroy(new UpstreamTimeoutError(`The task did not answer within ${responseTimeoutMs} ms`));
      }, responseTimeoutMs);
      upstream.once("error", (error) => {
        clearTimeout(timer);
        if (answered) {
          res.destroy(error);
          resolve();
          return;
        }
        if (error instanceof UpstreamUnavailableError || error instanceof UpstreamTimeoutError) return reject(error);
        const wrapped = new UpstreamUnavailableError(`The connection to the task broke before it answered: ${error.message}`, { cause: error });
        Object.assign(wrapped, { reused: upstream.reusedSocket });
        reject(wrapped);
      });
      upstream.once("response", (answer) => {
        clearTimeout(timer);
        answered = true;
        headMs = performance.now() - startedMs;
        answer.on("data", (chunk: Buffer) => (bytes += chunk.length));
        const endsAt = set.endsAt();
        if (endsAt !== null && endsAt - Math.floor(Date.now() / 1000) <= this.options.options.endsAtNoticeSeconds) res.setHeader("suanli-endpoint-ends-at", String(endsAt));
        res.writeHead(answer.statusCode ?? 502, answer.statusMessage, endToEndHeaders(answer.headers));
        // An answer without a length (chunked: an event stream, a token stream) has its headers sent at
        // once, so its client sees it begin before the first event. One with a length goes out with its
        // first body bytes, in one write to the caller's socket instead of two (bench gateway).
        if (answer.headers["content-length"] === undefined) res.flushHeaders();
        answer.pipe(res);
        answer.once("end", () => resolve());
        answer.once("error", () => resolve());
      });
      res.once("close", () => {
        if (!res.writableFinished) upstream.destroy();
        resolve();
      });
      if (req.readableEnded || req.method === "GET" || req.method === "HEAD") upstream.end();
      else req.pipe(upstream);
    });
  }
}

/**
 * The gateway's request path: `/e/<endpointId>/<path>` → an HTTP/1.1 request to the task's port,
 * over a forward stream (common/protocols/task-io.ts) to the provider of one of the endpoint's
 * leases, signed by the gateway's key with the renter's delegation attached. Each endpoint has
 * its own `http.Agent` whose connections are those streams (ForwardDuplex): node's HTTP client
 * keeps them alive between requests and streams chunked and event-stream responses through as
 * they arrive.
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
  private readonly agents = new Map<string, http.Agent>();
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

  /** Opens a connection to the endpoint's port on the first of its leases that takes it; UpstreamUnavailableError when none does. */
  async connect(endpoint: GatewayEndpoint): Promise<ForwardDuplex> {
    const { port, leaseIds } = endpoint.endpoint;
    const reasons: string[] = [];
    for (const leaseId of leaseIds) {
      try {
        const lease = await this.lease(leaseId);
        if (lease.status !== "Active") {
          reasons.push(`lease ${leaseId} is ${lease.status.toLowerCase()}`);
          continue;
        }
        const peer = await resolveProviderPeer(this.options, lease.provider, lease.machineId);
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
        reasons.push(`lease ${leaseId}: ${reason}`);
      }
    }
    throw new UpstreamUnavailableError(`No lease of endpoint ${endpoint.id} can take the request now (${reasons.join("; ")})`);
  }

  private agentFor(endpoint: GatewayEndpoint): http.Agent {
    let agent = this.agents.get(endpoint.id);
    if (!agent) {
      agent = new http.Agent({ keepAlive: true, maxFreeSockets: Math.max(1, this.options.options.maxIdleStreamsPerEndpoint) });
      (agent as unknown as { createConnection: unknown }).createConnection = (_options: unknown, callback: (error: Error | null, socket?: Duplex) => void) => {
        this.connect(endpoint).then(
          (socket) => callback(null, socket),
          (error: unknown) => callback(error as Error),
        );
        return undefined;
      };
      this.agents.set(endpoint.id, agent);
    }
    return agent;
  }

  /** Closes an endpoint's kept-alive connections (it was deleted). */
  forget(endpointId: string): void {
    this.agents.get(endpointId)?.destroy();
    this.agents.delete(endpointId);
  }

  close(): void {
    for (const agent of this.agents.values()) agent.destroy();
    this.agents.clear();
  }

  /**
   * Sends `req` to the task as `path` (the part after `/e/<id>`, with the query) and streams the
   * answer back. Errors before the answer's head are thrown (503 or 504); after it, the response
   * is cut.
   */
  async forward(endpoint: GatewayEndpoint, req: IncomingMessage, res: ServerResponse, path: string, drop: readonly string[]): Promise<ProxyOutcome> {
    const idempotent = (req.method === "GET" || req.method === "HEAD") && !req.headers["content-length"] && !req.headers["transfer-encoding"];
    const headers = endToEndHeaders(req.headers, drop);
    headers["x-forwarded-for"] = [req.headers["x-forwarded-for"], req.socket.remoteAddress].filter(Boolean).join(", ");
    headers["x-forwarded-prefix"] = `/e/${endpoint.id}`;
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.once(endpoint, req, res, path, headers);
      } catch (error) {
        // A kept-alive connection the task closed meanwhile: a request that changes nothing goes again, on a new one.
        if (attempt === 0 && idempotent && (error as { reused?: boolean }).reused) continue;
        throw error;
      }
    }
  }

  /**
   * An Upgrade request (WebSocket): a new connection to the task, the request head written as
   * received (path rewritten, hop-by-hop headers but Connection/Upgrade dropped), then the bytes
   * both ways until either side closes. The task's own answer (101, or a refusal) goes back as is.
   */
  async upgrade(endpoint: GatewayEndpoint, req: IncomingMessage, socket: Duplex, head: Buffer, path: string, drop: readonly string[]): Promise<void> {
    const upstream = await this.connect(endpoint);
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

  private once(endpoint: GatewayEndpoint, req: IncomingMessage, res: ServerResponse, path: string, headers: http.OutgoingHttpHeaders): Promise<ProxyOutcome> {
    const { responseTimeoutMs } = this.options.options;
    const startedMs = performance.now();
    return new Promise<ProxyOutcome>((settle, reject) => {
      let answered = false;
      let headMs = 0;
      let bytes = 0;
      const resolve = () => settle({ status: res.statusCode, headMs, bytes });
      const upstream = http.request({ agent: this.agentFor(endpoint), method: req.method, path, headers, setHost: false });
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
        res.writeHead(answer.statusCode ?? 502, answer.statusMessage, endToEndHeaders(answer.headers));
        // Headers out at once: an event stream's client sees the answer begin before its first event.
        res.flushHeaders();
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

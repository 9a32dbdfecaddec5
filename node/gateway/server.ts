/**
 * The gateway's HTTP server (docs/endpoints.md): `/e/<endpointId>/...` goes straight to the proxy
 * (raw request and response, so bodies stream both ways untouched); the management routes are a
 * small fastify app on the same server:
 *
 * - `GET /v1/gateway`: `{ address, publicUrl, chainId }` (the address renters delegate to);
 * - `POST /v1/endpoints`: `{ endpoint, signature, delegation }` → `{ endpointId, url, expiresAt }`;
 * - `GET /v1/endpoints/:id`: the registered record;
 * - `DELETE /v1/endpoints/:id`: `{ issuedAt, signature }` signed by the renter;
 * - `POST /v1/endpoints/:id/revocations`: `{ nonce, issuedAt, signature }` signed by the renter.
 */
import http, { type IncomingMessage, type ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import Fastify, { type FastifyError } from "fastify";
import { runDetached } from "../../common/detached.js";
import { endpointRenterRequestSchema, endpointToJson, tokenRevocationSchema, verifyToken, type EndpointStats } from "../../common/endpoints.js";
import { ApiError, RequestInputError } from "../api/errors.js";
import { httpServerOptions, limitConnections } from "../http/limits.js";
import type { Logger } from "../log/logger.js";
import { LRUCache } from "lru-cache";
import { EndpointNotFoundError, TokenRateLimitedError, TokenRefusedError } from "./errors.js";
import type { GatewayOptions } from "./options.js";
import type { GatewayStats } from "./stats.js";
import type { EndpointProxy } from "./proxy.js";
import type { EndpointRegistry, GatewayEndpoint } from "./registry.js";

const PROXY_PATH = /^\/e\/([0-9a-f]{32})(\/[^?]*)?(\?.*)?$/;

export type GatewayServerOptions = {
  registry: EndpointRegistry;
  proxy: EndpointProxy;
  options: GatewayOptions;
  address: `0x${string}`;
  chainId: number;
  logger: Logger;
  stats: GatewayStats;
};

function errorBody(error: ApiError | RequestInputError): Record<string, unknown> {
  return {
    error: {
      name: error.name,
      message: error.shortMessage,
      ...(error instanceof TokenRefusedError ? { reason: error.reason } : {}),
      ...(error instanceof RequestInputError ? { fields: error.issues } : {}),
    },
  };
}

function statusOf(error: unknown): number {
  if (error instanceof RequestInputError) return 400;
  if (error instanceof ApiError) return error.statusCode;
  return 502;
}

function parse<T>(
  schema: { safeParse(value: unknown): { success: true; data: T } | { success: false; error: { issues: { path: PropertyKey[]; message: string }[] } } },
  value: unknown,
  what: string,
): T {
  const parsed = schema.safeParse(value);
  if (!parsed.success)
    throw new RequestInputError(
      what,
      parsed.error.issues.map((issue) => ({ path: issue.path.join("."), message: issue.message })),
    );
  return parsed.data;
}

export async function createGatewayServer(parameters: GatewayServerOptions) {
  const { registry, proxy, options, logger, stats } = parameters;
  let publicUrl = options.publicUrl ?? "";
  const endpointUrl = (id: string) => `${publicUrl}/e/${id}/`;
  const retryAfter = String(options.retryAfterSeconds);

  /** The status, headers and JSON body of an error answered by the gateway itself. */
  const errorAnswer = (error: unknown) => {
    const status = statusOf(error);
    if (!(error instanceof ApiError || error instanceof RequestInputError)) logger.warn("Gateway request failed", {}, error);
    const body = JSON.stringify(
      error instanceof ApiError || error instanceof RequestInputError
        ? errorBody(error)
        : { error: { name: "BadGatewayError", message: "The task's answer could not be passed on" } },
    );
    const headers: Record<string, string> = {
      "content-type": "application/json; charset=utf-8",
      ...(status === 503 ? { "retry-after": retryAfter } : {}),
      ...(error instanceof TokenRateLimitedError ? { "retry-after": String(error.retryAfterSeconds) } : {}),
      ...(status === 401 ? { "www-authenticate": 'Bearer error="invalid_token"' } : {}),
    };
    return { status, headers, body };
  };

  const sendError = (res: ServerResponse, error: unknown) => {
    const answer = errorAnswer(error);
    if (res.headersSent) {
      res.destroy();
      return;
    }
    res.writeHead(answer.status, answer.headers);
    res.end(answer.body);
  };

  /** The endpoint a request is for and the path to ask the task for, after the access check; a redirect to `/e/<id>/` as `{ redirect }`. */
  const route = async (req: IncomingMessage): Promise<{ redirect: string } | { endpoint: GatewayEndpoint; path: string; drop: string[] }> => {
    const match = PROXY_PATH.exec(req.url ?? "");
    if (!match) throw new EndpointNotFoundError((req.url ?? "").split("/")[2]?.slice(0, 64) ?? "");
    const [, id, rest, query = ""] = match as unknown as [string, string, string | undefined, string | undefined];
    if (rest === undefined) return { redirect: `/e/${id}/${query}` };
    const endpoint = registry.get(id);
    const drop: string[] = [];
    if (!endpoint.endpoint.public) {
      await checkToken(endpoint, req);
      drop.push("authorization");
    }
    return { endpoint, path: `${rest}${query}`, drop };
  };

  const handleProxy = async (req: IncomingMessage, res: ServerResponse) => {
    const startedMs = performance.now();
    const id = PROXY_PATH.exec(req.url ?? "")?.[1];
    try {
      const target = await route(req);
      if ("redirect" in target) {
        res.writeHead(308, { location: target.redirect });
        res.end();
        return;
      }
      const outcome = await proxy.forward(target.endpoint, req, res, target.path, target.drop);
      stats.record(target.endpoint.id, outcome.status, outcome.headMs, outcome.bytes);
    } catch (error) {
      sendError(res, error);
      // The gateway's own answers count for endpoints it serves (a token refused, the task unreachable), not for unknown ids.
      if (id && registry.has(id)) stats.record(id, res.statusCode, performance.now() - startedMs, 0);
    }
  };

  /** A WebSocket (or any Upgrade) request: the same route and access check, then the bytes both ways. */
  const handleUpgrade = async (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on("error", () => socket.destroy());
    try {
      if (!req.url?.startsWith("/e/")) throw new EndpointNotFoundError("");
      const target = await route(req);
      if ("redirect" in target) throw new EndpointNotFoundError(req.url.split("/")[2] ?? "");
      await proxy.upgrade(target.endpoint, req, socket, head, target.path, target.drop);
    } catch (error) {
      const answer = errorAnswer(error);
      const lines = [`HTTP/1.1 ${answer.status} ${http.STATUS_CODES[answer.status] ?? ""}`, ...Object.entries(answer.headers).map(([k, v]) => `${k}: ${v}`)];
      lines.push(`content-length: ${Buffer.byteLength(answer.body)}`, "connection: close", "", answer.body);
      socket.end(lines.join("\r\n"));
    }
  };

  const tokenWindows = new LRUCache<string, { startMs: number; count: number }>({ max: 100_000, ttl: 60_000 });
  const checkToken = async (endpoint: GatewayEndpoint, req: IncomingMessage) => {
    const header = req.headers.authorization ?? "";
    const token = /^Bearer\s+(\S+)$/i.exec(header)?.[1];
    const verdict = await verifyToken(token, {
      endpointId: endpoint.id,
      tokenSigner: endpoint.endpoint.tokenSigner,
      nowSeconds: Math.floor(Date.now() / 1000),
      revoked: (nonce) => registry.isRevoked(endpoint.id, nonce),
    });
    if (!verdict.ok) throw new TokenRefusedError(verdict.reason);
    // Each token its own budget, in fixed one-minute windows.
    const key = `${endpoint.id}/${verdict.claims.n}`;
    const now = Date.now();
    let window = tokenWindows.get(key);
    if (!window || now - window.startMs >= 60_000) tokenWindows.set(key, (window = { startMs: now, count: 0 }));
    if (++window.count > options.tokenRateLimitPerMinute) {
      throw new TokenRateLimitedError(options.tokenRateLimitPerMinute, Math.max(1, Math.ceil((window.startMs + 60_000 - now) / 1000)));
    }
  };

  const limits = options.connections;
  const app = Fastify({
    logger: false,
    bodyLimit: 256 * 1024,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    requestTimeout: limits.requestTimeoutMs,
    serverFactory: (handler) => {
      const server = http.createServer(httpServerOptions(limits), (req, res) => {
        if (req.url?.startsWith("/e/")) runDetached(handleProxy(req, res), logger, "Proxying a request");
        else handler(req, res);
      });
      server.on("upgrade", (req: IncomingMessage, socket: Duplex, head: Buffer) => runDetached(handleUpgrade(req, socket, head), logger, "Proxying an upgrade"));
      limitConnections(server, limits, { perAddress: !options.trustProxy });
      return server;
    },
  });
  app.setErrorHandler((error: FastifyError | Error, _request, reply) => {
    if (error instanceof ApiError || error instanceof RequestInputError) return reply.code(statusOf(error)).send(errorBody(error));
    const status = (error as FastifyError).statusCode;
    if (status && status >= 400 && status < 500) return reply.code(status).send({ error: { name: "InvalidInputError", message: error.message } });
    logger.warn("Gateway route failed", {}, error);
    return reply.code(500).send({ error: { name: "InternalError", message: "The gateway failed to answer" } });
  });
  app.setNotFoundHandler((request, reply) => reply.code(404).send({ error: { name: "RouteNotFoundError", message: `No route ${request.method} ${request.url}` } }));

  app.get("/v1/gateway", async () => ({ address: parameters.address, publicUrl, chainId: parameters.chainId }));
  app.post("/v1/endpoints", async (request, reply) => {
    const endpoint = await registry.register(request.body);
    // A record registered again (same id) keeps its replicas' figures; a new one starts its health checks now.
    proxy.replicas(endpoint);
    return reply.code(201).send({ endpointId: endpoint.id, url: endpointUrl(endpoint.id), expiresAt: endpoint.servedUntil });
  });
  app.get<{ Params: { id: string } }>("/v1/endpoints/:id", async (request) => {
    const endpoint = registry.get(request.params.id);
    return { endpointId: endpoint.id, url: endpointUrl(endpoint.id), expiresAt: endpoint.servedUntil, endpoint: endpointToJson(endpoint.endpoint) };
  });
  app.get<{ Params: { id: string } }>("/v1/endpoints/:id/stats", async (request): Promise<EndpointStats> => {
    const endpoint = registry.get(request.params.id);
    const replicas = proxy.replicas(endpoint);
    await replicas.refresh();
    return { ...stats.view(endpoint.id), endsAt: replicas.endsAt(), replicas: replicas.view() };
  });
  app.delete<{ Params: { id: string } }>("/v1/endpoints/:id", async (request, reply) => {
    const body = parse(endpointRenterRequestSchema, request.body, "request body");
    await registry.checkRenter(request.params.id, body, "delete");
    await registry.remove(request.params.id);
    proxy.forget(request.params.id);
    stats.forget(request.params.id);
    return reply.code(204).send();
  });
  app.post<{ Params: { id: string } }>("/v1/endpoints/:id/revocations", async (request, reply) => {
    const body = parse(tokenRevocationSchema, request.body, "request body");
    await registry.checkRenter(request.params.id, body, "revoke", body.nonce);
    await registry.revoke(request.params.id, body.nonce);
    return reply.code(201).send({ endpointId: request.params.id, nonce: body.nonce });
  });

  return {
    app,
    /** Starts listening; resolves with the address (`http://127.0.0.1:8090`), which is also the public URL when none is configured. */
    async listen(): Promise<string> {
      const address = await app.listen({ host: options.host, port: options.port });
      if (!publicUrl) publicUrl = address;
      logger.info("Gateway listening", { address, publicUrl });
      return address;
    },
    get publicUrl() {
      return publicUrl;
    },
    async close(): Promise<void> {
      proxy.close();
      await app.close();
    },
  };
}
export type GatewayServer = Awaited<ReturnType<typeof createGatewayServer>>;

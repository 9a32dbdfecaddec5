/**
 * The HTTP API server for dApp front ends (fastify 5): offers, providers, machines, leases, market
 * statistics, a match dry-run, signed requests relayed to providers (reservations, task, status,
 * logs, cancel), a server-sent event stream, health, Prometheus metrics, the OpenAPI document and
 * the explorer page. Reads everything from a MarketDataSource; relays through a ProviderRelay.
 *
 * @example
 * import { Registry } from "prom-client";
 * import { createApiServer } from "./node/api/server.js";
 * const api = await createApiServer({ source, deployment, options: { port: 8080 }, registry: new Registry() });
 * const url = await api.listen();
 * // ... later
 * await api.close();
 */
import { createRequire } from "node:module";
import cors from "@fastify/cors";
import rateLimit from "@fastify/rate-limit";
import Fastify, { type FastifyError, type FastifyInstance, type FastifyReply } from "fastify";
import { Registry } from "prom-client";
import type { z } from "zod";
import type { ApiErrorBody } from "../../common/api/market.js";
import type { Deployment } from "../../common/deployment.js";
import { InvalidInputError } from "../../common/errors.js";
import { describeIssues, parseInput } from "../../common/validation.js";
import type { DataStore } from "../data/store.js";
import { httpServerOptions, limitConnections } from "../http/limits.js";
import { silentLogger, type Logger } from "../log/logger.js";
import { ApiError, RateLimitedError, RequestInputError, RouteNotFoundError } from "./errors.js";
import { EventHub } from "./events.js";
import { loadConsoleAssets, loadExplorerAssets } from "./explorer-assets.js";
import { createApiMetrics } from "./metrics.js";
import { buildOpenApiDocument } from "./openapi.js";
import { apiOptionsSchema, type ApiOptions } from "./options.js";
import { OUTPUT_HEADERS } from "../../common/api/relay.js";
import type { RouteSpec } from "./route.js";
import { apiRoutes } from "./routes.js";
import { ReplayGuard } from "./signed.js";
import type { MarketDataSource, ProviderRelay } from "./source.js";
import type { DelegationVerifier } from "../sessions/delegations.js";

const require = createRequire(import.meta.url);
const VERSION: string = (require("../../package.json") as { version: string }).version;

export type ApiServerDeps = {
  source: MarketDataSource;
  /** Forwards renters' signed requests to providers (reservations, task, status, logs, cancel); without it those routes answer 503. */
  relay?: ProviderRelay;
  /** The node's data plane (docs/data.md) and the folder its transfers are staged in; without it the data routes answer 503 (DataDisabledError). */
  data?: { store: DataStore; staging: string };
  /** Checks requests signed by renters' session keys (the reservation route; the relay has its own). */
  delegations?: DelegationVerifier;
  /** The deployment the node serves (chain id, contracts, token); its LeaseMarket signs the EIP-712 domain. */
  deployment: Deployment;
  /** `api.*` options; defaults apply to what is left out. */
  options?: z.input<typeof apiOptionsSchema>;
  logger?: Logger;
  /** The node's metrics registry: the API registers its metrics there and /metrics serves all of it. */
  registry?: Registry;
  /** Clock in milliseconds (tests move it). */
  now?: () => number;
  /** The node's own chain.rpcUrl: the console offers it to the page when it is loopback and `api.console.rpcUrl` is unset. */
  chainRpcUrl?: string;
};

const LOOPBACK_HOSTS = new Set(["127.0.0.1", "localhost", "[::1]"]);

/**
 * The chain RPC URL the console publishes: `api.console.rpcUrl` when set; else the node's own
 * when it is a loopback http(s) URL without credentials (a devnet, a node on the renter's own
 * machine); else none: an operator's RPC URL may carry an API key and is never published unasked.
 */
export function consoleRpcUrl(options: ApiOptions, chainRpcUrl: string | undefined): string | null {
  if (options.console.rpcUrl) return options.console.rpcUrl;
  if (!chainRpcUrl) return null;
  try {
    const url = new URL(chainRpcUrl);
    if (!/^https?:$/.test(url.protocol) || url.username || url.password || url.search) return null;
    return LOOPBACK_HOSTS.has(url.hostname) || /^127\./.test(url.hostname) ? chainRpcUrl : null;
  } catch {
    return null;
  }
}

export type ApiServer = {
  app: FastifyInstance;
  options: ApiOptions;
  routes: readonly RouteSpec[];
  hub: EventHub;
  /** The OpenAPI document served at /openapi.json. */
  document: Record<string, unknown>;
  /** Every (method, url) fastify registered, automatic HEAD routes and the CORS preflight included. */
  registeredRoutes: readonly { method: string; url: string }[];
  /** Listens on options.host:options.port; resolves to the base URL (`http://127.0.0.1:8080`). */
  listen(): Promise<string>;
  /** Ends the event streams and closes the server. */
  close(): Promise<void>;
};

/** Longest path parameter the router accepts (a lease id has at most 78 digits, an address 42 characters); longer: 414. */
const MAX_PARAM_LENGTH = 200;

const PART_NAMES: Record<string, string> = { querystring: "query string", params: "path", body: "request body", headers: "headers" };

function errorBody(name: string, message: string, fields?: { path: string; message: string }[]): ApiErrorBody {
  return { error: fields ? { name, message, fields } : { name, message } };
}

export async function createApiServer(deps: ApiServerDeps): Promise<ApiServer> {
  const options = parseInput(apiOptionsSchema, deps.options ?? {}, "api options");
  const logger = (deps.logger ?? silentLogger()).child({ module: "api" });
  const registry = deps.registry ?? new Registry();
  const metrics = createApiMetrics(registry);
  const clock = deps.now ?? Date.now;
  const nowSeconds = () => Math.floor(clock() / 1000);

  const limits = options.connections;
  const app = Fastify({
    logger: false,
    bodyLimit: options.maxBodyBytes,
    trustProxy: options.trustProxy,
    // Fastify sets these on the server after creating it (its defaults: keep-alive 72 s, no request
    // timeout); the head timeout and how often both are checked go to http.createServer.
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    requestTimeout: limits.requestTimeoutMs,
    http: httpServerOptions(limits),
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: MAX_PARAM_LENGTH },
    // The router's own refusals get the documented error shape too.
    frameworkErrors: (error, _request, frameworkReply) => {
      const reply = frameworkReply as unknown as FastifyReply;
      const code = (error as FastifyError).code;
      // Sent, not returned: fastify ignores the callback's value, and a reply is a thenable.
      if (code === "FST_ERR_MAX_PARAM_LENGTH") reply.code(414).send(errorBody("UriTooLongError", `A path parameter is longer than ${MAX_PARAM_LENGTH} characters`));
      else if (code === "FST_ERR_BAD_URL")
        reply.code(400).send(errorBody("InvalidInputError", "The URL is not valid (bad percent-encoding)", [{ path: "(url)", message: "expected a valid URL" }]));
      else reply.code(500).send(errorBody("InternalError", "The node failed to answer; the error is in its log"));
    },
  });

  // The caps and the idle timeout (node/http/limits.ts). Behind a reverse proxy every connection
  // comes from the proxy: the per-address cap would cap all clients together.
  limitConnections(app.server, limits, { perAddress: !options.trustProxy, onRefused: (reason) => metrics.connectionsRefused.inc({ reason }) });

  // Every route fastify registers, plugins' included: the OpenAPI test compares them with the document.
  const registeredRoutes: { method: string; url: string }[] = [];
  app.addHook("onRoute", (route) => {
    for (const method of [route.method].flat()) registeredRoutes.push({ method, url: route.url });
  });

  // Validation with the routes' zod schemas: the 400 names each bad field and what is accepted.
  app.setValidatorCompiler(({ schema, httpPart }) => {
    const zodSchema = schema as unknown as z.ZodType;
    const what = PART_NAMES[httpPart ?? ""] ?? httpPart ?? "input";
    return (data: unknown) => {
      const result = zodSchema.safeParse(data);
      if (result.success) return { value: result.data };
      const issues = describeIssues(zodSchema, result.error).map((issue) => ({ path: issue.path || `(${what})`, message: issue.message }));
      return { error: new RequestInputError(what, issues) };
    };
  });
  // Responses are encoded by their schemas: bigints become decimal strings, and a body that does
  // not fit its documented schema is a 500 here rather than a surprise in a client.
  app.setSerializerCompiler(({ schema }) => {
    const zodSchema = schema as unknown as z.ZodType;
    return (data: unknown) => JSON.stringify(zodSchema.encode(data));
  });

  // Bodies are JSON only: a text/plain body is refused with 415 rather than half-understood.
  app.removeContentTypeParser("text/plain");
  // Except the routes that declare a streamed body (data uploads): they read the request stream
  // themselves, unparsed; any other route refuses these media types with 415 as before.
  const streamed = new Map<string, Set<string>>();
  app.addContentTypeParser(["application/octet-stream", "application/x-tar"], (request, payload, done) => {
    const mediaType = (request.headers["content-type"] ?? "").split(";")[0]!.trim().toLowerCase();
    if (streamed.get(`${request.method} ${request.routeOptions.url}`)?.has(mediaType)) return done(null, payload);
    done(Object.assign(new Error(`Unsupported media type ${mediaType}`), { code: "FST_ERR_CTP_INVALID_MEDIA_TYPE", statusCode: 415 }), undefined);
  });

  app.setErrorHandler((error: FastifyError | Error, request, reply) => {
    const route = request.routeOptions.url ?? "unmatched";
    if (error instanceof RequestInputError) {
      return reply.code(400).send(errorBody(error.name, error.shortMessage, error.issues));
    }
    if (error instanceof InvalidInputError) {
      return reply.code(400).send(
        errorBody(
          error.name,
          error.shortMessage,
          error.fields.map((path) => ({ path, message: error.shortMessage })),
        ),
      );
    }
    if (error instanceof ApiError) {
      if (error.statusCode === 429) metrics.rateLimited.inc({ route });
      return reply.code(error.statusCode).send(errorBody(error.name, error.shortMessage));
    }
    const code = (error as FastifyError).code;
    const statusCode = (error as FastifyError).statusCode;
    if (code === "FST_ERR_CTP_BODY_TOO_LARGE") {
      return reply.code(413).send(errorBody("PayloadTooLargeError", `The request body is larger than ${options.maxBodyBytes} bytes`));
    }
    if (code === "FST_ERR_CTP_INVALID_MEDIA_TYPE") {
      return reply.code(415).send(errorBody("UnsupportedMediaTypeError", "Send the body as application/json"));
    }
    if (code === "FST_ERR_CTP_EMPTY_JSON_BODY" || code === "FST_ERR_CTP_INVALID_JSON_BODY" || (error instanceof SyntaxError && statusCode === 400)) {
      return reply
        .code(400)
        .send(errorBody("InvalidInputError", `Invalid request body: not valid JSON (${error.message})`, [{ path: "(request body)", message: "expected a JSON object" }]));
    }
    if (statusCode !== undefined && statusCode >= 400 && statusCode < 500) {
      return reply.code(statusCode).send(errorBody("BadRequestError", error.message));
    }
    logger.error("Request failed", { method: request.method, route }, error);
    return reply.code(500).send(errorBody("InternalError", "The node failed to answer; the error is in its log"));
  });

  await app.register(rateLimit, {
    global: true,
    max: options.rateLimitPerMinute,
    timeWindow: 60_000,
    keyGenerator: (request) => request.ip,
    errorResponseBuilder: (_request, context) => new RateLimitedError(Math.max(1, Math.ceil(context.ttl / 1000)), context.max),
  });
  // @fastify/cors answers an OPTIONS without Origin or Access-Control-Request-Method with a
  // text/plain 400; answer it first, in the documented error shape.
  app.addHook("onRequest", async (request, reply) => {
    if (request.method === "OPTIONS" && (!request.headers.origin || !request.headers["access-control-request-method"])) {
      return reply
        .code(400)
        .send(
          errorBody("InvalidInputError", "Not a CORS preflight: OPTIONS needs the Origin and Access-Control-Request-Method headers", [
            { path: "(headers)", message: "expected Origin and Access-Control-Request-Method" },
          ]),
        );
    }
  });
  await app.register(cors, {
    origin: options.corsOrigins.includes("*") ? "*" : options.corsOrigins,
    methods: ["GET", "POST"],
    allowedHeaders: ["content-type", "last-event-id"],
    // The output read's headers carry its manifest in brief: a browser must be able to read them.
    exposedHeaders: ["retry-after", "x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset", "content-length", ...Object.values(OUTPUT_HEADERS)],
    maxAge: 600,
  });

  // Validation replaces the body with its parsed form; a relay forwards what the client signed.
  const rawBodies = new WeakMap<object, unknown>();
  app.addHook("preValidation", async (request) => {
    if (request.body !== undefined) rawBodies.set(request, request.body);
  });

  app.addHook("onSend", async (_request, reply, payload) => {
    reply.header("x-content-type-options", "nosniff");
    return payload;
  });
  app.addHook("onResponse", async (request, reply) => {
    const route = request.routeOptions.url ?? "unmatched";
    metrics.requests.inc({ method: request.method, route, status: String(reply.statusCode) });
    metrics.requestDuration.observe({ method: request.method, route }, reply.elapsedTime / 1000);
  });
  app.setNotFoundHandler({ preHandler: app.rateLimit() }, async (request) => {
    throw new RouteNotFoundError(request.method, request.url);
  });

  const hub = new EventHub({ source: deps.source, options: options.sse, metrics, logger, nowSeconds });
  const explorer = options.explorer ? await loadExplorerAssets() : undefined;
  if (explorer && !explorer.js) logger.warn("Explorer bundle missing; /explorer/ answers 503 until `npm run build`", {});
  const consoleAssets = options.console.enabled ? await loadConsoleAssets() : undefined;
  if (consoleAssets && !consoleAssets.js) logger.warn("Console bundle missing; /console/ answers 503 until `npm run build`", {});
  const pageRpcUrl = options.console.enabled ? consoleRpcUrl(options, deps.chainRpcUrl) : null;
  if (options.console.enabled && !pageRpcUrl) {
    logger.warn(
      "The renter console has no chain RPC URL to offer browsers: set api.console.rpcUrl to a public endpoint (the node's own is not loopback and is never published)",
      {},
    );
  }

  let document: Record<string, unknown> = {};
  const routes = apiRoutes({
    source: deps.source,
    relay: deps.relay,
    data: deps.data,
    options,
    deployment: deps.deployment,
    hub,
    registry,
    metrics,
    guard: new ReplayGuard(100_000, 2 * options.signatureMaxAgeSeconds + 60),
    delegations: deps.delegations,
    explorer,
    console: consoleAssets,
    consoleRpcUrl: pageRpcUrl,
    version: VERSION,
    startedAtMs: Date.now(),
    nowSeconds,
    document: () => document,
  });
  document = buildOpenApiDocument(routes, {
    title: "Suanli node API",
    version: VERSION,
    description: "Live GPU offers, providers, leases and market statistics of a Suanli node, for dApp front ends. Amounts are decimal strings of token base units.",
  });

  const CSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'";
  // The console's page also reads the chain (its RPC origin) and checks bundle digests where the
  // bundle server allows it (any http(s) origin: the renter typed the URL; CORS still applies).
  const consoleCsp = CSP.replace("connect-src 'self'", `connect-src 'self'${pageRpcUrl ? ` ${new URL(pageRpcUrl).origin}` : ""} http: https:`);
  for (const route of routes) {
    if (route.streamBody) streamed.set(`${route.method} ${route.url}`, new Set(Object.keys(route.streamBody)));
    const response: Record<number, z.ZodType> = {};
    for (const [code, spec] of Object.entries(route.responses)) {
      if (spec.schema && !spec.contentType) response[Number(code)] = spec.schema;
    }
    app.route({
      method: route.method,
      url: route.url,
      // Only the parts a route has: fastify warns about parts given as undefined.
      schema: {
        ...(route.querystring ? { querystring: route.querystring } : {}),
        ...(route.params ? { params: route.params } : {}),
        ...(route.body ? { body: route.body } : {}),
        response,
      },
      config: {
        rateLimit: route.rateLimit === "none" ? false : route.rateLimit === "write" ? { max: options.writeRateLimitPerMinute, timeWindow: 60_000 } : undefined,
      },
      handler: async (request, reply) => {
        if (route.tag === "explorer") reply.header("content-security-policy", CSP);
        if (route.tag === "console") reply.header("content-security-policy", consoleCsp);
        // Fastify validated the query and params with the route's zod schemas above: objects of those shapes.
        const query = request.query as Record<string, unknown> | undefined;
        const params = request.params as Record<string, unknown> | undefined;
        return route.handler({ query, params, body: request.body, rawBody: rawBodies.get(request), request, reply });
      },
    });
  }

  app.addHook("preClose", async () => hub.stop());
  hub.start();

  let closed = false;
  return {
    app,
    options,
    routes,
    hub,
    document,
    registeredRoutes,
    async listen() {
      const address = await app.listen({ host: options.host, port: options.port });
      logger.info("API listening", { address });
      return address;
    },
    async close() {
      if (closed) return;
      closed = true;
      hub.stop();
      await app.close();
    },
  };
}

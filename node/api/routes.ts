/**
 * The route table of the HTTP API: every route the server answers, with its schemas. The write
 * routes (match, reservations, lease relays) are in routes-write.ts.
 */
import { templateCatalog, templateCatalogSchema } from "../../common/templates/catalog.js";
import { z } from "zod";
import {
  leaseIdParamsSchema,
  leasePageSchema,
  leaseQuerySchema,
  leaseViewSchema,
  machineQuerySchema,
  machinePageSchema,
  machineViewSchema,
  providerListQuerySchema,
  providerPageSchema,
  providerParamsSchema,
  providerViewSchema,
} from "../../common/api/chain.js";
import { eventsQuerySchema, marketEventSchemas } from "../../common/api/events.js";
import { healthSchema, MAX_STATS_BUCKETS, marketStatsSchema, nodeInfoSchema, statsQuerySchema, type HealthCheck, type HealthStatus } from "../../common/api/market.js";
import { machineIdParamsSchema, offerKeyParamsSchema, offerPageSchema, offerQuerySchema, offerViewSchema } from "../../common/api/offers.js";
import { GPU_MODELS } from "../../common/gpu.js";
import { ExplorerNotBuiltError, LeaseNotFoundError, MachineNotFoundError, OfferNotFoundError, ProviderNotFoundError, RequestInputError, ConsoleNotBuiltError } from "./errors.js";
import { toOfferView } from "./offer-view.js";
import { defineRoute, type RouteSpec } from "./route.js";
import type { RouteDeps } from "./route-deps.js";
import { badInput, error, rateLimited } from "./route-responses.js";
import { writeRoutes } from "./routes-write.js";
import { dataRoutes } from "./routes-data.js";
import { consoleConfigSchema } from "../../common/api/console.js";
import type { Deployment } from "../../common/deployment.js";
import type { Page, PageOf } from "./source.js";

export type { RouteDeps } from "./route-deps.js";

function pageOf<T>(result: PageOf<T>, page: Page) {
  const next = page.offset + result.items.length;
  return { items: result.items, total: result.total, limit: page.limit, offset: page.offset, nextOffset: next < result.total ? next : null };
}

const worst = (statuses: HealthStatus[]): HealthStatus => (statuses.includes("down") ? "down" : statuses.includes("degraded") ? "degraded" : "ok");

export function apiRoutes(deps: RouteDeps): RouteSpec[] {
  const { source, options, deployment } = deps;

  const routes: RouteSpec[] = [
    defineRoute({
      method: "GET",
      url: "/v1/info",
      operationId: "getInfo",
      summary: "The node's chain, contracts, token and GPU models",
      tag: "node",
      responses: { 200: { description: "Node information", schema: nodeInfoSchema }, 429: rateLimited },
      handler: async () => ({
        version: deps.version,
        chainId: deployment.chainId,
        contracts: {
          token: deployment.contracts.token,
          registry: deployment.contracts.registry ?? null,
          market: deployment.contracts.market ?? null,
          sessions: deployment.contracts.sessions ?? null,
        },
        token: { symbol: deployment.token.symbol, decimals: deployment.token.decimals },
        gpuModels: GPU_MODELS.map((model) => ({ name: model.name, vramMiB: model.vramMiB })),
        reservations: deployment.contracts.market !== undefined,
      }),
    }),
    defineRoute({
      method: "GET",
      url: "/v1/health",
      operationId: "getHealth",
      summary: "Health of the node and what it depends on",
      tag: "node",
      responses: {
        200: { description: "Serving (status ok or degraded)", schema: healthSchema },
        429: rateLimited,
        503: { description: "A dependency is down", schema: healthSchema },
      },
      handler: async ({ reply }) => {
        let checks: HealthCheck[];
        let timer: NodeJS.Timeout | undefined;
        try {
          // A health check that hangs (an RPC endpoint that accepts and never answers) is itself the answer.
          const timeout = new Promise<never>((_, reject) => {
            timer = setTimeout(() => reject(new Error(`health checks did not answer within ${options.healthTimeoutMs} ms`)), options.healthTimeoutMs);
          });
          checks = await Promise.race([source.health(), timeout]);
        } catch (cause) {
          checks = [{ name: "source", status: "down", detail: cause instanceof Error ? cause.message : String(cause) }];
        } finally {
          clearTimeout(timer);
        }
        const status = worst(checks.map((check) => check.status));
        const body = {
          status,
          version: deps.version,
          uptimeSeconds: Math.max(0, Math.floor((Date.now() - deps.startedAtMs) / 1000)),
          checks,
        };
        return reply.code(status === "down" ? 503 : 200).send(body);
      },
    }),
    defineRoute({
      method: "GET",
      url: "/v1/offers",
      operationId: "listOffers",
      summary: "Live offers, filtered, sorted and paged",
      tag: "offers",
      querystring: offerQuerySchema,
      responses: { 200: { description: "A page of offers", schema: offerPageSchema }, 400: badInput, 429: rateLimited },
      handler: async ({ query }) => {
        const { limit, offset, ...filter } = query;
        const page = { limit, offset };
        const result = await source.queryOffers(filter, page);
        const now = deps.nowSeconds();
        return pageOf({ items: result.items.map((entry) => toOfferView(entry, now, source.reputationOf?.(entry.message.offer.provider))), total: result.total }, page);
      },
    }),
    defineRoute({
      method: "GET",
      url: "/v1/offers/:key",
      operationId: "getOffer",
      summary: "One live offer by its key `<provider>:<machineId>`",
      tag: "offers",
      params: offerKeyParamsSchema,
      responses: {
        200: { description: "The offer", schema: offerViewSchema },
        400: badInput,
        404: error("No live offer with this key"),
        429: rateLimited,
      },
      handler: async ({ params }) => {
        const entry = await source.getOffer(params.key);
        if (!entry) throw new OfferNotFoundError(params.key);
        return toOfferView(entry, deps.nowSeconds(), source.reputationOf?.(entry.message.offer.provider));
      },
    }),
    defineRoute({
      method: "GET",
      url: "/v1/providers",
      operationId: "listProviders",
      summary: "Registered providers with stake, reputation and machines",
      tag: "providers",
      querystring: providerListQuerySchema,
      responses: { 200: { description: "A page of providers", schema: providerPageSchema }, 400: badInput, 429: rateLimited },
      handler: async ({ query }) => {
        const page = { limit: query.limit, offset: query.offset };
        return pageOf(await source.listProviders({ sort: query.sort }, page), page);
      },
    }),
    defineRoute({
      method: "GET",
      url: "/v1/providers/:address",
      operationId: "getProvider",
      summary: "A provider's on-chain record: stake, machines, attestations and reputation",
      tag: "providers",
      params: providerParamsSchema,
      responses: {
        200: { description: "The provider", schema: providerViewSchema },
        400: badInput,
        404: error("The address never registered as a provider"),
        429: rateLimited,
      },
      handler: async ({ params }) => {
        const provider = await source.getProvider(params.address);
        if (!provider) throw new ProviderNotFoundError(params.address);
        return provider;
      },
    }),
    defineRoute({
      method: "GET",
      url: "/v1/machines",
      operationId: "listMachines",
      summary: "Machines declared in the registry",
      tag: "providers",
      querystring: machineQuerySchema,
      responses: { 200: { description: "A page of machines", schema: machinePageSchema }, 400: badInput, 429: rateLimited },
      handler: async ({ query }) => {
        const { limit, offset, ...filter } = query;
        const page = { limit, offset };
        return pageOf(await source.listMachines(filter, page), page);
      },
    }),
    defineRoute({
      method: "GET",
      url: "/v1/machines/:machineId",
      operationId: "getMachine",
      summary: "One machine by its on-chain id",
      tag: "providers",
      params: machineIdParamsSchema,
      responses: {
        200: { description: "The machine", schema: machineViewSchema },
        400: badInput,
        404: error("No machine with this id"),
        429: rateLimited,
      },
      handler: async ({ params }) => {
        const machine = await source.getMachine(params.machineId);
        if (!machine) throw new MachineNotFoundError(params.machineId);
        return machine;
      },
    }),
    defineRoute({
      method: "GET",
      url: "/v1/leases",
      operationId: "listLeases",
      summary: "Leases of an address as renter, provider or either, newest first",
      tag: "leases",
      querystring: leaseQuerySchema,
      responses: { 200: { description: "A page of leases", schema: leasePageSchema }, 400: badInput, 429: rateLimited },
      handler: async ({ query }) => {
        const page = { limit: query.limit, offset: query.offset };
        return pageOf(await source.leasesByAddress(query.address, query.role, query.status, page), page);
      },
    }),
    defineRoute({
      method: "GET",
      url: "/v1/leases/:id",
      operationId: "getLease",
      summary: "One lease by id",
      tag: "leases",
      params: leaseIdParamsSchema,
      responses: {
        200: { description: "The lease", schema: leaseViewSchema },
        400: badInput,
        404: error("No lease with this id"),
        429: rateLimited,
      },
      handler: async ({ params }) => {
        const lease = await source.getLease(params.id);
        if (!lease) throw new LeaseNotFoundError(params.id);
        return lease;
      },
    }),
    defineRoute({
      method: "GET",
      url: "/v1/stats",
      operationId: "getMarketStats",
      summary: "Price percentiles and utilization by GPU model over time",
      tag: "market",
      querystring: statsQuerySchema,
      responses: { 200: { description: "Statistics per model", schema: marketStatsSchema }, 400: badInput, 429: rateLimited },
      handler: async ({ query }) => {
        const to = query.to ?? deps.nowSeconds();
        const from = query.from ?? Math.max(0, to - 24 * 3600);
        if (from >= to) throw new RequestInputError("query string", [{ path: "from", message: "must be before `to`" }]);
        const buckets = Math.ceil((to - Math.floor(from / query.bucketSeconds) * query.bucketSeconds) / query.bucketSeconds);
        if (buckets > MAX_STATS_BUCKETS) {
          throw new RequestInputError("query string", [
            { path: "bucketSeconds", message: `the window holds ${buckets} buckets; at most ${MAX_STATS_BUCKETS} (raise bucketSeconds or narrow from..to)` },
          ]);
        }
        return source.marketStats({ model: query.model, from, to, bucketSeconds: query.bucketSeconds });
      },
    }),
    defineRoute({
      method: "GET",
      url: "/v1/templates",
      operationId: "listTemplates",
      summary: "The template catalog: image, command, ports, environment, health path, GPUs and VRAM per template",
      description: "The catalog this node's release ships (common/templates/catalog.ts; docs/templates.md), the same the SDK's listTemplates returns.",
      tag: "market",
      responses: { 200: { description: "The catalog", schema: templateCatalogSchema }, 429: rateLimited },
      handler: async () => templateCatalog(),
    }),
    ...writeRoutes(deps),
    ...dataRoutes(deps),
    defineRoute({
      method: "GET",
      url: "/v1/events",
      operationId: "streamEvents",
      summary: "Server-sent events: offer, offer-removed, lease (and reset)",
      description:
        "`text/event-stream`. Each event has an increasing id and JSON data: `offer` an Offer, `offer-removed` an OfferRemovedEvent, " +
        "`lease` a Lease, `reset` a ResetEvent (missed events are gone: reload). Send Last-Event-ID to resume. " +
        "Heartbeat comments keep idle streams open.",
      tag: "events",
      querystring: eventsQuerySchema,
      responses: {
        200: { description: "The event stream", contentType: "text/event-stream", events: marketEventSchemas },
        400: badInput,
        429: error("Too many streams from this client, or rate limit exceeded"),
        503: error("The node serves its maximum number of streams"),
      },
      handler: async ({ query, request, reply }) => {
        // HEAD (fastify's automatic HEAD route): the stream's headers only, without taking one of
        // the client's stream slots or holding the connection open.
        if (request.method === "HEAD") return reply.code(200).header("content-type", "text/event-stream").header("cache-control", "no-cache").send();
        const header = request.headers["last-event-id"];
        deps.hub.attach(request, reply, query.types, typeof header === "string" ? header : undefined);
        return reply;
      },
    }),
    defineRoute({
      method: "GET",
      url: "/metrics",
      operationId: "getMetrics",
      summary: "Prometheus metrics of this node",
      tag: "node",
      rateLimit: "none",
      responses: { 200: { description: "Prometheus text exposition format", contentType: "text/plain" } },
      handler: async ({ reply }) => reply.type(deps.registry.contentType).send(await deps.registry.metrics()),
    }),
    defineRoute({
      method: "GET",
      url: "/openapi.json",
      operationId: "getOpenApiDocument",
      summary: "This document",
      tag: "node",
      responses: {
        200: { description: "OpenAPI 3.1 document", schema: z.looseObject({ openapi: z.string() }) },
        429: rateLimited,
      },
      handler: async () => deps.document(),
    }),
  ];

  if (options.explorer) {
    const asset = (name: "html" | "css" | "js") => {
      const assets = deps.explorer;
      const content = assets?.[name];
      if (!content) throw new ExplorerNotBuiltError();
      return content;
    };
    routes.push(
      defineRoute({
        method: "GET",
        url: "/",
        operationId: "getRoot",
        summary: "Redirects to the explorer",
        tag: "explorer",
        responses: { 302: { description: "To /explorer", headers: { Location: "/explorer" } }, 429: rateLimited },
        handler: async ({ reply }) => reply.redirect("/explorer", 302),
      }),
      defineRoute({
        method: "GET",
        // Also answers /explorer/ (the server ignores trailing slashes); the assets' URLs are absolute.
        url: "/explorer",
        operationId: "getExplorer",
        summary: "The explorer page",
        tag: "explorer",
        responses: { 200: { description: "HTML page", contentType: "text/html" }, 429: rateLimited, 503: error("The explorer is not built") },
        handler: async ({ reply }) => reply.type("text/html; charset=utf-8").send(asset("html")),
      }),
      defineRoute({
        method: "GET",
        url: "/explorer/app.js",
        operationId: "getExplorerScript",
        summary: "The explorer's script bundle",
        tag: "explorer",
        responses: { 200: { description: "JavaScript", contentType: "text/javascript" }, 429: rateLimited, 503: error("The explorer is not built") },
        handler: async ({ reply }) => reply.type("text/javascript; charset=utf-8").send(asset("js")),
      }),
      defineRoute({
        method: "GET",
        url: "/explorer/style.css",
        operationId: "getExplorerStyle",
        summary: "The explorer's style sheet",
        tag: "explorer",
        responses: { 200: { description: "CSS", contentType: "text/css" }, 429: rateLimited, 503: error("The explorer is not built") },
        handler: async ({ reply }) => reply.type("text/css; charset=utf-8").send(asset("css")),
      }),
    );
  }
  if (options.console.enabled) {
    const asset = (name: "html" | "css" | "js") => {
      const content = deps.console?.[name];
      if (!content) throw new ConsoleNotBuiltError();
      return content;
    };
    const notBuilt = error("The console is not built");
    routes.push(
      defineRoute({
        method: "GET",
        // Also answers /console/ (the server ignores trailing slashes); the assets' URLs are absolute.
        url: "/console",
        operationId: "getConsole",
        summary: "The renter console page",
        tag: "console",
        responses: { 200: { description: "HTML page", contentType: "text/html" }, 429: rateLimited, 503: notBuilt },
        handler: async ({ reply }) => reply.type("text/html; charset=utf-8").send(asset("html")),
      }),
      defineRoute({
        method: "GET",
        url: "/console/app.js",
        operationId: "getConsoleScript",
        summary: "The renter console's script bundle (the browser SDK inside)",
        tag: "console",
        responses: { 200: { description: "JavaScript", contentType: "text/javascript" }, 429: rateLimited, 503: notBuilt },
        handler: async ({ reply }) => reply.type("text/javascript; charset=utf-8").send(asset("js")),
      }),
      defineRoute({
        method: "GET",
        url: "/console/style.css",
        operationId: "getConsoleStyle",
        summary: "The renter console's style sheet",
        tag: "console",
        responses: { 200: { description: "CSS", contentType: "text/css" }, 429: rateLimited, 503: notBuilt },
        handler: async ({ reply }) => reply.type("text/css; charset=utf-8").send(asset("css")),
      }),
      defineRoute({
        method: "GET",
        url: "/console/config.json",
        operationId: "getConsoleConfig",
        summary: "The deployment, chain RPC URL, bundler and sponsor URLs the console's SDK client uses",
        tag: "console",
        responses: { 200: { description: "Console configuration", schema: consoleConfigSchema }, 429: rateLimited },
        handler: async () => ({
          chainId: deployment.chainId,
          rpcUrl: deps.consoleRpcUrl,
          bundlerUrl: options.console.bundlerUrl ?? null,
          paymasterUrl: options.console.paymasterUrl ?? null,
          deployment: consoleDeployment(deployment),
        }),
      }),
    );
  }
  return routes;
}

/**
 * What the console's SDK client needs of the manifest: its contracts (the ERC-4337 ones for a passkey's smart
 * account), the token and its permit domain (the rest stays on the node).
 */
function consoleDeployment(deployment: Deployment) {
  const { token, registry, market, sessions, entryPoint, accountFactory, paymaster, passkeyAccountFactory } = deployment.contracts;
  return {
    chainId: deployment.chainId,
    deploymentBlock: deployment.deploymentBlock,
    deployedAt: deployment.deployedAt,
    deployer: deployment.deployer,
    contracts: {
      token,
      ...(registry ? { registry } : {}),
      ...(market ? { market } : {}),
      ...(sessions ? { sessions } : {}),
      ...(entryPoint ? { entryPoint } : {}),
      ...(accountFactory ? { accountFactory } : {}),
      ...(paymaster ? { paymaster } : {}),
      ...(passkeyAccountFactory ? { passkeyAccountFactory } : {}),
    },
    token: { symbol: deployment.token.symbol, decimals: deployment.token.decimals, ...(deployment.token.permit !== undefined ? { permit: deployment.token.permit } : {}) },
  };
}

/**
 * The route table of the HTTP API: every route the server answers, with its schemas.
 */
import type { Registry } from "prom-client";
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
import { consoleConfigSchema } from "../../common/api/console.js";
import { eventsQuerySchema, marketEventSchemas } from "../../common/api/events.js";
import {
  apiErrorSchema,
  healthSchema,
  MAX_STATS_BUCKETS,
  marketStatsSchema,
  matchQuerySchema,
  matchRequestSchema,
  matchResultSchema,
  nodeInfoSchema,
  reservationAnswerSchema,
  reservationBodySchema,
  statsQuerySchema,
  type HealthCheck,
  type HealthStatus,
  type ReservationAnswer,
} from "../../common/api/market.js";
import { machineIdParamsSchema, offerKeyParamsSchema, offerPageSchema, offerQuerySchema, offerViewSchema } from "../../common/api/offers.js";
import {
  OUTPUT_HEADERS,
  RELAY_ACTIONS,
  outputListRelayBodySchema,
  outputManifestApiSchema,
  outputReadRelayBodySchema,
  relayAnswerSchemas,
  relayBodySchemas,
  type OutputRelayBody,
  type RelayAction,
  type RelayBody,
} from "../../common/api/relay.js";
import { outputFilesDigest } from "../../common/output-bytes-digest.js";
import { Readable } from "node:stream";
import type { ReserveReply } from "../../common/matching/handshake.js";
import type { Deployment } from "../../common/deployment.js";
import { GPU_MODELS } from "../../common/gpu.js";
import {
  ConsoleNotBuiltError,
  ExplorerNotBuiltError,
  InvalidSignatureError,
  OutputTooLargeError,
  TooManyStreamsError,
  LeaseNotFoundError,
  MachineNotFoundError,
  OfferNotFoundError,
  ProviderNotFoundError,
  RequestInputError,
  ServiceUnavailableError,
  StaleSignatureError,
} from "./errors.js";
import type { EventHub } from "./events.js";
import type { ExplorerAssets, PageAssets } from "./explorer-assets.js";
import type { ApiMetrics } from "./metrics.js";
import { toOfferView } from "./offer-view.js";
import type { ApiOptions } from "./options.js";
import { defineRoute, type ResponseSpec, type RouteSpec } from "./route.js";
import { verifyReserveRequest, type ReplayGuard } from "./signed.js";
import { checkOutputAuth, checkRelayAuth } from "./relay.js";
import type { MarketDataSource, Page, PageOf, ProviderRelay } from "./source.js";

export type RouteDeps = {
  source: MarketDataSource;
  /** Forwards renters' signed requests to providers; absent on a node without a p2p host (503). */
  relay: ProviderRelay | undefined;
  options: ApiOptions;
  deployment: Deployment;
  hub: EventHub;
  registry: Registry;
  metrics: ApiMetrics;
  guard: ReplayGuard;
  explorer: ExplorerAssets | undefined;
  /** The renter console's files, when `api.console.enabled`. */
  console: PageAssets | undefined;
  /** The chain RPC URL the console page reads from (null: none published). */
  consoleRpcUrl: string | null;
  version: string;
  startedAtMs: number;
  nowSeconds: () => number;
  document: () => Record<string, unknown>;
};

const error = (description: string): ResponseSpec => ({ description, schema: apiErrorSchema });
const rateLimited: ResponseSpec = {
  description: "Rate limit exceeded",
  schema: apiErrorSchema,
  headers: { "Retry-After": "Seconds until the client may send again" },
};
const badInput = error("A query parameter, path parameter or body field is invalid; `fields` names each one");
const tooLarge = error("The request body is larger than api.maxBodyBytes");
const badMediaType = error("The body is not application/json");
const badSignature = error("The signature is not the renter's, or issuedAt is too far from the node's clock");
const providerUnreachable = error("The provider could not be reached (ProviderUnreachableError), or it answered with an error: `name` is the provider's own");
const providerTimeout = error("The provider did not answer in time (ProviderTimeoutError)");
const noRelay = error("This node cannot relay (no LeaseMarket in its deployment, or no p2p host)");

/** The reserve protocol's answer in the API's shape. */
function toReservationAnswer(reply: ReserveReply): ReservationAnswer {
  if (reply.accepted) {
    return {
      accepted: true,
      acceptance: { offer: reply.offer, signature: reply.signature },
      units: reply.units,
      holdUntil: reply.holdUntil,
      preempt: reply.preempt.map((id) => BigInt(id)),
      ...(reply.sealingKey ? { sealingKey: reply.sealingKey } : {}),
    };
  }
  return { accepted: false, reason: reply.reason, message: reply.message ?? null, availableUnits: reply.availableUnits ?? null };
}

const RELAY_SUMMARIES: Record<RelayAction, { summary: string; description: string; rateLimit: "default" | "write" }> = {
  task: {
    summary: "Send a lease's task spec to its provider (signed by the renter)",
    description: "Relays the task protocol (`/suanli/task/1.0.0`): the provider starts the task once its lease is open.",
    rateLimit: "write",
  },
  status: {
    summary: "A lease's task status and heartbeat from its provider (signed by the renter)",
    description: "Relays the status protocol (`/suanli/status/1.0.0`): state, GPU metrics, exit code and, once over, the signed completion report.",
    rateLimit: "default",
  },
  logs: {
    summary: "A lease's task logs from its provider, long-polled (signed by the renter)",
    description: "Relays the logs protocol (`/suanli/logs/1.0.0`): lines from `fromSeq`, waiting up to `waitMs` for new ones.",
    rateLimit: "default",
  },
  cancel: {
    summary: "Ask a lease's provider to stop its task (signed by the renter)",
    description: "Relays the cancel protocol (`/suanli/cancel/1.0.0`). Close the lease on-chain afterwards to stop paying.",
    rateLimit: "write",
  },
};

function pageOf<T>(result: PageOf<T>, page: Page) {
  const next = page.offset + result.items.length;
  return { items: result.items, total: result.total, limit: page.limit, offset: page.offset, nextOffset: next < result.total ? next : null };
}

const worst = (statuses: HealthStatus[]): HealthStatus =>
  statuses.includes("down") ? "down" : statuses.includes("degraded") ? "degraded" : "ok";

export function apiRoutes(deps: RouteDeps): RouteSpec[] {
  const { source, options, deployment } = deps;

  const relayRoute = (action: RelayAction): RouteSpec => {
    const about = RELAY_SUMMARIES[action];
    return defineRoute({
      method: "POST",
      url: `/v1/leases/:id/${action}`,
      operationId: `relay${action[0].toUpperCase()}${action.slice(1)}`,
      summary: about.summary,
      description:
        `${about.description} The body carries \`auth\`: an EIP-712 RenterRequest for action \`${action}\` on this lease, signed by the lease's renter ` +
        "(domain Suanli / 1 / chain id / LeaseMarket). The node checks the signer against the on-chain lease, forwards the body unchanged " +
        "to the lease's provider and returns the provider's answer; an error the provider answers with comes back as 502 under its own `name`.",
      tag: "leases",
      params: leaseIdParamsSchema,
      body: relayBodySchemas[action] as z.ZodType,
      rateLimit: about.rateLimit,
      responses: {
        200: { description: "The provider's answer", schema: relayAnswerSchemas[action] },
        400: badInput,
        401: badSignature,
        404: error("No lease with this id (LeaseNotFoundError), or its provider is no longer registered (ProviderNotFoundError)"),
        413: tooLarge,
        415: badMediaType,
        429: rateLimited,
        502: providerUnreachable,
        503: noRelay,
        504: providerTimeout,
      },
      handler: async ({ params, body, rawBody }) => {
        const relay = deps.relay;
        checkRelayAuth(action, params.id, body as RelayBody);
        if (!relay || !deployment.contracts.market) throw new ServiceUnavailableError("This node cannot relay lease requests (no LeaseMarket or no p2p host)");
        try {
          return await relay.forward(action, params.id, body as RelayBody, rawBody);
        } catch (error) {
          if (error instanceof StaleSignatureError) deps.metrics.signatureFailures.inc({ reason: "stale" });
          else if (error instanceof InvalidSignatureError) deps.metrics.signatureFailures.inc({ reason: "signer" });
          throw error;
        }
      },
    });
  };

  /** Relayed output downloads open right now (api.output.maxConcurrent). */
  let outputStreams = 0;
  const outputRoute = (op: "list" | "read"): RouteSpec =>
    defineRoute({
      method: "POST",
      url: `/v1/leases/:id/output/${op}`,
      operationId: op === "list" ? "relayOutputList" : "relayOutputRead",
      summary:
        op === "list"
          ? "The manifest of a lease's task output from its provider (signed by the renter)"
          : "Stream a lease's task output from its provider, resumable (signed by the renter)",
      description:
        "Relays the output protocol (`/suanli/output/1.0.0`) for clients without libp2p. The body is the protocol's `{ auth, params }`: `auth` an EIP-712 " +
        "RenterRequest for action `output` on this lease signed by its renter, whose bodyHash covers `params`; the node checks the signer against the on-chain " +
        "lease and forwards the body unchanged, and the provider checks the bodyHash and refuses a nonce it has seen (sign each request anew). " +
        (op === "list"
          ? "Answers the provider's manifest: the files in digest order, their sizes, `final` (digested by the signed completion report) or `snapshot` (the task still runs)."
          : "Answers the bytes of the files in manifest order from `params.fromPath`/`params.fromOffset` to the end, as `application/octet-stream` " +
            "(Content-Length: the bytes that follow); the headers carry the manifest in brief (kind, total bytes, file count, and the sha256 of the canonical JSON " +
            "of its `files`, to compare with the listed one). A download that stopped resumes by asking again from where it stopped. The client recomputes the " +
            "output digest and checks it against the provider's signed completion report and the chain: this node cannot alter the bytes unnoticed. " +
            "Outputs over api.output.maxBytes answer 413; at most api.output.maxConcurrent downloads at once (429 beyond)."),
      tag: "leases",
      params: leaseIdParamsSchema,
      body: (op === "list" ? outputListRelayBodySchema : outputReadRelayBodySchema) as z.ZodType,
      rateLimit: "default",
      responses: {
        200:
          op === "list"
            ? { description: "The provider's manifest", schema: outputManifestApiSchema }
            : {
                description: "The output's bytes from the requested start",
                contentType: "application/octet-stream",
                headers: {
                  [OUTPUT_HEADERS.kind]: "`final` or `snapshot`",
                  [OUTPUT_HEADERS.totalBytes]: "Bytes of the whole output",
                  [OUTPUT_HEADERS.files]: "Files in the manifest",
                  [OUTPUT_HEADERS.manifestDigest]: "sha256 (hex) of the canonical JSON of the manifest's `files` ([{ path, size }], digest order)",
                },
              },
        400: badInput,
        401: badSignature,
        404: error("No lease with this id (LeaseNotFoundError), or its provider is no longer registered (ProviderNotFoundError)"),
        413: error("The request body is larger than api.maxBodyBytes, or the output larger than api.output.maxBytes (OutputTooLargeError)"),
        415: badMediaType,
        429: error("Rate limit exceeded, or api.output.maxConcurrent downloads are already relayed (TooManyStreamsError)"),
        502: providerUnreachable,
        503: noRelay,
        504: providerTimeout,
      },
      handler: async ({ params, body, rawBody, reply }) => {
        const relay = deps.relay;
        checkOutputAuth(params.id, body as OutputRelayBody);
        if (!relay?.openOutput || !deployment.contracts.market) throw new ServiceUnavailableError("This node cannot relay output downloads (no LeaseMarket or no p2p host)");
        if (outputStreams >= options.output.maxConcurrent) {
          throw new TooManyStreamsError(`This node relays at most ${options.output.maxConcurrent} output downloads at once; retry later or use the Node SDK over libp2p`);
        }
        outputStreams++;
        let released = false;
        const release = () => {
          if (!released) outputStreams--;
          released = true;
        };
        try {
          // The client going away stops the provider's stream too.
          const gone = new AbortController();
          reply.raw.once("close", () => gone.abort());
          let opened;
          try {
            opened = await relay.openOutput(params.id, body as OutputRelayBody, rawBody, gone.signal);
          } catch (error) {
            if (error instanceof StaleSignatureError) deps.metrics.signatureFailures.inc({ reason: "stale" });
            else if (error instanceof InvalidSignatureError) deps.metrics.signatureFailures.inc({ reason: "signer" });
            throw error;
          }
          const { manifest } = opened;
          if (manifest.totalBytes > options.output.maxBytes) {
            opened.abort(new Error("over api.output.maxBytes"));
            throw new OutputTooLargeError(
              `The output of lease ${params.id} is ${manifest.totalBytes} bytes; this node relays at most ${options.output.maxBytes} (api.output.maxBytes)`,
            );
          }
          if (op === "list") {
            release();
            return manifest;
          }
          const stream = Readable.from(opened.bytes, { objectMode: false, highWaterMark: 1 });
          stream.once("close", release);
          stream.once("error", () => opened.abort(new Error("the HTTP client went away")));
          reply
            .header("content-type", "application/octet-stream")
            .header("content-length", String(opened.remaining))
            .header("cache-control", "no-store")
            .header(OUTPUT_HEADERS.kind, manifest.kind)
            .header(OUTPUT_HEADERS.totalBytes, String(manifest.totalBytes))
            .header(OUTPUT_HEADERS.files, String(manifest.files.length))
            .header(OUTPUT_HEADERS.manifestDigest, outputFilesDigest(manifest.files));
          return reply.send(stream);
        } catch (error) {
          release();
          throw error;
        }
      },
    });

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
        },
        token: deployment.token,
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
        return pageOf({ items: result.items.map((entry) => toOfferView(entry, now)), total: result.total }, page);
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
        return toOfferView(entry, deps.nowSeconds());
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
      method: "POST",
      url: "/v1/match",
      operationId: "matchDryRun",
      summary: "Match dry-run: ranked candidates for a task, or why nothing matched",
      description:
        "The body is the renter's match request as the SDK and the CLI take it (docs/matching.md): `gpuType`, `gpuCount`, `duration`, " +
        "`maxPricePerGpuHour` or `mode: interruptible` with `bidPerGpuHour` (USD per GPU-hour), `region`, `minVramMiB`, `minReputation`, " +
        "`attestedOnly`, `colocation`. Reserves nothing. When nothing fits, `explanation.steps` lists, in order, how many offers each " +
        "constraint removed and `explanation.nearMisses` the offers that came nearest.",
      tag: "market",
      querystring: matchQuerySchema,
      body: matchRequestSchema,
      rateLimit: "write",
      responses: {
        200: { description: "Candidates (matched true) or the explanation (matched false)", schema: matchResultSchema },
        400: badInput,
        413: tooLarge,
        415: badMediaType,
        429: rateLimited,
      },
      handler: async ({ body, query }) => source.matchDryRun(body, query.limit),
    }),
    defineRoute({
      method: "POST",
      url: "/v1/reservations",
      operationId: "reserve",
      summary: "Ask a provider to hold units for a renter (signed by the renter's wallet)",
      description:
        "The body is an EIP-712 ReserveRequest signed by `request.renter` (domain Suanli / 1 / chain id / LeaseMarket). " +
        "The node forwards it to the provider over the reserve protocol and returns the provider's signed acceptance " +
        "(an Offer bound to the renter, to open the lease with) or its reason for refusing.",
      tag: "market",
      body: reservationBodySchema,
      rateLimit: "write",
      responses: {
        200: { description: "The provider's answer: its acceptance, or its refusal with a reason", schema: reservationAnswerSchema },
        400: badInput,
        401: badSignature,
        404: error("The provider is not registered (ProviderNotFoundError)"),
        409: error("This signed request was already received (ReplayedRequestError), or the provider's node rents nothing: it publishes offers but serves no reservations (ProviderNotRentingError)"),
        413: tooLarge,
        415: badMediaType,
        429: rateLimited,
        502: providerUnreachable,
        503: noRelay,
        504: providerTimeout,
      },
      handler: async ({ body }) => {
        const market = deployment.contracts.market;
        if (!market) throw new ServiceUnavailableError("Reservations need a deployment with a LeaseMarket; this node's manifest has none");
        const relay = deps.relay;
        if (!relay) throw new ServiceUnavailableError("This node has no p2p host to reach providers through");
        await verifyReserveRequest(body.request, body.signature, {
          chainId: deployment.chainId,
          market,
          nowSeconds: deps.nowSeconds(),
          maxAgeSeconds: options.signatureMaxAgeSeconds,
          guard: deps.guard,
          onRefused: (reason) => deps.metrics.signatureFailures.inc({ reason }),
        });
        return toReservationAnswer(await relay.reserve(body.request, body.signature));
      },
    }),
    ...RELAY_ACTIONS.map((action) => relayRoute(action)),
    outputRoute("list"),
    outputRoute("read"),
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
        summary: "The deployment and chain RPC URL the console's SDK client uses",
        tag: "console",
        responses: { 200: { description: "Console configuration", schema: consoleConfigSchema }, 429: rateLimited },
        handler: async () => ({ chainId: deployment.chainId, rpcUrl: deps.consoleRpcUrl, deployment }),
      }),
    );
  }
  return routes;
}

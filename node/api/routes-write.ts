/**
 * The HTTP API's write routes: the match dry-run, reservations (a renter's signed request
 * forwarded to the provider) and the lease relays (task, status, logs, cancel… forwarded to the
 * lease's provider). They share the `write` rate-limit budget.
 */
import { z } from "zod";
import { leaseIdParamsSchema } from "../../common/api/chain.js";
import { matchQuerySchema, matchRequestSchema, matchResultSchema, reservationAnswerSchema, reservationBodySchema, type ReservationAnswer } from "../../common/api/market.js";
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
import { DelegationRefusedError, InvalidSignatureError, OutputTooLargeError, ServiceUnavailableError, StaleSignatureError, TooManyStreamsError } from "./errors.js";
import { checkOutputAuth, checkRelayAuth } from "./relay.js";
import { defineRoute, type RouteSpec } from "./route.js";
import {
  badInput,
  badMediaType,
  badSignature,
  error,
  noRelay,
  providerRefused,
  providerTimeout,
  providerUnreachable,
  providerWrongState,
  rateLimited,
  tooLarge,
} from "./route-responses.js";
import type { RouteDeps } from "./route-deps.js";
import { verifyReserveRequest } from "./signed.js";

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

/** The write routes, in the order the OpenAPI document lists them. */
export function writeRoutes(deps: RouteDeps): RouteSpec[] {
  const { source, options, deployment } = deps;
  const relayRoute = (action: RelayAction): RouteSpec => {
    const about = RELAY_SUMMARIES[action];
    return defineRoute({
      method: "POST",
      url: `/v1/leases/:id/${action}`,
      operationId: `relay${action.charAt(0).toUpperCase()}${action.slice(1)}`,
      summary: about.summary,
      description:
        `${about.description} The body carries \`auth\`: an EIP-712 RenterRequest for action \`${action}\` on this lease, signed by the lease's renter or by its session key with \`auth.delegation\` (docs/sessions.md) ` +
        "(domain Suanli / 1 / chain id / LeaseMarket). The node checks the signer against the on-chain lease, forwards the body unchanged " +
        "to the lease's provider and returns the provider's answer; an error the provider answers with comes back under its own `name`, with the status of its meaning (404 nothing there, 409 the task's state, 400 bad input, 403, 429, 503), and 502 only when the answer breaks the protocol or names an error this node does not know.",
      tag: "leases",
      params: leaseIdParamsSchema,
      body: relayBodySchemas[action] as z.ZodType,
      rateLimit: about.rateLimit,
      responses: {
        200: { description: "The provider's answer", schema: relayAnswerSchemas[action] },
        400: badInput,
        401: badSignature,
        403: providerRefused,
        404: error(
          "No lease with this id (LeaseNotFoundError), its provider is no longer registered (ProviderNotFoundError), or the provider answered that it holds nothing there (UnknownLeaseError, OutputNotAvailableError, PortNotDeclaredError)",
        ),
        409: providerWrongState,
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
          else if (error instanceof InvalidSignatureError) deps.metrics.signatureFailures.inc({ reason: error instanceof DelegationRefusedError ? "delegation" : "signer" });
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
        "RenterRequest for action `output` on this lease signed by its renter (or its session key, with `auth.delegation`), whose bodyHash covers `params`; the node checks the signer against the on-chain " +
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
        403: providerRefused,
        404: error(
          "No lease with this id (LeaseNotFoundError), its provider is no longer registered (ProviderNotFoundError), or the provider answered that it holds nothing there (UnknownLeaseError, OutputNotAvailableError, PortNotDeclaredError)",
        ),
        409: providerWrongState,
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
            else if (error instanceof InvalidSignatureError) deps.metrics.signatureFailures.inc({ reason: error instanceof DelegationRefusedError ? "delegation" : "signer" });
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

  return [
    defineRoute({
      method: "POST",
      url: "/v1/match",
      operationId: "matchDryRun",
      summary: "Match dry-run: ranked candidates for a task, or why nothing matched",
      description:
        "The body is the renter's match request as the SDK and the CLI take it (docs/matching.md): `gpuType`, `gpuCount`, `duration`, " +
        "`maxPricePerGpuHour` or `mode: interruptible` with `bidPerGpuHour` (USD per GPU-hour), `region`, `minVramMiB`, `cpuCores`, `memoryGiB`, `diskGiB` (host resources for the whole request), `minReputation`, " +
        "`attestedOnly`, `gpuIdentityVerified`, `colocation`. Reserves nothing. When nothing fits, `explanation.steps` lists, in order, how many offers each " +
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
        "The body is an EIP-712 ReserveRequest signed by `request.renter` (domain Suanli / 1 / chain id / LeaseMarket), or by its session key with `delegation`. " +
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
        409: error(
          "This signed request was already received (ReplayedRequestError), or the provider's node rents nothing: it publishes offers but serves no reservations (ProviderNotRentingError)",
        ),
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
        await verifyReserveRequest(
          body.request,
          body.signature,
          {
            chainId: deployment.chainId,
            market,
            nowSeconds: deps.nowSeconds(),
            maxAgeSeconds: options.signatureMaxAgeSeconds,
            guard: deps.guard,
            onRefused: (reason) => deps.metrics.signatureFailures.inc({ reason }),
            delegations: deps.delegations,
          },
          body.delegation,
        );
        return toReservationAnswer(await relay.reserve(body.request, body.signature, body.delegation));
      },
    }),
    ...RELAY_ACTIONS.map((action) => relayRoute(action)),
    outputRoute("list"),
    outputRoute("read"),
  ];
}

/**
 * The HTTP API's write routes: the match dry-run, reservations (a renter's signed request
 * forwarded to the provider) and the lease relays (task, status, logs, cancel… forwarded to the
 * lease's provider). They share the `write` rate-limit budget.
 */
import { z } from "zod";
import { leaseIdParamsSchema } from "../../common/api/chain.js";
import { matchQuerySchema, matchRequestSchema, matchResultSchema, reservationAnswerSchema, reservationBodySchema, type ReservationAnswer } from "../../common/api/market.js";
import { relayAnswerSchemas, relayBodySchemas, RELAY_ACTIONS, type RelayAction, type RelayBody } from "../../common/api/relay.js";
import type { ReserveReply } from "../../common/matching/handshake.js";
import { InvalidSignatureError, ServiceUnavailableError, StaleSignatureError } from "./errors.js";
import { checkRelayAuth } from "./relay.js";
import { defineRoute, type RouteSpec } from "./route.js";
import { badInput, badMediaType, badSignature, error, noRelay, providerTimeout, providerUnreachable, rateLimited, tooLarge } from "./route-responses.js";
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

  return [
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
  ];
}

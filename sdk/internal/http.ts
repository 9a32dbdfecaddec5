/**
 * The client without libp2p (a browser): offers come from a node's HTTP API (polled), and every
 * request to a provider goes through the node's relay routes, signed by the renter's wallet as
 * over libp2p. The node checks the signature against the chain and forwards the body unchanged.
 */
import { providerViewSchema } from "../../common/api/chain.js";
import { offerPageSchema, type OfferView } from "../../common/api/offers.js";
import { reservationAnswerSchema } from "../../common/api/market.js";
import { relayAnswerSchemas } from "../../common/api/relay.js";
import { SuanliError } from "../../common/errors.js";
import { stringifyPlain } from "../../common/json.js";
import type { OfferKnowledge } from "../../common/matching/entry.js";
import { OfferEngineIndex, ReputationCache } from "../../common/matching/offer-index.js";
import type { MatchingOptionsInput } from "../../common/matching/options.js";
import type { OfferMessage } from "../../common/offers/message.js";
import { cancelAnswerSchema, logsAnswerSchema, reserveReplySchema, taskAnswerSchema, taskStatusSchema } from "../../common/protocols/lease.js";
import type { z } from "zod";
import { ProviderRequestError } from "../errors.js";
import type { OfferFeed } from "./feed.js";
import type { ProviderLink } from "./link.js";

/** An error a node or provider answered, under its own name. */
class RemoteAnswerError extends SuanliError {
  constructor(name: string, message: string, status: number) {
    super(message, { details: `HTTP ${status}` });
    this.name = name;
  }
}

async function send(nodeUrl: string, path: string, init?: { body?: unknown; signal?: AbortSignal }): Promise<Response> {
  try {
    return await fetch(new URL(path, nodeUrl), {
      method: init?.body === undefined ? "GET" : "POST",
      headers: init?.body === undefined ? {} : { "content-type": "application/json" },
      body: init?.body === undefined ? undefined : stringifyPlain(init.body),
      signal: init?.signal,
    });
  } catch (error) {
    if (init?.signal?.aborted) throw init.signal.reason ?? error;
    throw new ProviderRequestError(`Cannot reach the node at ${nodeUrl}`, { cause: error });
  }
}

async function call(nodeUrl: string, path: string, init?: { body?: unknown; signal?: AbortSignal }): Promise<unknown> {
  return answerOf(await send(nodeUrl, path, init), path);
}

/** The JSON answer, or the node's (or provider's) error under its own name. */
async function answerOf(response: Response, path: string): Promise<unknown> {
  const json = (await response.json().catch(() => null)) as { error?: { name?: string; message?: string } } | null;
  if (!response.ok) {
    throw new RemoteAnswerError(json?.error?.name ?? "HttpError", json?.error?.message ?? `HTTP ${response.status} from ${path}`, response.status);
  }
  return json;
}

/** The gossip message shape the engine indexes, from the node's offer view. */
function messageFromView(view: OfferView): OfferMessage {
  return {
    v: 1,
    offer: view.signed.offer,
    signature: view.signed.signature,
    // A reserved-term tier is an offer of its own: without its tier it would be filed (and
    // replaced) under the machine's on-demand key, and matched as on-demand.
    ...(view.tier ? { tier: view.tier } : {}),
    ...(view.sealingKey ? { sealingKey: view.sealingKey } : {}),
    leaseChecks: view.leaseChecks,
    ...(view.resources ? { resources: view.resources } : {}),
    ...(view.retention ? { retention: view.retention } : {}),
    machine: { model: view.model, units: view.units, vramMiB: view.vramMiB, interconnect: view.interconnect, region: view.region, cluster: view.cluster },
    capacity: view.capacity,
    attestations: [],
    peerId: view.peerId,
    addrs: view.addrs,
    seq: view.seq,
    publishedAt: view.publishedAt,
    // The node verified the provider's message signature; the engine does not read it.
    peerSignature: `0x${"00".repeat(64)}`,
  } as OfferMessage;
}

/** What the engine is told of an offer the node describes: the attestation that counts, and until when its GPUs are CC-verified. */
export function attestationOf(view: OfferView, now: number): OfferKnowledge["attestation"] {
  if (!view.attested) return null;
  const current = view.attestations.filter((a) => a.expiry > now);
  if (!current.length) return null;
  // The node says whether its quorum's attestations verified the GPUs by CC evidence (gpuIdentityVerified).
  const cc = view.gpuIdentityVerified ? current.filter((a) => a.gpuIdentityVerified) : [];
  return {
    attestedAt: Math.max(...current.map((a) => a.issuedAt)),
    expiry: Math.max(...current.map((a) => a.expiry)),
    ...(cc.length ? { ccExpiry: Math.max(...cc.map((a) => a.expiry)) } : {}),
  };
}

/** The engine's form of the view's failures: until when each counts. */
export function failuresUntilOf(view: Pick<OfferView, "attestFailuresUntil">): number[] {
  return view.attestFailuresUntil.flatMap(({ until, failures }) => Array.from({ length: failures }, () => until));
}

/** Follows a node's offers over HTTP into a local matching engine (refreshed every `intervalMs`). */
export async function startHttpFeed(options: { nodeUrl: string; matching?: MatchingOptionsInput; intervalMs?: number; now?: () => number }): Promise<OfferFeed> {
  const now = options.now ?? (() => Math.floor(Date.now() / 1000));
  // A provider's counters are read once per feed (the node's view is itself cached).
  const reputations = new ReputationCache(
    async (provider) => {
      const view = providerViewSchema.parse(await call(options.nodeUrl, `/v1/providers/${provider}`));
      return { leasesCompleted: view.reputation.leasesCompleted, faults: view.reputation.faults, unitSecondsDelivered: BigInt(view.reputation.unitSecondsDelivered) };
    },
    { now },
  );
  const offers = new OfferEngineIndex({ matching: options.matching, reputations, now });
  const { engine } = offers;

  async function refresh(): Promise<void> {
    const seen = new Set<string>();
    for (let offset: number | null = 0, pages = 0; offset !== null && pages < 100; pages++) {
      const page = offerPageSchema.parse(await call(options.nodeUrl, `/v1/offers?limit=100&offset=${offset}`));
      for (const view of page.items) {
        seen.add(view.key);
        // The node's count of the machine's failures, as the times each counts until: the engine
        // applies maxAttestFailures as the node's does, and ages them between refreshes.
        await offers.put(view.key, messageFromView(view), attestationOf(view, now()), null, failuresUntilOf(view));
      }
      offset = page.nextOffset;
    }
    for (const key of offers.keys()) if (!seen.has(key)) offers.remove(key);
  }

  let first = refresh();
  const timer = setInterval(() => {
    first = refresh().catch(() => undefined);
  }, options.intervalMs ?? 2_000);
  (timer as { unref?: () => void }).unref?.();
  return {
    engine,
    host: undefined,
    async ready() {
      await first;
    },
    async syncPeer() {
      await refresh();
    },
    message: (key) => offers.message(key),
    messages: () => offers.messages(),
    avoid: (provider, seconds) => offers.avoid(provider, seconds),
    async close() {
      clearInterval(timer);
    },
  };
}

function leaseIdOf(body: { auth: { request: { leaseId: bigint | string | number } } }): string {
  return String(body.auth.request.leaseId);
}

/** Reaches providers through a node's relay routes. */
export function httpLink(nodeUrl: string): ProviderLink {
  const relay = async <S extends z.ZodType>(
    action: "task" | "status" | "logs" | "cancel",
    body: { auth: { request: { leaseId: bigint | string | number } } },
    schema: S,
  ): Promise<z.output<S>> => {
    const answer = await call(nodeUrl, `/v1/leases/${leaseIdOf(body)}/${action}`, { body });
    relayAnswerSchemas[action].parse(answer);
    return schema.parse(answer) as z.output<S>;
  };
  return {
    async reserve(_to, body) {
      const { request, signature, delegation } = body as { request: unknown; signature: string; delegation?: unknown };
      const answer = reservationAnswerSchema.parse(await call(nodeUrl, "/v1/reservations", { body: { request, signature, ...(delegation ? { delegation } : {}) } }));
      if (!answer.accepted) {
        return reserveReplySchema.parse({
          accepted: false,
          reason: answer.reason,
          ...(answer.message ? { message: answer.message } : {}),
          ...(answer.availableUnits !== null ? { availableUnits: answer.availableUnits } : {}),
        });
      }
      return reserveReplySchema.parse(
        JSON.parse(
          stringifyPlain({
            accepted: true,
            offer: answer.acceptance.offer,
            signature: answer.acceptance.signature,
            units: answer.units,
            holdUntil: answer.holdUntil,
            preempt: answer.preempt,
            ...(answer.sealingKey ? { sealingKey: answer.sealingKey } : {}),
          }),
        ),
      );
    },
    task: (_to, body) => relay("task", body, taskAnswerSchema),
    status: (_to, body) => relay("status", body, taskStatusSchema),
    logs: (_to, body) => relay("logs", body, logsAnswerSchema),
    cancel: (_to, body) => relay("cancel", body, cancelAnswerSchema),
    relayOutput: {
      list: (leaseId, body, signal) => call(nodeUrl, `/v1/leases/${leaseId}/output/list`, { body, signal }),
      async read(leaseId, body, signal) {
        const path = `/v1/leases/${leaseId}/output/read`;
        const response = await send(nodeUrl, path, { body, signal });
        if (!response.ok) await answerOf(response, path);
        return response;
      },
    },
  };
}

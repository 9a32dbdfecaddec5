import { bytesToHex, type Address } from "viem";
import {
  endpointCreatedSchema,
  endpointId as idOf,
  endpointRecordSchema,
  endpointRequestMessage,
  registrationToJson,
  gatewayInfoSchema,
  mintToken,
  randomNonceHex,
  readTokenClaims,
  endpointStatsSchema,
  type EndpointStats,
  type GatewayInfo,
} from "../../common/endpoints.js";
import { suanliTypes, type Endpoint } from "../../common/eip712.js";
import { InvalidInputError } from "../../common/errors.js";
import { SESSION_MAX_SECONDS, signSessionDelegation } from "../../common/sessions.js";
import { parseInput } from "../../common/validation.js";
import { GatewayRequestError } from "../errors.js";
import { requireWallet, type SuanliContext } from "../internal/context.js";
import { currentAttempt } from "../internal/store.js";
import { taskRecord } from "./getTaskStatus.js";

/** An endpoint's life when the caller names none: a day (at most a week: the delegation's limit). */
const DEFAULT_ENDPOINT_SECONDS = 24 * 3600;

/**
 * Options of `client.createEndpoint`.
 *
 * @example
 * import type { CreateEndpointParameters } from "suanli/sdk";
 * const options: CreateEndpointParameters = { gatewayUrl: "https://gw.example", taskId, port: 8000, public: true };
 */
export type CreateEndpointParameters = {
  /** The gateway's base URL (what its operator publishes, `gateway.publicUrl`). */
  gatewayUrl: string;
  /** The running task whose port it serves (its current lease). */
  taskId?: string;
  /**
   * Instead of `taskId`: several running tasks of the same program, one replica each (their
   * current leases, on one provider or many). The gateway sends each request to the ready replica
   * with the fewest requests in flight.
   */
  taskIds?: readonly string[];
  /** The task's port: one its spec declared in `ports`. */
  port: number;
  /**
   * A path the gateway GETs on each replica every few seconds (`/health`); a replica is sent
   * requests once it answers 2xx or 3xx, and not while its checks fail. Default: none (a replica
   * is ready while its lease runs; one whose request fails is left out for a while).
   */
  healthPath?: string;
  /** Anyone may call it (default false: only bearers of tokens, mintEndpointToken). */
  public?: boolean;
  /** Seconds it is served (default a day, at most a week). */
  ttlSeconds?: number;
  /** Who signs its tokens (default the wallet). */
  tokenSigner?: Address;
  /** For a group task: which machine, by rank (default 0). */
  rank?: number;
};

/**
 * A registered endpoint: its id, the URL the world calls, the signed record, and when it stops.
 *
 * @example
 * import type { CreateEndpointReturnType } from "suanli/sdk";
 * const { url }: CreateEndpointReturnType = await client.createEndpoint({ gatewayUrl, taskId, port: 8000, public: true });
 */
export type CreateEndpointReturnType = { endpointId: string; url: string; expiresAt: number; gateway: GatewayInfo; endpoint: Endpoint };

async function gatewayCall(url: string, init: RequestInit | undefined, what: string): Promise<unknown> {
  let response: Response;
  try {
    response = await fetch(url, { ...init, headers: { "content-type": "application/json", ...init?.headers } });
  } catch (error) {
    throw new GatewayRequestError(`Cannot reach the gateway at ${url}`, { cause: error });
  }
  const text = await response.text();
  let body: unknown;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {
    body = text;
  }
  if (!response.ok) {
    const error = (body as { error?: { name?: string; message?: string } } | undefined)?.error;
    throw new GatewayRequestError(`The gateway refused ${what} (${response.status}${error?.name ? ` ${error.name}` : ""}): ${error?.message ?? text.slice(0, 500)}`);
  }
  return body;
}

/**
 * Who a gateway is: the address renters delegate "forward" to, its public URL and chain.
 *
 * @example
 * import { getGateway } from "suanli/sdk";
 * const { address, publicUrl } = await getGateway("https://gw.example");
 */
export async function getGateway(gatewayUrl: string): Promise<GatewayInfo> {
  const base = gatewayUrl.replace(/\/+$/, "");
  return parseInput(gatewayInfoSchema, await gatewayCall(`${base}/v1/gateway`, undefined, "the info request"), "gateway info");
}

/**
 * Serves a port of the running task to the world through a gateway (docs/endpoints.md): the
 * wallet signs the Endpoint record (lease, port, who may call, expiry) and a delegation of
 * "forward" on the task's lease to the gateway's key (two signatures), and the gateway registers
 * it. The gateway can then open connections to that port of that lease only, until both expire.
 *
 * @example
 * import { createClient } from "suanli/sdk";
 * const { url, endpointId } = await client.createEndpoint({ gatewayUrl: "https://gw.example", taskId, port: 8000 });
 * const { token } = await client.mintEndpointToken({ endpointId, ttlSeconds: 3600 });
 * console.log(await (await fetch(`${url}v1/models`, { headers: { authorization: `Bearer ${token}` } })).json());
 */
export async function createEndpoint(ctx: SuanliContext, parameters: CreateEndpointParameters): Promise<CreateEndpointReturnType> {
  const ttlSeconds = parameters.ttlSeconds ?? DEFAULT_ENDPOINT_SECONDS;
  if (!Number.isInteger(ttlSeconds) || ttlSeconds < 60 || ttlSeconds > SESSION_MAX_SECONDS) {
    throw new InvalidInputError("createEndpoint", [{ path: "ttlSeconds", message: `expected an integer from 60 to ${SESSION_MAX_SECONDS} (a week)` }]);
  }
  const { walletClient, account } = requireWallet(ctx, "the endpoint");
  const gateway = await getGateway(parameters.gatewayUrl);
  if (gateway.chainId !== ctx.chainId) throw new GatewayRequestError(`The gateway serves chain ${gateway.chainId}, not this client's ${ctx.chainId}`);
  const taskIds = parameters.taskIds ?? (parameters.taskId === undefined ? [] : [parameters.taskId]);
  if ((parameters.taskId === undefined) === (parameters.taskIds === undefined) || taskIds.length === 0) {
    throw new InvalidInputError("createEndpoint", [{ path: "taskId", message: "pass taskId (one task) or taskIds (one or more replicas), not both" }]);
  }
  const leaseIds: bigint[] = [];
  for (const taskId of taskIds) {
    const attempt = currentAttempt(await taskRecord(ctx, taskId));
    const member = (parameters.rank ?? 0) === 0 ? attempt : attempt.group?.[parameters.rank ?? 0];
    if (!member) throw new InvalidInputError("createEndpoint", [{ path: "rank", message: `task ${taskId} has no machine of that rank` }]);
    leaseIds.push(member.leaseId);
  }
  const now = Math.floor(Date.now() / 1000);
  const salt = new Uint8Array(32);
  crypto.getRandomValues(salt);
  const endpoint = parseInput(
    endpointRecordSchema,
    {
      renter: account.address,
      gateway: gateway.address,
      leaseIds,
      port: parameters.port,
      healthPath: parameters.healthPath ?? "",
      public: parameters.public ?? false,
      tokenSigner: parameters.tokenSigner ?? account.address,
      expiresAt: BigInt(now + ttlSeconds),
      salt: bytesToHex(salt),
    },
    "createEndpoint",
  );
  const signature = await walletClient.signTypedData({ account, domain: ctx.domain, types: { Endpoint: suanliTypes.Endpoint }, primaryType: "Endpoint", message: endpoint });
  const delegation = await signSessionDelegation((p) => walletClient.signTypedData({ account, ...p }), ctx.domain, {
    renter: account.address,
    sessionKey: gateway.address,
    actions: ["forward"],
    leaseIds,
    ttlSeconds,
    nowSeconds: now,
  });
  const body = registrationToJson({ endpoint, signature, delegation });
  const base = parameters.gatewayUrl.replace(/\/+$/, "");
  const created = parseInput(endpointCreatedSchema, await gatewayCall(`${base}/v1/endpoints`, { method: "POST", body: JSON.stringify(body) }, "the endpoint"), "gateway answer");
  if (created.endpointId !== idOf(ctx.domain, endpoint)) throw new GatewayRequestError(`The gateway answered endpoint ${created.endpointId}, not the one signed`);
  return { ...created, gateway, endpoint };
}

/**
 * A bearer token for an endpoint that is not public, signed offline by the wallet (its
 * `tokenSigner`): `{ endpointId, expiresAt, nonce }` and the signature. The gateway checks it
 * without a database; revokeEndpointToken ends it early.
 *
 * @example
 * import { mintEndpointToken } from "suanli/sdk";
 * const { token } = await client.mintEndpointToken({ endpointId, ttlSeconds: 3600 });
 * await fetch(url, { headers: { authorization: `Bearer ${token}` } });
 */
export async function mintEndpointToken(ctx: SuanliContext, parameters: { endpointId: string; ttlSeconds?: number }): Promise<{ token: string; nonce: string; expiresAt: number }> {
  if (!/^[0-9a-f]{32}$/.test(parameters.endpointId)) throw new InvalidInputError("mintEndpointToken", [{ path: "endpointId", message: "expected 32 hex digits" }]);
  const ttlSeconds = parameters.ttlSeconds ?? DEFAULT_ENDPOINT_SECONDS;
  if (!Number.isInteger(ttlSeconds) || ttlSeconds < 1) throw new InvalidInputError("mintEndpointToken", [{ path: "ttlSeconds", message: "expected a positive integer" }]);
  const { walletClient, account } = requireWallet(ctx, "the endpoint token");
  const claims = { e: parameters.endpointId, x: Math.floor(Date.now() / 1000) + ttlSeconds, n: randomNonceHex() };
  const token = await mintToken(claims, (message) => walletClient.signMessage({ account, message }));
  return { token, nonce: claims.n, expiresAt: claims.x };
}

/**
 * Revokes one token of an endpoint at its gateway (by the token, or its nonce): the wallet signs
 * the request. The gateway refuses the token from then on (401, reason `revoked`).
 *
 * @example
 * import { revokeEndpointToken } from "suanli/sdk";
 * await client.revokeEndpointToken({ gatewayUrl, endpointId, token });
 */
export async function revokeEndpointToken(ctx: SuanliContext, parameters: { gatewayUrl: string; endpointId: string; token?: string; nonce?: string }): Promise<void> {
  const nonce = parameters.nonce ?? (parameters.token ? readTokenClaims(parameters.token).n : undefined);
  if (!nonce) throw new InvalidInputError("revokeEndpointToken", [{ path: "token", message: "pass the token or its nonce" }]);
  await renterRequest(ctx, parameters.gatewayUrl, parameters.endpointId, "revoke", nonce);
}

/**
 * Removes an endpoint from its gateway (the wallet signs the request); its URL answers 404 after.
 *
 * @example
 * import { deleteEndpoint } from "suanli/sdk";
 * await client.deleteEndpoint({ gatewayUrl, endpointId });
 */
export async function deleteEndpoint(ctx: SuanliContext, parameters: { gatewayUrl: string; endpointId: string }): Promise<void> {
  await renterRequest(ctx, parameters.gatewayUrl, parameters.endpointId, "delete");
}

async function renterRequest(ctx: SuanliContext, gatewayUrl: string, endpointId: string, action: "delete" | "revoke", nonce?: string): Promise<void> {
  const { walletClient, account } = requireWallet(ctx, action === "delete" ? "deleting the endpoint" : "revoking the token");
  const gateway = await getGateway(gatewayUrl);
  const issuedAt = Math.floor(Date.now() / 1000);
  const signature = await walletClient.signMessage({ account, message: endpointRequestMessage({ gateway: gateway.address, endpointId, action, nonce, issuedAt }) });
  const base = gatewayUrl.replace(/\/+$/, "");
  const url = action === "delete" ? `${base}/v1/endpoints/${endpointId}` : `${base}/v1/endpoints/${endpointId}/revocations`;
  await gatewayCall(
    url,
    { method: action === "delete" ? "DELETE" : "POST", body: JSON.stringify({ issuedAt, signature, ...(nonce ? { nonce } : {}) }) },
    action === "delete" ? "the deletion" : "the revocation",
  );
}

/**
 * An endpoint's figures at its gateway since the gateway started: requests by status, latency to
 * the answer's head (p50/p90/p99 over the last 1,024 requests, ms), body bytes sent back.
 *
 * @example
 * import { getEndpointStats } from "suanli/sdk";
 * const { requests, latencyMs } = await getEndpointStats("https://gw.example", endpointId);
 * console.log(requests.byStatus["200"], latencyMs.p99);
 */
export async function getEndpointStats(gatewayUrl: string, endpointId: string): Promise<EndpointStats> {
  const base = gatewayUrl.replace(/\/+$/, "");
  return parseInput(endpointStatsSchema, await gatewayCall(`${base}/v1/endpoints/${encodeURIComponent(endpointId)}/stats`, undefined, "the stats request"), "endpoint stats");
}

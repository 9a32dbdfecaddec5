/**
 * Endpoints on a gateway (issue 37, docs/endpoints.md): the renter's signed Endpoint record (which
 * leases, which port, who may call, until when), the registration a gateway accepts, bearer
 * tokens the renter's `tokenSigner` mints offline, and the renter's signed management requests
 * (delete an endpoint, revoke a token). Shared by the gateway (node/gateway/) and the SDK; no
 * Node-only API.
 */
import { getAddress, hashTypedData, hexToBytes, bytesToHex, recoverMessageAddress, recoverTypedDataAddress, type Address, type Hex, type TypedDataDomain } from "viem";
import { z } from "zod";
import { suanliTypes, type Endpoint } from "./eip712.js";
import { addressSchema, bytes32Schema, leaseIdSchema, signatureSchema, uint64Schema } from "./schemas.js";
import { signedDelegationSchema, type SignedDelegation } from "./sessions.js";

/** At most this many leases back one endpoint. */
export const ENDPOINT_MAX_LEASES = 64;
/** How far a management request's `issuedAt` may be from the gateway's clock, seconds. */
export const ENDPOINT_REQUEST_MAX_AGE_SECONDS = 300;
/** Characters of an endpoint id: the first 16 bytes of the record's EIP-712 hash, in hex. */
export const ENDPOINT_ID_LENGTH = 32;

/**
 * The path the gateway asks each replica for (GET, 2xx or 3xx: ready), with its query: a path of
 * printable ASCII starting with `/`; empty for no health checks.
 */
export const healthPathSchema = z
  .string()
  .max(256)
  .regex(/^(\/[\x21-\x7e]*)?$/, "expected empty (no health checks) or a path starting with / of printable ASCII without spaces");

/** An Endpoint record as it travels (integers as bigints, decimal strings or safe integers). */
export const endpointRecordSchema = z.strictObject({
  renter: addressSchema,
  gateway: addressSchema,
  leaseIds: z
    .array(leaseIdSchema)
    .min(1)
    .max(ENDPOINT_MAX_LEASES)
    .refine((ids) => new Set(ids).size === ids.length, { message: "lists a lease twice" }),
  port: z.number().int().min(1).max(65_535),
  healthPath: healthPathSchema,
  public: z.boolean(),
  tokenSigner: addressSchema,
  expiresAt: uint64Schema,
  salt: bytes32Schema,
}) satisfies z.ZodType<Endpoint, unknown>;

/** What `POST /v1/endpoints` on a gateway takes: the record, the renter's signature of it, and the renter's delegation of "forward" to the gateway. */
export const endpointRegistrationSchema = z.strictObject({
  endpoint: endpointRecordSchema,
  signature: signatureSchema,
  delegation: signedDelegationSchema,
});
export type EndpointRegistration = z.output<typeof endpointRegistrationSchema>;

/** A renter's signed management request (`DELETE /v1/endpoints/:id`, `POST /v1/endpoints/:id/revocations`). */
export const endpointRenterRequestSchema = z.strictObject({
  issuedAt: z.number().int().nonnegative(),
  signature: signatureSchema,
});
/** A token revocation: the token's nonce, with the renter's signature. */
export const tokenRevocationSchema = endpointRenterRequestSchema.extend({ nonce: z.string().regex(/^[0-9a-f]{32}$/, "expected 32 hex digits") });

/** The EIP-712 hash of an Endpoint record. */
export function endpointHash(domain: TypedDataDomain, endpoint: Endpoint): Hex {
  return hashTypedData({ domain, types: { Endpoint: suanliTypes.Endpoint }, primaryType: "Endpoint", message: endpoint });
}

/**
 * The id of an endpoint: the first 16 bytes of its record's EIP-712 hash, 32 hex digits (what
 * follows `/e/` in its URL).
 *
 * @example
 * import { endpointId } from "suanli/sdk";
 * const url = `${gateway.publicUrl}/e/${endpointId(domain, record)}/`;
 */
export function endpointId(domain: TypedDataDomain, endpoint: Endpoint): string {
  return endpointHash(domain, endpoint).slice(2, 2 + ENDPOINT_ID_LENGTH);
}

/** Whether `signature` of the record is the renter's (ECDSA). */
export async function endpointSignedByRenter(domain: TypedDataDomain, endpoint: Endpoint, signature: Hex): Promise<boolean> {
  try {
    const signer = await recoverTypedDataAddress({ domain, types: { Endpoint: suanliTypes.Endpoint }, primaryType: "Endpoint", message: endpoint, signature });
    return getAddress(signer) === getAddress(endpoint.renter);
  } catch {
    return false;
  }
}

/** The record as JSON (integers as decimal strings): what the SDK sends and the gateway stores. */
export function endpointToJson(endpoint: Endpoint): Record<string, unknown> {
  return { ...endpoint, leaseIds: endpoint.leaseIds.map(String), expiresAt: endpoint.expiresAt.toString() };
}

/** A registration as JSON (integers as decimal strings): what the SDK sends and the gateway stores. */
export function registrationToJson(registration: { endpoint: Endpoint; signature: Hex; delegation: SignedDelegation }): {
  endpoint: Record<string, unknown>;
  signature: Hex;
  delegation: { message: Record<string, unknown>; signature: Hex };
} {
  const { message } = registration.delegation;
  return {
    endpoint: endpointToJson(registration.endpoint),
    signature: registration.signature,
    delegation: {
      message: { ...message, leaseIds: message.leaseIds.map(String), issuedAt: message.issuedAt.toString(), expiresAt: message.expiresAt.toString() },
      signature: registration.delegation.signature,
    },
  };
}

/** The text a renter signs (EIP-191) to delete an endpoint or revoke one of its tokens. */
export function endpointRequestMessage(parameters: { gateway: Address; endpointId: string; action: "delete" | "revoke"; nonce?: string; issuedAt: number }): string {
  const what = parameters.action === "delete" ? "delete endpoint" : `revoke token ${parameters.nonce ?? ""} of endpoint`;
  return `Suanli gateway ${getAddress(parameters.gateway)}: ${what} ${parameters.endpointId} at ${parameters.issuedAt}`;
}

// ---------------------------------------------------------------------------------------------
// tokens

/** What a bearer token says: its endpoint, its expiry (unix seconds), a random nonce (what a revocation names). */
export const endpointTokenClaimsSchema = z.strictObject({
  e: z.string().regex(/^[0-9a-f]{32}$/),
  x: z.number().int().positive(),
  n: z.string().regex(/^[0-9a-f]{32}$/),
});
export type EndpointTokenClaims = z.output<typeof endpointTokenClaimsSchema>;

function base64url(bytes: Uint8Array): string {
  let binary = "";
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary).replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "");
}

function fromBase64url(text: string): Uint8Array {
  const binary = atob(text.replaceAll("-", "+").replaceAll("_", "/"));
  return Uint8Array.from(binary, (char) => char.charCodeAt(0));
}

/** The text the token signer signs (EIP-191) for a token's claims part. */
export function tokenSigningMessage(claimsPart: string): string {
  return `Suanli endpoint token ${claimsPart}`;
}

/** A random 16-byte nonce, 32 hex digits. */
export function randomNonceHex(): string {
  const bytes = new Uint8Array(16);
  crypto.getRandomValues(bytes);
  return bytesToHex(bytes).slice(2);
}

/** Builds a token from its claims and the signer's signature of `tokenSigningMessage(claimsPart)`. */
export async function mintToken(claims: EndpointTokenClaims, sign: (message: string) => Promise<Hex>): Promise<string> {
  const claimsPart = base64url(new TextEncoder().encode(JSON.stringify(endpointTokenClaimsSchema.parse(claims))));
  const signature = await sign(tokenSigningMessage(claimsPart));
  return `${claimsPart}.${base64url(hexToBytes(signature))}`;
}

/** Why a token is refused (the 401's `reason`). */
export type TokenRefusal = "missing" | "malformed" | "bad-signature" | "expired" | "revoked" | "wrong-endpoint";

/**
 * Checks a bearer token against an endpoint, without any database: its form, that
 * `tokenSigner` signed it, that it names this endpoint and has not expired, and that its nonce is
 * not in `revoked`. Returns the claims or the reason it is refused.
 */
export async function verifyToken(
  token: string | undefined,
  expected: { endpointId: string; tokenSigner: Address; nowSeconds: number; revoked: (nonce: string) => boolean },
): Promise<{ ok: true; claims: EndpointTokenClaims } | { ok: false; reason: TokenRefusal }> {
  if (!token) return { ok: false, reason: "missing" };
  const [claimsPart, signaturePart, extra] = token.split(".");
  if (!claimsPart || !signaturePart || extra !== undefined) return { ok: false, reason: "malformed" };
  let claims: EndpointTokenClaims;
  let signature: Hex;
  try {
    claims = endpointTokenClaimsSchema.parse(JSON.parse(new TextDecoder().decode(fromBase64url(claimsPart))));
    const bytes = fromBase64url(signaturePart);
    if (bytes.length !== 65) return { ok: false, reason: "malformed" };
    signature = bytesToHex(bytes);
  } catch {
    return { ok: false, reason: "malformed" };
  }
  if (claims.e !== expected.endpointId) return { ok: false, reason: "wrong-endpoint" };
  let signer: Address;
  try {
    signer = await recoverMessageAddress({ message: tokenSigningMessage(claimsPart), signature });
  } catch {
    return { ok: false, reason: "bad-signature" };
  }
  if (getAddress(signer) !== getAddress(expected.tokenSigner)) return { ok: false, reason: "bad-signature" };
  if (claims.x <= expected.nowSeconds) return { ok: false, reason: "expired" };
  if (expected.revoked(claims.n)) return { ok: false, reason: "revoked" };
  return { ok: true, claims };
}

/** A token's claims read without checking anything (to revoke it by its nonce). */
export function readTokenClaims(token: string): EndpointTokenClaims {
  const [claimsPart] = token.split(".");
  return endpointTokenClaimsSchema.parse(JSON.parse(new TextDecoder().decode(fromBase64url(claimsPart ?? ""))));
}

/** `GET /v1/gateway`: who the gateway is. */
export const gatewayInfoSchema = z.strictObject({ address: addressSchema, publicUrl: z.string().url(), chainId: z.number().int().positive() });
/**
 * Who a gateway is (`GET /v1/gateway`): the address renters delegate "forward" to, the base URL of its endpoints, its chain.
 *
 * @example
 * import { getGateway, type GatewayInfo } from "suanli/sdk";
 * const info: GatewayInfo = await getGateway("https://gw.example");
 */
export type GatewayInfo = z.output<typeof gatewayInfoSchema>;

/** `POST /v1/endpoints`'s answer. */
export const endpointCreatedSchema = z.strictObject({ endpointId: z.string().regex(/^[0-9a-f]{32}$/), url: z.string().url(), expiresAt: z.number().int() });

const latencySchema = z.number().nonnegative().nullable();
/** `GET /v1/endpoints/{id}/stats`. */
export const endpointStatsSchema = z.strictObject({
  endpointId: z.string(),
  requests: z.strictObject({ total: z.number().int().nonnegative(), byStatus: z.record(z.string().regex(/^\d{3}$/), z.number().int().nonnegative()) }),
  latencyMs: z.strictObject({ p50: latencySchema, p90: latencySchema, p99: latencySchema }),
  bytesOut: z.number().int().nonnegative(),
  /** When the last of its leases stops (unix seconds: its deposit runs out, or its notice ends); null when none runs. */
  endsAt: z.number().int().nullable(),
  replicas: z.array(
    z.strictObject({
      leaseId: z.string().regex(/^\d+$/),
      provider: addressSchema.nullable(),
      /**
       * `ready`: routed to; `starting`: no health check passed yet; `unhealthy`: its last checks or
       * a request to it failed; `ending`: its lease stops within the gateway's drain time (a
       * preemption notice, its deposit running out), requests in flight finish; `ended`: its lease
       * is over; `unknown`: its lease could not be read.
       */
      state: z.enum(["ready", "starting", "unhealthy", "ending", "ended", "unknown"]),
      outstanding: z.number().int().nonnegative(),
      requests: z.number().int().nonnegative(),
      failures: z.number().int().nonnegative(),
      lastCheck: z.strictObject({ ok: z.boolean(), at: z.number().int(), detail: z.string() }).nullable(),
      endsAt: z.number().int().nullable(),
    }),
  ),
});
/**
 * An endpoint's figures at its gateway (getEndpointStats): requests by status, latency percentiles to the answer's head (ms; null before any request), body bytes out, and per replica (lease): its state, requests in flight, requests and failures, its last health check.
 *
 * @example
 * import { getEndpointStats, type EndpointStats } from "suanli/sdk";
 * const stats: EndpointStats = await getEndpointStats(gatewayUrl, endpointId);
 */
export type EndpointStats = z.output<typeof endpointStatsSchema>;

/**
 * The endpoints a gateway serves and the tokens revoked on them: checked when registered (both
 * of the renter's signatures, that they agree, that the leases are the renter's), kept in memory
 * for the request path and in the node's level store so a restarted gateway serves them again.
 */
import { getAddress, recoverMessageAddress, type Address, type TypedDataDomain } from "viem";
import {
  ENDPOINT_REQUEST_MAX_AGE_SECONDS,
  endpointId as idOf,
  endpointRegistrationSchema,
  endpointRequestMessage,
  endpointSignedByRenter,
  registrationToJson,
  type EndpointRegistration,
} from "../../common/endpoints.js";
import { SessionDelegationError } from "../../common/sessions.js";
import type { LeaseView } from "../../common/chain/market.js";
import type { DelegationVerifier, PendingDelegation } from "../sessions/delegations.js";
import { Bucket } from "../store/buckets.js";
import type { Repository, Store } from "../store/store.js";
import { RequestInputError } from "../api/errors.js";
import { EndpointNotFoundError, EndpointRefusedError } from "./errors.js";

/** A registered endpoint: the registration, its id, and when it stops being served (the earlier of the record's and the delegation's expiry). */
export type GatewayEndpoint = EndpointRegistration & { id: string; servedUntil: number };

type StoredRegistration = ReturnType<typeof registrationToJson>;

export type EndpointRegistryOptions = {
  store: Store;
  domain: TypedDataDomain;
  /** The gateway key's address: what records and delegations must name. */
  gateway: Address;
  delegations: DelegationVerifier;
  readLease: (leaseId: bigint) => Promise<Pick<LeaseView, "renter" | "status">>;
  maxEndpoints: number;
  /** Unix seconds. */
  now?: () => number;
};

export class EndpointRegistry {
  private readonly endpoints = new Map<string, GatewayEndpoint>();
  /** `<endpoint id>/<nonce>` → the token's expiry. */
  private readonly revoked = new Map<string, number>();
  private readonly records: Repository<StoredRegistration>;
  private readonly revocations: Repository<number>;

  private constructor(private readonly options: EndpointRegistryOptions) {
    this.records = options.store.repository<StoredRegistration>(Bucket.gatewayEndpoints);
    this.revocations = options.store.repository<number>(Bucket.gatewayRevocations);
  }

  private now(): number {
    return this.options.now?.() ?? Math.floor(Date.now() / 1000);
  }

  /** Opens the registry with what the store holds; expired endpoints and revocations are dropped. */
  static async open(options: EndpointRegistryOptions): Promise<EndpointRegistry> {
    const registry = new EndpointRegistry(options);
    const now = registry.now();
    for await (const [id, stored] of registry.records.entries()) {
      const parsed = endpointRegistrationSchema.safeParse(stored);
      const endpoint = parsed.success ? registry.entry(parsed.data) : undefined;
      if (!endpoint || endpoint.id !== id || endpoint.servedUntil <= now) await registry.records.del(id);
      else registry.endpoints.set(id, endpoint);
    }
    for await (const [key, expiresAt] of registry.revocations.entries()) {
      if (expiresAt <= now) await registry.revocations.del(key);
      else registry.revoked.set(key, expiresAt);
    }
    return registry;
  }

  private entry(registration: EndpointRegistration): GatewayEndpoint {
    const servedUntil = Number(
      registration.endpoint.expiresAt < registration.delegation.message.expiresAt ? registration.endpoint.expiresAt : registration.delegation.message.expiresAt,
    );
    return { ...registration, id: idOf(this.options.domain, registration.endpoint), servedUntil };
  }

  /** The endpoint with this id while it is served; 404 otherwise. */
  get(id: string): GatewayEndpoint {
    const endpoint = this.endpoints.get(id);
    if (!endpoint || endpoint.servedUntil <= this.now()) throw new EndpointNotFoundError(id);
    return endpoint;
  }

  /** Whether an endpoint with this id is served now. */
  has(id: string): boolean {
    const endpoint = this.endpoints.get(id);
    return endpoint !== undefined && endpoint.servedUntil > this.now();
  }

  list(): GatewayEndpoint[] {
    return [...this.endpoints.values()];
  }

  isRevoked(id: string, nonce: string): boolean {
    return this.revoked.has(`${id}/${nonce}`);
  }

  /**
   * Checks and keeps a registration: the record names this gateway and has not expired; the
   * renter signed it; the delegation is the same renter's, to this gateway's key, allows "forward"
   * on every lease of the record and is not revoked on-chain; every lease is the renter's. Throws
   * EndpointRefusedError (403) saying which check failed.
   */
  async register(raw: unknown): Promise<GatewayEndpoint> {
    const parsed = endpointRegistrationSchema.safeParse(raw);
    if (!parsed.success) {
      throw new RequestInputError(
        "endpoint registration",
        parsed.error.issues.map((issue) => ({ path: issue.path.join("."), message: issue.message })),
      );
    }
    const registration = parsed.data;
    const { endpoint, delegation } = registration;
    const { gateway, domain, delegations } = this.options;
    if (endpoint.gateway !== getAddress(gateway)) throw new EndpointRefusedError(`The record names gateway ${endpoint.gateway}, not this one (${gateway})`);
    if (Number(endpoint.expiresAt) <= this.now()) throw new EndpointRefusedError(`The record expired at ${endpoint.expiresAt}`);
    if (!(await endpointSignedByRenter(domain, endpoint, registration.signature))) {
      throw new EndpointRefusedError(`The record is not signed by its renter ${endpoint.renter}`);
    }
    if (delegation.message.renter !== endpoint.renter) {
      throw new EndpointRefusedError(`The delegation is from ${delegation.message.renter}, not from the record's renter ${endpoint.renter}`);
    }
    const refused = (what: string, error: unknown) =>
      error instanceof SessionDelegationError
        ? new EndpointRefusedError(`The delegation does not let this gateway forward ${what}: ${error.shortMessage}`, { cause: error })
        : error;
    // The delegation's local check for every lease first, then the leases' renters, and only then
    // the chain step (revocation, a smart account's approval), as providers do.
    let pending: PendingDelegation | undefined;
    for (const leaseId of endpoint.leaseIds) {
      pending = await delegations.local(delegation, { requestSigner: gateway, action: "forward", leaseId }).catch((error: unknown) => {
        throw refused(`lease ${leaseId}`, error);
      });
    }
    for (const leaseId of endpoint.leaseIds) {
      const lease = await this.options.readLease(leaseId);
      if (lease.status === "None") throw new EndpointRefusedError(`Lease ${leaseId} does not exist`);
      if (getAddress(lease.renter) !== endpoint.renter)
        throw new EndpointRefusedError(`Lease ${leaseId} is not the renter's: its renter is ${lease.renter}, the record's ${endpoint.renter}`);
    }
    await delegations.confirm(pending!).catch((error: unknown) => {
      throw refused("the record's leases", error);
    });
    const entry = this.entry(registration);
    if (!this.endpoints.has(entry.id) && this.endpoints.size >= this.options.maxEndpoints) {
      throw new EndpointRefusedError(`This gateway serves ${this.options.maxEndpoints} endpoints already (gateway.maxEndpoints)`);
    }
    await this.records.put(entry.id, registrationToJson(registration));
    this.endpoints.set(entry.id, entry);
    return entry;
  }

  /** Checks a renter's management request for an endpoint: fresh, and signed (EIP-191) by the endpoint's renter. */
  async checkRenter(id: string, request: { issuedAt: number; signature: `0x${string}` }, action: "delete" | "revoke", nonce?: string): Promise<GatewayEndpoint> {
    const endpoint = this.get(id);
    const skew = Math.abs(this.now() - request.issuedAt);
    if (skew > ENDPOINT_REQUEST_MAX_AGE_SECONDS) throw new EndpointRefusedError(`issuedAt is ${skew} s from this gateway's clock (at most ${ENDPOINT_REQUEST_MAX_AGE_SECONDS} s)`);
    const message = endpointRequestMessage({ gateway: this.options.gateway, endpointId: id, action, nonce, issuedAt: request.issuedAt });
    let signer: Address | undefined;
    try {
      signer = await recoverMessageAddress({ message, signature: request.signature });
    } catch {
      signer = undefined;
    }
    if (!signer || getAddress(signer) !== endpoint.endpoint.renter)
      throw new EndpointRefusedError(`The request is not signed by the endpoint's renter ${endpoint.endpoint.renter}`);
    return endpoint;
  }

  async remove(id: string): Promise<void> {
    await this.records.del(id);
    this.endpoints.delete(id);
  }

  /** Revokes a token of an endpoint by its nonce until `expiresAt` (the endpoint's end: a token cannot outlive it). */
  async revoke(id: string, nonce: string): Promise<void> {
    const endpoint = this.get(id);
    const key = `${id}/${nonce}`;
    await this.revocations.put(key, endpoint.servedUntil);
    this.revoked.set(key, endpoint.servedUntil);
  }
}

/**
 * Access control of the lease protocols: every task spec, status read, log read and cancel
 * carries a RenterRequest signed by the lease's renter (EIP-712, bound to the lease id, this
 * provider, the action, the body and a fresh nonce). The renter checked against is the one the
 * chain recorded when the lease opened.
 */
import { getAddress, type Address, type TypedDataDomain } from "viem";
import { LRUCache } from "lru-cache";
import { leaseRequestBodyHash, recoverRenter, RENTER_REQUEST_MAX_AGE_SECONDS, type RenterAction, type RenterAuth } from "../../../common/protocols/lease.js";
import { SessionDelegationError } from "../../../common/sessions.js";
import type { DelegationVerifier, PendingDelegation } from "../../sessions/delegations.js";
import { RenterAuthError } from "./errors.js";

export class RenterRequestVerifier {
  /** Nonces seen within twice the allowed age: a replay is refused for as long as it could be fresh. */
  private readonly seen: LRUCache<string, true>;
  /** Delegated authorizations past the local check, awaiting `confirm` (the chain step). */
  private readonly pending = new WeakMap<RenterAuth, PendingDelegation>();

  constructor(
    private readonly options: {
      domain: TypedDataDomain;
      provider: Address;
      /** Checks requests signed by a session key (auth.delegation); without it they are refused. */
      delegations?: DelegationVerifier;
      maxAgeSeconds?: number;
      /** Unix seconds. */
      now?: () => number;
    },
  ) {
    const maxAge = options.maxAgeSeconds ?? RENTER_REQUEST_MAX_AGE_SECONDS;
    this.seen = new LRUCache({ max: 200_000, ttl: 2 * maxAge * 1000 + 1000 });
  }

  /**
   * The local half of the check, before anything costs a chain read: `auth` authorizes `action` on
   * `leaseId` for this provider, over exactly `body` (without auth), is fresh, and its signature
   * reads. Returns the signer; whether the signer is the lease's renter, and whether the nonce is
   * fresh, are `consume`'s to decide once the lease is known. Throws RenterAuthError.
   */
  async authenticate(auth: RenterAuth, expected: { leaseId: bigint; action: RenterAction; body: unknown }): Promise<Address> {
    const { request } = auth;
    const maxAge = this.options.maxAgeSeconds ?? RENTER_REQUEST_MAX_AGE_SECONDS;
    if (request.leaseId !== expected.leaseId) throw new RenterAuthError(`The authorization is for lease ${request.leaseId}, not ${expected.leaseId}`);
    if (request.action !== expected.action) throw new RenterAuthError(`The authorization is for "${request.action}", not "${expected.action}"`);
    if (getAddress(request.provider) !== getAddress(this.options.provider)) {
      throw new RenterAuthError(`The authorization is for provider ${request.provider}, not this one (${this.options.provider})`);
    }
    const now = this.options.now?.() ?? Math.floor(Date.now() / 1000);
    if (Math.abs(now - request.issuedAt) > maxAge) {
      throw new RenterAuthError(`The authorization was issued at ${request.issuedAt}, more than ${maxAge} s from this node's clock (${now})`, {
        metaMessages: ["Sign a fresh request; check the clock of the signing machine."],
      });
    }
    if (leaseRequestBodyHash(expected.action, expected.body) !== request.bodyHash) {
      throw new RenterAuthError("The request body does not match the signed bodyHash", {
        metaMessages: ["bodyHash is leaseRequestBodyHash(action, body without auth) from common/protocols/lease.ts."],
      });
    }
    if (this.seen.has(`${request.nonce}`)) throw replayed();
    let signer: Address;
    try {
      signer = getAddress(await recoverRenter(this.options.domain, auth));
    } catch (error) {
      throw new RenterAuthError("The authorization's signature cannot be read", { cause: error });
    }
    if (!auth.delegation) return signer;
    // Signed by a session key: the renter is whoever delegated to it, within the delegation's scope.
    // Only the local half here; `confirm` asks the chain once the renter is known to be the lease's.
    if (!this.options.delegations) throw new RenterAuthError("This provider accepts no session keys: sign the request with the renter's wallet");
    const pending = await sessionError(this.options.delegations.local(auth.delegation, { requestSigner: signer, action: expected.action, leaseId: expected.leaseId }));
    this.pending.set(auth, pending);
    return pending.renter;
  }

  /**
   * The chain half of a delegated authorization (revocation; a smart-account renter's approval),
   * for a caller that found the delegation's renter to be the lease's: a stranger's delegation
   * never costs a chain read. Nothing for a request the wallet signed. Throws RenterAuthError.
   */
  async confirm(auth: RenterAuth): Promise<void> {
    if (!auth.delegation) return;
    const pending = this.pending.get(auth);
    if (!pending || !this.options.delegations) throw new RenterAuthError("The delegated authorization was not checked first (authenticate)");
    await sessionError(this.options.delegations.confirm(pending));
  }

  /** Once the signer is known to be the lease's renter: the delegation's chain step (confirm), then the nonce (consume). */
  async accept(auth: RenterAuth): Promise<void> {
    await this.confirm(auth);
    this.consume(auth);
  }

  /**
   * Uses the authorization's nonce up: check and mark in one synchronous step, so of concurrent
   * copies of one authorization exactly one passes. Throws RenterAuthError for a replay.
   */
  consume(auth: RenterAuth): void {
    const key = `${auth.request.nonce}`;
    if (this.seen.has(key)) throw replayed();
    this.seen.set(key, true);
  }

  /**
   * The whole check for callers that already know the lease's renter: authenticate, compare the
   * signer with `renter`, consume the nonce.
   */
  async verify(auth: RenterAuth, expected: { leaseId: bigint; action: RenterAction; body: unknown; renter: Address }): Promise<void> {
    const signer = await this.authenticate(auth, expected);
    if (signer !== getAddress(expected.renter)) throw notAuthorized(expected.leaseId);
    await this.accept(auth);
  }
}

/** A delegation's refusal as the protocol's RenterAuthError. */
async function sessionError<T>(work: Promise<T>): Promise<T> {
  try {
    return await work;
  } catch (error) {
    if (error instanceof SessionDelegationError) throw new RenterAuthError(error.shortMessage, { cause: error, metaMessages: error.metaMessages });
    throw error;
  }
}

function replayed(): RenterAuthError {
  return new RenterAuthError("The authorization's nonce was already used", { metaMessages: ["Sign each request with a fresh nonce."] });
}

/**
 * The one answer for "no such lease here" and "not your lease": a stranger learns nothing about
 * which leases exist.
 */
export function notAuthorized(leaseId: bigint): RenterAuthError {
  return new RenterAuthError(`The signer is not the renter of a lease ${leaseId} with this provider`, {
    metaMessages: ["Only the wallet that opened the lease may send its task, read its status and logs, or cancel it."],
  });
}

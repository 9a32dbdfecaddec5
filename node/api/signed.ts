/**
 * Checks of signed writes: an EIP-712 signature by the wallet the request names, issued recently,
 * never seen before. The replay check runs last so that a forged request cannot burn someone
 * else's nonce.
 */
import { recoverTypedDataAddress, type Address, type Hex } from "viem";
import { suanliDomain, suanliTypes, type ReserveRequest } from "../../common/eip712.js";
import { SessionDelegationError, signedDelegationSchema, type SessionAction } from "../../common/sessions.js";
import type { DelegationVerifier } from "../sessions/delegations.js";
import { DelegationRefusedError, InvalidSignatureError, ReplayedRequestError, RequestInputError, StaleSignatureError } from "./errors.js";

/** Remembers recently seen request ids, bounded in count and in age. */
export class ReplayGuard {
  private readonly seen = new Map<string, number>();
  constructor(
    private readonly capacity: number,
    private readonly ttlSeconds: number,
  ) {}

  /** True the first time `id` is offered within its lifetime; false after. */
  claim(id: string, nowSeconds: number): boolean {
    for (const [key, at] of this.seen) {
      if (at > nowSeconds - this.ttlSeconds && this.seen.size < this.capacity) break;
      this.seen.delete(key);
    }
    if (this.seen.has(id)) return false;
    this.seen.set(id, nowSeconds);
    return true;
  }
}

export type SignatureCheck = {
  chainId: number;
  market: Address;
  nowSeconds: number;
  maxAgeSeconds: number;
  guard: ReplayGuard;
  /** Counts each refusal by reason. */
  /** Why a request was refused, for the metrics: its time, its signature, its delegation (malformed or refused), or a replay. */
  onRefused?: (reason: "stale" | "signer" | "delegation" | "malformed" | "replay") => void;
  /** Checks requests signed by a session key; without it they are refused. */
  delegations?: DelegationVerifier;
};

/**
 * The renter on whose behalf a session key signed: `signer` recovered from the request, `delegation`
 * as the API schema decoded it; `mismatch` is the error when that renter is not `renter` (the
 * lease's, the reservation's), checked before the chain is asked anything (revocation, a smart
 * account's approval). Throws the 400 for a delegation out of bounds (too long, "reserve" with
 * leases) and the 401 for one that does not cover the request, expired, is not the renter's or was
 * revoked.
 */
export async function renterBehind(
  delegations: DelegationVerifier | undefined,
  delegation: unknown,
  expected: { signer: Address; action: SessionAction; leaseId: bigint | undefined; renter: Address; mismatch: (delegator: Address) => Error },
): Promise<Address> {
  const parsed = signedDelegationSchema.safeParse(delegation);
  if (!parsed.success) {
    throw new RequestInputError(
      "request body",
      parsed.error.issues.map((issue) => ({ path: ["auth", "delegation", ...issue.path.map(String)].join("."), message: issue.message })),
    );
  }
  if (!delegations?.enabled) throw new DelegationRefusedError("This node accepts no session keys (its deployment has no SessionKeys contract): sign with the renter's wallet");
  try {
    const pending = await delegations.local(parsed.data, { requestSigner: expected.signer, action: expected.action, leaseId: expected.leaseId });
    if (pending.renter.toLowerCase() !== expected.renter.toLowerCase()) throw expected.mismatch(pending.renter);
    await delegations.confirm(pending);
    return pending.renter;
  } catch (error) {
    if (error instanceof SessionDelegationError) throw new DelegationRefusedError(error.shortMessage);
    throw error;
  }
}

/** Verifies a renter's signed ReserveRequest; throws the API error to answer with. */
export async function verifyReserveRequest(request: ReserveRequest, signature: Hex, check: SignatureCheck, delegation?: unknown): Promise<void> {
  const skew = Math.abs(check.nowSeconds - request.issuedAt);
  if (skew > check.maxAgeSeconds) {
    check.onRefused?.("stale");
    throw new StaleSignatureError(`request.issuedAt is ${skew} s from this node's clock (at most ${check.maxAgeSeconds} s accepted); sign it again with the current time`);
  }
  let signer: Address;
  try {
    signer = await recoverTypedDataAddress({
      domain: suanliDomain(check.chainId, check.market),
      types: { ReserveRequest: suanliTypes.ReserveRequest },
      primaryType: "ReserveRequest",
      message: request,
      signature,
    });
  } catch {
    check.onRefused?.("signer");
    throw new InvalidSignatureError("signature is not a valid ECDSA signature of the request");
  }
  if (delegation !== undefined) {
    try {
      signer = await renterBehind(check.delegations, delegation, {
        signer,
        action: "reserve",
        leaseId: undefined,
        renter: request.renter,
        mismatch: (delegator) => new InvalidSignatureError(`delegation is from ${delegator}, not from request.renter ${request.renter}`),
      });
    } catch (error) {
      check.onRefused?.(error instanceof RequestInputError ? "malformed" : error instanceof DelegationRefusedError ? "delegation" : "signer");
      throw error;
    }
  }
  if (signer.toLowerCase() !== request.renter.toLowerCase()) {
    check.onRefused?.("signer");
    throw new InvalidSignatureError(
      `signature was made by ${signer}, not by request.renter ${request.renter} (EIP-712 domain: Suanli, 1, chain ${check.chainId}, LeaseMarket ${check.market})`,
    );
  }
  if (!check.guard.claim(`${request.renter.toLowerCase()}:${request.nonce}`, check.nowSeconds)) {
    check.onRefused?.("replay");
    throw new ReplayedRequestError();
  }
}

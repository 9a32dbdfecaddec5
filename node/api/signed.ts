/**
 * Checks of signed writes: an EIP-712 signature by the wallet the request names, issued recently,
 * never seen before. The replay check runs last so that a forged request cannot burn someone
 * else's nonce.
 */
import { recoverTypedDataAddress, type Address, type Hex } from "viem";
import { suanliDomain, suanliTypes, type ReserveRequest } from "../../common/eip712.js";
import { InvalidSignatureError, ReplayedRequestError, StaleSignatureError } from "./errors.js";

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
  onRefused?: (reason: "stale" | "signer" | "replay") => void;
};

/** Verifies a renter's signed ReserveRequest; throws the API error to answer with. */
export async function verifyReserveRequest(request: ReserveRequest, signature: Hex, check: SignatureCheck): Promise<void> {
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

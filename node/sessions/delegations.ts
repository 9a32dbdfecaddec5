/**
 * The node's check of requests signed by a renter's session key (common/sessions.ts): the
 * delegation's scope, time and signature (checkDelegation), then the deployment's SessionKeys
 * contract: a delegation its renter revoked (one, or every one issued up to a time) is refused.
 * A revocation is read from the chain at most once per REVOCATION_CACHE_MS for one delegation, so
 * it takes effect within that long of its block; the answers are cached, the refusals too.
 * A deployment without a SessionKeys contract (a manifest from before issue #38) accepts no
 * delegation: its requests must be signed by the renter's wallet.
 */
import { LRUCache } from "lru-cache";
import type { Address, Hex, PublicClient, TypedDataDomain } from "viem";
import { sessionKeysAbi } from "../../common/abi.js";
import { checkDelegation, SessionDelegationError, type SessionAction, type SignedDelegation } from "../../common/sessions.js";

/** How long a "not revoked" answer from the chain is trusted. */
export const REVOCATION_CACHE_MS = 10_000;

export class DelegationVerifier {
  private readonly revoked: LRUCache<string, Promise<boolean>>;
  /** Whether an address has code (a smart account whose signatures are checked by ERC-1271), by address. */
  private readonly code = new LRUCache<Address, Promise<boolean>>({ max: 50_000, ttl: 600_000 });

  constructor(
    private readonly options: {
      domain: TypedDataDomain;
      publicClient: Pick<PublicClient, "readContract" | "verifyHash" | "getCode">;
      /** The deployment's SessionKeys contract; undefined: no delegation is accepted. */
      sessions: Address | undefined;
      cacheMs?: number;
      /** Unix seconds. */
      now?: () => number;
    },
  ) {
    this.revoked = new LRUCache({ max: 50_000, ttl: options.cacheMs ?? REVOCATION_CACHE_MS });
  }

  /** Whether this node accepts delegated requests at all. */
  get enabled(): boolean {
    return this.options.sessions !== undefined;
  }

  /**
   * The renter on whose behalf `requestSigner` signed: the delegation covers the request, is
   * live, is the renter's, and is not revoked. Throws SessionDelegationError.
   */
  async renterOf(delegation: SignedDelegation, expected: { requestSigner: Address; action: SessionAction; leaseId: bigint | undefined }): Promise<Address> {
    const sessions = this.options.sessions;
    if (!sessions) {
      throw new SessionDelegationError("This deployment has no SessionKeys contract, so its nodes accept no session keys", {
        metaMessages: ["Sign the request with the renter's wallet, or deploy SessionKeys (docs/contracts.md) and add it to the manifest."],
      });
    }
    const { publicClient } = this.options;
    const { renter, hash } = await checkDelegation(this.options.domain, delegation, {
      ...expected,
      nowSeconds: this.options.now?.() ?? Math.floor(Date.now() / 1000),
      // ERC-1271 only for a renter with code (a smart account): a forged signature from a plain
      // address costs one cached code read, never a call per request.
      verifyContractSignature: async (address, digest, signature) => (await this.hasCode(address)) && publicClient.verifyHash({ address, hash: digest, signature }),
    });
    if (await this.isRevoked(sessions, renter, hash, delegation.message.issuedAt)) {
      throw new SessionDelegationError(`The renter ${renter} revoked this session (delegation ${hash})`, {
        metaMessages: ["Start a new session: the wallet signs a new delegation."],
      });
    }
    return renter;
  }

  private hasCode(address: Address): Promise<boolean> {
    let answer = this.code.get(address);
    if (!answer) {
      answer = this.options.publicClient.getCode({ address }).then((code) => code !== undefined && code !== "0x");
      this.code.set(address, answer);
      answer.catch(() => this.code.delete(address));
    }
    return answer;
  }

  private isRevoked(sessions: Address, renter: Address, hash: Hex, issuedAt: bigint): Promise<boolean> {
    const key = `${renter}:${hash}`;
    let answer = this.revoked.get(key);
    if (!answer) {
      answer = this.options.publicClient.readContract({ address: sessions, abi: sessionKeysAbi, functionName: "isRevoked", args: [renter, hash, issuedAt] });
      this.revoked.set(key, answer);
      // A failed read is not remembered: the next request asks again.
      answer.catch(() => this.revoked.delete(key));
    }
    return answer.catch((error: unknown) => {
      throw new SessionDelegationError("Could not read from the chain whether the session was revoked", { cause: error });
    });
  }
}

/**
 * The node's check of requests signed by a renter's session key (common/sessions.ts), in two steps
 * so that a stranger cannot make the node read the chain:
 * - `local`: the delegation's scope, time and the renter's ECDSA signature (checkDelegation); no
 *   chain read. It names the renter the delegation claims.
 * - `confirm`, called only once the caller found that renter to be the lease's (or the
 *   reservation's): the deployment's SessionKeys contract, in one read (`check`, cached for
 *   REVOCATION_CACHE_MS per delegation): a delegation its renter revoked (one, or every one issued
 *   up to a time) is refused; and a delegation whose renter did not sign it with a key counts only
 *   when the renter is a contract (a smart account) that approved it there (SessionKeys.approve) or
 *   whose ERC-1271 `isValidSignature` accepts it (an eth_call with a gas cap).
 * A revocation thus takes effect within REVOCATION_CACHE_MS of its block. A deployment without a
 * SessionKeys contract (a manifest from before issue #38) accepts no delegation: its requests must
 * be signed by the renter's wallet.
 */
import { LRUCache } from "lru-cache";
import { encodeFunctionData, parseAbi, type Address, type Hex, type PublicClient, type TypedDataDomain } from "viem";
import { sessionKeysAbi } from "../../common/abi.js";
import { checkDelegation, SessionDelegationError, unsignedDelegation, type SessionAction, type SignedDelegation } from "../../common/sessions.js";

/** How long an answer of SessionKeys.check (approved, revoked) is trusted. */
export const REVOCATION_CACHE_MS = 10_000;
/** Gas an ERC-1271 check may use: a renter's contract cannot make the node's RPC burn more. */
export const ERC1271_GAS = 300_000n;
const ERC1271_MAGIC = "0x1626ba7e";
const erc1271Abi = parseAbi(["function isValidSignature(bytes32 hash, bytes signature) view returns (bytes4)"]);

/** A delegation past the local check: the renter it claims, and what `confirm` must still ask the chain. */
export type PendingDelegation = { renter: Address; hash: Hex; signed: boolean; issuedAt: bigint; signature: Hex | "0x" };

type Status = { approved: boolean; revoked: boolean };

export class DelegationVerifier {
  private readonly status: LRUCache<string, Promise<Status>>;
  /** Whether an address has code: a yes is kept 10 minutes, a no 5 seconds (an account deployed later counts soon). */
  private readonly code = new LRUCache<Address, Promise<boolean>>({ max: 50_000, ttl: 600_000 });
  /** ERC-1271 answers by renter, hash and signature (an account's owner may change: a minute). */
  private readonly erc1271 = new LRUCache<string, Promise<boolean>>({ max: 50_000, ttl: 60_000 });

  constructor(
    private readonly options: {
      domain: TypedDataDomain;
      publicClient: Pick<PublicClient, "readContract" | "getCode" | "call">;
      /** The deployment's SessionKeys contract; undefined: no delegation is accepted. */
      sessions: Address | undefined;
      cacheMs?: number;
      /** Unix seconds. */
      now?: () => number;
    },
  ) {
    this.status = new LRUCache({ max: 50_000, ttl: options.cacheMs ?? REVOCATION_CACHE_MS });
  }

  /** Whether this node accepts delegated requests at all. */
  get enabled(): boolean {
    return this.options.sessions !== undefined;
  }

  /**
   * The local step: the delegation covers the request, is live, and names its renter (signed by
   * its key, or to be confirmed on the chain). No chain read. Throws SessionDelegationError.
   */
  async local(delegation: SignedDelegation, expected: { requestSigner: Address; action: SessionAction; leaseId: bigint | undefined }): Promise<PendingDelegation> {
    if (!this.options.sessions) {
      throw new SessionDelegationError("This deployment has no SessionKeys contract, so its nodes accept no session keys", {
        metaMessages: ["Sign the request with the renter's wallet, or deploy SessionKeys (docs/contracts.md) and add it to the manifest."],
      });
    }
    const checked = await checkDelegation(this.options.domain, delegation, {
      ...expected,
      nowSeconds: this.options.now?.() ?? Math.floor(Date.now() / 1000),
      deferUnsigned: true,
    });
    return { ...checked, issuedAt: delegation.message.issuedAt, signature: delegation.signature };
  }

  /**
   * The chain step, for a delegation whose renter the caller has matched to the lease's (or the
   * reservation's): not revoked, and, when its renter did not sign it with a key, approved by the
   * renter's contract. Throws SessionDelegationError.
   */
  async confirm(pending: PendingDelegation): Promise<void> {
    const sessions = this.options.sessions!;
    const { renter, hash } = pending;
    if (!pending.signed) {
      const accepted =
        (await this.hasCode(renter)) &&
        ((await this.read(sessions, pending)).approved || (pending.signature !== "0x" && (await this.isValidSignature(renter, hash, pending.signature))));
      if (!accepted) throw unsignedDelegation(renter, pending.signature);
    }
    if ((await this.read(sessions, pending)).revoked) {
      throw new SessionDelegationError(`The renter ${renter} revoked this session (delegation ${hash})`, {
        metaMessages: ["Start a new session: the wallet signs a new delegation."],
      });
    }
  }

  private hasCode(address: Address): Promise<boolean> {
    let answer = this.code.get(address);
    if (!answer) {
      answer = this.options.publicClient.getCode({ address }).then((code) => code !== undefined && code !== "0x");
      this.code.set(address, answer);
      answer.then(
        (has) => {
          if (!has) this.code.set(address, Promise.resolve(false), { ttl: 5_000 });
        },
        () => this.code.delete(address),
      );
    }
    return answer;
  }

  private isValidSignature(renter: Address, hash: Hex, signature: Hex): Promise<boolean> {
    const key = `${renter}:${hash}:${signature}`;
    let answer = this.erc1271.get(key);
    if (!answer) {
      const data = encodeFunctionData({ abi: erc1271Abi, functionName: "isValidSignature", args: [hash, signature] });
      answer = this.options.publicClient
        .call({ to: renter, data, gas: ERC1271_GAS })
        .then(({ data: result }) => result?.slice(0, 10).toLowerCase() === ERC1271_MAGIC)
        .catch(() => false);
      this.erc1271.set(key, answer);
    }
    return answer;
  }

  /** SessionKeys.check: whether the renter approved the delegation on-chain, and whether it is revoked; cached. */
  private read(sessions: Address, pending: PendingDelegation): Promise<Status> {
    const key = `${pending.renter}:${pending.hash}:${pending.issuedAt}`;
    let answer = this.status.get(key);
    if (!answer) {
      answer = this.options.publicClient
        .readContract({ address: sessions, abi: sessionKeysAbi, functionName: "check", args: [pending.renter, pending.hash, pending.issuedAt] })
        .then(([approved, revoked]) => ({ approved, revoked }));
      this.status.set(key, answer);
      // A failed read is not remembered: the next request asks again.
      answer.catch(() => this.status.delete(key));
    }
    return answer.catch((error: unknown) => {
      throw new SessionDelegationError("Could not read the session's approval and revocation from the chain", { cause: error });
    });
  }
}

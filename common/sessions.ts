/**
 * Session keys (issue #38): the renter's wallet signs one EIP-712 SessionDelegation to a key the
 * page, SDK or CLI generates, and that key signs the renter's requests from then on (reserve, the
 * task spec, status, logs, output, exec, forward, cancel), so a prompting wallet asks once per
 * session instead of once per request. A delegation is scoped (which actions; optionally which
 * leases), bounded in time (at most SESSION_MAX_SECONDS) and revocable on-chain (the deployment's
 * SessionKeys contract: `revoke(hash)` of one, `revokeAll()` of every delegation issued so far).
 * Money never moves on a session key's word: opening, extending and closing a lease stay the
 * renter's own transactions.
 *
 * Nodes and providers check a delegated request with {@link checkDelegation} (scope, time, the
 * renter's signature) and then ask the chain whether it was revoked.
 */
import { bytesToHex, getAddress, hashTypedData, recoverTypedDataAddress, type Address, type Hex, type TypedDataDomain } from "viem";
import { z } from "zod";
import { suanliTypes, type SessionDelegation } from "./eip712.js";
import { SuanliError } from "./errors.js";
import { addressSchema, bytes32Schema, leaseIdSchema, signatureSchema, uint64Schema } from "./schemas.js";
import { parseInput } from "./validation.js";

/**
 * What a session key may be allowed to do: the lease requests, and "reserve" (holding units before a lease opens).
 *
 * @example
 * import { SESSION_ACTIONS } from "suanli/sdk";
 * const session = await client.startSession({ actions: SESSION_ACTIONS.filter((a) => a !== "exec") });
 */
export const SESSION_ACTIONS = ["reserve", "task", "status", "logs", "cancel", "output", "exec", "forward"] as const;
/**
 * One of SESSION_ACTIONS.
 *
 * @example
 * import type { SessionAction } from "suanli/sdk";
 * const reads: SessionAction[] = ["status", "logs"];
 */
export type SessionAction = (typeof SESSION_ACTIONS)[number];
/**
 * The longest a delegation may live: a week.
 *
 * @example
 * import { SESSION_MAX_SECONDS } from "suanli/sdk";
 * const session = await client.startSession({ ttlSeconds: SESSION_MAX_SECONDS });
 */
export const SESSION_MAX_SECONDS = 7 * 24 * 3600;
/** A delegation's life when the caller names none: 12 hours. */
export const SESSION_DEFAULT_SECONDS = 12 * 3600;
/** How far in the future a delegation's issuedAt may be (clocks differ). */
export const SESSION_CLOCK_SKEW_SECONDS = 300;
/** At most this many leases in one delegation (an empty list: every lease of the renter). */
export const SESSION_MAX_LEASES = 64;

/** A SessionDelegation as it travels (amounts as bigints, decimal strings or safe integers). */
export const sessionDelegationSchema = z
  .strictObject({
    renter: addressSchema,
    sessionKey: addressSchema,
    actions: z
      .array(z.enum(SESSION_ACTIONS))
      .min(1)
      .max(SESSION_ACTIONS.length)
      .refine((actions) => new Set(actions).size === actions.length, { message: "lists an action twice" }),
    leaseIds: z.array(leaseIdSchema).max(SESSION_MAX_LEASES),
    issuedAt: uint64Schema,
    expiresAt: uint64Schema,
    salt: bytes32Schema,
  })
  .refine((d) => d.expiresAt > d.issuedAt, { message: "expiresAt must be after issuedAt", path: ["expiresAt"] })
  .refine((d) => d.expiresAt - d.issuedAt <= BigInt(SESSION_MAX_SECONDS), {
    message: `a delegation lives at most ${SESSION_MAX_SECONDS} s (a week)`,
    path: ["expiresAt"],
  })
  .refine((d) => !(d.actions.includes("reserve") && d.leaseIds.length > 0), {
    message: '"reserve" comes before any lease: a delegation that allows it must name no leases',
    path: ["actions"],
  }) satisfies z.ZodType<SessionDelegation, unknown>;

/**
 * A delegation with the renter's EIP-712 signature, or `0x` for one its renter (a smart account
 * that cannot sign) approved on-chain with SessionKeys.approve.
 */
export const signedDelegationSchema = z.strictObject({ message: sessionDelegationSchema, signature: z.union([signatureSchema, z.literal("0x")]) });
/**
 * A SessionDelegation with the renter's EIP-712 signature: what travels as `auth.delegation`.
 *
 * @example
 * import type { SignedDelegation } from "suanli/sdk";
 * const { message, signature }: SignedDelegation = (await client.startSession()).delegation;
 */
export type SignedDelegation = z.output<typeof signedDelegationSchema>;

/**
 * A delegated request refused, or a session that cannot be started or used: what was wrong, and what is accepted.
 *
 * @example
 * import { SessionDelegationError } from "suanli/sdk";
 * try {
 *   client.useSession(saved);
 * } catch (error) {
 *   if (error instanceof SessionDelegationError) await client.startSession(); // expired, or another wallet's
 * }
 */
export class SessionDelegationError extends SuanliError {
  override name = "SessionDelegationError";
}

/**
 * The EIP-712 hash of a delegation (hashTypedData, domain included): what SessionKeys.revoke takes.
 *
 * @example
 * import { delegationHash } from "suanli/sdk";
 * const hash = delegationHash(domain, session.delegation.message); // equals session.hash
 */
export function delegationHash(domain: TypedDataDomain, message: SessionDelegation): Hex {
  return hashTypedData({ domain, types: { SessionDelegation: suanliTypes.SessionDelegation }, primaryType: "SessionDelegation", message });
}

/**
 * Signs a SessionDelegation with the renter's wallet.
 *
 * @example
 * import type { SessionDelegationSigner } from "suanli/sdk";
 * const signer: SessionDelegationSigner = (p) => walletClient.signTypedData({ account, ...p });
 */
export type SessionDelegationSigner = (parameters: {
  domain: TypedDataDomain;
  types: { SessionDelegation: typeof suanliTypes.SessionDelegation };
  primaryType: "SessionDelegation";
  message: SessionDelegation;
}) => Promise<Hex>;

/**
 * Signs a delegation to `sessionKey` for `actions` (on `leaseIds`, empty: every lease of the
 * renter) for `ttlSeconds` from now (default SESSION_DEFAULT_SECONDS).
 *
 * @example
 * import { signSessionDelegation } from "suanli/sdk";
 * const delegation = await signSessionDelegation((p) => walletClient.signTypedData({ account, ...p }), domain,
 *   { renter: account.address, sessionKey: sessionAccount.address, actions: ["status", "logs"] });
 */
export async function signSessionDelegation(
  signer: SessionDelegationSigner,
  domain: TypedDataDomain,
  parameters: { renter: Address; sessionKey: Address; actions: readonly SessionAction[]; leaseIds?: readonly bigint[]; ttlSeconds?: number; nowSeconds?: number },
): Promise<SignedDelegation> {
  const issuedAt = BigInt(parameters.nowSeconds ?? Math.floor(Date.now() / 1000));
  const salt = new Uint8Array(32);
  crypto.getRandomValues(salt);
  const message = parseInput(
    sessionDelegationSchema,
    {
      renter: parameters.renter,
      sessionKey: parameters.sessionKey,
      actions: [...parameters.actions],
      leaseIds: [...(parameters.leaseIds ?? [])],
      issuedAt,
      expiresAt: issuedAt + BigInt(parameters.ttlSeconds ?? SESSION_DEFAULT_SECONDS),
      salt: bytesToHex(salt),
    },
    "session delegation",
    [`actions: some of ${SESSION_ACTIONS.join(", ")}; at most ${SESSION_MAX_SECONDS} s long.`],
  );
  const signature = await signer({ domain, types: { SessionDelegation: suanliTypes.SessionDelegation }, primaryType: "SessionDelegation", message });
  return { message, signature };
}

/** Whether a delegation allows `action` on `leaseId` (undefined: a request about no lease yet, a reservation). */
export function delegationCovers(message: SessionDelegation, action: SessionAction, leaseId: bigint | undefined): boolean {
  if (!message.actions.includes(action)) return false;
  if (message.leaseIds.length === 0) return true;
  return leaseId !== undefined && message.leaseIds.includes(leaseId);
}

/**
 * The local check of a delegated request (no chain read): `requestSigner` (who signed the
 * request) is the delegation's session key; the delegation allows `action` on `leaseId`; it has
 * started (allowing SESSION_CLOCK_SKEW_SECONDS) and not expired at `nowSeconds`; and the renter
 * signed it (ECDSA). A renter whose signature does not recover, or that sent none (`0x`), may be
 * a smart account: with `deferUnsigned` the answer says `signed: false` and the caller decides on
 * the chain (a node checks ERC-1271 and SessionKeys.approve, once the renter is known to be the
 * lease's); without it that is refused. Returns the renter, the delegation's hash (for the
 * revocation check) and whether the renter's ECDSA signature was verified. Throws
 * SessionDelegationError.
 */
export async function checkDelegation(
  domain: TypedDataDomain,
  signed: SignedDelegation,
  expected: {
    requestSigner: Address;
    action: SessionAction;
    leaseId: bigint | undefined;
    nowSeconds: number;
    deferUnsigned?: boolean;
  },
): Promise<{ renter: Address; hash: Hex; signed: boolean }> {
  const { message } = signed;
  if (getAddress(message.sessionKey) !== getAddress(expected.requestSigner)) {
    throw new SessionDelegationError(`The request was signed by ${expected.requestSigner}, not by the delegation's session key ${message.sessionKey}`);
  }
  if (!delegationCovers(message, expected.action, expected.leaseId)) {
    const leases = message.leaseIds.length === 0 ? "every lease" : `leases ${message.leaseIds.join(", ")}`;
    throw new SessionDelegationError(
      `The session key may not "${expected.action}"${expected.leaseId === undefined ? "" : ` lease ${expected.leaseId}`}: its delegation allows ${message.actions.join(", ")} on ${leases}`,
      { metaMessages: ["Sign this request with the wallet, or start a session whose delegation covers it."] },
    );
  }
  const now = BigInt(expected.nowSeconds);
  if (message.issuedAt > now + BigInt(SESSION_CLOCK_SKEW_SECONDS)) {
    throw new SessionDelegationError(`The delegation is issued at ${message.issuedAt}, in the future of this node's clock (${now})`, {
      metaMessages: ["Check the clock of the signing machine."],
    });
  }
  if (message.expiresAt <= now) {
    throw new SessionDelegationError(`The session expired at ${message.expiresAt} (this node's clock: ${now})`, {
      metaMessages: ["Start a new session: the wallet signs a new delegation."],
    });
  }
  const hash = delegationHash(domain, message);
  let renterSigned = false;
  if (signed.signature !== "0x") {
    try {
      const recovered = await recoverTypedDataAddress({
        domain,
        types: { SessionDelegation: suanliTypes.SessionDelegation },
        primaryType: "SessionDelegation",
        message,
        signature: signed.signature,
      });
      renterSigned = getAddress(recovered) === getAddress(message.renter);
    } catch {
      renterSigned = false;
    }
  }
  if (!renterSigned && !expected.deferUnsigned) throw unsignedDelegation(message.renter, signed.signature);
  return { renter: getAddress(message.renter), hash, signed: renterSigned };
}

/** The refusal of a delegation its renter did not sign (nor, for `0x`, approve on-chain). */
export function unsignedDelegation(renter: Address, signature: Hex | "0x"): SessionDelegationError {
  return signature === "0x"
    ? new SessionDelegationError(`The delegation has no signature and its renter ${renter} did not approve it on-chain`, {
        metaMessages: ["A renter that cannot sign (a smart account) calls SessionKeys.approve(hash) first."],
      })
    : new SessionDelegationError(`The delegation is not signed by its renter ${renter}`);
}

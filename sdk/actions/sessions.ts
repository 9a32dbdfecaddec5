import { getAddress, type Hex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { z } from "zod";
import {
  checkDelegation,
  unsignedDelegation,
  SESSION_ACTIONS,
  SESSION_DEFAULT_SECONDS,
  SESSION_MAX_SECONDS,
  SessionDelegationError,
  signedDelegationSchema,
  signSessionDelegation,
  type SessionAction,
} from "../../common/sessions.js";
import { parseInput } from "../../common/validation.js";
import { sessionKeysAbi } from "../../common/abi.js";
import { revokeSessions } from "../internal/chain.js";
import { approveSmartSession, requireWallet, sessionOf, type SuanliContext } from "../internal/context.js";
import type { Session } from "../types.js";

export type { Session } from "../types.js";

/**
 * What a session allows when the caller names nothing: everything but running commands in the task and forwarding its ports.
 *
 * @example
 * import { DEFAULT_SESSION_ACTIONS } from "suanli/sdk";
 * const session = await client.startSession({ actions: [...DEFAULT_SESSION_ACTIONS, "exec"] });
 */
export const DEFAULT_SESSION_ACTIONS: readonly SessionAction[] = ["reserve", "task", "status", "logs", "cancel", "output"];

/**
 * Parameters of startSession.
 *
 * @example
 * import type { StartSessionParameters } from "suanli/sdk";
 * const parameters: StartSessionParameters = { actions: ["status", "logs"], ttlSeconds: 3600 };
 */
export type StartSessionParameters = {
  /** What the session key may do; default reserve, task, status, logs, cancel and output (exec and forward only when named). */
  actions?: SessionAction[];
  /** The leases it may act on; default every lease of the wallet (and then "reserve" may be allowed). */
  leaseIds?: bigint[];
  /** How long the session lasts, seconds; default 12 hours, at most a week. */
  ttlSeconds?: number;
};

const startSchema = z.strictObject({
  actions: z.array(z.enum(SESSION_ACTIONS)).min(1).optional(),
  leaseIds: z.array(z.bigint().positive()).optional(),
  ttlSeconds: z.number().int().min(60).max(SESSION_MAX_SECONDS).optional(),
});

const savedSchema = z.object({
  privateKey: z.string().regex(/^0x[0-9a-fA-F]{64}$/, "expected the session key's 32-byte private key as 0x + 64 hex digits"),
  delegation: signedDelegationSchema,
});

/**
 * Starts a session: generates a session key and asks the wallet, once, to sign a delegation to it.
 * From then on the client signs its requests to providers (reservations, the task, status, logs,
 * output, cancel) with the session key, so a prompting wallet is asked only for transactions and
 * permits. Needs a deployment with a SessionKeys contract (the nodes check revocations there).
 *
 * @example
 * import { createClient } from "suanli/sdk";
 * const client = await createClient({ rpcUrl, nodeUrl, account: address, walletTransport: custom(window.ethereum), deployment });
 * const session = await client.startSession({ ttlSeconds: 3600 }); // the one signature of the session
 * const { taskId } = await client.submitTask(request); // the permit and the lease transaction only
 * for await (const line of client.logs(taskId, { follow: true })) console.log(line.text); // no prompt
 */
export async function startSession(ctx: SuanliContext, parameters: StartSessionParameters = {}): Promise<Session> {
  const input = parseInput(startSchema, parameters, "session parameters", [`actions: some of ${SESSION_ACTIONS.join(", ")}; ttlSeconds: 60..${SESSION_MAX_SECONDS}`]);
  const { walletClient, account } = requireWallet(ctx, "starting a session");
  if (!ctx.deployment.contracts.sessions) throw noSessionKeys();
  const actions = input.actions ?? [...DEFAULT_SESSION_ACTIONS];
  const leaseIds = input.leaseIds ?? [];
  // "reserve" comes before any lease: a session bound to leases cannot hold units.
  const scoped = leaseIds.length > 0 && !input.actions ? actions.filter((action) => action !== "reserve") : actions;
  // A smart account signs nothing: it approves the delegation on-chain, in one user operation.
  if (ctx.userOps) return approveSmartSession(ctx, { actions: scoped, leaseIds, ttlSeconds: input.ttlSeconds });
  const privateKey = generatePrivateKey();
  const key = privateKeyToAccount(privateKey);
  // Stamped after the wallet's last SessionKeys.revokeAll: one signed in that same second would be revoked already.
  const revokedBefore = Number(
    await ctx.publicClient.readContract({ address: ctx.deployment.contracts.sessions, abi: sessionKeysAbi, functionName: "revokedBefore", args: [account.address] }),
  );
  const delegation = await signSessionDelegation((p) => walletClient.signTypedData({ account, ...p }), ctx.domain, {
    renter: account.address,
    sessionKey: key.address,
    actions: scoped,
    leaseIds,
    ttlSeconds: input.ttlSeconds ?? SESSION_DEFAULT_SECONDS,
    nowSeconds: Math.max(Math.floor(Date.now() / 1000), revokedBefore + 1),
  });
  const session = sessionOf(ctx, privateKey, delegation);
  ctx.session = { account: key, session };
  return session;
}

/**
 * Uses a session started earlier (a Session, or its JSON with amounts as strings): the delegation
 * must be the wallet's and live, and the private key must be its session key's.
 *
 * @example
 * import { useSession } from "suanli/sdk";
 * const saved = JSON.parse(await readFile("session.json", "utf8"));
 * await client.useSession(saved); // throws SessionDelegationError when expired, altered or another wallet's
 */
export async function useSession(ctx: SuanliContext, saved: unknown): Promise<Session> {
  const parsed = parseInput(savedSchema, saved, "session", ["{ privateKey, delegation: { message, signature } } as startSession returned it."]);
  const { account } = requireWallet(ctx, "using a session");
  const key = privateKeyToAccount(parsed.privateKey as Hex);
  const { message } = parsed.delegation;
  if (getAddress(message.sessionKey) !== key.address) throw new SessionDelegationError(`The private key is not the session key ${message.sessionKey} of this delegation`);
  if (getAddress(message.renter) !== getAddress(account.address)) {
    throw new SessionDelegationError(`The session was delegated by ${message.renter}, not by this client's wallet ${account.address}`);
  }
  if (Number(message.expiresAt) <= Math.floor(Date.now() / 1000)) throw new SessionDelegationError(`The session expired at ${message.expiresAt}: start a new one`);
  // Signed for this deployment and chain by the wallet (a smart account's `0x` is checked by the nodes).
  const checked = await checkDelegation(ctx.domain, parsed.delegation, {
    requestSigner: key.address,
    action: message.actions[0]!,
    leaseId: message.leaseIds[0],
    nowSeconds: Math.floor(Date.now() / 1000),
    deferUnsigned: true,
  });
  if (!checked.signed && parsed.delegation.signature !== "0x") throw unsignedDelegation(message.renter, parsed.delegation.signature);
  const session = sessionOf(ctx, parsed.privateKey as Hex, parsed.delegation);
  ctx.session = { account: key, session };
  return session;
}

/**
 * Ends the session here: later requests are signed by the wallet again. The delegation stays valid
 * until it expires (revokeSession ends it everywhere).
 *
 * @example
 * client.endSession();
 */
export function endSession(ctx: SuanliContext): void {
  ctx.session = undefined;
}

/**
 * Parameters of revokeSession.
 *
 * @example
 * import type { RevokeSessionParameters } from "suanli/sdk";
 * const parameters: RevokeSessionParameters = { all: true };
 */
export type RevokeSessionParameters = {
  /** The delegation hash of the session to revoke (Session.hash); default the current session. */
  hash?: Hex;
  /** Revoke every session the wallet has issued so far. */
  all?: boolean;
};

/**
 * The transaction that revoked.
 *
 * @example
 * import type { RevokeSessionReturnType } from "suanli/sdk";
 * const { transaction, gasUsed }: RevokeSessionReturnType = await client.revokeSession();
 */
export type RevokeSessionReturnType = {
  transaction: Hex;
  gasUsed: bigint;
};

/**
 * Revokes on-chain, with one transaction from the wallet: the current session (default), the
 * session of `hash`, or with `all` every session the wallet has issued so far. Nodes refuse the
 * revoked delegations within 10 seconds of the block. The current session ends here at once.
 *
 * @example
 * const { transaction } = await client.revokeSession(); // the current session
 * await client.revokeSession({ all: true }); // every session issued so far
 */
export async function revokeSession(ctx: SuanliContext, parameters: RevokeSessionParameters = {}): Promise<RevokeSessionReturnType> {
  const { walletClient } = requireWallet(ctx, "revoking a session");
  const sessions = ctx.deployment.contracts.sessions;
  if (!sessions) throw noSessionKeys();
  const which = parameters.all ? "all" : (parameters.hash ?? ctx.session?.session.hash);
  if (!which) throw new SessionDelegationError("No session to revoke: pass `hash`, or `all: true`");
  const sent = await revokeSessions({ publicClient: ctx.publicClient, walletClient, userOps: ctx.userOps }, sessions, which);
  if (which === "all" || which === ctx.session?.session.hash) ctx.session = undefined;
  return { transaction: sent.transaction, gasUsed: sent.gasUsed };
}

function noSessionKeys(): SessionDelegationError {
  return new SessionDelegationError("This deployment has no SessionKeys contract, so it takes no session keys: requests are signed by the wallet", {
    metaMessages: ["Deploy a current Suanli (its manifest names contracts.sessions)."],
  });
}

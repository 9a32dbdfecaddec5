import { getAddress, type Account, type Address, type Chain, type Hex, type LocalAccount, type PublicClient, type Transport, type WalletClient } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { sessionKeysAbi } from "../../common/abi.js";
import type { Deployment } from "../../common/deployment.js";
import type { suanliDomain } from "../../common/eip712.js";
import { signLeaseRequest, type RenterAction, type RenterAuth } from "../../common/protocols/lease.js";
import {
  delegationCovers,
  delegationHash,
  SESSION_DEFAULT_SECONDS,
  SessionDelegationError,
  signSessionDelegation,
  type SessionAction,
  type SignedDelegation,
} from "../../common/sessions.js";
import { NoWalletError } from "../errors.js";
import type { Session, TaskAttempt } from "../types.js";
import type { OfferFeed } from "./feed.js";
import type { ProviderLink } from "./link.js";
import type { CheckpointCopies } from "./checkpoint-copies.js";
import type { TaskStore } from "./store.js";
import type { UserOpSender } from "./user-ops.js";

/** Everything an action needs; built once by createClient. */
export type SuanliContext = {
  chainId: number;
  deployment: Deployment;
  domain: ReturnType<typeof suanliDomain>;
  market: Address;
  registry: Address;
  token: Address;
  publicClient: PublicClient<Transport, Chain>;
  walletClient: WalletClient<Transport, Chain, Account> | undefined;
  account: Account | undefined;
  feed: OfferFeed;
  link: ProviderLink;
  tasks: TaskStore;
  /** Progress lines for people (CLI); silent by default. */
  progress: (line: string) => void;
  /** Copies each new verified checkpoint to the renter's own node (client option `pinCheckpointsOn`); absent without it. */
  checkpointCopies?: CheckpointCopies;
  /** The current session (startSession): its key signs the requests it covers instead of the wallet. */
  session?: { account: LocalAccount; session: Session };
  /** A smart-account client (createClient's `smartAccount`): its sends are user operations, its requests signed by session keys. */
  userOps?: UserOpSender;
  /** The smart account's session being approved on-chain, so that concurrent requests wait for the one operation. */
  approving?: Promise<Session>;
};

/** A session is not used for a request within this many seconds of its expiry: the wallet signs instead. */
const SESSION_EXPIRY_MARGIN_SECONDS = 30;

/** The session key to sign `action` (on `leaseId`) with, when the current session covers it and is not about to expire. */
export function sessionFor(ctx: SuanliContext, action: SessionAction, leaseId: bigint | undefined): SuanliContext["session"] {
  const current = ctx.session;
  if (!current || current.session.expiresAt - SESSION_EXPIRY_MARGIN_SECONDS <= Math.floor(Date.now() / 1000)) return undefined;
  // A session is the wallet's own: never sign for another account's requests with it.
  if (ctx.account && current.session.renter.toLowerCase() !== ctx.account.address.toLowerCase()) return undefined;
  return delegationCovers(current.session.delegation.message, action, leaseId) ? current : undefined;
}

/** What a smart-account client's own session allows: a session's defaults (sessions.ts DEFAULT_SESSION_ACTIONS), and whatever is asked for beyond them. */
const SMART_SESSION_ACTIONS: readonly SessionAction[] = ["reserve", "task", "status", "logs", "cancel", "output"];

/** A Session from its key and its (signed, or on-chain approved) delegation. */
export function sessionOf(ctx: Pick<SuanliContext, "domain">, privateKey: Hex, delegation: SignedDelegation): Session {
  const { message } = delegation;
  return {
    sessionKey: getAddress(message.sessionKey),
    renter: getAddress(message.renter),
    actions: [...message.actions] as SessionAction[],
    leaseIds: [...message.leaseIds],
    expiresAt: Number(message.expiresAt),
    hash: delegationHash(ctx.domain, message),
    privateKey,
    delegation,
  };
}

/**
 * A session of the smart account (SimpleAccount has no ERC-1271; the PasskeyAccount's is not used for sessions, docs/aa.md
 * "ERC-1271 on the PasskeyAccount"): a fresh key, its delegation
 * with no signature (`0x`), approved on-chain by the account in one user operation (SessionKeys.approve; the first also
 * deploys the account). Nodes and providers then accept the key's requests for the account (node/sessions/delegations.ts).
 */
export async function approveSmartSession(
  ctx: SuanliContext,
  parameters: { actions: readonly SessionAction[]; leaseIds?: readonly bigint[]; ttlSeconds?: number },
): Promise<Session> {
  const userOps = ctx.userOps!;
  const sessions = ctx.deployment.contracts.sessions;
  if (!sessions) {
    throw new SessionDelegationError("This deployment has no SessionKeys contract: a smart account, which signs no requests, cannot rent on it", {
      metaMessages: ["Deploy a current Suanli (its manifest names contracts.sessions), or rent with a wallet (`account`)."],
    });
  }
  const renter = userOps.account.address;
  const privateKey = generatePrivateKey();
  const key = privateKeyToAccount(privateKey);
  // Stamped after the account's last SessionKeys.revokeAll, as startSession does.
  const revokedBefore = Number(await ctx.publicClient.readContract({ address: sessions, abi: sessionKeysAbi, functionName: "revokedBefore", args: [renter] }));
  const delegation = await signSessionDelegation(async () => "0x", ctx.domain, {
    renter,
    sessionKey: key.address,
    actions: parameters.actions,
    leaseIds: parameters.leaseIds,
    ttlSeconds: parameters.ttlSeconds ?? SESSION_DEFAULT_SECONDS,
    nowSeconds: Math.max(Math.floor(Date.now() / 1000), revokedBefore + 1),
  });
  const session = sessionOf(ctx, privateKey, delegation);
  ctx.progress(`Approving session key ${key.address} for the smart account ${renter} (one user operation)...`);
  await userOps.send("approve the session", [{ to: sessions, abi: sessionKeysAbi, functionName: "approve", args: [session.hash] }]);
  ctx.session = { account: key, session };
  return session;
}

/**
 * The session to sign `action` with: the current one when it covers it; for a smart-account client without one, a new
 * session approved on-chain (one user operation, shared by concurrent callers); otherwise undefined (the wallet signs).
 */
export async function sessionToSign(ctx: SuanliContext, action: SessionAction, leaseId: bigint | undefined): Promise<SuanliContext["session"]> {
  const current = sessionFor(ctx, action, leaseId);
  if (current || !ctx.userOps) return current;
  if (!ctx.approving) {
    const actions = SMART_SESSION_ACTIONS.includes(action) ? SMART_SESSION_ACTIONS : [...SMART_SESSION_ACTIONS, action];
    ctx.approving = approveSmartSession(ctx, { actions }).finally(() => (ctx.approving = undefined));
  }
  await ctx.approving;
  return sessionFor(ctx, action, leaseId);
}

/** The wallet, or NoWalletError naming the action. */
export function requireWallet(ctx: SuanliContext, action: string): { walletClient: WalletClient<Transport, Chain, Account>; account: Account } {
  if (!ctx.walletClient || !ctx.account) throw new NoWalletError(action);
  return { walletClient: ctx.walletClient, account: ctx.account };
}

/** Signs the renter's authorization of one request about an attempt's lease. */
export async function authorize(ctx: SuanliContext, attempt: TaskAttempt, action: RenterAction, body: Record<string, unknown>): Promise<RenterAuth> {
  const parameters = { leaseId: attempt.leaseId, provider: attempt.provider, action, body };
  // Within a session its key signs, with the wallet's delegation attached: no wallet prompt.
  const session = await sessionToSign(ctx, action, attempt.leaseId);
  if (session) {
    const auth = await signLeaseRequest((p) => session.account.signTypedData(p), ctx.domain, parameters);
    return { ...auth, delegation: session.session.delegation };
  }
  const { walletClient, account } = requireWallet(ctx, `the ${action} request`);
  return signLeaseRequest((p) => walletClient.signTypedData({ account, ...p }), ctx.domain, parameters);
}

import type { Account, Address, Chain, LocalAccount, PublicClient, Transport, WalletClient } from "viem";
import type { Deployment } from "../../common/deployment.js";
import type { suanliDomain } from "../../common/eip712.js";
import { signLeaseRequest, type RenterAction, type RenterAuth } from "../../common/protocols/lease.js";
import { delegationCovers, type SessionAction } from "../../common/sessions.js";
import { NoWalletError } from "../errors.js";
import type { Session, TaskAttempt } from "../types.js";
import type { OfferFeed } from "./feed.js";
import type { ProviderLink } from "./link.js";
import type { CheckpointCopies } from "./checkpoint-copies.js";
import type { TaskStore } from "./store.js";

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

/** The wallet, or NoWalletError naming the action. */
export function requireWallet(ctx: SuanliContext, action: string): { walletClient: WalletClient<Transport, Chain, Account>; account: Account } {
  if (!ctx.walletClient || !ctx.account) throw new NoWalletError(action);
  return { walletClient: ctx.walletClient, account: ctx.account };
}

/** Signs the renter's authorization of one request about an attempt's lease. */
export async function authorize(ctx: SuanliContext, attempt: TaskAttempt, action: RenterAction, body: Record<string, unknown>): Promise<RenterAuth> {
  const parameters = { leaseId: attempt.leaseId, provider: attempt.provider, action, body };
  // Within a session its key signs, with the wallet's delegation attached: no wallet prompt.
  const session = sessionFor(ctx, action, attempt.leaseId);
  if (session) {
    const auth = await signLeaseRequest((p) => session.account.signTypedData(p), ctx.domain, parameters);
    return { ...auth, delegation: session.session.delegation };
  }
  const { walletClient, account } = requireWallet(ctx, `the ${action} request`);
  return signLeaseRequest((p) => walletClient.signTypedData({ account, ...p }), ctx.domain, parameters);
}

import type { Account, Address, Chain, PublicClient, Transport, WalletClient } from "viem";
import type { Deployment } from "../../common/deployment.js";
import type { suanliDomain } from "../../common/eip712.js";
import { signLeaseRequest, type RenterAction, type RenterAuth } from "../../common/protocols/lease.js";
import { NoWalletError } from "../errors.js";
import type { TaskAttempt } from "../types.js";
import type { OfferFeed } from "./feed.js";
import type { ProviderLink } from "./link.js";
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
};

/** The wallet, or NoWalletError naming the action. */
export function requireWallet(ctx: SuanliContext, action: string): { walletClient: WalletClient<Transport, Chain, Account>; account: Account } {
  if (!ctx.walletClient || !ctx.account) throw new NoWalletError(action);
  return { walletClient: ctx.walletClient, account: ctx.account };
}

/** Signs the renter's authorization of one request about an attempt's lease. */
export async function authorize(ctx: SuanliContext, attempt: TaskAttempt, action: RenterAction, body: Record<string, unknown>): Promise<RenterAuth> {
  const { walletClient, account } = requireWallet(ctx, `the ${action} request`);
  return signLeaseRequest((parameters) => walletClient.signTypedData({ account, ...parameters }), ctx.domain, {
    leaseId: attempt.leaseId,
    provider: attempt.provider,
    action,
    body,
  });
}

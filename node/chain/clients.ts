import { createPublicClient, createWalletClient, defineChain, http, type Account, type Chain, type PublicClient, type Transport, type WalletClient } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { SuanliError } from "../../common/errors.js";

export class ChainConnectionError extends SuanliError {
  override name = "ChainConnectionError";
}

/** A viem chain description for any JSON-RPC endpoint. */
export function chainFor(chainId: number, rpcUrl: string): Chain {
  return defineChain({
    id: chainId,
    name: chainId === 31337 ? "Suanli devnet" : `chain ${chainId}`,
    nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
    rpcUrls: { default: { http: [rpcUrl] } },
  });
}

export type ChainClients = {
  chain: Chain;
  publicClient: PublicClient<Transport, Chain>;
  walletClient?: WalletClient<Transport, Chain, Account>;
  account?: Account;
};

/**
 * Connects to a JSON-RPC endpoint: asks its chain id (unless given) and builds viem clients.
 * With an account or private key, a wallet client too.
 */
export async function connectChain(options: {
  rpcUrl: string;
  chainId?: number | undefined;
  account?: Account | `0x${string}` | undefined;
  pollingIntervalMs?: number;
}): Promise<ChainClients> {
  let chainId = options.chainId;
  if (chainId === undefined) {
    const probe = createPublicClient({ transport: http(options.rpcUrl, { retryCount: 0, timeout: 5_000 }) });
    try {
      chainId = await probe.getChainId();
    } catch (error) {
      throw new ChainConnectionError(`Cannot reach the chain at ${options.rpcUrl}`, {
        cause: error,
        metaMessages: ["Start a devnet with `npm run chain`, or set chain.rpcUrl to a reachable JSON-RPC endpoint."],
      });
    }
  }
  const chain = chainFor(chainId, options.rpcUrl);
  const transport = http(options.rpcUrl, { retryCount: 2, timeout: 30_000 });
  const pollingInterval = options.pollingIntervalMs ?? 500;
  const publicClient = createPublicClient({ chain, transport, pollingInterval }) as PublicClient<Transport, Chain>;
  if (!options.account) return { chain, publicClient };
  const account = typeof options.account === "string" ? privateKeyToAccount(options.account) : options.account;
  const walletClient = createWalletClient({ chain, transport, account, pollingInterval });
  return { chain, publicClient, walletClient, account };
}

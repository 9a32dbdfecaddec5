import type { Command } from "commander";
import type { Account } from "viem";
import type { Deployment } from "../../common/deployment.js";
import { connectChain, type ChainClients } from "../chain/clients.js";
import { DEFAULT_DEPLOYMENTS_DIR, readDeployment } from "../chain/manifest.js";
import { resolveAccount, type WalletFlags } from "./account.js";
import { checkChainFlags, FlagProblems } from "./preflight.js";

/** Flags shared by the commands that talk to a chain. */
export type ChainFlags = WalletFlags & { rpcUrl?: string; deployments?: string; json?: boolean };

/** Adds --rpc-url, --deployments and the wallet flags to a command. */
export function withChainFlags(command: Command, { wallet = true }: { wallet?: boolean } = {}): Command {
  command
    .option("--rpc-url <url>", "JSON-RPC endpoint (env SUANLI_CHAIN__RPC_URL)", process.env.SUANLI_CHAIN__RPC_URL ?? "http://127.0.0.1:8545")
    .option("--deployments <dir>", "folder of <chainId>.json deployment manifests", process.env.SUANLI_CHAIN__DEPLOYMENTS_DIR ?? DEFAULT_DEPLOYMENTS_DIR)
    .option("--json", "print data as one JSON object");
  if (wallet) {
    command
      .option("--key <hex>", "private key of your wallet (prefer SUANLI_KEY or --key-file)")
      .option("--key-file <path>", "file holding the private key")
      .option("--devnet-account <n>", "use funded devnet account N (devnet only)");
  }
  return command;
}

export type CliContext = ChainClients & { deployment: Deployment; account?: Account };

/** Connects to the chain, reads the deployment manifest and, when asked, resolves the wallet. */
export async function cliContext(flags: ChainFlags, { needWallet }: { needWallet: boolean }, problems = new FlagProblems()): Promise<CliContext> {
  // Every flag is checked (and every problem reported at once) before the chain is reached.
  checkChainFlags(flags, problems);
  problems.throwIfAny();
  const probe = await connectChain({ rpcUrl: flags.rpcUrl ?? "http://127.0.0.1:8545" });
  const chainId = probe.chain.id;
  const deployment = await readDeployment(flags.deployments ?? DEFAULT_DEPLOYMENTS_DIR, chainId);
  if (!needWallet) return { ...probe, deployment };
  const account = await resolveAccount(flags, chainId);
  const clients = await connectChain({ rpcUrl: flags.rpcUrl ?? "http://127.0.0.1:8545", chainId, account });
  return { ...clients, deployment, account };
}

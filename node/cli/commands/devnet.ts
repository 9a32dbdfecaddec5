import type { Command } from "commander";
import { DEVNET_MNEMONIC, devnetAccount } from "../../../common/devnet.js";
import { connectChain } from "../../chain/clients.js";
import { deployContracts } from "../../chain/deploy.js";
import { startEmbeddedChain } from "../../chain/embedded.js";
import { DEFAULT_DEPLOYMENTS_DIR, writeDeployment } from "../../chain/manifest.js";
import { CliError, emit, ExitCode, progress } from "../output.js";

export function registerDevnet(program: Command): void {
  program
    .command("devnet")
    .description("start a local chain on 127.0.0.1 with the Suanli contracts deployed, and keep it running")
    .option("--port <port>", "JSON-RPC port", "8545")
    .option("--deployments <dir>", "where to write the deployment manifest", DEFAULT_DEPLOYMENTS_DIR)
    .option("--json", "print the devnet description as JSON")
    .action(async (options: { port: string; deployments: string; json?: boolean }) => {
      const port = Number(options.port);
      if (!Number.isInteger(port) || port < 0 || port > 65535) {
        throw new CliError(`--port must be an integer from 0 to 65535, got "${options.port}"`, ExitCode.usage);
      }
      const json = Boolean(options.json);
      progress(json, "Starting the embedded chain...");
      const chain = await startEmbeddedChain({ port });
      const clients = await connectChain({ rpcUrl: chain.rpcUrl, account: devnetAccount(0) });
      const deployment = await deployContracts({ publicClient: clients.publicClient, walletClient: clients.walletClient! });
      const manifest = await writeDeployment(options.deployments, deployment);
      const accounts = Array.from({ length: 10 }, (_, i) => devnetAccount(i).address);
      emit(json, { rpcUrl: chain.rpcUrl, chainId: deployment.chainId, manifest, contracts: deployment.contracts, accounts }, () =>
        [
          `Devnet running at ${chain.rpcUrl} (chain ${deployment.chainId})`,
          `Contracts (manifest ${manifest}):`,
          ...Object.entries(deployment.contracts).map(([role, address]) => `  ${role.padEnd(9)} ${address}`),
          `Funded accounts (mnemonic "${DEVNET_MNEMONIC}"):`,
          ...accounts.map((address, i) => `  #${i} ${address}`),
          "Press Ctrl-C to stop.",
        ].join("\n"),
      );
      await new Promise<void>((resolve) => {
        process.once("SIGINT", resolve);
        process.once("SIGTERM", resolve);
      });
      await chain.close();
    });
}

import type { Command } from "commander";
import { DEVNET_MNEMONIC, devnetAccount } from "../../../common/devnet.js";
import { connectChain } from "../../chain/clients.js";
import { deployContracts } from "../../chain/deploy.js";
import { startEmbeddedChain } from "../../chain/embedded.js";
import { DEFAULT_DEPLOYMENTS_DIR, writeDeployment } from "../../chain/manifest.js";
import { seedDemoMarket, startDemoActivity } from "../../api/demo.js";
import { InMemoryMarketSource } from "../../api/memory-source.js";
import { createApiServer, type ApiServer } from "../../api/server.js";
import { createLogger } from "../../log/logger.js";
import { CliError, emit, ExitCode, progress } from "../output.js";

export function registerDevnet(program: Command): void {
  program
    .command("devnet")
    .description("start a local chain on 127.0.0.1 with the Suanli contracts deployed, and keep it running")
    .option("--port <port>", "JSON-RPC port", "8545")
    .option("--deployments <dir>", "where to write the deployment manifest", DEFAULT_DEPLOYMENTS_DIR)
    .option("--api-port <port>", "also serve the HTTP API and explorer on 127.0.0.1:<port>")
    .option("--demo-offers", "with --api-port: fill the API with signed demo offers from devnet wallets, updated every few seconds")
    .option("--attestors <accounts>", "devnet accounts granted ATTESTOR_ROLE, comma-separated (\"\" for none)", "7,8,9")
    .option("--json", "print the devnet description as JSON")
    .action(async (options: { port: string; deployments: string; apiPort?: string; demoOffers?: boolean; attestors: string; json?: boolean }) => {
      const port = Number(options.port);
      if (!Number.isInteger(port) || port < 0 || port > 65535) {
        throw new CliError(`--port must be an integer from 0 to 65535, got "${options.port}"`, ExitCode.usage);
      }
      const apiPort = options.apiPort === undefined ? undefined : Number(options.apiPort);
      if (apiPort !== undefined && (!Number.isInteger(apiPort) || apiPort < 0 || apiPort > 65535)) {
        throw new CliError(`--api-port must be an integer from 0 to 65535, got "${options.apiPort}"`, ExitCode.usage);
      }
      if (options.demoOffers && apiPort === undefined) {
        throw new CliError("--demo-offers needs --api-port", ExitCode.usage);
      }
      const attestorIndexes = options.attestors.trim() === "" ? [] : options.attestors.split(",").map((part) => Number(part.trim()));
      if (attestorIndexes.some((index) => !Number.isInteger(index) || index < 0 || index > 999)) {
        throw new CliError(`--attestors must list devnet account numbers such as 7,8,9, got "${options.attestors}"`, ExitCode.usage);
      }
      const json = Boolean(options.json);
      progress(json, "Starting the embedded chain...");
      const chain = await startEmbeddedChain({ port });
      const clients = await connectChain({ rpcUrl: chain.rpcUrl, account: devnetAccount(0) });
      const attestors = attestorIndexes.map((index) => devnetAccount(index).address);
      const deployment = await deployContracts({ publicClient: clients.publicClient, walletClient: clients.walletClient!, attestors });
      const manifest = await writeDeployment(options.deployments, deployment);
      const accounts = Array.from({ length: 10 }, (_, i) => devnetAccount(i).address);

      // The HTTP API over an in-memory market: the node's offer book replaces it once it runs here.
      let api: ApiServer | undefined;
      let stopDemo: (() => void) | undefined;
      let apiUrl: string | undefined;
      if (apiPort !== undefined) {
        const domain = { chainId: deployment.chainId, verifyingContract: deployment.contracts.market ?? deployment.contracts.token };
        const source = new InMemoryMarketSource({ publicClient: clients.publicClient, domain });
        if (options.demoOffers) {
          progress(json, "Seeding demo offers...");
          await seedDemoMarket(source, { domain, nowSeconds: Math.floor(Date.now() / 1000) });
          stopDemo = startDemoActivity(source, { domain, intervalMs: 5000, nowSeconds: () => Math.floor(Date.now() / 1000) });
        }
        api = await createApiServer({
          source,
          deployment,
          options: { enabled: true, host: "127.0.0.1", port: apiPort },
          logger: createLogger({ level: "warn" }),
        });
        apiUrl = await api.listen();
      }

      emit(json, { rpcUrl: chain.rpcUrl, chainId: deployment.chainId, manifest, contracts: deployment.contracts, accounts, attestors, apiUrl: apiUrl ?? null }, () =>
        [
          `Devnet running at ${chain.rpcUrl} (chain ${deployment.chainId})`,
          ...(apiUrl ? [`HTTP API at ${apiUrl}/v1/ (OpenAPI: ${apiUrl}/openapi.json), explorer at ${apiUrl}/explorer/`] : []),
          `Contracts (manifest ${manifest}):`,
          ...Object.entries(deployment.contracts).map(([role, address]) => `  ${role.padEnd(9)} ${address}`),
          `Funded accounts (mnemonic "${DEVNET_MNEMONIC}"):`,
          ...accounts.map((address, i) => `  #${i} ${address}${attestorIndexes.includes(i) ? " (attestor)" : ""}`),
          "Press Ctrl-C to stop.",
        ].join("\n"),
      );
      await new Promise<void>((resolve) => {
        process.once("SIGINT", resolve);
        process.once("SIGTERM", resolve);
      });
      stopDemo?.();
      await api?.close();
      await chain.close();
    });
}

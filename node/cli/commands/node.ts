import type { Command } from "commander";
import { loadConfig } from "../../config/load.js";
import { nodeConfigSchema } from "../../config/schema.js";
import { runNode, waitForShutdown } from "../../run.js";
import { parseConfigFlags } from "../config-flags.js";
import { emit, progress } from "../output.js";

export function registerNode(program: Command): void {
  const node = program.command("node").description("run a Suanli node: offer book, chain follower, p2p, and the HTTP API when api.enabled");

  node
    .command("start")
    .description("start a node that keeps the offer book and serves the HTTP API (api.enabled); Ctrl-C stops it")
    .option("--config <file>", "JSON config file (docs/configuration.md); SUANLI_<KEY>__<SUBKEY> variables and --<key> <value> flags override it")
    .option("--json", "print the node's description as one JSON line once it runs")
    .allowUnknownOption(true)
    .allowExcessArguments(true)
    .action(async (options: { config?: string; json?: boolean }, command: Command) => {
      const json = Boolean(options.json);
      // A ConfigError names the key and where its value came from; main.ts exits with code 2 on it.
      const config = await loadConfig(nodeConfigSchema, { file: options.config, env: process.env, flags: parseConfigFlags(command.args) });
      progress(json, `Starting the node (data in ${config.dataDir})...`);
      const node = await runNode(config);
      const { daemon, api, gateway } = node;
      const addrs = daemon.p2p.host.getMultiaddrs().map(String);
      const shutdown = waitForShutdown(); // before the ready line: see RunningNode.stopOnSignal
      emit(
        json,
        {
          peerId: daemon.p2p.host.peerId.toString(),
          addrs,
          chainId: daemon.deployment.chainId,
          market: daemon.market,
          apiUrl: api?.url ?? null,
          gatewayUrl: gateway?.publicUrl ?? null,
          gatewayAddress: gateway?.address ?? null,
          sponsorUrl: node.sponsor?.url ?? null,
          sponsorAddress: node.sponsor?.address ?? null,
          metricsUrl: node.metrics ? `${node.metrics.url}/metrics` : null,
          wallet: daemon.account?.address ?? null,
        },
        () =>
          [
            `Node ${daemon.p2p.host.peerId} on chain ${daemon.deployment.chainId}`,
            ...addrs.map((addr) => `  listening on ${addr}`),
            api ? `HTTP API at ${api.url}/v1/ (explorer at ${api.url}/explorer/)` : "HTTP API off (set api.enabled to serve it)",
            ...(gateway ? [`Gateway at ${gateway.publicUrl} (listening on ${gateway.url}; its address for delegations: ${gateway.address})`] : []),
            ...(node.sponsor ? [`Sponsor (ERC-7677 paymaster service) at ${node.sponsor.url}; the paymaster's signer must be ${node.sponsor.address}`] : []),
            ...(node.metrics ? [`Metrics at ${node.metrics.url}/metrics`] : []),
            "Press Ctrl-C to stop.",
          ].join("\n"),
      );
      await node.stopOnSignal((signal) => progress(json, `Stopping (${signal})...`), shutdown);
    });
}

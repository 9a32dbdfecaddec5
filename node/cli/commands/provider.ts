import path from "node:path";
import type { Command } from "commander";
import { formatUnits } from "viem";
import { readProvider } from "../../../common/chain/market.js";
import { PER_SECOND_ROUNDING_NOTE, showsPerSecondRounding } from "../../../common/matching/money.js";
import { loadConfig } from "../../config/load.js";
import { nodeConfigSchema } from "../../config/schema.js";
import { runNode, waitForShutdown } from "../../run.js";
import { parseConfigFlags } from "../config-flags.js";
import { CliError, emit, ExitCode } from "../output.js";
import { registerProviderEarnings } from "./provider-earnings.js";

export function registerProvider(program: Command): void {
  const provider = program.command("provider").description("sell this machine's GPU time: register, offer, run renters' tasks, get paid");
  provider
    .command("start")
    .description("start a provider node from a config file and keep it running until Ctrl-C or SIGTERM")
    .requiredOption("--config <file>", "the node's JSON config (keys: docs/configuration.md; provider section: docs/provider.md)")
    .option("--json", "print one JSON line when the node is ready and one when it stopped")
    .allowUnknownOption()
    .allowExcessArguments()
    .addHelpText("after", "\nAny config key can also be given as a flag after the options: --chain.rpcUrl http://127.0.0.1:8545")
    .action(async (options: { config: string; json?: boolean }, command: Command) => {
      const json = Boolean(options.json);
      const config = await loadConfig(nodeConfigSchema, { file: options.config, env: process.env, flags: parseConfigFlags(command.args) });
      if (!config.chain.privateKey) {
        throw new CliError("A provider needs a wallet: chain.privateKey is not set", ExitCode.usage, [
          "Set chain.privateKey in the config file, or SUANLI_CHAIN__PRIVATE_KEY in the environment.",
        ]);
      }
      const node = await runNode(config, { provider: { hiddenPaths: [path.resolve(options.config)] } });
      const { daemon, metrics: metricsServer } = node;
      try {
        const summary = node.provider!.summary();
        const stake = await readProvider(daemon.chain.publicClient, daemon.registry, summary.address);
        const { symbol, decimals } = daemon.deployment.token;
        // Listening for the signal before saying ready: a supervisor's SIGTERM right after the ready line stops the node cleanly.
        const shutdown = waitForShutdown();
        emit(
          json,
          {
            event: "ready",
            ...summary,
            pid: process.pid,
            stake: { total: stake.stake, free: stake.free, locked: stake.locked },
            metricsUrl: metricsServer ? `${metricsServer.url}/metrics` : null,
          },
          () =>
            [
              `Provider node running (chain ${daemon.deployment.chainId}, ${summary.inventorySource} inventory, ${summary.runtime} runtime)`,
              `  tasks    ${summary.isolation.description}`,
              ...summary.isolation.warnings.map((warning) => `  WARNING  ${warning}`),
              `  wallet   ${summary.address}`,
              `  peer id  ${summary.peerId}`,
              ...summary.addrs.map((addr) => `  listen   ${addr}`),
              `  stake    ${formatUnits(BigInt(stake.stake), decimals)} ${symbol} (${formatUnits(BigInt(stake.free), decimals)} free)`,
              ...summary.machines.map(
                (m) =>
                  `  machine  #${m.machineId} ${m.model} x${m.units} (${m.vramMiB} MiB, ${m.region}) at ${m.pricePerUnitSecond} base units per unit-second = ${formatUnits(m.pricePerUnitSecond * 3600n, decimals)} ${symbol}/unit-hour${m.minBidPerUnitSecond > 0n ? `, interruptible from ${formatUnits(m.minBidPerUnitSecond * 3600n, decimals)}` : ""}${m.offered ? "" : " (not offered)"}`,
              ),
              ...(summary.machines.some((m) => showsPerSecondRounding(m.pricePerUnitSecond, decimals)) ? [`  note     ${PER_SECOND_ROUNDING_NOTE}`] : []),
              ...summary.problems.map((problem) => `  problem  ${problem}`),
              ...(metricsServer ? [`  metrics  ${metricsServer.url}/metrics`] : []),
              "Press Ctrl-C to stop.",
            ].join("\n"),
        );
        await node.stopOnSignal((signal) => daemon.logger.info("Stopping", { signal }), shutdown);
      } finally {
        await node.stop();
      }
      if (json) emit(true, { event: "stopped" }, () => "");
    });
  registerProviderEarnings(provider);
}

import type { Command } from "commander";
import { loadConfig } from "../../config/load.js";
import { nodeConfigSchema } from "../../config/schema.js";
import { startDaemon } from "../../daemon.js";
import { CliError, emit, ExitCode, progress } from "../output.js";

/** Resolves on the first SIGINT or SIGTERM. */
export function waitForShutdown(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    const done = (signal: NodeJS.Signals) => {
      process.off("SIGINT", done);
      process.off("SIGTERM", done);
      resolve(signal);
    };
    process.once("SIGINT", done);
    process.once("SIGTERM", done);
  });
}

/**
 * Config flags after the command's own options: `--api.port 9090`, `--chain.rpcUrl=http://…`,
 * `--api.enabled` (a bare flag is `true`). Anything that is not `--<dotted key>` is refused.
 */
export function parseConfigFlags(args: readonly string[]): Record<string, string> {
  const flags: Record<string, string> = {};
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    const match = /^--([A-Za-z][A-Za-z0-9]*(?:\.[A-Za-z][A-Za-z0-9]*)*)(?:=(.*))?$/s.exec(arg);
    if (!match) {
      throw new CliError(`Unexpected argument "${arg}"`, ExitCode.usage, ["Config keys are given as --<key> <value>, e.g. --api.port 9090 (docs/configuration.md)."]);
    }
    const [, key, inline] = match;
    if (inline !== undefined) flags[key] = inline;
    else if (i + 1 < args.length && !args[i + 1].startsWith("--")) flags[key] = args[++i];
    else flags[key] = "true";
  }
  return flags;
}

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
      const daemon = await startDaemon(config);
      const addrs = daemon.p2p.host.getMultiaddrs().map(String);
      emit(
        json,
        {
          peerId: daemon.p2p.host.peerId.toString(),
          addrs,
          chainId: daemon.deployment.chainId,
          market: daemon.market,
          apiUrl: daemon.api?.url ?? null,
          wallet: daemon.account?.address ?? null,
        },
        () =>
          [
            `Node ${daemon.p2p.host.peerId} on chain ${daemon.deployment.chainId}`,
            ...addrs.map((addr) => `  listening on ${addr}`),
            daemon.api ? `HTTP API at ${daemon.api.url}/v1/ (explorer at ${daemon.api.url}/explorer/)` : "HTTP API off (set api.enabled to serve it)",
            "Press Ctrl-C to stop.",
          ].join("\n"),
      );
      const signal = await waitForShutdown();
      progress(json, `Stopping (${signal})...`);
      await daemon.stop();
    });
}

import { multiaddr, type Multiaddr } from "@multiformats/multiaddr";
import type { Command } from "commander";
import { formatUnits } from "viem";
import { requestChallenge, DEFAULT_CHALLENGE_REQUEST_TIMEOUT_MS } from "../../../common/attest/request.js";
import type { ChallengeOutcomeMessage } from "../../../common/attest/wire.js";
import { createHost } from "../../../common/p2p/host.js";
import { loadConfig } from "../../config/load.js";
import { nodeConfigSchema } from "../../config/schema.js";
import { runNode, waitForShutdown } from "../../run.js";
import { parseConfigFlags } from "../config-flags.js";
import { cliContext, withChainFlags, type ChainFlags } from "../context.js";
import { CliError, emit, ExitCode, progress } from "../output.js";
import { registerAttestorStake } from "./attestor-stake.js";

export function registerAttestor(program: Command): void {
  const attestor = program.command("attestor").description("the attestor role: challenge providers' hardware, watch leases, co-sign faults");
  registerAttestorStake(attestor);

  attestor
    .command("start")
    .description("run an attestor node until Ctrl-C (its wallet must hold ATTESTOR_ROLE)")
    .option("--config <file>", "JSON config file (keys: docs/configuration.md); SUANLI_<KEY>__<SUBKEY> variables and --<key> <value> flags override it")
    .option("--json", "print the node's identity as one JSON line")
    .allowUnknownOption(true)
    .allowExcessArguments(true)
    .addHelpText("after", "\nAny config key can also be given as a flag after the options: --p2p.bootstrap /ip4/127.0.0.1/tcp/4107/p2p/12D3KooW...")
    .action(async (flags: { config?: string; json?: boolean }, command: Command) => {
      const json = Boolean(flags.json);
      const config = await loadConfig(nodeConfigSchema, { file: flags.config, env: process.env, flags: parseConfigFlags(command.args) });
      progress(json, "Starting the attestor node...");
      const node = await runNode(config, { attestor: true });
      const { daemon } = node;
      const addrs = daemon.p2p.host.getMultiaddrs().map(String);
      const shutdown = waitForShutdown(); // before the ready line: see RunningNode.stopOnSignal
      emit(
        json,
        {
          address: daemon.account!.address,
          peerId: daemon.p2p.host.peerId.toString(),
          addrs,
          chainId: daemon.deployment.chainId,
          apiUrl: node.api?.url ?? null,
          metricsUrl: node.metrics ? `${node.metrics.url}/metrics` : null,
        },
        () =>
          [
            `Attestor ${daemon.account!.address} running on chain ${daemon.deployment.chainId}`,
            `Peer id ${daemon.p2p.host.peerId.toString()}`,
            ...addrs.map((addr) => `  listening on ${addr}`),
            ...(node.api ? [`HTTP API at ${node.api.url}/v1/`] : []),
            ...(node.metrics ? [`Metrics at ${node.metrics.url}/metrics`] : []),
            "Press Ctrl-C to stop.",
          ].join("\n"),
      );
      await node.stopOnSignal((signal) => progress(json, `Stopping (${signal})...`), shutdown);
    });

  withChainFlags(
    attestor
      .command("challenge")
      .description("ask a running attestor to challenge a machine now, and print the outcome")
      .requiredOption("--machine <id>", "the machine's on-chain id")
      .requiredOption("--attestor <multiaddr>", "the attestor node, /ip4/…/tcp/…/p2p/<peer id> (printed by `npx suanli attestor start`)")
      .option("--timeout-ms <ms>", "how long to wait for the outcome", String(DEFAULT_CHALLENGE_REQUEST_TIMEOUT_MS))
      .option("--force", "challenge now even if the attestor has a recent result (a failure within its backoff, a pass not yet due); at most once a minute per machine"),
    { wallet: false },
  ).action(async (flags: ChainFlags & { machine: string; attestor: string; timeoutMs: string; force?: boolean }) => {
    const json = Boolean(flags.json);
    const machineId = Number(flags.machine);
    if (!Number.isInteger(machineId) || machineId < 1 || machineId > 2 ** 32 - 1) {
      throw new CliError(`--machine must be a machine id (an integer from 1), got "${flags.machine}"`, ExitCode.usage);
    }
    const timeoutMs = Number(flags.timeoutMs);
    if (!Number.isInteger(timeoutMs) || timeoutMs < 100 || timeoutMs > 3_600_000) {
      throw new CliError(`--timeout-ms must be an integer from 100 to 3600000, got "${flags.timeoutMs}"`, ExitCode.usage);
    }
    let target: Multiaddr;
    try {
      target = multiaddr(flags.attestor);
    } catch {
      throw new CliError(`--attestor must be a multiaddr such as /ip4/127.0.0.1/tcp/4001/p2p/12D3KooW…, got "${flags.attestor}"`, ExitCode.usage);
    }
    if (!target.getComponents().some((component) => component.name === "p2p")) {
      throw new CliError("--attestor must end in /p2p/<peer id>", ExitCode.usage);
    }
    const ctx = await cliContext(flags, { needWallet: false });
    progress(json, `Asking ${flags.attestor} to challenge machine ${machineId}...`);
    const host = await createHost({ listen: [], dht: { enabled: false }, gossip: { enabled: false }, connections: { min: 0 } });
    let outcome: ChallengeOutcomeMessage;
    try {
      outcome = await requestChallenge(host, target, { chainId: ctx.deployment.chainId, machineId, ...(flags.force ? { force: true } : {}) }, { timeoutMs });
    } finally {
      await host.stop();
    }
    if (outcome.outcome === "error" && outcome.reason === "backoff") {
      // A forced challenge asked again too soon: the request, not the machine, is what is wrong;
      // one line says so and when to try again (exit 2, as for any refused command line).
      if (json) emit(json, outcome, () => "");
      const when = outcome.retryAfter ? `; try again after ${new Date(outcome.retryAfter * 1000).toISOString()}` : "";
      throw new CliError(`Not challenged: ${outcome.detail}${when}`, ExitCode.usage);
    }
    emit(json, outcome, () => describeOutcome(outcome));
    if (outcome.outcome !== "pass") {
      const hints =
        outcome.outcome === "fail" && outcome.cached
          ? ["This is the attestor's recorded result; once the cause is fixed, challenge again now with --force."]
          : outcome.outcome === "error" && outcome.reason === "unreachable"
            ? [
                "The attestor must reach the provider's node: start it with --p2p.bootstrap <an address of the provider's network> (on the devnet, an attestor node printed by `npm run devnet`).",
              ]
            : [];
      throw new CliError(`Machine ${machineId} has no attestation from this attestor (${outcome.outcome}: ${outcome.reason})`, ExitCode.failure, hints);
    }
  });
}

function describeOutcome(outcome: ChallengeOutcomeMessage): string {
  if (outcome.outcome === "pass") {
    const { attestation } = outcome.attestation;
    return [
      `Machine ${outcome.machineId} passed${outcome.cached ? " (an earlier, still valid result)" : ""}`,
      `  measured ${formatUnits(outcome.measuredThroughput, 12)} int8 TOPS`,
      `  attestation valid until ${new Date(attestation.expiry * 1000).toISOString()}`,
    ].join("\n");
  }
  if (outcome.outcome === "fail") {
    return `Machine ${outcome.machineId} failed${outcome.cached ? " (recently; retried after the backoff)" : ""}: ${outcome.reason}: ${outcome.detail}`;
  }
  return `The attestor could not challenge machine ${outcome.machineId}: ${outcome.reason}: ${outcome.detail}`;
}

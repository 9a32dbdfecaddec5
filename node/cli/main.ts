import { createRequire } from "node:module";
import { Command, CommanderError } from "commander";
import { InvalidInputError, SuanliError } from "../../common/errors.js";
import { ConfigError } from "../config/load.js";
import { registerAttestor } from "./commands/attestor.js";
import { registerCheckpoints } from "./commands/checkpoints.js";
import { registerResume } from "./commands/resume.js";
import { registerTemplates } from "./commands/templates.js";
import { registerEndpoint } from "./commands/endpoint.js";
import { registerData } from "./commands/data.js";
import { registerDevnet } from "./commands/devnet.js";
import { registerGovernance } from "./commands/governance.js";
import { registerNode } from "./commands/node.js";
import { registerProvider } from "./commands/provider.js";
import { registerWallet } from "./commands/wallet.js";
import { registerRenter, renterExitCode } from "./commands/renter.js";
import { CliError, cliWording, ExitCode } from "./output.js";

const { version } = createRequire(import.meta.url)("../../package.json") as { version: string };
const program = new Command("suanli")
  .description("Suanli: a decentralized marketplace for renting GPU compute")
  .version(version, "-V, --version", "print the version")
  .showHelpAfterError()
  .exitOverride();

registerDevnet(program);
registerNode(program);
registerAttestor(program);
registerWallet(program);
registerRenter(program);
registerData(program);
registerCheckpoints(program);
registerResume(program);
registerTemplates(program);
registerEndpoint(program);
registerProvider(program);
registerGovernance(program);

function exitCodeFor(error: unknown): number {
  if (error instanceof CliError) return error.exitCode;
  const renter = renterExitCode(error);
  if (renter !== undefined) return renter;
  if (error instanceof ConfigError || error instanceof InvalidInputError) return ExitCode.usage;
  if (error instanceof SuanliError && error.name === "StakeMissingError") return ExitCode.insufficientFunds;
  return ExitCode.failure;
}

try {
  await program.parseAsync(process.argv);
  // The command is over (a one-shot command answered; a node, the devnet or a forward stopped
  // cleanly): exit now rather than when the last idle handle lets go. After "Node stopped" the
  // RPC client's keep-alive sockets held the process 4 s, and a busy attestation worker or a
  // task's pipe up to a minute (issue #40 item 3). stdout and stderr are written synchronously
  // to files and pipes, so nothing printed is lost.
  process.exit();
} catch (error) {
  if (error instanceof CommanderError) {
    // commander already printed its message (help, version, or a usage error)
    process.exit(error.exitCode === 0 ? 0 : ExitCode.usage);
  }
  // An unexpected error's stack names the TypeScript sources (the bundle's map, read only now: bin/suanli.mjs).
  if (!(error instanceof SuanliError)) process.setSourceMapsEnabled(true);
  const message = error instanceof SuanliError ? error.message : error instanceof Error ? (error.stack ?? error.message) : String(error);
  process.stderr.write(`Error: ${cliWording(message)}\n`);
  process.exit(exitCodeFor(error));
}

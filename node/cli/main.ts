import { createRequire } from "node:module";
import { Command, CommanderError } from "commander";
import { InvalidInputError, SuanliError } from "../../common/errors.js";
import { ConfigError } from "../config/load.js";
import { COMMAND_MODULES, modulesFor } from "./commands.js";
import { CliError, cliWording, ExitCode } from "./output.js";

const { version } = createRequire(import.meta.url)("../../package.json") as { version: string };
const program = new Command("suanli")
  .description("Suanli: a decentralized marketplace for renting GPU compute")
  .version(version, "-V, --version", "print the version")
  .showHelpAfterError()
  .exitOverride();

async function exitCodeFor(error: unknown): Promise<number> {
  if (error instanceof CliError) return error.exitCode;
  const { renterExitCode } = await import("./commands/renter-output.js");
  const renter = renterExitCode(error);
  if (renter !== undefined) return renter;
  if (error instanceof ConfigError || error instanceof InvalidInputError) return ExitCode.usage;
  if (error instanceof SuanliError && error.name === "StakeMissingError") return ExitCode.insufficientFunds;
  return ExitCode.failure;
}

try {
  // One after another in the table's order, which is the order help lists the commands in.
  for (const key of modulesFor(process.argv.slice(2))) await COMMAND_MODULES[key](program);
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
  process.exit(await exitCodeFor(error));
}

/**
 * Config keys given as flags after a start command's own options (`node start`, `provider
 * start`, `attestor start`): `--api.port 9090`, `--chain.rpcUrl=http://…`, `--api.enabled` (a
 * bare flag is `true`). The config schema then checks each value like any other source.
 */
import { CliError, ExitCode } from "./output.js";

/** Parses `--<dotted.key> [value]` pairs; anything else is a usage error (exit 2). */
export function parseConfigFlags(args: readonly string[]): Record<string, string> {
  const flags: Record<string, string> = {};
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    const match = /^--([A-Za-z][A-Za-z0-9]*(?:\.[A-Za-z][A-Za-z0-9]*)*)(?:=(.*))?$/s.exec(arg);
    if (!match) {
      throw new CliError(`Unexpected argument "${arg}"`, ExitCode.usage, ["Config keys are given as --<key> <value>, e.g. --api.port 9090 (docs/configuration.md)."]);
    }
    const [, key, inline] = match;
    if (inline !== undefined) flags[key!] = inline;
    else if (i + 1 < args.length && !args[i + 1]!.startsWith("--")) flags[key!] = args[++i]!;
    else flags[key!] = "true";
  }
  return flags;
}

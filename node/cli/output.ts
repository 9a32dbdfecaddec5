import { SuanliError } from "../../common/errors.js";
import { stringifyPlain } from "../../common/json.js";
import { EXPLAIN_REMEDIES } from "../../common/matching/explain.js";

/**
 * Exit codes scripts can rely on. Documented in README ("Exit codes").
 */
export const ExitCode = {
  ok: 0,
  /** Something failed that is not the caller's input (chain unreachable, transaction reverted). */
  failure: 1,
  /** The command line or a config file was wrong. */
  usage: 2,
  /** The request was valid but nothing matched (no offer fits; see the explanation). */
  noMatch: 3,
  /** Not enough funds for what was asked. */
  insufficientFunds: 4,
  /** The task ran and exited non-zero, or the lease ended by a fault. */
  taskFailed: 5,
} as const;
export type ExitCode = (typeof ExitCode)[keyof typeof ExitCode];

/** An error that ends a CLI command with a specific exit code. */
export class CliError extends SuanliError {
  override name = "CliError";
  constructor(
    shortMessage: string,
    readonly exitCode: ExitCode,
    metaMessages?: string[],
  ) {
    super(shortMessage, { metaMessages });
  }
}

/** Writes command output: JSON on one line with --json, else the human rendering. */
export function emit(json: boolean, data: unknown, human: () => string): void {
  process.stdout.write(json ? `${stringifyPlain(data)}\n` : `${human()}\n`);
}

/** Progress lines go to stderr so stdout stays parseable; silent with --json. */
export function progress(json: boolean, line: string): void {
  if (!json) process.stderr.write(`${line}\n`);
}

/**
 * The SDK's hints name its options (`attestedOnly: false`); a CLI user needs the flags. Every
 * error the CLI prints goes through this, so no hint tells a CLI user to edit code.
 */
const CLI_WORDING: [string, string][] = [
  [EXPLAIN_REMEDIES.acceptUnattested, "add --allow-unattested to accept unattested machines"],
  [EXPLAIN_REMEDIES.acceptWithoutCc, "leave out --gpu-identity-verified to accept GPUs attested without it"],
  [EXPLAIN_REMEDIES.acceptCluster, "add --colocation cluster to accept several machines on a declared fast interconnect"],
  [EXPLAIN_REMEDIES.raiseAttestFailures, "raise --max-attest-failures to accept them"],
  [
    "Pass `account` to createClient: privateKeyToAccount(key) in Node, or an injected wallet in a browser.",
    "Give a wallet: --key-file <file>, SUANLI_KEY, --key <hex>, or --devnet-account <n> on the devnet.",
  ],
];

/** Rewrites SDK hints in `text` into the CLI's flags. */
export function cliWording(text: string): string {
  let out = text;
  for (const [sdk, cli] of CLI_WORDING) out = out.replaceAll(sdk, cli);
  return out;
}

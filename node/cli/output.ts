import { SuanliError } from "../../common/errors.js";
import { stringifyPlain } from "../../common/json.js";

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

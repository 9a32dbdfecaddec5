/** What a SuanliError carries besides its short message; every field is optional. */
export type SuanliErrorParameters = {
  /** More about what went wrong (often the underlying error's message). */
  details?: string | undefined;
  /** Hints: what is accepted, what to do next. One line each. */
  metaMessages?: string[] | undefined;
  /** The error this one wraps. */
  cause?: unknown;
};

/**
 * The error base class of Suanli, modelled on viem's BaseError: a short message a user can act
 * on, optional details, hints (`metaMessages`) and a cause. Every subclass sets a stable `name`
 * that callers and tests match on; message text may change, names may not.
 *
 * @example
 * import { createClient, SuanliError } from "suanli/sdk";
 * try {
 *   await client.submitTask(parameters);
 * } catch (error) {
 *   if (!(error instanceof SuanliError)) throw error;
 *   // name: stable, switch on it; shortMessage: one line; metaMessages: what to do next.
 *   console.error(`${error.name}: ${error.shortMessage}`);
 *   for (const hint of error.metaMessages ?? []) console.error(`  ${hint}`);
 *   if (error.details) console.error(`  details: ${error.details}`);
 * }
 *
 * @example
 * // A subclass, as the SDK's own errors are written:
 * import { SuanliError } from "suanli/sdk";
 * class NoWalletError extends SuanliError {
 *   override name = "NoWalletError";
 *   constructor() {
 *     super("No wallet configured.", { metaMessages: ["Pass `account` to createClient."] });
 *   }
 * }
 */
export class SuanliError extends Error {
  override name = "SuanliError";
  /** The one-line summary, without details or hints. */
  readonly shortMessage: string;
  /** More about what went wrong: the given details, else the cause's message. */
  readonly details: string | undefined;
  /** Hints for the user: what is accepted, what to do next. */
  readonly metaMessages: string[] | undefined;

  constructor(shortMessage: string, parameters: SuanliErrorParameters = {}) {
    const details =
      parameters.details ?? (parameters.cause instanceof SuanliError ? parameters.cause.details : parameters.cause instanceof Error ? parameters.cause.message : undefined);
    const lines = [shortMessage];
    if (parameters.metaMessages?.length) lines.push("", ...parameters.metaMessages);
    if (details && details !== shortMessage) lines.push("", `Details: ${details}`);
    super(lines.join("\n"), parameters.cause === undefined ? undefined : { cause: parameters.cause });
    this.shortMessage = shortMessage;
    this.details = details;
    this.metaMessages = parameters.metaMessages;
  }

  /** Walks the cause chain and returns the first error for which `fn` is true. */
  walk(fn: (error: unknown) => boolean): unknown {
    if (fn(this)) return this;
    let current: unknown = this.cause;
    for (let depth = 0; current !== undefined && depth < 32; depth++) {
      if (fn(current)) return current;
      current = current instanceof Error ? current.cause : undefined;
    }
    return undefined;
  }
}

/**
 * Whose failure an error is, where that decides who pays: `renter` (its input was wrong: the
 * lease ends with a completion report) or `provider` (the node failed: it terminates the lease
 * and pays the penalty).
 */
export type Blame = "renter" | "provider";

/**
 * Input at a boundary (config, CLI flag, HTTP body, p2p message) did not match its schema. In the
 * SDK: bad `createClient` configuration or action parameters; nothing was sent or paid.
 *
 * @example
 * import { createClient, InvalidInputError } from "suanli/sdk";
 * try {
 *   await client.submitTask({ gpuType: "A100", gpuCount: 0, duration: 600, maxPricePerGpuHour: "2.50",
 *     image: "nvcr.io/nvidia/pytorch:24.03-py3", command: "python train.py" });
 * } catch (error) {
 *   if (error instanceof InvalidInputError) console.error(error.fields, error.shortMessage); // ["gpuCount"], "Invalid match request: gpuCount: must be at least 1"
 * }
 */
export class InvalidInputError extends SuanliError {
  override name = "InvalidInputError";
  /** The caller's input was wrong (a provider bills a renter's bad task input: node/provider/errors.ts). */
  readonly blame: Blame = "renter";
  /** The offending fields as dotted paths (`gpuCount`, `p2p.listen.0`). */
  readonly fields: string[];

  constructor(what: string, issues: { path: string; message: string }[], hints: string[] = []) {
    const fields = issues.map((issue) => issue.path);
    super(`Invalid ${what}: ${issues.map((issue) => `${issue.path || "(root)"}: ${issue.message}`).join("; ")}`, { metaMessages: hints.length ? hints : undefined });
    this.fields = fields;
  }
}

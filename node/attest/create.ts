/**
 * Builds attestation parts from the `attest` options, for the composition root.
 */
import type { Logger } from "../log/logger.js";
import type { AttestOptions } from "./options.js";
import { CpuRunner, ExternalRunner, type Runner } from "./runner/index.js";

/** The runner the options name: the CPU reference runner or an external program. */
export function createRunner(options: AttestOptions["runner"], logger?: Logger): Runner {
  if (options.kind === "external") {
    return new ExternalRunner({ command: options.command!, args: options.args, startTimeoutMs: options.startTimeoutMs, logger });
  }
  return new CpuRunner({ workers: options.workers });
}

/** `maxChallengeTeraOps` as the int8 op count ChallengeResponder takes. */
export function maxChallengeOps(options: AttestOptions): bigint {
  return BigInt(Math.round(options.maxChallengeTeraOps * 1e6)) * 1_000_000n;
}

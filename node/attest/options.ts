import { z } from "zod";
import { challengeProfileSchema } from "../../common/attest/params.js";

/**
 * Options of attestation (config key `attest`): the challenge profile an attestor issues, how
 * long its attestations last, and the runner a provider computes challenges with.
 * Documented in docs/configuration.md; the reasoning in docs/attestation.md.
 */
export const attestRunnerOptionsSchema = z
  .strictObject({
    /** `cpu`: the reference runner on worker threads; `external`: a program speaking the runner contract (a GPU runner). */
    kind: z.enum(["cpu", "external"]).default("cpu"),
    /** CPU runner worker threads; default: the machine's available parallelism. */
    workers: z.number().int().min(1).max(1024).optional(),
    /** External runner: the program to start. */
    command: z.string().min(1).optional(),
    /** External runner: its arguments. */
    args: z.array(z.string()).default([]),
    /** External runner: time to print its hello line. */
    startTimeoutMs: z.number().int().min(100).max(600_000).default(30_000),
  })
  .refine((runner) => runner.kind !== "external" || runner.command !== undefined, {
    message: "attest.runner.command is required when attest.runner.kind is external",
    path: ["command"],
  });

export const attestOptionsSchema = z.strictObject({
  challenge: challengeProfileSchema.prefault({}),
  /** Validity of an attestation this node signs, seconds. One day: machines are re-challenged daily. */
  attestationTtlSeconds: z.number().int().min(60).max(30 * 86_400).default(86_400),
  /** Largest challenge a provider computes, in tera-ops (10¹² int8 ops); larger ones are refused. */
  maxChallengeTeraOps: z.number().positive().max(1e9).default(1e6),
  runner: attestRunnerOptionsSchema.prefault({}),
});
export type AttestOptions = z.output<typeof attestOptionsSchema>;

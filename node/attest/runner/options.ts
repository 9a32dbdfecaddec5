import { z } from "zod";

/** The runner a provider computes challenges with (config key `attest.runner`; docs/configuration.md). */
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
export type AttestRunnerOptions = z.output<typeof attestRunnerOptionsSchema>;

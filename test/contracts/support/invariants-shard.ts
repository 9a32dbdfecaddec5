/**
 * One shard of the invariant suite in a process of its own, for LeaseMarket.property.test.ts:
 * the EVM and the model both run on the JavaScript thread, so a second process is what puts the
 * second core to work. Run as `node --import tsx test/contracts/support/invariants-shard.ts
 * '<options JSON>'` in the repository root; prints one line of JSON: the shard's counts, and the
 * failure as describeFailure words it.
 */
import { pathToFileURL } from "node:url";
import { network } from "hardhat";
import { z } from "zod";
import { describeFailure, runInvariants, type RunResult } from "./invariants.js";

const optionsSchema = z.strictObject({
  sequences: z.number().int().positive(),
  shard: z.strictObject({ index: z.number().int().nonnegative(), count: z.number().int().positive() }),
  minSteps: z.number().int().positive(),
  maxSteps: z.number().int().positive(),
  seed: z.number().int().nonnegative(),
  promises: z.boolean(),
  liveness: z.boolean(),
  known: z.array(z.string()),
});

export type ShardOptions = z.infer<typeof optionsSchema>;
export type ShardCounts = Omit<RunResult, "failure">;
export type ShardReport = ShardCounts & { failure?: string };

// Mocha loads every file under test/: only a direct run does anything.
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const options = optionsSchema.parse(JSON.parse(process.argv[2] ?? "null"));
  const result = await runInvariants(await network.create(), options);
  const { failure, ...counts } = result;
  const report: ShardReport = failure ? { ...counts, failure: describeFailure(result) } : counts;
  process.stdout.write(`${JSON.stringify(report)}\n`);
  process.exit(0);
}

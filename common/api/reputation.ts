/**
 * A provider's on-chain reputation as the HTTP API shows it (providers, offers, match answers), in a
 * module of its own so that offers.ts and chain.ts can both use it.
 */
import { z } from "zod";
import { amountSchema } from "./primitives.js";

export const reputationSchema = z.strictObject({
  leasesCompleted: z.number().int().nonnegative(),
  faults: z.number().int().nonnegative(),
  unitSecondsDelivered: amountSchema.describe("Units × seconds delivered over completed leases."),
  uptimePercent: z
    .number()
    .min(0)
    .max(100)
    .nullable()
    .describe(
      "Share of the provider's counted leases that ended without a fault, in percent to one decimal: leasesCompleted / (leasesCompleted + faults) × 100 (a quorum fault is the chain's record of a provider that stopped serving); null before any counted lease.",
    ),
});
export type Reputation = z.output<typeof reputationSchema>;

/**
 * The `uptimePercent` of a provider's on-chain counters: the share of its counted leases that
 * ended without a fault (one decimal), or null before any (issue #40 item 9). The chain records
 * no seconds of downtime, only faults, so this is the honest figure it supports.
 */
export function uptimePercentOf(counters: { leasesCompleted: number | bigint; faults: number | bigint }): number | null {
  const completed = Number(counters.leasesCompleted);
  const total = completed + Number(counters.faults);
  return total === 0 ? null : Math.round((completed / total) * 1000) / 10;
}

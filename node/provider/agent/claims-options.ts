/** The provider's `provider.claims.*` options (docs/configuration.md): when accrued pay is claimed and held pay released. */
import { z } from "zod";

export const claimsOptionsSchema = z.strictObject({
  /** How often every lease with money waiting is claimed (`claimMany`). */
  intervalMs: z.number().int().min(50).max(86_400_000).default(300_000),
  /** Active leases are claimed once this much (base units) has accrued; ended leases always. */
  minAmount: z
    .union([z.string().regex(/^\d{1,29}$/, "expected a decimal integer of base units"), z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER)])
    .transform((value) => BigInt(value))
    .default(1_000_000n),
  /**
   * How often the node checks whether a held lease's fault window is over (issue #34): its release claim goes out
   * within this long of the window's end instead of at the next claim pass (up to `intervalMs` later).
   */
  releaseWatchMs: z.number().int().min(100).max(600_000).default(30_000),
});
export type ClaimsOptions = z.output<typeof claimsOptionsSchema>;

/**
 * `provider.pricing`: how each model's price is set (docs/provider.md, "Pricing"). The configured
 * `provider.prices` stay the reference ("base") price of every policy; the policy moves the
 * published price around it, one bounded step per interval, never under the idle workload's
 * earnings plus the margin.
 */
import { z } from "zod";

const bps = (min: number, max: number) => z.number().int().min(min).max(max);

/** Where the idle workload says what one unit earns per hour (docs/provider.md, "Idle earnings floor"). */
export const idleEarningsSchema = z
  .strictObject({
    /** A command printing the earnings: a string through /bin/sh -c, or an argv. */
    command: z
      .union([
        z
          .string()
          .min(1)
          .max(16 * 1024),
        z
          .array(z.string().max(16 * 1024))
          .min(1)
          .max(256),
      ])
      .optional(),
    /** A file the idle workload (re)writes with the earnings. */
    file: z.string().regex(/^\//, "expected an absolute path").optional(),
    /** What is added on top of the earnings before a unit is sold: 1000 = 10 %. */
    marginBps: bps(0, 100_000).default(1_000),
    /** How often the command runs or the file is read. */
    refreshMs: z.number().int().min(50).max(86_400_000).default(60_000),
    timeoutMs: z.number().int().min(100).max(120_000).default(10_000),
  })
  .refine((source) => (source.command === undefined) !== (source.file === undefined), {
    message: "set exactly one of command or file",
  });
export type IdleEarningsOptions = z.output<typeof idleEarningsSchema>;

export const pricingOptionsSchema = z
  .strictObject({
    /**
     * `static`: the configured price; `utilization`: rises as this node's units fill, falls as
     * they idle; `market`: follows the network's price index of the model at an offset.
     */
    policy: z.enum(["static", "utilization", "market"]).default("static"),
    /** How often prices are re-evaluated; each evaluation moves a price by at most one step. */
    intervalMs: z.number().int().min(50).max(86_400_000).default(60_000),
    /** Largest move of one evaluation, in basis points of the current price (at least one base unit). */
    maxStepBps: bps(1, 10_000).default(1_000),
    utilization: z
      .strictObject({
        /** Price at 0 % use, in basis points of the configured price. */
        floorBps: bps(1, 1_000_000).default(8_000),
        /** Price at 100 % use, in basis points of the configured price. */
        ceilingBps: bps(1, 1_000_000).default(15_000),
        /** Use (basis points of this node's units of the model) at which the configured price applies. */
        targetBps: bps(1, 9_999).default(7_000),
      })
      .prefault({})
      .refine((curve) => curve.floorBps <= 10_000 && curve.ceilingBps >= 10_000, {
        message: "floorBps must be at most 10000 and ceilingBps at least 10000 (the configured price lies between them)",
      }),
    market: z
      .strictObject({
        /** Offset from the network index, in basis points (-500: 5 % under the index). */
        offsetBps: bps(-9_000, 100_000).default(0),
        /** Bounds around the configured price, so an empty or odd book cannot drag the price anywhere. */
        floorBps: bps(1, 1_000_000).default(5_000),
        ceilingBps: bps(1, 1_000_000).default(20_000),
        /** Other providers' live offers of the model needed before the index is followed. */
        minOffers: z.number().int().min(1).max(10_000).default(3),
      })
      .prefault({})
      .refine((market) => market.floorBps <= 10_000 && market.ceilingBps >= 10_000, {
        message: "floorBps must be at most 10000 and ceilingBps at least 10000 (the configured price lies between them)",
      }),
    idleEarnings: idleEarningsSchema.optional(),
  })
  .prefault({});
export type PricingOptions = z.output<typeof pricingOptionsSchema>;
export type PricingPolicyName = PricingOptions["policy"];

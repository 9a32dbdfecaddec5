/**
 * Offer queries: the filter and paging a dApp, the SDK and the matching engine use to read an
 * offer book. One schema, so the HTTP API, the SDK and the node agree on every parameter.
 */
import { z } from "zod";
import { canonicalGpuName, knownGpuNames } from "../gpu.js";
import { addressSchema } from "../schemas.js";
import { interconnectSchema } from "./message.js";

const count = z.coerce.number().int().min(0).max(65_535);

export const offerFilterSchema = z.strictObject({
  /** GPU model: canonical name or alias (`A100`, `NVIDIA A100-SXM4-80GB`); a MIG slice keeps its suffix. */
  model: z
    .string()
    .min(1)
    .max(64)
    .transform((value, ctx) => {
      const canonical = canonicalGpuName(value);
      if (!canonical) {
        ctx.addIssue({ code: "custom", message: `unknown GPU model (known: ${knownGpuNames().join(", ")})` });
        return z.NEVER;
      }
      return canonical;
    })
    .optional(),
  /** At least this many free units on the machine. */
  minFreeUnits: count.optional(),
  /** At least this much memory per unit, MiB. */
  minVramMiB: z.coerce
    .number()
    .int()
    .min(0)
    .max(2 ** 32 - 1)
    .optional(),
  /** On-demand price per unit-second at most this (token base units). */
  maxPricePerUnitSecond: z
    .union([z.bigint(), z.string().regex(/^\d{1,29}$/, "expected a decimal integer"), z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER)])
    .transform((value) => BigInt(value))
    .optional(),
  /** Region as the provider declared it (case-insensitive). */
  region: z.string().min(1).max(32).optional(),
  interconnect: interconnectSchema.optional(),
  /** true: only offers attested by a quorum of attestors now; false: only the others. */
  attested: z.union([z.boolean(), z.enum(["true", "false"]).transform((value) => value === "true")]).optional(),
  provider: addressSchema.optional(),
});
export type OfferFilter = z.output<typeof offerFilterSchema>;
export type OfferFilterInput = z.input<typeof offerFilterSchema>;

export const offerPageSchema = z.strictObject({
  /** Offers per page. */
  limit: z.coerce.number().int().min(1).max(500).default(50),
  /** `nextCursor` of the previous page. */
  cursor: z.string().min(1).max(512).optional(),
});
export type OfferPage = z.output<typeof offerPageSchema>;
export type OfferPageInput = z.input<typeof offerPageSchema>;

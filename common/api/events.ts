/**
 * The server-sent event stream `GET /v1/events`: one `event:` name per change, the data a JSON
 * object of the schema below. Each event carries an increasing `id`; a client that reconnects
 * with `Last-Event-ID` gets what it missed, or a `reset` event when that is no longer held (then
 * it should reload what it shows).
 */
import { z } from "zod";
import { leaseViewSchema } from "./chain.js";
import { offerViewSchema } from "./offers.js";
import { unixSecondsSchema } from "./primitives.js";

export const offerRemovedReasonSchema = z.enum(["expired", "revoked", "withdrawn", "evicted"]);
export type OfferRemovedReason = z.output<typeof offerRemovedReasonSchema>;

export const offerRemovedEventSchema = z.strictObject({
  key: z.string(),
  reason: offerRemovedReasonSchema,
  at: unixSecondsSchema,
});

export const resetEventSchema = z.strictObject({
  reason: z.string().describe("Why the stream cannot replay: the missed events are no longer held."),
});

/** Event name → schema of its data. */
export const marketEventSchemas = {
  /** An offer was added or replaced by a newer version (same key). */
  offer: offerViewSchema,
  /** An offer left the book. */
  "offer-removed": offerRemovedEventSchema,
  /** A lease was opened or changed state. */
  lease: leaseViewSchema,
  /** The client missed events that are no longer held: reload. */
  reset: resetEventSchema,
} as const;
export type MarketEventName = keyof typeof marketEventSchemas;
export const marketEventNames = Object.keys(marketEventSchemas) as MarketEventName[];

/** The `types` filter of /v1/events: a comma-separated subset of offer, offer-removed, lease. */
export const eventsQuerySchema = z.strictObject({
  types: z
    .string()
    .max(64)
    .transform((text, ctx) => {
      const names = text
        .split(",")
        .map((name) => name.trim())
        .filter(Boolean);
      const allowed = ["offer", "offer-removed", "lease"];
      const bad = names.filter((name) => !allowed.includes(name));
      if (bad.length || names.length === 0) {
        ctx.addIssue({ code: "custom", message: `expected a comma-separated list of ${allowed.join(", ")}` });
        return z.NEVER;
      }
      return names as ("offer" | "offer-removed" | "lease")[];
    })
    .optional(),
});

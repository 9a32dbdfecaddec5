import { z } from "zod";
import { InvalidInputError } from "../../common/errors.js";
import { resolveGpuName } from "../../common/matching/gpu-type.js";
import { formatUsd, usdSchema } from "../../common/matching/money.js";
import { parseInput } from "../../common/validation.js";
import type { SuanliContext } from "../internal/context.js";

const queryOffersSchema = z.strictObject({
  /** A model, alias, MIG slice or class ("any 80GB"). */
  gpuType: z.string().optional(),
  minFreeUnits: z.number().int("expected a whole number").min(0, "must be at least 0").optional(),
  maxPricePerGpuHour: usdSchema({ max: 10_000n * 1_000_000n, what: "a price per GPU-hour" }).optional(),
  region: z.string().optional(),
  attestedOnly: z.boolean().default(false),
  limit: z.number().int().min(1).max(1000).default(100),
});
export type QueryOffersParameters = z.input<typeof queryOffersSchema>;

/** One machine's live offer, as a renter reads it. */
export type OfferSummary = {
  key: string;
  provider: `0x${string}`;
  machineId: number;
  model: string;
  units: number;
  freeUnits: number;
  /** Units held by interruptible leases: an on-demand renter may preempt them. */
  interruptibleUnits: number;
  vramMiB: number;
  region: string;
  interconnect: string;
  pricePerUnitSecond: bigint;
  /** USD per GPU-hour, e.g. "2.52". */
  pricePerGpuHour: string;
  /** USD per GPU-hour of the lowest interruptible bid accepted, or null if interruptible is not sold. */
  minBidPerGpuHour: string | null;
  attested: boolean;
  expiry: number;
};

/**
 * The live offers this client has received and validated, cheapest first, filtered.
 *
 * @example
 * import { createClient } from "suanli/sdk";
 * const offers = await client.queryOffers({ gpuType: "A100", minFreeUnits: 2 });
 * for (const o of offers) console.log(o.model, o.freeUnits, o.pricePerGpuHour);
 */
export async function queryOffers(ctx: SuanliContext, parameters: QueryOffersParameters = {}): Promise<OfferSummary[]> {
  const query = parseInput(queryOffersSchema, parameters, "offer query");
  let models: Set<string> | undefined;
  if (query.gpuType !== undefined) {
    const resolved = resolveGpuName(query.gpuType);
    if ("error" in resolved) throw new InvalidInputError("offer query", [{ path: "gpuType", message: resolved.error }]);
    models = new Set(resolved.models);
  }
  await ctx.feed.ready();
  const now = Math.floor(Date.now() / 1000);
  const out: OfferSummary[] = [];
  for (const message of ctx.feed.messages()) {
    const entry = ctx.feed.engine.get(`${message.offer.provider.toLowerCase()}:${message.offer.machineId}`);
    const attested = entry?.attestationExpiry != null && entry.attestationExpiry > now;
    const base = message.machine.model.split("/")[0];
    if (models && !models.has(message.machine.model) && !models.has(base)) continue;
    if (query.minFreeUnits !== undefined && message.capacity.freeUnits < query.minFreeUnits) continue;
    if (query.maxPricePerGpuHour !== undefined && message.offer.pricePerUnitSecond * 3600n > query.maxPricePerGpuHour) continue;
    if (query.region !== undefined && message.machine.region.toLowerCase() !== query.region.toLowerCase()) continue;
    if (query.attestedOnly && !attested) continue;
    out.push({
      key: `${message.offer.provider.toLowerCase()}:${message.offer.machineId}`,
      provider: message.offer.provider,
      machineId: message.offer.machineId,
      model: message.machine.model,
      units: message.machine.units,
      freeUnits: message.capacity.freeUnits,
      interruptibleUnits: message.capacity.interruptibleUnits,
      vramMiB: message.machine.vramMiB,
      region: message.machine.region,
      interconnect: message.machine.interconnect,
      pricePerUnitSecond: message.offer.pricePerUnitSecond,
      pricePerGpuHour: formatUsd(message.offer.pricePerUnitSecond * 3600n),
      minBidPerGpuHour: message.offer.minBidPerUnitSecond > 0n ? formatUsd(message.offer.minBidPerUnitSecond * 3600n) : null,
      attested,
      expiry: message.offer.expiry,
    });
  }
  out.sort((a, b) => (a.pricePerUnitSecond < b.pricePerUnitSecond ? -1 : a.pricePerUnitSecond > b.pricePerUnitSecond ? 1 : a.key < b.key ? -1 : 1));
  return out.slice(0, query.limit);
}

import { z } from "zod";
import { uptimePercentOf } from "../../common/api/reputation.js";
import { InvalidInputError } from "../../common/errors.js";
import { attestFailuresAt } from "../../common/matching/entry.js";
import { resolveGpuName } from "../../common/matching/gpu-type.js";
import { formatUsd, usdSchema } from "../../common/matching/money.js";
import { parseInput } from "../../common/validation.js";
import { messageKey } from "../../common/offers/message.js";
import type { SuanliContext } from "../internal/context.js";

const queryOffersSchema = z.strictObject({
  /** A model, alias, MIG slice or class ("any 80GB"). Default: every model. */
  gpuType: z.string().optional(),
  /** Only machines with at least this many free GPUs, a whole number >= 0. Default: any. */
  minFreeUnits: z.number().int("expected a whole number").min(0, "must be at least 0").optional(),
  /** Only offers at or below this price, USD per GPU-hour ("2.50" or 2.5; at most 6 decimals, up to 10000). Default: any. */
  maxPricePerGpuHour: usdSchema({ max: 10_000n * 1_000_000n, what: "a price per GPU-hour" }).optional(),
  /** Only machines in this region (exact name, case-insensitive). Default: any region. */
  region: z.string().optional(),
  /** Only machines with a current attestation (default false: attested or not, see `attested`). */
  attestedOnly: z.boolean().default(false),
  /** Only machines whose GPUs the attestor quorum identified by NVIDIA-signed confidential-computing evidence (default false; see `gpuIdentityVerified`). */
  gpuIdentityVerified: z.boolean().default(false),
  /** Most offers returned, 1 to 1000 (default 100). */
  limit: z.number().int().min(1).max(1000).default(100),
});
/**
 * Filters for `queryOffers`; every field is optional and all given filters must hold. Bad
 * fields throw InvalidInputError naming them.
 *
 * @example
 * import { createClient, type QueryOffersParameters } from "suanli/sdk";
 * const filters: QueryOffersParameters = { gpuType: "any 80GB", minFreeUnits: 4, maxPricePerGpuHour: "3.00", region: "eu-west", attestedOnly: true, limit: 20 };
 * const offers = await client.queryOffers(filters);
 */
export type QueryOffersParameters = z.input<typeof queryOffersSchema>;

/**
 * One machine's live offer, as a renter reads it.
 *
 * @example
 * import { createClient, type OfferSummary } from "suanli/sdk";
 * const offers: OfferSummary[] = await client.queryOffers({ gpuType: "H100" });
 * for (const offer of offers) {
 *   console.log(`${offer.key} ${offer.freeUnits}/${offer.units}× ${offer.model} (${offer.vramMiB} MiB) in ${offer.region}: ` +
 *     `${offer.pricePerGpuHour} USD/GPU-h, interruptible from ${offer.minBidPerGpuHour ?? "n/a"}, attested ${offer.attested}`);
 * }
 */
export type OfferSummary = {
  /** `<provider address, lower case>:<machineId>`, plus `:<tier>` for a reserved-term tier's offer. */
  key: string;
  /** The provider's wallet address. */
  provider: `0x${string}`;
  /** The machine's id in the registry. */
  machineId: number;
  /** GPU model, e.g. "A100-80GB" (a MIG slice has a "/" suffix). */
  model: string;
  /** GPUs on the machine. */
  units: number;
  /** GPUs free now. */
  freeUnits: number;
  /** Units held by interruptible leases: an on-demand renter may preempt them. */
  interruptibleUnits: number;
  /** Memory per GPU, MiB. */
  vramMiB: number;
  region: string;
  /** The machine's declared GPU interconnect, e.g. "nvlink". */
  interconnect: string;
  /** On-demand price per GPU per second, in the settlement token's base units. */
  pricePerUnitSecond: bigint;
  /** USD per GPU-hour, e.g. "2.52". */
  pricePerGpuHour: string;
  /** USD per GPU-hour of the lowest interruptible bid accepted, or null if interruptible is not sold. */
  minBidPerGpuHour: string | null;
  /** Whether the machine has a current attestation from the attestor quorum. */
  attested: boolean;
  /** Whether the attestor quorum's current attestations verified the GPUs by their confidential-computing evidence. */
  gpuIdentityVerified: boolean;
  /**
   * The machine's failed challenges that count now (the last week's, from its attestations and the
   * attestors' signed failure notices): what `maxAttestFailures` bounds when matching (default 3).
   */
  attestFailures: number;
  /** When the signed offer expires, unix seconds. */
  expiry: number;
  /**
   * The provider's on-chain reputation as this client last read it: leases completed, faults,
   * unit-seconds delivered, and `uptimePercent`, the share of its counted leases that ended without
   * a fault (one decimal; null before any). Null until the client has read the provider's record.
   */
  reputation: { leasesCompleted: number; faults: number; unitSecondsDelivered: bigint; uptimePercent: number | null } | null;
  /** CPU cores, host memory and disk (MiB) each GPU comes with, enforced by the provider's runtime; null when it declares none. */
  resources: { cpuCoresPerUnit: number; memoryMiBPerUnit: number; diskMiBPerUnit: number } | null;
  /**
   * The provider's current sealing key for secrets (an uncompressed P-256 public key, when it
   * expires in unix seconds, and its wallet's EIP-191 signature over both, common/sealed.ts), as
   * published with its offers; absent from providers that do not publish one. Check it with
   * sealingKeyProblem before sealing to it: providers rotate their keys.
   */
  sealingKey?: { publicKey: string; expiresAt: number; signature: `0x${string}` };
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
    const gpuIdentityVerified = attested && entry?.ccExpiry != null && entry.ccExpiry > now;
    const base = message.machine.model.split("/")[0]!;
    if (models && !models.has(message.machine.model) && !models.has(base)) continue;
    if (query.minFreeUnits !== undefined && message.capacity.freeUnits < query.minFreeUnits) continue;
    if (query.maxPricePerGpuHour !== undefined && message.offer.pricePerUnitSecond * 3600n > query.maxPricePerGpuHour) continue;
    if (query.region !== undefined && message.machine.region.toLowerCase() !== query.region.toLowerCase()) continue;
    if (query.attestedOnly && !attested) continue;
    if (query.gpuIdentityVerified && !gpuIdentityVerified) continue;
    out.push({
      key: messageKey(message),
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
      gpuIdentityVerified,
      attestFailures: entry ? attestFailuresAt(entry, now) : 0,
      expiry: message.offer.expiry,
      reputation: entry ? { ...entry.reputation, uptimePercent: uptimePercentOf(entry.reputation) } : null,
      resources: message.resources ?? null,
      ...(message.sealingKey
        ? { sealingKey: { publicKey: message.sealingKey.publicKey, expiresAt: message.sealingKey.expiresAt, signature: message.sealingKey.signature as `0x${string}` } }
        : {}),
    });
  }
  out.sort((a, b) => (a.pricePerUnitSecond < b.pricePerUnitSecond ? -1 : a.pricePerUnitSecond > b.pricePerUnitSecond ? 1 : a.key < b.key ? -1 : 1));
  return out.slice(0, query.limit);
}

import { gib } from "../../../common/matching/explain-text.js";
import { PER_SECOND_ROUNDING_NOTE, showsPerSecondRounding } from "../../../common/matching/money.js";
import type { OfferSummary } from "../../../sdk/actions/queryOffers.js";

/** `8c 64G 200G`: CPU cores, memory and disk each GPU comes with; `-` when the offer declares none. */
function perGpu(resources: OfferSummary["resources"]): string {
  if (!resources) return "-";
  return `${resources.cpuCoresPerUnit}c ${gib(resources.memoryMiBPerUnit)}G ${gib(resources.diskMiBPerUnit)}G`;
}

/**
 * The offers table's track-record columns (issue #40 item 9): the provider's uptime (share of its
 * counted leases that ended without a fault; "new" before any) and the GPU-hours it delivered; "-"
 * when the client has not read its record yet.
 */
export function trackRecord(reputation: OfferSummary["reputation"]): string {
  if (!reputation) return `${"-".padStart(6)} ${"-".padStart(8)}`;
  const uptime = reputation.uptimePercent === null ? "new" : `${reputation.uptimePercent}%`;
  return `${uptime.padStart(6)} ${(Number(reputation.unitSecondsDelivered) / 3600).toFixed(1).padStart(8)}`;
}

/** `suanli offers` for people: one row per offer, and the rounding note when a price shows it. */
export function offersTable(offers: OfferSummary[]): string {
  return [
    `${"MODEL".padEnd(16)} ${"FREE".padStart(5)} ${"USD/GPU-h".padStart(10)} ${"REGION".padEnd(10)} ${"ATTESTED".padEnd(8)} ${"CC".padEnd(3)} ${"UPTIME".padStart(6)} ${"GPU-h".padStart(8)} ${"PER GPU".padEnd(16)} PROVIDER:MACHINE`,
    ...offers.map(
      (o) =>
        `${o.model.padEnd(16)} ${`${o.freeUnits}/${o.units}`.padStart(5)} ${o.pricePerGpuHour.padStart(10)} ${o.region.padEnd(10)} ${(o.attested ? "yes" : "no").padEnd(8)} ${(o.gpuIdentityVerified ? "yes" : "no").padEnd(3)} ${trackRecord(o.reputation)} ${perGpu(o.resources).padEnd(16)} ${o.key}`,
    ),
    ...(offers.some((o) => showsPerSecondRounding(o.pricePerUnitSecond)) ? [`Note: ${PER_SECOND_ROUNDING_NOTE}.`] : []),
  ].join("\n");
}

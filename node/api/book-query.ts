/**
 * The offer book as GET /v1/offers reads it: the filters and sort orders over book entries, and
 * the book's removal reasons in the API's vocabulary. Pure functions of the entries.
 */
import type { OfferRemovedReason } from "../../common/api/events.js";
import type { OfferFilter, OfferSort } from "../../common/api/offers.js";
import { isAttested as isAttestedState } from "../../common/offers/validate.js";
import type { BookEntry, RemovalReason } from "../offers/book.js";

/** The book's removal reasons in the API's vocabulary. */
export function removedReason(reason: RemovalReason): OfferRemovedReason {
  switch (reason) {
    case "expired":
      return "expired";
    case "nonce_revoked":
      return "revoked";
    case "machine_removed":
      return "withdrawn";
    default:
      return "evicted";
  }
}

export function compareBigint(a: bigint, b: bigint): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** The sort orders of GET /v1/offers over book entries; ties break on the key so pages are stable. */
export function bookComparator(sort: OfferSort): (a: BookEntry, b: BookEntry) => number {
  const descending = sort.startsWith("-");
  const field = descending ? sort.slice(1) : sort;
  const primary = (a: BookEntry, b: BookEntry): number => {
    switch (field) {
      case "price":
        return compareBigint(a.pricePerUnitSecond, b.pricePerUnitSecond);
      case "vram":
        return a.vramMiB - b.vramMiB;
      case "freeUnits":
        return a.freeUnits - b.freeUnits;
      default:
        return a.message.publishedAt - b.message.publishedAt;
    }
  };
  return (a, b) => {
    const order = primary(a, b);
    if (order !== 0) return descending ? -order : order;
    return a.key < b.key ? -1 : a.key > b.key ? 1 : 0;
  };
}

/** The filters of GET /v1/offers over a book entry (the same semantics as offer-view.ts). */
export function bookEntryMatches(entry: BookEntry, filter: OfferFilter, now: number): boolean {
  if (entry.expiry <= now) return false;
  if (filter.model !== undefined && entry.model !== filter.model) return false;
  if (filter.minFreeUnits !== undefined && entry.freeUnits < filter.minFreeUnits) return false;
  if (filter.minVramMiB !== undefined && entry.vramMiB < filter.minVramMiB) return false;
  if (filter.maxPricePerUnitSecond !== undefined && entry.pricePerUnitSecond > filter.maxPricePerUnitSecond) return false;
  if (filter.region !== undefined && entry.region.toLowerCase() !== filter.region.toLowerCase()) return false;
  if (filter.attested !== undefined && isAttestedState(entry.attestation, now) !== filter.attested) return false;
  if (filter.provider !== undefined && entry.provider.toLowerCase() !== filter.provider.toLowerCase()) return false;
  if (filter.interruptible !== undefined && entry.minBidPerUnitSecond > 0n !== filter.interruptible) return false;
  return true;
}

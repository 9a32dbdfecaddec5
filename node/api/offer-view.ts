/**
 * Turning book entries into the API's offer view, and the offer filters and sort orders of
 * GET /v1/offers, in one place so that every data source filters the way the API documents.
 */
import type { OfferFilter, OfferSort, OfferView, AttestationView } from "../../common/api/offers.js";
import { NO_CC } from "../../common/attest/cc.js";
import { leaseCheckShareBps } from "../../common/attest/lease-checks.js";
import { offerKey, pricePerUnitHour } from "../../common/offers/message.js";
import type { OfferEntry, VerifiedAttestation } from "./source.js";
import { uptimePercentOf } from "../../common/api/chain.js";
import type { Reputation as MatchingReputation } from "../../common/matching/entry.js";

/** A verified attestation covers the offer's machine and has not expired. */
export function attestationCovers(entry: OfferEntry, verified: VerifiedAttestation, nowSeconds: number): boolean {
  const { attestation } = verified;
  const { offer } = entry.message;
  return (
    attestation.expiry > nowSeconds &&
    attestation.provider.toLowerCase() === offer.provider.toLowerCase() &&
    attestation.machineId === offer.machineId &&
    attestation.model.toLowerCase() === offer.model.toLowerCase()
  );
}

/** Attested under the quorum the source applied (attestedUntil), or by any current verified attestation. */
export function isAttested(entry: OfferEntry, nowSeconds: number): boolean {
  if (entry.attestedUntil !== undefined) return entry.attestedUntil !== null && entry.attestedUntil > nowSeconds;
  return entry.verifiedAttestations.some((verified) => attestationCovers(entry, verified, nowSeconds));
}

/** Verified by confidential-computing evidence under the quorum the source applied (ccUntil), or by any current covering attestation with a non-zero `cc`. */
export function isCcVerified(entry: OfferEntry, nowSeconds: number): boolean {
  if (entry.ccUntil !== undefined) return entry.ccUntil !== null && entry.ccUntil > nowSeconds;
  return entry.verifiedAttestations.some((verified) => verified.attestation.cc !== NO_CC && attestationCovers(entry, verified, nowSeconds));
}

export function toAttestationView(verified: VerifiedAttestation, nowSeconds: number): AttestationView {
  const { attestation } = verified;
  return {
    attestor: verified.attestor,
    units: attestation.units,
    vramMiB: attestation.vramMiB,
    throughput: attestation.throughput,
    issuedAt: attestation.issuedAt,
    expiry: attestation.expiry,
    current: attestation.expiry > nowSeconds,
    gpuIdentityVerified: attestation.cc !== NO_CC,
    cc: attestation.cc,
    failures: attestation.failures,
    lastFailureAt: attestation.lastFailureAt,
  };
}

/** The machine's signed failures that count at `nowSeconds`, with until when each does, and the latest one's time. */
export function failuresView(entry: OfferEntry, nowSeconds: number): Pick<OfferView, "attestFailures" | "attestFailuresUntil" | "lastAttestFailureAt"> {
  const until = (entry.attestFailuresUntil ?? []).filter((t) => t > nowSeconds);
  const grouped: { until: number; failures: number }[] = [];
  for (const t of until) {
    const last = grouped[grouped.length - 1];
    if (last?.until === t) last.failures++;
    else grouped.push({ until: t, failures: 1 });
  }
  return { attestFailures: until.length, attestFailuresUntil: grouped, lastAttestFailureAt: until.length ? (entry.lastAttestFailureAt ?? null) : null };
}

export function entryKey(entry: OfferEntry): string {
  return offerKey(entry.message.offer.provider, entry.message.offer.machineId, entry.message.tier ?? 0);
}

/** An offer as the API shows it, with its provider's reputation when the node holds it (`reputation`). */
export function toOfferView(entry: OfferEntry, nowSeconds: number, reputation?: MatchingReputation): OfferView {
  const { offer, machine, capacity, signature } = entry.message;
  return {
    key: entryKey(entry),
    provider: offer.provider,
    machineId: offer.machineId,
    ...(entry.message.tier ? { tier: entry.message.tier } : {}),
    model: machine.model,
    ...(entry.message.sealingKey ? { sealingKey: entry.message.sealingKey } : {}),
    modelHash: offer.model,
    units: machine.units,
    vramMiB: machine.vramMiB,
    interconnect: machine.interconnect,
    region: machine.region,
    cluster: machine.cluster,
    pricePerUnitSecond: offer.pricePerUnitSecond,
    pricePerUnitHour: pricePerUnitHour(offer.pricePerUnitSecond),
    minBidPerUnitSecond: offer.minBidPerUnitSecond,
    minDuration: offer.minDuration,
    maxDuration: offer.maxDuration,
    collateralBps: offer.collateralBps,
    startWindow: offer.startWindow,
    ...(entry.message.resources ? { resources: entry.message.resources } : {}),
    ...(entry.message.retention ? { retention: entry.message.retention } : {}),
    leaseChecks: { shareBps: leaseCheckShareBps(entry.message.leaseChecks) },
    ...(reputation ? { reputation: { ...reputation, uptimePercent: uptimePercentOf(reputation) } } : {}),
    expiry: offer.expiry,
    capacity: {
      freeUnits: capacity.freeUnits,
      onDemandUnits: capacity.onDemandUnits,
      interruptibleUnits: capacity.interruptibleUnits,
      lowestInterruptibleBid: capacity.lowestInterruptibleBid,
    },
    attested: isAttested(entry, nowSeconds),
    gpuIdentityVerified: isCcVerified(entry, nowSeconds),
    attestations: entry.verifiedAttestations.map((verified) => toAttestationView(verified, nowSeconds)),
    ...failuresView(entry, nowSeconds),
    peerId: entry.message.peerId,
    addrs: entry.message.addrs,
    seq: entry.message.seq,
    publishedAt: entry.message.publishedAt,
    receivedAt: entry.receivedAt,
    signed: { offer, signature },
  };
}

/** True when the offer is live at `nowSeconds` and passes every filter given. */
export function offerMatchesFilter(entry: OfferEntry, filter: OfferFilter, nowSeconds: number): boolean {
  const { offer, machine, capacity } = entry.message;
  if (offer.expiry <= nowSeconds) return false;
  if (filter.model !== undefined && machine.model !== filter.model) return false;
  if (filter.minFreeUnits !== undefined && capacity.freeUnits < filter.minFreeUnits) return false;
  if (filter.minVramMiB !== undefined && machine.vramMiB < filter.minVramMiB) return false;
  if (filter.maxPricePerUnitSecond !== undefined && offer.pricePerUnitSecond > filter.maxPricePerUnitSecond) return false;
  if (filter.region !== undefined && machine.region.toLowerCase() !== filter.region.toLowerCase()) return false;
  if (filter.attested !== undefined && isAttested(entry, nowSeconds) !== filter.attested) return false;
  if (filter.gpuIdentityVerified !== undefined && isCcVerified(entry, nowSeconds) !== filter.gpuIdentityVerified) return false;
  if (filter.provider !== undefined && offer.provider.toLowerCase() !== filter.provider.toLowerCase()) return false;
  if (filter.interruptible !== undefined && offer.minBidPerUnitSecond > 0n !== filter.interruptible) return false;
  return true;
}

function compareBigint(a: bigint, b: bigint): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** A comparator for a sort order; ties break on the key so that pages are stable. */
export function offerComparator(sort: OfferSort): (a: OfferEntry, b: OfferEntry) => number {
  const descending = sort.startsWith("-");
  const field = descending ? sort.slice(1) : sort;
  const primary = (a: OfferEntry, b: OfferEntry): number => {
    switch (field) {
      case "price":
        return compareBigint(a.message.offer.pricePerUnitSecond, b.message.offer.pricePerUnitSecond);
      case "vram":
        return a.message.machine.vramMiB - b.message.machine.vramMiB;
      case "freeUnits":
        return a.message.capacity.freeUnits - b.message.capacity.freeUnits;
      default:
        return a.message.publishedAt - b.message.publishedAt;
    }
  };
  return (a, b) => {
    const order = primary(a, b);
    if (order !== 0) return descending ? -order : order;
    const ka = entryKey(a);
    const kb = entryKey(b);
    return ka < kb ? -1 : ka > kb ? 1 : 0;
  };
}

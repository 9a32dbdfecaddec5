/**
 * The reserve handshake between a renter and a provider, as data: the provider's answer
 * (a signed acceptance that holds units for a short time, or a refusal with a reason), the
 * EIP-712 ReserveRequest a renter signs, and the lease terms the renter then opens with.
 * The p2p protocol (`/suanli/reserve/1.0.0`) carries these; this file only defines and checks them.
 */
import type { Address, Hex } from "viem";
import { z } from "zod";
import { sealingKeySchema } from "../sealed.js";
import type { Offer, ReserveRequest } from "../eip712.js";
import { offerWireSchema } from "../offers/message.js";
import { signatureSchema } from "../schemas.js";
import type { CandidatePart } from "./engine.js";
import type { MatchRequest } from "./request.js";

export const REFUSAL_REASONS = [
  /** The units are held or leased by someone else now. */
  "insufficient-units",
  /** The provider's price went up, or the bid is below its minimum now. */
  "price-changed",
  /** The machine no longer sells (offer withdrawn, machine in maintenance). */
  "offer-withdrawn",
  /** Duration outside what the provider accepts. */
  "duration-out-of-range",
  /** Too many reservations in flight at the provider; try another. */
  "busy",
  /** The request was malformed, stale, replayed, badly signed or for another chain. */
  "invalid-request",
  /** The renter's balance or allowance cannot cover the deposit. */
  "renter-unfunded",
  /** The provider node is shutting down. */
  "shutting-down",
  "other",
] as const;
export type RefusalReason = (typeof REFUSAL_REASONS)[number];

export const acceptanceSchema = z.strictObject({
  accepted: z.literal(true),
  /** The provider's Offer bound to this renter (offer.renter) with a short expiry: what openLease takes. */
  offer: offerWireSchema,
  signature: signatureSchema,
  /** Units held for the renter. */
  units: z.number().int().min(1).max(65_535),
  /** Unix seconds until which the provider holds them. */
  holdUntil: z
    .number()
    .int()
    .nonnegative()
    .max(2 ** 32 - 1),
  /** Interruptible leases (ids, decimal) the lease must preempt, when the units need preemption. */
  preempt: z
    .array(
      z
        .string()
        .regex(/^\d{1,78}$/)
        .refine((id) => BigInt(id) < 2n ** 256n, "expected a lease id below 2^256"),
    )
    .max(64)
    .default([]),
  /** The provider's encryption key for sealed secrets, signed by its wallet (common/sealed.ts). */
  sealingKey: sealingKeySchema.optional(),
});
export type Acceptance = z.output<typeof acceptanceSchema>;

export const refusalSchema = z.strictObject({
  accepted: z.literal(false),
  reason: z.enum(REFUSAL_REASONS),
  /** A sentence for the renter. */
  message: z.string().max(500).optional(),
  /** Units the provider could hold right now, when it says. */
  availableUnits: z.number().int().min(0).max(65_535).optional(),
});
export type Refusal = z.output<typeof refusalSchema>;

export const reserveReplySchema = z.discriminatedUnion("accepted", [acceptanceSchema, refusalSchema]);
export type ReserveReply = Acceptance | Refusal;

/** The EIP-712 ReserveRequest a renter signs for one part of a candidate. */
export function reserveRequestFor(request: MatchRequest, part: CandidatePart, renter: Address, issuedAt: number, nonce: Hex): ReserveRequest {
  return {
    renter,
    provider: part.entry.provider,
    machineId: part.entry.machineId,
    units: part.units,
    duration: request.duration,
    interruptible: request.interruptible,
    bidPerUnitSecond: request.bidPerUnitSecond ?? 0n,
    issuedAt,
    nonce,
  };
}

/** LeaseMarket.openLease terms for an accepted part (see docs/contracts.md). */
export type LeaseTerms = {
  units: number;
  duration: number;
  maxPricePerUnitSecond: bigint;
  interruptible: boolean;
  bidPerUnitSecond: bigint;
  preempt: bigint[];
};

export function leaseTermsFor(request: MatchRequest, acceptance: Acceptance): LeaseTerms {
  return {
    units: acceptance.units,
    duration: request.duration,
    maxPricePerUnitSecond: request.maxPricePerUnitSecond,
    interruptible: request.interruptible,
    bidPerUnitSecond: request.bidPerUnitSecond ?? 0n,
    preempt: acceptance.preempt.map((id) => BigInt(id)),
  };
}

/** Deposit the renter pays at open: units × price × duration (price = offer price, or the bid). */
export function depositFor(request: MatchRequest, offer: Offer, units: number): bigint {
  const price = request.interruptible ? request.bidPerUnitSecond! : offer.pricePerUnitSecond;
  return BigInt(units) * price * BigInt(request.duration);
}

/**
 * Why an acceptance cannot be used for this part, or null when it can. Catches a provider that
 * answers for another machine, raised its price, holds fewer units or signed for someone else
 * before the renter spends gas on a transaction that would fail. Each reason names the field and
 * both values (what the acceptance says, what the renter asked or the offer showed). Signatures
 * are checked by the contract (and by the protocol layer, which knows the domain).
 *
 * `chainNow` is the chain's time (unix seconds) as the renter estimates it, not its wall clock:
 * the provider writes `offer.expiry` and `holdUntil` in chain time, because the contract checks
 * the expiry against the block's timestamp, and a chain's clock may run minutes behind or ahead
 * of wall time (a devnet, an idle chain, a host without NTP).
 */
export function acceptanceMismatch(acceptance: Acceptance, part: CandidatePart, request: MatchRequest, renter: Address | undefined, chainNow: number): string | null {
  const offer = acceptance.offer;
  const entry = part.entry;
  if (offer.provider !== entry.provider) return `acceptance is from provider ${offer.provider}, the offer from ${entry.provider}`;
  if (offer.machineId !== entry.machineId) return `acceptance is for machine ${offer.machineId}, the offer for machine ${entry.machineId}`;
  if (offer.model !== entry.offer.model) return `acceptance is for GPU model ${offer.model}, the offer for ${entry.offer.model}`;
  if (acceptance.units !== part.units) return `acceptance holds ${acceptance.units} units, ${part.units} were asked`;
  if (renter !== undefined && offer.renter.toLowerCase() !== renter.toLowerCase()) return `acceptance is bound to renter ${offer.renter}, not ${renter}`;
  if (request.interruptible) {
    if (offer.minBidPerUnitSecond === 0n) return "acceptance sells no interruptible capacity (offer.minBidPerUnitSecond 0)";
    if (offer.minBidPerUnitSecond > request.bidPerUnitSecond!) {
      return `acceptance requires a higher bid: offer.minBidPerUnitSecond ${offer.minBidPerUnitSecond} > the bid ${request.bidPerUnitSecond} per unit-second`;
    }
  } else if (offer.pricePerUnitSecond > request.maxPricePerUnitSecond) {
    return `acceptance price is above the cap: offer.pricePerUnitSecond ${offer.pricePerUnitSecond} > maxPricePerUnitSecond ${request.maxPricePerUnitSecond}`;
  }
  if (request.duration < offer.minDuration || request.duration > offer.maxDuration) {
    return `acceptance does not cover the duration: ${request.duration} s is outside offer.minDuration ${offer.minDuration} .. offer.maxDuration ${offer.maxDuration}`;
  }
  if (offer.expiry <= chainNow) return `acceptance already expired: offer.expiry ${offer.expiry} <= chain time ${chainNow}`;
  if (acceptance.holdUntil <= chainNow) return `acceptance already expired: holdUntil ${acceptance.holdUntil} <= chain time ${chainNow}`;
  return null;
}

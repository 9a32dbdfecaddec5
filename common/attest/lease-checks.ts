/**
 * In-lease capacity checks (docs/attestation.md, "In-lease checks"): attestors challenge a leased
 * machine at random times, without notice, with the ordinary capacity challenge. The provider
 * announces in its offer the share of a lease's time these checks may take (`leaseChecks.shareBps`
 * in the offer message, shown by GET /v1/offers and the SDK); the provider pays for it: the
 * renter's paid time is not consumed (see the accounting in docs/attestation.md).
 */
import { z } from "zod";

/** Lowest share a provider may announce: 0.1 % of the lease (a provider cannot opt out of checks). */
export const MIN_LEASE_CHECK_SHARE_BPS = 10;
/** Highest share: 10 % of the lease. */
export const MAX_LEASE_CHECK_SHARE_BPS = 1_000;
/** The share of an offer that announces none (providers before the field): 1 %. */
export const DEFAULT_LEASE_CHECK_SHARE_BPS = 100;

export const leaseChecksSchema = z.strictObject({
  /** Share of a lease's elapsed time that in-lease challenges may take, in basis points, per attestor. */
  shareBps: z
    .number()
    .int()
    .min(MIN_LEASE_CHECK_SHARE_BPS, `leaseChecks.shareBps must be at least ${MIN_LEASE_CHECK_SHARE_BPS} (0.1 %): every lease is checked`)
    .max(MAX_LEASE_CHECK_SHARE_BPS, `leaseChecks.shareBps must be at most ${MAX_LEASE_CHECK_SHARE_BPS} (10 %)`),
});
export type LeaseChecks = z.output<typeof leaseChecksSchema>;

/** The share an offer announces, or the default for an offer without one. */
export function leaseCheckShareBps(leaseChecks: LeaseChecks | undefined): number {
  return leaseChecks?.shareBps ?? DEFAULT_LEASE_CHECK_SHARE_BPS;
}

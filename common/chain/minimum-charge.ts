/**
 * Why a renter's close paid more than the seconds it used (issue #34, findings 4 and 7), by name, for
 * receipts and `suanli tasks`. LeaseMarket.close charges at least one of two minimums:
 * - `Commitment`: the lease came from a reserved-term offer (minDuration >= LeaseMarket.MIN_COMMITMENT), whose
 *   discount is paid for with its commitment: an early close pays units x price x minDuration;
 * - `PreemptionNotice`: the lease preempted others, so it owes at least min(preemptionNotice, duration)
 *   seconds of its units x price (preempting is never free).
 * The chain charges the larger; the name given is the one that set the amount.
 */
import type { Address, Client } from "viem";
import { getContractEvents, readContract } from "viem/actions";
import { leaseMarketAbi } from "../abi.js";
import type { LeaseView } from "./market.js";

/** The minimums a renter's close can be charged, by name. */
export const MINIMUM_CHARGE_REASONS = ["Commitment", "PreemptionNotice"] as const;
export type MinimumChargeReason = (typeof MINIMUM_CHARGE_REASONS)[number];

/** What a close charged beyond the seconds used: the minimum's name and the amount above units x price x seconds. */
export type MinimumCharge = { reason: MinimumChargeReason; amount: bigint };

/** The lease fields the classification reads (LeaseView once the lease has ended). */
export type EndedLease = Pick<LeaseView, "endReason" | "units" | "pricePerUnitSecond" | "activatedAt" | "stopAt">;

/**
 * Names the minimum a renter's close was charged, or null when it paid only the seconds it used (or the lease did
 * not end by the renter's close). `providerTotal`: the provider's final total (LeaseEnded's, or the ended lease's
 * deposit). `shrunk`: the lease was shrunk, so units x price x seconds no longer measures its use; a shrink waits
 * until both minimums are paid, so a shrunk lease carries neither. `preemptedOthers`: the lease evicted others
 * (LeasePreempted with it as `byLeaseId`).
 */
export function classifyMinimumCharge(
  lease: EndedLease,
  providerTotal: bigint,
  context: { preemptedOthers: boolean; preemptionNotice: number; shrunk: boolean },
): MinimumCharge | null {
  if (lease.endReason !== "RenterClosed" || context.shrunk) return null;
  const rate = BigInt(lease.units) * lease.pricePerUnitSecond;
  const used = lease.activatedAt === 0 ? 0 : Math.max(0, lease.stopAt - lease.activatedAt);
  const metered = rate * BigInt(used);
  if (providerTotal <= metered) return null;
  const reason: MinimumChargeReason = context.preemptedOthers && providerTotal <= rate * BigInt(context.preemptionNotice) ? "PreemptionNotice" : "Commitment";
  return { reason, amount: providerTotal - metered };
}

/**
 * Reads from the chain what `classifyMinimumCharge` needs for an ended lease: no call at all unless the lease ended
 * by the renter's close for more than it used; then its shrinks, the leases it preempted (in its open transaction,
 * from `fromBlock`) and the market's notice.
 */
export async function readMinimumCharge(client: Client, market: Address, lease: EndedLease & Pick<LeaseView, "leaseId">, providerTotal: bigint, fromBlock: bigint) {
  if (classifyMinimumCharge(lease, providerTotal, { preemptedOthers: false, preemptionNotice: 0, shrunk: false }) === null) return null;
  const [shrinks, preemptions, params] = await Promise.all([
    getContractEvents(client, { address: market, abi: leaseMarketAbi, eventName: "LeaseShrunk", args: { leaseId: lease.leaseId }, fromBlock, strict: true }),
    getContractEvents(client, { address: market, abi: leaseMarketAbi, eventName: "LeasePreempted", args: { byLeaseId: lease.leaseId }, fromBlock, strict: true }),
    readContract(client, { address: market, abi: leaseMarketAbi, functionName: "params" }),
  ]);
  return classifyMinimumCharge(lease, providerTotal, { preemptedOthers: preemptions.length > 0, preemptionNotice: Number(params.preemptionNotice), shrunk: shrinks.length > 0 });
}

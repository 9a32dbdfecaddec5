import type { LeaseView } from "../../common/chain/market.js";

/**
 * Wall-clock metering of a lease: the chain reports accrual as of its latest block, and an active
 * lease keeps accruing units × price per second between blocks (activatedAt moves with a shrink,
 * so this holds for the current units), up to its end.
 */
export function meteredByNow(
  lease: Pick<LeaseView, "status" | "activatedAt" | "stopAt" | "end" | "units" | "pricePerUnitSecond" | "accrued">,
  nowSeconds: number,
): { elapsedSeconds: number; accruedNow: bigint } {
  if (!lease.activatedAt) return { elapsedSeconds: 0, accruedNow: lease.accrued };
  const stop = lease.stopAt || Math.floor(Math.min(nowSeconds, lease.end || nowSeconds));
  const elapsedSeconds = Math.max(0, stop - lease.activatedAt);
  if (lease.status !== "Active") return { elapsedSeconds, accruedNow: lease.accrued };
  const estimate = BigInt(lease.units) * lease.pricePerUnitSecond * BigInt(elapsedSeconds);
  return { elapsedSeconds, accruedNow: estimate > lease.accrued ? estimate : lease.accrued };
}

/**
 * What a provider earned, read from the chain alone (issue #40 item 9: a provider could not see it
 * without Grafana). Node and SDK share it; `suanli provider earnings` prints it.
 *
 * Sources: the provider's `LeaseOpened` events (its leases), its `LeaseClaimed` events (every payment
 * and the protocol fee taken from it, dated by their blocks), each lease's `getLease` and `claimable`,
 * the market's `owed` and the registry's `locked`. Nothing is estimated: every figure is a sum of
 * base units the contracts report.
 */
import type { Address, PublicClient } from "viem";
import { getAddress } from "viem";
import { leaseMarketAbi } from "../abi.js";
import { mapBounded } from "../concurrency.js";
import { readLease, readProvider, type EndReasonName, type LeaseStatusName } from "./market.js";

/** One lease of the provider: what it accrued, what was paid, what a claim pays now, what is held. */
export type LeaseEarnings = {
  leaseId: bigint;
  renter: Address;
  machineId: number;
  units: number;
  status: LeaseStatusName;
  endReason: EndReasonName;
  /** The provider's total so far (paid included), before the protocol fee. */
  accrued: bigint;
  /** Paid out to the provider so far, before the fee. */
  paid: bigint;
  /** Protocol fee taken from those payments. */
  fees: bigint;
  /** What a claim pays now, before the fee. */
  claimable: bigint;
  /**
   * Accrued but not claimable yet: the last fault window of pay (held until it passes, issue #34)
   * and, for a completion, what its release claim pays.
   */
  held: bigint;
  /** Collateral the lease locks now. */
  collateral: bigint;
};

/** Payments received on one UTC day. */
export type DayEarnings = { day: string; claimed: bigint; fees: bigint; claims: number };

export type ProviderEarnings = {
  provider: Address;
  /** The first block searched for the provider's leases and claims. */
  fromBlock: bigint;
  /** Paid to the provider after fees, as its LeaseClaimed events say (a part the token refused to deliver is also in `owed` until withdrawn). */
  claimed: bigint;
  /** Protocol fees taken from the provider's payments. */
  fees: bigint;
  /** What claiming every lease now would pay, before fees. */
  claimableNow: bigint;
  /** Accrued, not claimable yet (the held fault window; running leases' newest seconds). */
  held: bigint;
  /** Payments the token refused to deliver, owed by the market (`suanli wallet withdraw`). */
  owed: bigint;
  /** Collateral locked by the provider's leases (registry). */
  collateralLocked: bigint;
  leases: LeaseEarnings[];
  /** Days with payments, oldest first. */
  days: DayEarnings[];
};

/** At most this many chain reads in flight: a provider with thousands of leases must not flood its RPC. */
const READS_IN_FLIGHT = 8;

/** The UTC day (YYYY-MM-DD) of a unix time in seconds. */
export function utcDay(seconds: bigint | number): string {
  return new Date(Number(seconds) * 1000).toISOString().slice(0, 10);
}

/**
 * Reads a provider's earnings. `fromBlock` should be the deployment block (the manifest's
 * `deploymentBlock`): the market has no leases before it.
 */
export async function readProviderEarnings(
  client: PublicClient,
  contracts: { market: Address; registry: Address },
  provider: Address,
  fromBlock: bigint,
): Promise<ProviderEarnings> {
  const who = getAddress(provider);
  const [opened, claims] = await Promise.all([
    client.getContractEvents({ address: contracts.market, abi: leaseMarketAbi, eventName: "LeaseOpened", args: { provider: who }, fromBlock, strict: true }),
    client.getContractEvents({ address: contracts.market, abi: leaseMarketAbi, eventName: "LeaseClaimed", args: { provider: who }, fromBlock, strict: true }),
  ]);

  const feesByLease = new Map<bigint, bigint>();
  for (const claim of claims) feesByLease.set(claim.args.leaseId, (feesByLease.get(claim.args.leaseId) ?? 0n) + claim.args.fee);

  const ids = [...new Set(opened.map((event) => event.args.leaseId))].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const leases = await mapBounded(ids, READS_IN_FLIGHT, async (leaseId): Promise<LeaseEarnings> => {
    const [view, claimable] = await Promise.all([
      readLease(client, contracts.market, leaseId),
      client.readContract({ address: contracts.market, abi: leaseMarketAbi, functionName: "claimable", args: [leaseId] }),
    ]);
    const unpaid = view.accrued > view.paid ? view.accrued - view.paid : 0n;
    return {
      leaseId,
      renter: view.renter,
      machineId: view.machineId,
      units: view.units,
      status: view.status,
      endReason: view.endReason,
      accrued: view.accrued,
      paid: view.paid,
      fees: feesByLease.get(leaseId) ?? 0n,
      claimable,
      held: unpaid > claimable ? unpaid - claimable : 0n,
      collateral: view.collateral,
    };
  });

  // Claims dated by their blocks' timestamps: one read per distinct block.
  const blocks = [...new Set(claims.map((claim) => claim.blockNumber))];
  const stamps = new Map<bigint, bigint>();
  await mapBounded(blocks, READS_IN_FLIGHT, async (blockNumber) => stamps.set(blockNumber, (await client.getBlock({ blockNumber })).timestamp));
  const byDay = new Map<string, DayEarnings>();
  for (const claim of claims) {
    const day = utcDay(stamps.get(claim.blockNumber)!);
    const entry = byDay.get(day) ?? { day, claimed: 0n, fees: 0n, claims: 0 };
    entry.claimed += claim.args.amount - claim.args.fee;
    entry.fees += claim.args.fee;
    entry.claims += 1;
    byDay.set(day, entry);
  }

  const [owed, record] = await Promise.all([
    client.readContract({ address: contracts.market, abi: leaseMarketAbi, functionName: "owed", args: [who] }),
    readProvider(client, contracts.registry, who),
  ]);
  const sum = (pick: (lease: LeaseEarnings) => bigint) => leases.reduce((total, lease) => total + pick(lease), 0n);
  const fees = claims.reduce((total, claim) => total + claim.args.fee, 0n);
  return {
    provider: who,
    fromBlock,
    claimed: claims.reduce((total, claim) => total + claim.args.amount, 0n) - fees,
    fees,
    claimableNow: sum((lease) => lease.claimable),
    held: sum((lease) => lease.held),
    owed,
    collateralLocked: record.locked,
    leases,
    days: [...byDay.values()].sort((a, b) => a.day.localeCompare(b.day)),
  };
}

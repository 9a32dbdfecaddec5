/**
 * Chain-facing helpers that node and SDK share: lease maths that matches the LeaseMarket to the base
 * unit, the order of fault signatures, and typed reads of leases, providers and machines (signing
 * lives in sign.ts). Everything is typed from the generated ABIs in common/abi.ts.
 */
import type { Address, Client, Hex } from "viem";
import { getAddress } from "viem";
import { readContract } from "viem/actions";
import { leaseMarketAbi, providerRegistryAbi, testTokenAbi } from "../abi.js";

/** Lease states, indexed by the contract's `LeaseStatus` enum. */
export const LEASE_STATUSES = ["None", "Open", "Active", "Ended", "Settled", "Cancelled"] as const;
export type LeaseStatusName = (typeof LEASE_STATUSES)[number];

/** Why a lease ended, indexed by the contract's `EndReason` enum. */
export const END_REASONS = ["None", "RenterClosed", "Completed", "Faulted", "Preempted", "Expired", "Terminated", "MissedStart", "CoSigned"] as const;
export type EndReasonName = (typeof END_REASONS)[number];

/** Basis points: 10,000 = 100 %. */
export const BPS = 10_000n;

/** The deposit a lease escrows: units x price per unit-second x seconds. */
export function computeDeposit(units: number | bigint, pricePerUnitSecond: bigint, durationSeconds: number | bigint): bigint {
  return BigInt(units) * pricePerUnitSecond * BigInt(durationSeconds);
}

/** The provider collateral a lease locks: deposit x collateralBps / 10,000, rounded down like the contract. */
export function computeCollateral(deposit: bigint, collateralBps: number | bigint): bigint {
  return (deposit * BigInt(collateralBps)) / BPS;
}

/** The protocol fee on a lease's cumulative payments to its provider, rounded down like the contract. */
export function computeFee(amount: bigint, protocolFeeBps: number | bigint): bigint {
  return (amount * BigInt(protocolFeeBps)) / BPS;
}

/**
 * The fee taken from one payment that brings a lease's `paid` from `paidBefore` to `paidAfter`: the contract
 * charges fee(paidAfter) - fee(paidBefore), so however the payments are split the treasury gets fee(total).
 */
export function computePaymentFee(paidBefore: bigint, paidAfter: bigint, protocolFeeBps: number | bigint): bigint {
  return computeFee(paidAfter, protocolFeeBps) - computeFee(paidBefore, protocolFeeBps);
}

/**
 * Orders attestor signatures the way submitFault requires (strictly increasing signer address) and
 * drops duplicates of one signer.
 */
export function orderFaultSignatures(signatures: readonly { signer: Address; signature: Hex }[]): Hex[] {
  const bySigner = new Map<string, Hex>();
  for (const { signer, signature } of signatures) bySigner.set(getAddress(signer).toLowerCase(), signature);
  return [...bySigner.entries()].sort(([a], [b]) => (BigInt(a) < BigInt(b) ? -1 : 1)).map(([, signature]) => signature);
}

/** A lease as LeaseMarket.getLease returns it, with the status and end reason as names. */
export type LeaseView = {
  leaseId: bigint;
  renter: Address;
  provider: Address;
  machineId: number;
  units: number;
  pricePerUnitSecond: bigint;
  interruptible: boolean;
  collateralBps: number;
  /**
   * Collateral locked now: zero once ended, except after a completion, whose collateral stays locked
   * until `stopAt` + the fault window (COMPLETION_HOLD_SECONDS) and is then released by `claim`.
   */
  collateral: bigint;
  /** Escrowed so far; once ended, the provider's final total. */
  deposit: bigint;
  paid: bigint;
  /** Set while Open. */
  startDeadline: number;
  /** Start of metering (moved by shrink); zero while Open. */
  activatedAt: number;
  /** When accrual stopped or stops; zero while Open or Active. */
  stopAt: number;
  /** When the deposit runs out (Active), or stopAt once ended; zero while Open. */
  end: number;
  duration: number;
  status: LeaseStatusName;
  endReason: EndReasonName;
  /** The provider's total so far, paid included. */
  accrued: bigint;
  /** What a claim pays now, before the protocol fee. */
  claimable: bigint;
};

/** LeaseMarket's FAULT_SUBMISSION_WINDOW: how long a completion holds the provider's collateral (issue #34, finding 1). */
export const COMPLETION_HOLD_SECONDS = 600;

/**
 * When a held lease's collateral and last fault window of pay may be released by `claim` (stopAt +
 * the fault window), or undefined when the lease holds neither: a fault observed before the
 * completion (or the expiry) can land until then.
 */
export function completionHeldUntil(view: Pick<LeaseView, "status" | "endReason" | "collateral" | "stopAt" | "deposit" | "paid">): number | undefined {
  // A completion's hold, or an expiry's: an Active lease ended within the fault window after its end (issue #34).
  if (view.status !== "Settled" || (view.endReason !== "Completed" && view.endReason !== "Expired")) return undefined;
  // Held: collateral still locked, or (a lease with no collateral) pay still unpaid. The release sets paid = deposit
  // and shows no collateral, so a released lease reads as not held.
  if (view.collateral === 0n && view.paid >= view.deposit) return undefined;
  return view.stopAt + COMPLETION_HOLD_SECONDS;
}

/** What a held lease still escrows for its provider (its last fault window of pay, paid by the releasing claim); zero otherwise. */
export function heldPay(view: Pick<LeaseView, "status" | "endReason" | "collateral" | "stopAt" | "deposit" | "paid">): bigint {
  return completionHeldUntil(view) === undefined ? 0n : view.deposit - view.paid;
}

/** Reads one lease (status "None" when it does not exist). */
export async function readLease(client: Client, market: Address, leaseId: bigint, options: { blockNumber?: bigint } = {}): Promise<LeaseView> {
  const raw = await readContract(client, { address: market, abi: leaseMarketAbi, functionName: "getLease", args: [leaseId], ...options });
  const status = LEASE_STATUSES[raw.status];
  const endReason = END_REASONS[raw.endReason];
  // The contract's enums and these lists are one definition: a value past them is a contract this code does not know.
  if (status === undefined || endReason === undefined)
    throw new Error(`Lease ${leaseId}: status ${raw.status} or end reason ${raw.endReason} is not one this client knows (LeaseMarket is newer than the client?)`);
  return { leaseId, ...raw, status, endReason };
}

/** A provider as ProviderRegistry.getProvider returns it. */
export type ProviderView = Awaited<ReturnType<typeof readProvider>>;

/** Reads a provider's registration, stake, collateral and reputation. */
export async function readProvider(client: Client, registry: Address, provider: Address) {
  return readContract(client, { address: registry, abi: providerRegistryAbi, functionName: "getProvider", args: [provider] });
}

/** Interconnect names, indexed by the registry's code. */
export const INTERCONNECTS = ["none", "nvlink", "fabric"] as const;

/** A machine as ProviderRegistry.getMachine returns it, plus its idle units. */
export type MachineView = Awaited<ReturnType<typeof readMachine>>;

/** Reads a machine's declaration and current use (owner zero when it does not exist). */
export async function readMachine(client: Client, registry: Address, machineId: number) {
  const raw = await readContract(client, { address: registry, abi: providerRegistryAbi, functionName: "getMachine", args: [machineId] });
  return {
    machineId,
    ...raw,
    interconnectName: INTERCONNECTS[raw.interconnect] ?? "none",
    idleUnits: raw.units - raw.onDemandUnits - raw.interruptibleUnits,
  };
}

/**
 * Every custom error a LeaseMarket transaction can revert with, including those bubbling up from the
 * registry and the token, for viem's decodeErrorResult or a contract's error decoding.
 */
export const suanliErrorsAbi = [
  ...leaseMarketAbi.filter((item) => item.type === "error"),
  ...providerRegistryAbi.filter((item) => item.type === "error"),
  ...testTokenAbi.filter((item) => item.type === "error"),
].filter((item, index, all) => all.findIndex((other) => other.name === item.name) === index);

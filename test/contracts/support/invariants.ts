/**
 * The adversarial invariant suite of the money rules, shared by the CI test
 * (test/contracts/LeaseMarket.property.test.ts) and the benchmark (`npm run bench -- invariants`).
 *
 * A world of one honest provider (P), an attacker (A: a provider with its own machine that also
 * rents, from P and from itself, including its idle units as interruptible at its floor bid), three honest renters (R1, R2 and RP, who only pays by EIP-2612
 * permit), three attestors, governance and two treasuries, on a token with a USDC-style blocklist.
 * A seeded generator draws sequences of steps from the model's state (open with and without
 * preemption, with public, renter-bound, expiring and price-0 offers; activate, claim, claimMany,
 * close, complete, terminate, cancel, extend, shrink, settle; faults submitted at once or held
 * back and submitted later; stake, unstake, withdraw; machine add/update/remove; deregister and
 * register again; nonce revocations; governance changes of every parameter; blocking and
 * unblocking accounts; time jumps; faults of every kind, defined or not, and their disputes with
 * and without contradicting receipts, raced by the disputed attestor, in the AttestorStaking the
 * attestors stake in: support/invariants-staking.ts), runs them on a real hardhat chain and, after every step:
 *
 * - exact: an independent model (below, written from the rules in docs/contracts.md) predicts
 *   whether the step succeeds and every resulting figure: each account's token balance (so every
 *   penalty, credit, fee and refund), each lease's status, end reason, deposit, paid, units,
 *   times and collateral, each provider's free, locked and unbonding stake and reputation, each
 *   machine's used units. The chain must equal it;
 * - adversarial: what any renter received from a provider's collateral never exceeds what the
 *   rules promise for the event (docs/contracts.md "Threat model: the attacker's bound"), no
 *   provider is paid beyond the metered price of the service, and the attacker's net gain over the
 *   sequence is at most the sum of those promises from honest counterparties, and no provider's
 *   reputation counts more unit-seconds than its on-demand leases paid for (#34 finding 5);
 * - staking: the staking holds exactly its stakes, open fees and what it owes, its books equal the
 *   model's, and no attestor ends better off than its slashes leave it, whoever disputed (#34 findings 3 and 6);
 * - live: every running lease can be ended by someone (an eth_call of close, complete, terminate,
 *   claim or cancel succeeds), every Open lease past its deadline can be cancelled, every provider
 *   can start unstaking its free stake; at the end of each sequence every lease is ended and every
 *   provider withdraws its whole stake.
 *
 * Reproducible: sequence i of base seed S uses seed mix(S, i); a failure reports S, i and the steps.
 */
import assert from "node:assert/strict";
import { decodeFunctionResult, encodeFunctionData, getAddress, zeroAddress, type Abi, type Address, type Hex } from "viem";
import { mnemonicToAccount, type HDAccount } from "viem/accounts";
import { attestorStakingAbi, leaseMarketAbi, providerRegistryAbi } from "../../../common/abi.js";
import { orderFaultSignatures } from "../../../common/chain/market.js";
import { signFault, signOffer, signSettlement } from "../../../common/chain/sign.js";
import { signPermitFields } from "../../../common/chain/tx.js";
import { suanliDomain, type Offer } from "../../../common/eip712.js";
import { modelHash } from "../../../common/gpu.js";
import {
  ATTESTOR_STAKE,
  ATTESTOR_WALLET,
  MAX_FAULT_KIND,
  STAKING,
  drainClaims,
  drainResolve,
  generateStaking,
  initialStaking,
  isStaked,
  lastAnswerBy,
  modelStaking,
  stakingCall,
  stakingPromises,
  type StakingState,
  type StakingStep,
} from "./invariants-staking.js";
import type { Connection } from "./suanli.js";

// ---------------------------------------------------------------------------------------------
// Constants of the world

export const DEFAULT_SEED = 0x5a4e11;
const MNEMONIC = "test test test test test test test test test test test junk";
const MODEL = modelHash("L4-24GB");
const ZERO32 = `0x${"00".repeat(32)}` as const;
const BPS = 10_000n;
const MAX_UINT = 2n ** 256n - 1n;
const MAX_PREEMPT = 16;
const MAX_BATCH = 64;
const MAX_FAULT_SIGNATURES = 32;
const MAX_FAULT_QUORUM = 32;
const FAULT_SUBMISSION_WINDOW = 600;
const MIN_START_WINDOW = 10;
const MAX_PROTOCOL_FEE_BPS = 1000;
const MAX_PREEMPTION_NOTICE = 86_400;
const MAX_UNBONDING_DELAY = 90 * 86_400;
const RENTER_FUNDS = 1_000_000n;
/** LeaseMarketBase.MIN_COMMITMENT: an offer's minDuration from which it binds the renter. */
const MIN_COMMITMENT = 3_600;
const PROVIDER_STAKE = { P: 40_000n, A: 20_000n };
const PROVIDER_WALLET = 60_000n;

/** LeaseStatus and EndReason of ILeaseMarketTypes.sol. */
const S = { None: 0, Open: 1, Active: 2, Ended: 3, Settled: 4, Cancelled: 5 } as const;
const R = { None: 0, RenterClosed: 1, Completed: 2, Faulted: 3, Preempted: 4, Expired: 5, Terminated: 6, MissedStart: 7, CoSigned: 8 } as const;
export const END_REASON_NAMES = ["None", "RenterClosed", "Completed", "Faulted", "Preempted", "Expired", "Terminated", "MissedStart", "CoSigned"];
const OUTCOME = { Neutral: 0, Completed: 1, Faulted: 2 } as const;

// ---------------------------------------------------------------------------------------------
// Seeded randomness

/** mulberry32: small, fast, good enough to draw test steps. */
export function rng(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    next,
    int: (min: number, max: number) => min + Math.floor(next() * (max - min + 1)),
    chance: (p: number) => next() < p,
    pick: <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)]!,
  };
}
export type Rng = ReturnType<typeof rng>;

/** The seed of sequence `index` under base seed `seed`. */
export function sequenceSeed(seed: number, index: number): number {
  let h = (seed ^ Math.imul(index + 1, 0x9e3779b1)) >>> 0;
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b) >>> 0;
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35) >>> 0;
  return (h ^ (h >>> 16)) >>> 0;
}

// ---------------------------------------------------------------------------------------------
// The model

/**
 * Issue #13's findings, each a broken promise this suite detects against the contracts before
 * the fix. A finding listed in `known` is tolerated (its promise is relaxed to what the contracts
 * do): only to check the rest of the suite against contracts that still have it.
 */
export const FINDINGS = {
  /** 1: a fault's credit computed on collateral added by an extension after the fault was observed. */
  faultAfterExtension: "fault-after-extension",
  /** 3: a start penalty computed on collateral added by an extension of the Open lease. */
  penaltyAfterExtension: "penalty-after-extension",
  /** 2: a lease that preempted others closed while Open pays nothing for the units it held. */
  freePreemption: "free-preemption",
  /** 4: a renter that cannot receive tokens keeps its leases (and the provider's collateral) from ending. */
  blockedRenterLocks: "blocked-renter-locks",
  /**
   * #34 round two, closed (branch money-overpaid): a fault returned the provider's pay after observedAt only up to the collateral
   * (ILeaseMarket.submitFault: "capped at the collateral"). A provider that stops serving, then is paid to the
   * end (a claim, or `complete`, which pays up to its stop at once) keeps the pay the collateral does not cover:
   * above the metered price of what it served when that pay exceeds the collateral (short leases, low
   * collateralBps). Replay: seed 5918225, sequence 605. Closed by holding the provider's last
   * FAULT_SUBMISSION_WINDOW seconds of pay (claims pay until now - W; `complete` until stopAt - W, the rest
   * released with the collateral), so nothing it is paid lies after a fault's observedAt.
   */
  overpaidAboveCollateral: "overpaid-above-collateral",
  /**
   * #34 round two, closed (branch money-r2): a claim, `close` or preempting open after an Active lease's end finalized
   * it as Expired and released its collateral at once, so a fault observed in its last FAULT_SUBMISSION_WINDOW
   * seconds could no longer land (the provider stops serving near the end; anyone's claim just after it wipes the
   * fault out). Closed by holding the expired lease like a completion until end + W (units freed, collateral and the
   * last window's pay held). Listed as known, the model follows the old rule.
   */
  expiryReleasesCollateral: "expiry-releases-collateral",
} as const;

/**
 * Findings the contracts of this branch still have (empty once the money-rules fixes are merged):
 * the default of `known` for the test and the benchmark.
 */
export const KNOWN_OPEN_FINDINGS: string[] = [];

class Revert extends Error {}
function revert(reason: string): never {
  throw new Revert(reason);
}

type Params = { protocolFeeBps: number; startPenaltyBps: number; faultMinCreditBps: number; preemptionNotice: number; treasury: Address };

type MLease = {
  id: number;
  renter: Address;
  provider: Address;
  start: number;
  stopAt: number;
  collateralBps: number;
  endReason: number;
  activated: boolean;
  price: bigint;
  deposit: bigint;
  paid: bigint;
  machineId: number;
  units: number;
  status: number;
  interruptible: boolean;
  // History kept for the promises (not part of the contract state).
  /** Collateral, deposit, units and the preemption notice when opened. */
  openCollateral: bigint;
  openDeposit: bigint;
  openUnits: number;
  openNotice: number;
  /** Collateral of the lease from each time on. */
  collateralFrom: { at: number; collateral: bigint }[];
  /** Metered segments: from `from`, `units` accrue at `price`. */
  segments: { from: number; units: number }[];
  /** Paid to the renter from the provider's collateral, and what the rules promised at most for it. */
  credit: bigint;
  promised: bigint;
  /** How many leases this one preempted when it was opened. */
  preempted: number;
  /** Contract state: FLAG_PREEMPTOR, and the deposit the terms of a recent extension's faults and terminations use. */
  preemptor: boolean;
  depositBefore: bigint;
  /** FLAG_COMMITTED: a reserved-term lease (its offer's minDuration >= MIN_COMMITMENT) owes this many seconds once active. */
  commitment: number;
  /** The minimum a preemptor closed by its renter paid (the promise checked). */
  closeMinimum?: bigint;
  /** Renter and provider co-signed its final total after it ended. */
  cosigned?: boolean;
  /** After a fault: what the provider had claimed beyond observedAt, returned to the renter from collateral. */
  recovered: bigint;
  /** After a fault: the part of `recovered` the collateral did not cover (FINDINGS.overpaidAboveCollateral). */
  unrecovered?: bigint;
  /**
   * FLAG_HELD (#34 finding 1): a completion whose collateral stays locked until stopAt + FAULT_SUBMISSION_WINDOW.
   * `deposit` is still the lease's deposit (the renter was refunded deposit - paid at the completion), `paid` the
   * provider's total; the release (claim after the window, or the renter's settle) sets deposit = paid.
   */
  held?: boolean;
};

type MProvider = {
  registered: boolean;
  free: bigint;
  locked: bigint;
  unbonding: bigint;
  unlockAt: number;
  machineCount: number;
  nonceFloor: bigint;
  revoked: bigint[];
  leasesCompleted: bigint;
  faults: bigint;
  unitSeconds: bigint;
};

type MMachine = { owner: Address; units: number; onDemand: number; interrupt: number };

/** Signed by the first `signers` attestors (in address order). */
type HeldFault = { leaseId: number; kind: number; observedAt: number; signers: number; signatures: Hex[] };

export type State = {
  now: number;
  nextLeaseId: number;
  params: Params;
  quorum: number;
  delay: number;
  leases: MLease[];
  providers: Record<Address, MProvider>;
  machines: Record<number, MMachine>;
  lastMachineId: number;
  balances: Record<Address, bigint>;
  allowances: Record<Address, bigint>;
  permitNonce: bigint;
  blocked: Address[];
  owed: Record<Address, bigint>;
  held: HeldFault[];
  /** AttestorStaking (support/invariants-staking.ts). */
  staking: StakingState;
};

function rate(l: { units: number; price: bigint }): bigint {
  return BigInt(l.units) * l.price;
}
function collateralOf(deposit: bigint, bps: number): bigint {
  return (deposit * BigInt(bps)) / BPS;
}
function endOf(l: MLease): number {
  return l.start + Number(l.deposit / rate(l));
}
function accruedUntil(l: MLease, until: number): bigint {
  return rate(l) * BigInt(until - l.start);
}
function fee(amount: bigint, bps: number): bigint {
  return (amount * BigInt(bps)) / BPS;
}
function min(a: number, b: number): number {
  return a < b ? a : b;
}
function bmin(a: bigint, b: bigint): bigint {
  return a < b ? a : b;
}
function bmax(a: bigint, b: bigint): bigint {
  return a > b ? a : b;
}
/** When a held completion's collateral may be released (before that, claim reverts CollateralHeld). */
export function holdEnd(l: { stopAt: number }): number {
  return l.stopAt + FAULT_SUBMISSION_WINDOW;
}
/** What the provider may be paid of a lease stopping or claimed at `at`: what accrued until at - W (the last window's pay is held). */
function paidUntil(l: MLease, at: number): bigint {
  return at <= l.start + FAULT_SUBMISSION_WINDOW ? 0n : accruedUntil(l, at - FAULT_SUBMISSION_WINDOW);
}
/** A held completion's total: what accrued until its stop (the renter was refunded the rest). */
function heldTotal(l: MLease): bigint {
  return accruedUntil(l, l.stopAt);
}
/** The provider's total: what it was paid while a lease runs or is held, its final total once ended. */
function providerTotal(l: MLease): bigint {
  return l.status === S.Open || l.status === S.Active || l.held ? l.paid : l.deposit;
}
/** What the market escrows for a lease: nothing for a held completion (its renter was refunded at the completion). */
function escrowOf(l: MLease): bigint {
  return l.held ? heldTotal(l) - l.paid : l.deposit - l.paid;
}

/** The model of the token, registry and market (today's rules, docs/contracts.md). */
export class Model {
  constructor(
    public st: State,
    private readonly w: World,
    private readonly known: ReadonlySet<string> = new Set(),
  ) {}

  // -- token
  private transfer(from: Address, to: Address, amount: bigint): void {
    if (this.st.blocked.includes(from)) revert("Blocked");
    if (this.st.blocked.includes(to)) revert("Blocked");
    const balance = this.st.balances[from] ?? 0n;
    if (balance < amount) revert("ERC20InsufficientBalance");
    this.st.balances[from] = balance - amount;
    this.st.balances[to] = (this.st.balances[to] ?? 0n) + amount;
  }
  private transferFrom(spender: Address, from: Address, to: Address, amount: bigint): void {
    void spender;
    const allowance = this.st.allowances[from] ?? 0n;
    if (allowance !== MAX_UINT) {
      if (allowance < amount) revert("ERC20InsufficientAllowance");
      this.st.allowances[from] = allowance - amount;
    }
    this.transfer(from, to, amount);
  }

  // -- registry
  private provider(a: Address): MProvider {
    return (this.st.providers[a] ??= {
      registered: false,
      free: 0n,
      locked: 0n,
      unbonding: 0n,
      unlockAt: 0,
      machineCount: 0,
      nonceFloor: 0n,
      revoked: [],
      leasesCompleted: 0n,
      faults: 0n,
      unitSeconds: 0n,
    });
  }
  private useNonce(provider: Address, nonce: bigint, consume: boolean): void {
    const p = this.provider(provider);
    if (nonce < p.nonceFloor) revert("InvalidOfferNonce");
    if (p.revoked.includes(nonce)) revert("InvalidOfferNonce");
    if (consume) p.revoked.push(nonce);
  }
  private freeUnits(machineId: number, units: number, interruptible: boolean): void {
    const m = this.st.machines[machineId];
    if (!m) revert("panic: free units of a removed machine");
    if (interruptible) {
      if (m.interrupt < units) revert("panic: underflow");
      m.interrupt -= units;
    } else {
      if (m.onDemand < units) revert("panic: underflow");
      m.onDemand -= units;
    }
  }
  private recordOutcome(provider: Address, unitSeconds: bigint, outcome: number): void {
    if (unitSeconds === 0n && outcome === OUTCOME.Neutral) return;
    const p = this.provider(provider);
    p.unitSeconds += unitSeconds;
    // Only delivered, paid service counts as a completed lease (finding 5).
    if (outcome === OUTCOME.Completed) {
      if (unitSeconds !== 0n) p.leasesCompleted++;
    } else if (outcome === OUTCOME.Faulted) p.faults++;
  }
  /**
   * ProviderRegistry.release of a held completion (its units went back at the completion): the collateral back,
   * less `slash`; reputation as the registry records it (an interruptible lease counts only its faults).
   */
  private releaseCollateral(l: MLease, slash: bigint, unitSeconds: bigint, outcome: number): void {
    const collateral = collateralOf(l.deposit, l.collateralBps);
    const p = this.provider(l.provider);
    if (p.locked < collateral) revert("panic: locked underflow");
    p.locked -= collateral;
    p.free += collateral - slash;
    if (l.interruptible) {
      if (outcome !== OUTCOME.Faulted) return;
      unitSeconds = 0n;
    }
    this.recordOutcome(l.provider, unitSeconds, outcome);
    if (slash !== 0n) this.transfer(this.w.registry, this.w.market, slash);
  }
  /** Ends a completion's hold: collateral back, `deposit` becomes the provider's total, reputation counts `outcome`. */
  private releaseHeld(l: MLease, outcome: number): void {
    const unitSeconds = bmin(BigInt(l.units) * BigInt(l.stopAt - l.start), l.paid / l.price);
    this.releaseCollateral(l, 0n, unitSeconds, outcome);
    l.deposit = l.paid;
    l.held = false;
  }
  private release(l: MLease, collateral: bigint, slash: bigint, unitSeconds: bigint, outcome: number): void {
    this.freeUnits(l.machineId, l.units, l.interruptible);
    const p = this.provider(l.provider);
    if (p.locked < collateral) revert("panic: locked underflow");
    p.locked -= collateral;
    p.free += collateral - slash;
    this.recordOutcome(l.provider, unitSeconds, outcome);
    // The slash goes to the market, which pays it to the renter with the refund.
    if (slash !== 0n) this.transfer(this.w.registry, this.w.market, slash);
  }

  // -- market internals
  private lease(id: number): MLease | undefined {
    return this.st.leases[id - 1];
  }
  /** Pays `amount` out of the market; a payment the token refuses is owed to `to` instead (finding 4). */
  private pay(to: Address, amount: bigint): void {
    if (amount === 0n) return;
    if (this.st.blocked.includes(to)) {
      this.st.owed[to] = (this.st.owed[to] ?? 0n) + amount;
      return;
    }
    this.transfer(this.w.market, to, amount);
  }
  /** Ends a lease; returns what the renter gets (refund + credit). */
  private finish(l: MLease, reason: number, stopAt: number, providerTotal: bigint, credit: bigint, outcome: number, promised: bigint): bigint {
    const collateral = collateralOf(l.deposit, l.collateralBps);
    const refund = l.deposit - providerTotal;
    let unitSeconds = 0n;
    if (l.status === S.Active) {
      const metered = BigInt(l.units) * BigInt(stopAt - l.start);
      const bought = providerTotal / l.price;
      // Only on-demand time counts: an interruptible lease adds no unit-second and no completion (#34 finding 5).
      if (!l.interruptible) unitSeconds = metered < bought ? metered : bought;
      else if (outcome === OUTCOME.Completed) outcome = OUTCOME.Neutral;
      l.status = providerTotal === l.paid ? S.Settled : S.Ended;
    } else if (reason === R.CoSigned || providerTotal === 0n) {
      l.status = reason === R.CoSigned ? S.Settled : S.Cancelled;
    } else {
      l.status = S.Ended;
    }
    l.deposit = providerTotal;
    l.stopAt = stopAt;
    l.endReason = reason;
    l.credit += credit;
    l.promised += promised;
    this.release(l, collateral, credit, unitSeconds, outcome);
    return refund + credit;
  }
  /** Pays the provider what its paid total rose by; the fee is on the cumulative total (finding 7). */
  private payProvider(provider: Address, paidBefore: bigint, paidAfter: bigint): void {
    if (paidAfter === paidBefore) return;
    const amount = paidAfter - paidBefore;
    const bps = this.st.params.protocolFeeBps;
    if (bps === 0) {
      this.pay(provider, amount);
      return;
    }
    const f = fee(paidAfter, bps) - fee(paidBefore, bps);
    this.pay(provider, amount - f);
    this.pay(this.st.params.treasury, f);
  }
  private accruedNow(l: MLease): bigint {
    const now = this.st.now;
    if (l.status === S.Active) return accruedUntil(l, min(now, endOf(l)));
    if (l.status === S.Ended) {
      if (now >= l.stopAt) return l.deposit;
      const sofar = accruedUntil(l, now);
      return bmin(sofar, l.deposit);
    }
    return l.paid;
  }
  private accrue(l: MLease): [bigint, boolean] {
    if (l.status === S.Active) {
      const end = endOf(l);
      if (this.st.now >= end) {
        // Within the fault window after the end the last window's pay stays held with the collateral (expire).
        const paidBefore = l.paid;
        l.paid = this.holdsExpiry(end) ? bmax(paidBefore, paidUntil(l, end)) : l.deposit;
        this.expire(l, end);
        return [l.paid - paidBefore, true];
      }
    }
    let total = this.accruedNow(l);
    // The last window's pay stays in escrow while a fault can still reach the lease (overpaid-above-collateral).
    const reachable = l.status === S.Active ? this.st.now < endOf(l) : l.status === S.Ended && this.st.now < l.stopAt;
    if (reachable && !this.known.has(FINDINGS.overpaidAboveCollateral)) total = bmin(total, paidUntil(l, this.st.now));
    total = bmax(total, l.paid);
    const amount = total - l.paid;
    if (l.status === S.Ended && total === l.deposit) {
      l.paid = total;
      l.status = S.Settled;
      return [amount, true];
    }
    if (amount === 0n) return [0n, false];
    l.paid = total;
    return [amount, true];
  }
  /** Whether an Active lease past `end`, ended now, is held (#34: a fault observed in its last window can still land). */
  private holdsExpiry(end: number): boolean {
    return !this.known.has(FINDINGS.expiryReleasesCollateral) && this.st.now < end + FAULT_SUBMISSION_WINDOW;
  }
  /**
   * Ends an Active lease that ran to its end (the caller set `paid` and pays it): held like a completion until
   * end + W (units freed, collateral and the pay beyond `paid` held, nothing refunded), or finalized at once after it.
   */
  private expire(l: MLease, end: number): void {
    if (!this.holdsExpiry(end)) {
      this.finish(l, R.Expired, end, l.deposit, 0n, OUTCOME.Completed, 0n);
      return;
    }
    l.stopAt = end;
    l.endReason = R.Expired;
    l.status = S.Settled;
    l.held = true;
    this.freeUnits(l.machineId, l.units, l.interruptible);
  }
  private collateralAt(l: MLease, at: number): bigint {
    let c = l.openCollateral;
    for (const entry of l.collateralFrom) if (entry.at <= at) c = entry.collateral;
    return c;
  }
  private setDeposit(l: MLease, deposit: bigint): void {
    l.deposit = deposit;
    l.collateralFrom.push({ at: this.st.now, collateral: collateralOf(deposit, l.collateralBps) });
  }
  /** The collateral share of `deposit` for the time left at `at`, on the lease's current start and rate. */
  private proRata(l: MLease, deposit: bigint, at: number): bigint {
    const end = l.start + Number(deposit / rate(l));
    if (end <= at) return 0n;
    return (collateralOf(deposit, l.collateralBps) * BigInt(end - at)) / BigInt(end - l.start);
  }
  /** A preempting lease closed by its renter pays at least the notice on its units, or its deposit (finding 2). */
  private preemptorMinimum(l: MLease, accrued: bigint): bigint {
    if (!l.preemptor) return accrued;
    const minimum = bmin(rate(l) * BigInt(this.st.params.preemptionNotice), l.deposit);
    l.closeMinimum = minimum;
    return accrued > minimum ? accrued : minimum;
  }
  /** A reserved-term lease closed Active by its renter pays at least units x price x its offer's minDuration (issue #34 finding 4). */
  private committedMinimum(l: MLease, owed: bigint): bigint {
    if (l.commitment === 0) return owed;
    const minimum = rate(l) * BigInt(l.commitment);
    l.closeMinimum = l.closeMinimum !== undefined && l.closeMinimum > minimum ? l.closeMinimum : minimum;
    return owed > minimum ? owed : minimum;
  }

  // -- operations (each mutates this.st; a Revert leaves the caller to discard the copy)
  open(sender: Address, offer: Offer, terms: Terms, permit?: { value: bigint; deadline: number }): void {
    const now = this.st.now;
    if (permit) {
      // try permit() catch {}: a valid permit (deadline not passed) sets the allowance.
      if (permit.deadline >= now) {
        this.st.allowances[sender] = permit.value;
        this.st.permitNonce++;
      }
    }
    if (now > offer.expiry) revert("OfferExpired");
    if (offer.renter !== zeroAddress && getAddress(offer.renter) !== sender) revert("OfferNotForRenter");
    if (offer.startWindow < MIN_START_WINDOW) revert("StartWindowTooShort");
    if (terms.units === 0) revert("ZeroUnits");
    if (terms.duration === 0 || terms.duration < offer.minDuration || terms.duration > offer.maxDuration) revert("DurationOutOfRange");
    let price: bigint;
    if (terms.interruptible) {
      if (offer.minBidPerUnitSecond === 0n) revert("InterruptibleNotOffered");
      price = terms.bidPerUnitSecond;
      if (price < offer.minBidPerUnitSecond) revert("BidTooLow");
    } else {
      price = offer.pricePerUnitSecond;
      if (price === 0n) revert("ZeroPrice");
    }
    if (price > terms.maxPricePerUnitSecond) revert("PriceAboveCap");
    const deposit = BigInt(terms.units) * price * BigInt(terms.duration);
    const collateral = collateralOf(deposit, offer.collateralBps);
    const leaseId = this.st.nextLeaseId++;
    const refunds: [Address, bigint][] = [];
    let preempted = 0;
    let evicted = 0n;
    if (terms.preempt.length !== 0) {
      if (terms.preempt.length > MAX_PREEMPT) revert("TooManyPreemptions");
      const m = this.st.machines[offer.machineId];
      let idle = m ? m.units - m.onDemand - m.interrupt : 0;
      for (let i = 0; i < terms.preempt.length && idle < terms.units; i++) {
        const id = Number(terms.preempt[i]);
        const l = this.lease(id);
        if ((l?.machineId ?? 0) !== offer.machineId || !l) revert("PreemptWrongMachine");
        // Its own provider would end it without the termination (or start) penalty (#34 finding 1).
        if (l.provider === sender && l.renter !== sender) revert("SelfPreemption");
        if (l.status === S.Active && now >= endOf(l)) {
          this.expire(l, endOf(l));
        } else {
          const running = l.status === S.Open || l.status === S.Active;
          if (!running || !l.interruptible || (terms.interruptible && l.price >= price)) revert("NotPreemptible");
          // The victim's notice: units x price x min(notice, its time left) (issue #34 finding 7).
          const left = l.status === S.Active ? endOf(l) - now : Number(l.deposit / rate(l));
          evicted += rate(l) * BigInt(Math.min(this.st.params.preemptionNotice, left));
          let stop = now;
          let total = 0n;
          if (l.status === S.Active) {
            stop = min(now + this.st.params.preemptionNotice, endOf(l));
            total = accruedUntil(l, stop);
          }
          refunds.push([l.renter, this.finish(l, R.Preempted, stop, total, 0n, OUTCOME.Neutral, 0n)]);
          preempted++;
        }
        idle += l.units;
      }
      // A bid owes at least the notice of every lease it evicts.
      const owes = bmin(BigInt(terms.units) * price * BigInt(this.st.params.preemptionNotice), deposit);
      if (terms.interruptible && owes < evicted) revert("PreemptionUnderpriced");
    }
    // reserve
    const m = this.st.machines[offer.machineId];
    if (!m || m.owner !== getAddress(offer.provider)) revert("NotMachineOwner");
    const idle = m.units - m.onDemand - m.interrupt;
    if (terms.units > idle) revert("InsufficientUnits");
    if (terms.interruptible) m.interrupt += terms.units;
    else m.onDemand += terms.units;
    this.useNonce(m.owner, offer.nonce, offer.renter !== zeroAddress);
    const p = this.provider(m.owner);
    if (collateral > p.free) revert("InsufficientFreeStake");
    p.free -= collateral;
    p.locked += collateral;
    const start = now + offer.startWindow;
    this.st.leases[leaseId - 1] = {
      id: leaseId,
      renter: sender,
      provider: m.owner,
      start,
      stopAt: 0,
      collateralBps: offer.collateralBps,
      endReason: R.None,
      activated: false,
      price,
      deposit,
      paid: 0n,
      machineId: offer.machineId,
      units: terms.units,
      status: S.Open,
      interruptible: terms.interruptible,
      preemptor: preempted > 0,
      depositBefore: 0n,
      commitment: offer.minDuration >= MIN_COMMITMENT ? offer.minDuration : 0,
      openCollateral: collateral,
      openDeposit: deposit,
      openUnits: terms.units,
      openNotice: this.st.params.preemptionNotice,
      collateralFrom: [],
      segments: [],
      credit: 0n,
      promised: 0n,
      preempted,
      recovered: 0n,
    };
    this.transferFrom(this.w.market, sender, this.w.market, deposit);
    for (const [to, amount] of refunds) this.pay(to, amount);
  }

  activate(sender: Address, id: number): void {
    const l = this.lease(id);
    if (!l || l.status !== S.Open) revert("InvalidLeaseStatus");
    if (sender !== l.provider) revert("NotProvider");
    if (this.st.now > l.start) revert("StartDeadlinePassed");
    l.start = this.st.now;
    l.activated = true;
    l.status = S.Active;
    l.segments.push({ from: this.st.now, units: l.units });
  }

  claim(id: number): void {
    const l = this.lease(id);
    if (l?.held) {
      // A completion's hold: released after the fault window; reputation counts a completion only if it ran to its end.
      if (this.st.now < holdEnd(l)) revert("CollateralHeld");
      const total = heldTotal(l);
      const paidBefore = l.paid;
      const outcome = total === l.deposit ? OUTCOME.Completed : OUTCOME.Neutral;
      l.paid = total;
      this.releaseHeld(l, outcome);
      this.payProvider(l.provider, paidBefore, total);
      return;
    }
    if (!l || (l.status !== S.Active && l.status !== S.Ended)) revert("InvalidLeaseStatus");
    const paidBefore = l.paid;
    const [amount, changed] = this.accrue(l);
    if (!changed) revert("NothingToClaim");
    this.payProvider(l.provider, paidBefore, paidBefore + amount);
  }

  claimMany(ids: number[]): void {
    if (ids.length > MAX_BATCH) revert("BatchTooLarge");
    const bps = this.st.params.protocolFeeBps;
    const payments: [Address, bigint][] = [];
    let fees = 0n;
    for (const id of ids) {
      const l = this.lease(id);
      if (!l || (l.status !== S.Active && l.status !== S.Ended)) continue;
      const paidBefore = l.paid;
      const [amount] = this.accrue(l);
      if (amount === 0n) continue;
      const f = bps === 0 ? 0n : fee(paidBefore + amount, bps) - fee(paidBefore, bps);
      fees += f;
      if (payments.length === 0 || payments[payments.length - 1]![0] !== l.provider) payments.push([l.provider, 0n]);
      payments[payments.length - 1]![1] += amount - f;
    }
    for (const [to, amount] of payments) this.pay(to, amount);
    this.pay(this.st.params.treasury, fees);
  }

  close(sender: Address, id: number): void {
    const l = this.lease(id);
    if (!l || sender !== l.renter) revert("NotRenter");
    const now = this.st.now;
    let refund = 0n;
    if (l.status === S.Open) {
      refund = this.finish(l, R.RenterClosed, now, this.preemptorMinimum(l, 0n), 0n, OUTCOME.Neutral, 0n);
    } else if (l.status === S.Active) {
      const end = endOf(l);
      if (now >= end) this.expire(l, end);
      else refund = this.finish(l, R.RenterClosed, now, this.committedMinimum(l, this.preemptorMinimum(l, accruedUntil(l, now))), 0n, OUTCOME.Completed, 0n);
    } else revert("InvalidLeaseStatus");
    this.pay(l.renter, refund);
  }

  complete(sender: Address, id: number): void {
    const l = this.lease(id);
    if (!l || l.status !== S.Active) revert("InvalidLeaseStatus");
    if (sender !== l.provider) revert("NotProvider");
    const stop = min(this.st.now, endOf(l));
    const total = accruedUntil(l, stop);
    const paidBefore = l.paid;
    // #34 finding 1: the provider is paid, the renter refunded and the units freed now; the collateral stays
    // locked for the fault window (a fault observed before the completion still lands) and reputation waits for
    // the release (claim after the window, or the renter's settle).
    // The provider is paid until stop - W; its last window's pay is held with the collateral (overpaid-above-collateral).
    l.paid = this.known.has(FINDINGS.overpaidAboveCollateral) ? total : bmax(paidBefore, paidUntil(l, stop));
    l.stopAt = stop;
    l.endReason = R.Completed;
    l.status = S.Settled;
    l.held = true;
    this.freeUnits(l.machineId, l.units, l.interruptible);
    this.payProvider(l.provider, paidBefore, l.paid);
    this.pay(l.renter, l.deposit - total);
  }

  terminate(sender: Address, id: number): void {
    const l = this.lease(id);
    if (!l || sender !== l.provider) revert("NotProvider");
    const now = this.st.now;
    let toRenter: bigint;
    const paidBefore = l.paid;
    if (l.status === S.Open) {
      const bps = BigInt(this.st.params.startPenaltyBps);
      const penalty = (collateralOf(l.deposit, l.collateralBps) * bps) / BPS;
      const base = this.known.has(FINDINGS.penaltyAfterExtension) ? collateralOf(l.deposit, l.collateralBps) : l.openCollateral;
      toRenter = this.finish(l, R.Terminated, now, 0n, penalty, OUTCOME.Faulted, (base * bps) / BPS);
    } else if (l.status === S.Active) {
      const end = endOf(l);
      if (now >= end) revert("LeaseExpired");
      const total = accruedUntil(l, now);
      const termsDeposit = now < l.stopAt + FAULT_SUBMISSION_WINDOW ? l.depositBefore : l.deposit;
      const penalty = this.proRata(l, termsDeposit, now);
      l.paid = total;
      // The provider walks away: the renter is owed at most the collateral as it stands.
      toRenter = this.finish(l, R.Terminated, now, total, penalty, OUTCOME.Faulted, collateralOf(l.deposit, l.collateralBps));
    } else revert("InvalidLeaseStatus");
    this.payProvider(l.provider, paidBefore, l.paid);
    this.pay(l.renter, toRenter);
  }

  cancel(id: number): void {
    const l = this.lease(id);
    if (!l || l.status !== S.Open) revert("InvalidLeaseStatus");
    if (this.st.now <= l.start) revert("StartDeadlineNotPassed");
    const bps = BigInt(this.st.params.startPenaltyBps);
    const penalty = (collateralOf(l.deposit, l.collateralBps) * bps) / BPS;
    // Promise: the start penalty on the lease as it was opened.
    const base = this.known.has(FINDINGS.penaltyAfterExtension) ? collateralOf(l.deposit, l.collateralBps) : l.openCollateral;
    const toRenter = this.finish(l, R.MissedStart, this.st.now, 0n, penalty, OUTCOME.Faulted, (base * bps) / BPS);
    this.pay(l.renter, toRenter);
  }

  submitFault(fault: HeldFault): void {
    const l = this.lease(fault.leaseId);
    const now = this.st.now;
    const inNotice = !!l && l.status === S.Ended && l.endReason === R.Preempted && now < l.stopAt;
    const held = !!l?.held;
    if (!l || (l.status !== S.Active && !inNotice && !held)) revert("InvalidLeaseStatus");
    // Only the defined kinds, each disputable by its signer's own receipt (#34 finding 3).
    if (fault.kind === 0 || fault.kind > MAX_FAULT_KIND) revert("InvalidFaultKind");
    const end = inNotice || held ? l.stopAt : endOf(l);
    const latest = min(now, end - 1);
    const observedAt = fault.observedAt;
    if (observedAt < l.start || observedAt > latest) revert("FaultObservedOutOfRange");
    if (now > observedAt + FAULT_SUBMISSION_WINDOW) revert("FaultSubmissionClosed");
    if (fault.signatures.length > MAX_FAULT_SIGNATURES) revert("TooManySignatures");
    if (fault.signatures.length < this.st.quorum) revert("FaultQuorumNotMet");
    // A signer counts only while it holds minStake in the staking (a slashed liar's signature stops counting).
    for (const a of this.w.attestors.slice(0, fault.signers)) if (!isStaked(this.st.staking, a.address)) revert("NotAttestor");
    const accruedAtFault = accruedUntil(l, observedAt);
    const total = bmax(l.paid, accruedAtFault);
    if (held) {
      this.faultHeld(l, observedAt, accruedAtFault);
      return;
    }
    if (inNotice) {
      // The collateral went back at the preemption: accrual stops at observedAt, no credit.
      const rest = l.deposit - total;
      l.deposit = total;
      l.stopAt = observedAt;
      l.endReason = R.Faulted;
      l.status = total === l.paid ? S.Settled : S.Ended;
      this.pay(l.renter, rest);
      return;
    }
    const collateral = collateralOf(l.deposit, l.collateralBps);
    let credit: bigint;
    let minCredit: bigint;
    if (observedAt < l.stopAt) {
      credit = this.proRata(l, l.depositBefore, observedAt);
      minCredit = (collateralOf(l.depositBefore, l.collateralBps) * BigInt(this.st.params.faultMinCreditBps)) / BPS;
    } else {
      credit = (collateral * BigInt(end - observedAt)) / BigInt(end - l.start);
      minCredit = (collateral * BigInt(this.st.params.faultMinCreditBps)) / BPS;
    }
    if (credit < minCredit) credit = minCredit;
    credit = bmin(credit + (total - accruedAtFault), collateral);
    // Promise: at most the collateral of the lease as it stood when the fault was observed, plus
    // whatever the provider claimed after observedAt (the renter's own money coming back).
    const promised = (this.known.has(FINDINGS.faultAfterExtension) ? collateral : this.collateralAt(l, observedAt)) + (total - accruedAtFault);
    l.recovered = total - accruedAtFault;
    l.unrecovered = bmax(0n, l.recovered - credit);
    const toRenter = this.finish(l, R.Faulted, observedAt, total, credit, OUTCOME.Faulted, promised);
    this.pay(l.renter, toRenter);
  }

  /**
   * A fault observed before a held completion (#34 finding 1): the provider keeps what accrued until observedAt, its
   * pay after it comes back to the renter from the collateral with the SLA credit, on the deposit before the lease's
   * latest extension (if any).
   */
  private faultHeld(l: MLease, observedAt: number, accruedAtFault: bigint): void {
    const collateral = collateralOf(l.deposit, l.collateralBps);
    let terms = l.depositBefore;
    if (terms === 0n || terms > l.deposit) terms = l.deposit;
    let credit = this.proRata(l, terms, observedAt);
    const minCredit = (collateralOf(terms, l.collateralBps) * BigInt(this.st.params.faultMinCreditBps)) / BPS;
    if (credit < minCredit) credit = minCredit;
    // The completion paid until stopAt - W <= observedAt: the provider's pay after observedAt is all still held.
    const paidBefore = l.paid;
    const total = bmax(paidBefore, accruedAtFault);
    const overpaid = total - accruedAtFault;
    credit = bmin(credit + overpaid, collateral);
    const heldBack = heldTotal(l) - total;
    // Promise: at most the collateral as it stood at observedAt, plus the provider's pay after it.
    l.promised += (this.known.has(FINDINGS.faultAfterExtension) ? collateral : this.collateralAt(l, observedAt)) + overpaid;
    l.credit += credit;
    l.recovered = overpaid;
    l.unrecovered = bmax(0n, overpaid - credit);
    this.releaseCollateral(l, credit, accruedAtFault / l.price, OUTCOME.Faulted);
    l.paid = total;
    l.deposit = total;
    l.held = false;
    l.endReason = R.Faulted;
    l.stopAt = observedAt;
    this.payProvider(l.provider, paidBefore, total);
    this.pay(l.renter, heldBack + credit);
  }

  settle(id: number, providerAmount: bigint, deadline: number): void {
    const l = this.lease(id);
    if (!l || (l.status !== S.Open && l.status !== S.Active && l.status !== S.Ended && !l.held)) revert("InvalidLeaseStatus");
    if (this.st.now > deadline) revert("SettlementExpired");
    // A held completion was paid out: its renter co-signs the provider's total as it stands.
    if (providerAmount < l.paid || providerAmount > (l.held ? heldTotal(l) : l.deposit)) revert("SettlementAmountOutOfRange");
    const paidBefore = l.paid;
    l.paid = providerAmount;
    let refund: bigint;
    if (l.held) {
      // The renter co-signs the completion: its hold ends now and it counts as one.
      refund = heldTotal(l) - providerAmount;
      this.releaseHeld(l, OUTCOME.Completed);
    } else if (l.status === S.Ended) {
      refund = l.deposit - providerAmount;
      l.deposit = providerAmount;
      l.status = S.Settled;
      // Renter and provider agreed on a new final total (at most what was owed): the minimum is no longer a floor.
      l.cosigned = true;
    } else {
      const stop = l.status === S.Active ? min(this.st.now, endOf(l)) : this.st.now;
      refund = this.finish(l, R.CoSigned, stop, providerAmount, 0n, OUTCOME.Completed, 0n);
    }
    this.payProvider(l.provider, paidBefore, providerAmount);
    this.pay(l.renter, refund);
  }

  extend(sender: Address, id: number, extra: number, offer: Offer): void {
    const l = this.lease(id);
    if (!l || sender !== l.renter) revert("NotRenter");
    // Only Active leases (finding 3).
    if (l.status !== S.Active) revert("InvalidLeaseStatus");
    const r = rate(l);
    const end = endOf(l);
    if (this.st.now >= end) revert("LeaseExpired");
    if (extra === 0) revert("ZeroExtension");
    if (end + extra >= 2 ** 32) revert("SafeCastOverflowedUintDowncast");
    if (this.st.now > offer.expiry) revert("OfferExpired");
    if (offer.renter !== zeroAddress && getAddress(offer.renter) !== sender) revert("OfferNotForRenter");
    if (getAddress(offer.provider) !== l.provider || offer.machineId !== l.machineId) revert("OfferForOtherMachine");
    const offerPrice = l.interruptible ? offer.minBidPerUnitSecond : offer.pricePerUnitSecond;
    if (offerPrice === 0n) revert(l.interruptible ? "InterruptibleNotOffered" : "ZeroPrice");
    if (offerPrice > l.price) revert("ExtensionPriceTooHigh");
    if (offer.collateralBps < l.collateralBps) revert("ExtensionCollateralTooLow");
    const total = Number(l.deposit / r) + extra;
    if (total < offer.minDuration || total > offer.maxDuration) revert("DurationOutOfRange");
    const extraDeposit = r * BigInt(extra);
    const oldCollateral = collateralOf(l.deposit, l.collateralBps);
    if (this.st.now >= l.stopAt + FAULT_SUBMISSION_WINDOW) l.depositBefore = l.deposit;
    this.setDeposit(l, l.deposit + extraDeposit);
    l.stopAt = this.st.now;
    // lockMore
    this.useNonce(l.provider, offer.nonce, offer.renter !== zeroAddress);
    const more = collateralOf(l.deposit, l.collateralBps) - oldCollateral;
    const p = this.provider(l.provider);
    if (more > p.free) revert("InsufficientFreeStake");
    p.free -= more;
    p.locked += more;
    this.transferFrom(this.w.market, sender, this.w.market, extraDeposit);
  }

  shrink(sender: Address, id: number, newUnits: number): void {
    const l = this.lease(id);
    if (!l || sender !== l.renter) revert("NotRenter");
    if (newUnits === 0 || newUnits >= l.units) revert("InvalidShrink");
    const now = this.st.now;
    if (l.preemptor) {
      if (l.status === S.Open || now < l.start + this.st.params.preemptionNotice) revert("PreemptionNoticeUnpaid");
      l.preemptor = false;
    }
    if (l.commitment !== 0 && l.status === S.Active) {
      if (now < l.start + l.commitment) revert("CommitmentUnserved");
      l.commitment = 0;
    }
    const oldCollateral = collateralOf(l.deposit, l.collateralBps);
    const paidBefore = l.paid;
    let accrued = 0n;
    let newDeposit: bigint;
    let unitSeconds = 0n;
    let refund: bigint;
    if (l.status === S.Active) {
      const end = endOf(l);
      if (now >= end) revert("LeaseExpired");
      accrued = accruedUntil(l, now);
      if (!l.interruptible) unitSeconds = BigInt(l.units) * BigInt(now - l.start);
      newDeposit = BigInt(newUnits) * l.price * BigInt(end - now);
      refund = l.deposit - accrued - newDeposit;
      if (now < l.stopAt + FAULT_SUBMISSION_WINDOW) {
        const endBefore = l.start + Number(l.depositBefore / rate(l));
        l.depositBefore = endBefore > now ? BigInt(newUnits) * l.price * BigInt(endBefore - now) : 0n;
      }
      l.start = now;
      l.paid = 0n;
      l.segments.push({ from: now, units: newUnits });
    } else if (l.status === S.Open) {
      newDeposit = BigInt(newUnits) * l.price * (l.deposit / rate(l));
      refund = l.deposit - newDeposit;
    } else revert("InvalidLeaseStatus");
    const released = l.units - newUnits;
    l.units = newUnits;
    this.setDeposit(l, newDeposit);
    this.freeUnits(l.machineId, released, l.interruptible);
    const p = this.provider(l.provider);
    const unlocked = oldCollateral - collateralOf(newDeposit, l.collateralBps);
    p.locked -= unlocked;
    p.free += unlocked;
    this.recordOutcome(l.provider, unitSeconds, OUTCOME.Neutral);
    this.payProvider(l.provider, paidBefore, accrued > paidBefore ? accrued : paidBefore);
    this.pay(l.renter, refund);
  }

  /** Pulls what the market owes `sender` (refused payments), to `to`. */
  withdrawOwed(sender: Address, to: Address): void {
    const amount = this.st.owed[sender] ?? 0n;
    if (amount === 0n) revert("NothingOwed");
    this.st.owed[sender] = 0n;
    this.transfer(this.w.market, to, amount);
  }

  setParams(sender: Address, params: Params): void {
    if (sender !== this.w.governance) revert("NotGovernance");
    if (params.protocolFeeBps > MAX_PROTOCOL_FEE_BPS) revert("ParamOutOfRange");
    if (params.startPenaltyBps > 10_000) revert("ParamOutOfRange");
    if (params.faultMinCreditBps > 10_000) revert("ParamOutOfRange");
    if (params.preemptionNotice > MAX_PREEMPTION_NOTICE) revert("ParamOutOfRange");
    if (params.protocolFeeBps !== 0 && params.treasury === zeroAddress) revert("ZeroTreasury");
    this.st.params = { ...params };
  }
  setFaultQuorum(sender: Address, quorum: number): void {
    if (sender !== this.w.governance) revert("AccessControlUnauthorizedAccount");
    if (quorum === 0 || quorum > MAX_FAULT_QUORUM) revert("InvalidFaultQuorum");
    this.st.quorum = quorum;
  }
  setUnbondingDelay(sender: Address, delay: number): void {
    if (sender !== this.w.governance) revert("AccessControlUnauthorizedAccount");
    if (delay > MAX_UNBONDING_DELAY) revert("UnbondingDelayTooLong");
    this.st.delay = delay;
  }

  register(sender: Address): void {
    const p = this.provider(sender);
    if (p.registered) revert("AlreadyRegistered");
    p.registered = true;
  }
  deregister(sender: Address): void {
    const p = this.provider(sender);
    if (!p.registered) revert("NotRegistered");
    if (p.machineCount !== 0) revert("ProviderHasMachines");
    if (p.locked !== 0n) revert("CollateralStillLocked");
    p.registered = false;
    p.unbonding += p.free;
    p.unlockAt = this.st.now + this.st.delay;
    p.free = 0n;
  }
  stake(sender: Address, amount: bigint): void {
    const p = this.provider(sender);
    if (!p.registered) revert("NotRegistered");
    if (amount === 0n) revert("ZeroAmount");
    p.free += amount;
    this.transferFrom(this.w.registry, sender, this.w.registry, amount);
  }
  requestUnstake(sender: Address, amount: bigint): void {
    if (amount === 0n) revert("ZeroAmount");
    const p = this.provider(sender);
    if (amount > p.free) revert("InsufficientFreeStake");
    p.free -= amount;
    p.unbonding += amount;
    p.unlockAt = this.st.now + this.st.delay;
  }
  withdraw(sender: Address): void {
    const p = this.provider(sender);
    const amount = p.unbonding;
    if (amount === 0n) revert("NothingToWithdraw");
    if (this.st.now < p.unlockAt) revert("StillUnbonding");
    p.unbonding = 0n;
    p.unlockAt = 0;
    this.transfer(this.w.registry, sender, amount);
  }
  addMachine(sender: Address, units: number): void {
    const p = this.provider(sender);
    if (!p.registered) revert("NotRegistered");
    if (units === 0) revert("InvalidUnitCount");
    const id = ++this.st.lastMachineId;
    this.st.machines[id] = { owner: sender, units, onDemand: 0, interrupt: 0 };
    p.machineCount++;
  }
  private idleMachineOf(id: number, sender: Address): MMachine {
    const m = this.st.machines[id];
    if (!m || m.owner !== sender) revert("NotMachineOwner");
    if (m.onDemand + m.interrupt !== 0) revert("MachineLeased");
    return m;
  }
  updateMachine(sender: Address, id: number, units: number): void {
    const m = this.idleMachineOf(id, sender);
    if (units === 0) revert("InvalidUnitCount");
    m.units = units;
  }
  removeMachine(sender: Address, id: number): void {
    this.idleMachineOf(id, sender);
    delete this.st.machines[id];
    this.provider(sender).machineCount--;
  }
  revokeNonce(sender: Address, nonce: bigint): void {
    const p = this.provider(sender);
    if (!p.revoked.includes(nonce)) p.revoked.push(nonce);
  }
  revokeNoncesBelow(sender: Address, floor: bigint): void {
    const p = this.provider(sender);
    if (floor <= p.nonceFloor) revert("NonceFloorNotRaised");
    p.nonceFloor = floor;
  }
  setBlocked(sender: Address, who: Address, value: boolean): void {
    if (sender !== this.w.governance) revert("NotAdmin");
    this.st.blocked = this.st.blocked.filter((a) => a !== who);
    if (value) this.st.blocked.push(who);
  }
}

// ---------------------------------------------------------------------------------------------
// Steps

export type Terms = { units: number; duration: number; maxPricePerUnitSecond: bigint; interruptible: boolean; bidPerUnitSecond: bigint; preempt: bigint[] };

export type Step =
  | { kind: "time"; seconds: number }
  | { kind: "open"; who: Address; offer: number; terms: Terms; permit?: { value: bigint; deadline: number } }
  | { kind: "activate" | "claim" | "close" | "complete" | "terminate" | "cancel"; who: Address; id: number }
  | { kind: "claimMany"; who: Address; ids: number[] }
  | { kind: "signFault"; id: number; faultKind: number; observedAt: number; signers: number; submit: boolean }
  | { kind: "submitHeld"; index: number }
  | { kind: "extend"; who: Address; id: number; extra: number; offer: number }
  | { kind: "shrink"; who: Address; id: number; units: number }
  | { kind: "settle" | "cosign"; id: number; amount: bigint; deadline: number }
  | { kind: "release"; who: Address; id: number }
  | { kind: "stake" | "unstake"; who: Address; amount: bigint }
  | { kind: "withdraw" | "deregister" | "register"; who: Address }
  | { kind: "addMachine"; who: Address; units: number }
  | { kind: "updateMachine"; who: Address; id: number; units: number }
  | { kind: "removeMachine"; who: Address; id: number }
  | { kind: "revokeNonce"; who: Address; nonce: bigint }
  | { kind: "revokeNoncesBelow"; who: Address; floor: bigint }
  | { kind: "setParams"; who: Address; params: Params }
  | { kind: "setFaultQuorum"; who: Address; quorum: number }
  | { kind: "setUnbondingDelay"; who: Address; delay: number }
  | { kind: "block"; who: Address; target: Address; value: boolean }
  | { kind: "withdrawOwed"; who: Address; to: Address }
  | StakingStep;

// ---------------------------------------------------------------------------------------------
// The world on chain

type Rpc = Connection["provider"];

export type World = {
  rpc: Rpc;
  token: Address;
  registry: Address;
  market: Address;
  staking: Address;
  /** The staking's sink (the second treasury). */
  sink: Address;
  lens: Address;
  lensAbi: Abi;
  tokenAbi: Abi;
  governance: Address;
  P: Address;
  A: Address;
  R1: Address;
  R2: Address;
  RP: Address;
  treasuries: [Address, Address];
  attestors: HDAccount[];
  keys: Record<Address, HDAccount>;
  renters: Address[];
  honest: Address[];
  offers: { offer: Offer; signature: Hex }[];
  accounts: Address[];
  providers: Address[];
  machineIds: number[];
  chainId: number;
  domain: ReturnType<typeof suanliDomain>;
  tokenDomain: { name: string; version: string; chainId: number; verifyingContract: Address };
  initial: State;
  startTime: number;
};

async function send(rpc: Rpc, from: Address, to: Address, abi: Abi, functionName: string, args: readonly unknown[]): Promise<void> {
  await rpc.request({ method: "eth_sendTransaction", params: [{ from, to, data: encodeFunctionData({ abi, functionName, args } as never), gas: "0x989680" }] });
}

/** Sends a transaction mined at `at`; true if it succeeded, false if it reverted. */
async function sendAt(rpc: Rpc, at: number, from: Address, to: Address, abi: Abi, functionName: string, args: readonly unknown[]): Promise<{ ok: boolean; error?: string }> {
  await rpc.request({ method: "evm_setNextBlockTimestamp", params: [at] });
  try {
    await send(rpc, from, to, abi, functionName, args);
    return { ok: true };
  } catch (error) {
    const message = (error as Error).message;
    if (!/revert|VM Exception|panic/i.test(message)) throw error;
    // Hardhat mines a reverting transaction (status 0) before it throws: time moved on as the model says.
    return { ok: false, error: message.split("\n")[0] };
  }
}

/** Whether a call from `from` would succeed now (eth_call on the latest state). */
async function callSucceeds(rpc: Rpc, from: Address, to: Address, abi: Abi, functionName: string, args: readonly unknown[]): Promise<boolean> {
  try {
    await rpc.request({
      method: "eth_call",
      params: [{ from, to, data: encodeFunctionData({ abi, functionName, args } as never), gas: "0x989680" }, "latest"],
    });
    return true;
  } catch {
    return false;
  }
}

export async function deployWorld(connection: Connection): Promise<World> {
  const { viem, provider: rpc } = connection;
  const publicClient = await viem.getPublicClient();
  const wallets = await viem.getWalletClients();
  const addresses = wallets.map((w) => getAddress(w.account.address));
  const [governance, P, A, R1, R2, RP, , , , t1, t2] = addresses;
  const keys: Record<Address, HDAccount> = {};
  for (let i = 0; i < 12; i++) {
    const account = mnemonicToAccount(MNEMONIC, { addressIndex: i });
    assert.equal(account.address, addresses[i], "hardhat's accounts come from the default mnemonic");
    keys[account.address] = account;
  }
  const attestors = [6, 7, 8].map((i) => keys[addresses[i]!]!).sort((a, b) => (BigInt(a!.address) < BigInt(b!.address) ? -1 : 1));

  const token = await viem.deployContract("InvariantToken");
  const registry = await viem.deployContract("ProviderRegistry", [token.address, governance!, 30, 2]);
  const extension = await viem.deployContract("LeaseMarketExtension", [registry.address]);
  const params: Params = { protocolFeeBps: 100, startPenaltyBps: 1_000, faultMinCreditBps: 2_000, preemptionNotice: 20, treasury: t1! };
  const market = await viem.deployContract("LeaseMarket", [registry.address, extension.address, params]);
  const lens = await viem.deployContract("SuanliLens");
  await registry.write.grantRole([await registry.read.MARKET_ROLE(), market.address]);
  for (const a of attestors) await registry.write.grantRole([await registry.read.ATTESTOR_ROLE(), a!.address]);
  // The attestors count only while staked (issue #34 findings 3 and 6: their lies are disputed and slashed).
  const staking = await viem.deployContract("AttestorStaking", [registry.address, market.address, { ...STAKING, sink: t2! }, zeroAddress]);
  await registry.write.setAttestorStaking([staking.address]);
  const world = {
    rpc,
    token: getAddress(token.address),
    registry: getAddress(registry.address),
    market: getAddress(market.address),
    staking: getAddress(staking.address),
    sink: t2!,
  };
  for (const a of attestors) {
    await token.write.mint([a!.address, ATTESTOR_STAKE + ATTESTOR_WALLET]);
    await send(rpc, a!.address, world.token, token.abi as Abi, "approve", [world.staking, MAX_UINT]);
    await send(rpc, a!.address, world.staking, attestorStakingAbi as Abi, "stake", [ATTESTOR_STAKE]);
  }
  // Disputers bond the fee from their wallets.
  for (const who of [P, A, R1, R2]) await send(rpc, who!, world.token, token.abi as Abi, "approve", [world.staking, MAX_UINT]);

  const balances: Record<Address, bigint> = {};
  const allowances: Record<Address, bigint> = {};
  const providers: Record<Address, MProvider> = {};
  const machines: Record<number, MMachine> = {};
  for (const [who, stake] of [
    [P, PROVIDER_STAKE.P],
    [A, PROVIDER_STAKE.A],
  ] as const) {
    await token.write.mint([who!, stake + PROVIDER_WALLET]);
    await send(rpc, who!, world.token, token.abi as Abi, "approve", [world.registry, MAX_UINT]);
    await send(rpc, who!, world.token, token.abi as Abi, "approve", [world.market, MAX_UINT]);
    await send(rpc, who!, world.registry, providerRegistryAbi as Abi, "register", [`peer-${who}`, ""]);
    await send(rpc, who!, world.registry, providerRegistryAbi as Abi, "stake", [stake]);
    balances[who!] = PROVIDER_WALLET;
    allowances[who!] = MAX_UINT;
    providers[who!] = {
      registered: true,
      free: stake,
      locked: 0n,
      unbonding: 0n,
      unlockAt: 0,
      machineCount: 0,
      nonceFloor: 0n,
      revoked: [],
      leasesCompleted: 0n,
      faults: 0n,
      unitSeconds: 0n,
    };
  }
  // Machines 1 and 2 are P's (4 and 2 units), 3 is A's (4 units); A's next machine will be 4.
  for (const [owner, units] of [
    [P, 4],
    [P, 2],
    [A, 4],
  ] as const) {
    await send(rpc, owner!, world.registry, providerRegistryAbi as Abi, "addMachine", [MODEL, units, 23_034, 0, "eu", ZERO32]);
    const id = Object.keys(machines).length + 1;
    machines[id] = { owner: owner!, units, onDemand: 0, interrupt: 0 };
    providers[owner!]!.machineCount++;
  }
  for (const r of [R1, R2, RP]) {
    await token.write.mint([r!, RENTER_FUNDS]);
    balances[r!] = RENTER_FUNDS;
    // RP pays by permit only.
    if (r !== RP) {
      await send(rpc, r!, world.token, token.abi as Abi, "approve", [world.market, MAX_UINT]);
      allowances[r!] = MAX_UINT;
    } else allowances[r!] = 0n;
  }
  await token.write.mint([A!, RENTER_FUNDS]);
  balances[A!]! += RENTER_FUNDS;
  balances[world.registry] = PROVIDER_STAKE.P + PROVIDER_STAKE.A;
  balances[world.market] = 0n;
  for (const a of attestors) balances[a!.address] = ATTESTOR_WALLET;
  balances[world.staking] = BigInt(attestors.length) * ATTESTOR_STAKE;

  const chainId = await publicClient.getChainId();
  const domain = suanliDomain(chainId, world.market);
  const startTime = Number((await publicClient.getBlock()).timestamp) + 1;
  const base = { model: MODEL, minDuration: 10, maxDuration: 1_500, startWindow: 200, expiry: startTime + 10_000_000, renter: zeroAddress as Address };
  const offers: Offer[] = [
    { ...base, provider: P!, machineId: 1, pricePerUnitSecond: 3n, minBidPerUnitSecond: 1n, collateralBps: 5_000, nonce: 1n },
    { ...base, provider: P!, machineId: 2, pricePerUnitSecond: 4n, minBidPerUnitSecond: 2n, collateralBps: 20_000, nonce: 2n },
    { ...base, provider: A!, machineId: 3, pricePerUnitSecond: 3n, minBidPerUnitSecond: 1n, collateralBps: 5_000, nonce: 1n },
    { ...base, provider: P!, machineId: 1, pricePerUnitSecond: 3n, minBidPerUnitSecond: 1n, collateralBps: 5_000, nonce: 10n, renter: A! },
    { ...base, provider: P!, machineId: 1, pricePerUnitSecond: 3n, minBidPerUnitSecond: 1n, collateralBps: 5_000, nonce: 11n, renter: R1! },
    { ...base, provider: P!, machineId: 1, pricePerUnitSecond: 2n, minBidPerUnitSecond: 1n, collateralBps: 5_000, nonce: 12n, expiry: startTime + 400 },
    { ...base, provider: P!, machineId: 1, pricePerUnitSecond: 0n, minBidPerUnitSecond: 1n, collateralBps: 5_000, nonce: 13n },
    { ...base, provider: A!, machineId: 4, pricePerUnitSecond: 3n, minBidPerUnitSecond: 1n, collateralBps: 5_000, nonce: 2n },
    { ...base, provider: P!, machineId: 2, pricePerUnitSecond: 4n, minBidPerUnitSecond: 2n, collateralBps: 5_000, nonce: 14n, maxDuration: 60_000, startWindow: 30 },
    { ...base, provider: P!, machineId: 1, pricePerUnitSecond: 3n, minBidPerUnitSecond: 1n, collateralBps: 5_000, nonce: 15n, startWindow: 5 },
    { ...base, provider: P!, machineId: 2, pricePerUnitSecond: 3n, minBidPerUnitSecond: 2n, collateralBps: 10_000, nonce: 16n },
    // A reserved-term tier (issue #34 finding 4): one hour's commitment at a discount, no interruptible capacity.
    {
      ...base,
      provider: P!,
      machineId: 2,
      pricePerUnitSecond: 3n,
      minBidPerUnitSecond: 0n,
      collateralBps: 2_000,
      nonce: 17n,
      minDuration: MIN_COMMITMENT,
      maxDuration: 2 * MIN_COMMITMENT,
    },
  ];
  const signed = await Promise.all(offers.map(async (offer) => ({ offer, signature: await signOffer(keys[offer.provider]!, domain, offer) })));

  const accounts = [...addresses.slice(0, 11), world.market, world.registry, world.staking];
  const state: State = {
    now: startTime,
    nextLeaseId: 1,
    params,
    quorum: 2,
    delay: 30,
    leases: [],
    providers,
    machines,
    lastMachineId: 3,
    balances,
    allowances,
    permitNonce: 0n,
    blocked: [],
    owed: {},
    held: [],
    staking: initialStaking(attestors.map((a) => a!.address)),
  };
  for (const a of accounts) balances[a] ??= 0n;
  return {
    ...world,
    lens: getAddress(lens.address),
    lensAbi: lens.abi as Abi,
    tokenAbi: token.abi as Abi,
    governance: governance!,
    P: P!,
    A: A!,
    R1: R1!,
    R2: R2!,
    RP: RP!,
    treasuries: [t1!, t2!],
    attestors: attestors!,
    keys,
    renters: [R1!, R2!, RP!, A!],
    honest: [P!, R1!, R2!, RP!],
    offers: signed,
    accounts,
    providers: [P!, A!],
    machineIds: [1, 2, 3, 4],
    chainId,
    domain,
    tokenDomain: { name: "Invariant USD", version: "1", chainId, verifyingContract: world.token },
    initial: state,
    startTime,
  };
}

// ---------------------------------------------------------------------------------------------
// Generation: a step drawn from the model's state (mostly valid targets, sometimes not).

const running = (l: MLease) => l.status === S.Open || l.status === S.Active;

function pickLease(r: Rng, st: State, statuses: number[]): MLease | undefined {
  const leases = st.leases.filter(Boolean);
  if (leases.length === 0) return undefined;
  const fitting = leases.filter((l) => statuses.includes(l.status));
  return r.chance(0.85) && fitting.length ? r.pick(fitting) : r.pick(leases);
}

/** A fault held back can still land on it: it runs, or it is a completion inside its fault window. */
function faultable(l: MLease | undefined): boolean {
  return !!l && (l.status === S.Active || !!l.held);
}

/**
 * A step on a held completion (#34 finding 1): wait for its fault window to close (to the second), a fault
 * observed before the completion (inside the window, or refused: after it, or too late), the renter's co-signature
 * (at the provider's total, or above it), or the release by claim (early ones refused).
 */
function generateHeld(r: Rng, st: State, w: World, l: MLease): Step {
  const now = st.now;
  const until = holdEnd(l);
  const roll = r.next();
  // The next step runs a second later: at the window's last second (refused) or its first one after (released).
  if (now < until - 2 && roll < 0.25) return { kind: "time", seconds: until - now - 1 - (r.chance(0.2) ? 1 : 0) };
  if (roll < 0.55) {
    const from = l.start;
    const to = Math.max(from, min(now, l.stopAt - 1));
    const observedAt = r.chance(0.1) ? l.stopAt + r.int(0, 3) : r.int(from, to);
    const signers = r.chance(0.9) ? Math.min(3, st.quorum) : Math.max(0, st.quorum - 1);
    return { kind: "signFault", id: l.id, faultKind: r.pick([1, 2, 2]), observedAt, signers, submit: r.chance(0.7) };
  }
  if (roll < 0.75) return { kind: "cosign", id: l.id, amount: l.paid + (r.chance(0.1) ? 1n : 0n), deadline: r.chance(0.9) ? now + 100 : now - 1 };
  return { kind: "release", who: r.pick([w.R1, w.P, w.A, l.renter]), id: l.id };
}

/**
 * The attacker opens on its own machine and lists its other renters' interruptible leases to preempt: it would end
 * them without the termination (or start) penalty, so the market refuses (SelfPreemption, #34 finding 1).
 */
function selfPreemption(r: Rng, st: State, w: World): Step | undefined {
  const victims = st.leases.filter((l) => l && running(l) && l.provider === w.A && l.renter !== w.A && l.interruptible);
  if (victims.length === 0) {
    // Its victim first: an honest renter bids for the attacker's idle units.
    if (!r.chance(0.5)) return undefined;
    const terms: Terms = { units: r.int(1, 2), duration: r.int(60, 400), maxPricePerUnitSecond: 10n, interruptible: true, bidPerUnitSecond: BigInt(r.int(1, 3)), preempt: [] };
    return { kind: "open", who: r.pick([w.R1, w.R2]), offer: 2, terms };
  }
  const victim = r.pick(victims);
  const offers = w.offers.map((o, i) => [o.offer, i] as const).filter(([o]) => getAddress(o.provider) === w.A && o.machineId === victim.machineId);
  if (offers.length === 0) return undefined;
  const [offer, index] = r.pick(offers);
  const preempt = victims.filter((l) => l.machineId === offer.machineId).map((l) => BigInt(l.id));
  const interruptible = r.chance(0.3);
  const terms: Terms = { units: r.int(1, 4), duration: r.int(10, 400), maxPricePerUnitSecond: 10n, interruptible, bidPerUnitSecond: 6n, preempt };
  return { kind: "open", who: w.A, offer: index, terms };
}

export function generate(r: Rng, st: State, w: World): Step {
  // AttestorStaking: disputes of the faults signed so far (and of forged attestations), claims, stake top-ups.
  if (r.chance(st.staking.signed.length ? 0.1 : 0.03)) return generateStaking(r, st.staking, w, (id) => st.leases[id - 1]?.provider);
  const roll = r.next() * 100;
  const now = st.now;
  const usableHeld = st.held.map((h, i) => [h, i] as const).filter(([h]) => faultable(st.leases[h.leaseId - 1]));
  if (usableHeld.length && r.chance(0.12)) return { kind: "submitHeld", index: r.pick(usableHeld)[1] };
  const holding = st.leases.filter((l) => l?.held);
  if (holding.length && r.chance(0.35)) return generateHeld(r, st, w, r.pick(holding));
  // #34 finding 1: an early completion (instead of a termination, or just before a fault lands).
  const active = st.leases.filter((l) => l?.status === S.Active);
  if (active.length && r.chance(0.04)) {
    const l = r.pick(active);
    return { kind: "complete", who: l.provider, id: l.id };
  }
  // #34: an Active lease run to its end, then ended by a claim or its renter's close inside the fault window after it
  // (held like a completion: a fault observed in its last window still lands, generateHeld signs them).
  if (active.length && r.chance(0.05)) {
    const l = r.pick(active);
    const end = endOf(l);
    if (now < end) return { kind: "time", seconds: end - now + r.int(0, 20) };
    return r.chance(0.5) ? { kind: "claim", who: r.pick([w.R1, w.R2, w.A, w.P]), id: l.id } : { kind: "close", who: l.renter, id: l.id };
  }
  if (r.chance(0.06)) {
    const attempt = selfPreemption(r, st, w);
    if (attempt) return attempt;
  }
  const unregistered = w.providers.filter((a) => !st.providers[a]!.registered);
  if (unregistered.length && r.chance(0.1)) return { kind: "register", who: r.pick(unregistered) };
  const anyone = () => r.pick([w.R1, w.R2, w.A, w.P, w.governance]);
  if (roll < 20 && r.chance(0.15)) {
    // #34 finding 5: the attacker rents its own idle units to itself as interruptible at its offer's floor bid.
    const own = w.offers.map((o, i) => [o.offer, i] as const).filter(([o]) => getAddress(o.provider) === w.A);
    const [offer, index] = r.pick(own);
    const terms: Terms = {
      units: r.int(1, 4),
      duration: r.int(10, 400),
      maxPricePerUnitSecond: 10n,
      interruptible: true,
      bidPerUnitSecond: offer.minBidPerUnitSecond,
      preempt: [],
    };
    return { kind: "open", who: w.A, offer: index, terms };
  }
  if (roll < 20) {
    const who = r.chance(0.4) ? w.A : r.pick(w.renters);
    const offerIndex = r.chance(0.6) ? r.pick([0, 2, 1]) : r.int(0, w.offers.length - 1);
    const offer = w.offers[offerIndex]!.offer;
    const interruptible = r.chance(0.4);
    const bid = BigInt(r.int(1, 6));
    let preempt: bigint[] = [];
    if (r.chance(0.35)) {
      preempt = st.leases
        .filter((l) => l && running(l) && l.machineId === offer.machineId && (l.interruptible || (l.status === S.Active && endOf(l) <= now)))
        .sort((a, b) => (a.price < b.price ? -1 : a.price > b.price ? 1 : 0))
        .map((l) => BigInt(l.id));
      if (r.chance(0.1) && st.leases.length) preempt.push(BigInt(r.int(1, st.leases.length + 1)));
    }
    // Preemption by small bids (issue #34 finding 7): one unit for a short time against larger leases.
    const smallBid = preempt.length !== 0 && interruptible && r.chance(0.4);
    // Tier offers closed early (finding 4): leases of at least the tier's minimum, mostly closed within it.
    const tier = offer.minDuration >= MIN_COMMITMENT;
    const duration = tier
      ? r.int(offer.minDuration - (r.chance(0.1) ? 10 : 0), offer.minDuration + 300)
      : smallBid
        ? r.int(1, 15)
        : r.chance(0.05)
          ? r.pick([0, 5, 2_000])
          : r.int(10, 400);
    const terms: Terms = {
      units: smallBid ? 1 : r.chance(0.03) ? 0 : r.int(1, 4),
      duration,
      maxPricePerUnitSecond: r.chance(0.05) ? 1n : 10n,
      interruptible,
      bidPerUnitSecond: bid,
      preempt,
    };
    let permit: { value: bigint; deadline: number } | undefined;
    if (who === w.RP) {
      const deposit = BigInt(terms.units) * (interruptible ? bid : offer.pricePerUnitSecond) * BigInt(duration);
      permit = { value: r.chance(0.1) ? deposit / 2n : deposit, deadline: r.chance(0.1) ? now - 1 : now + 100 };
    }
    return { kind: "open", who, offer: offerIndex, terms, permit };
  }
  if (roll < 37) {
    const l = pickLease(r, st, [S.Open]);
    if (l) return { kind: "activate", who: r.chance(0.9) ? l.provider : anyone(), id: l.id };
  }
  if (roll < 43) return { kind: "time", seconds: r.chance(0.7) ? r.int(1, 60) : r.int(60, 600) };
  if (roll < 47) {
    const l = pickLease(r, st, [S.Active, S.Ended]);
    if (l) return { kind: "claim", who: anyone(), id: l.id };
  }
  if (roll < 49) {
    const ids = Array.from({ length: r.int(0, 5) }, () => pickLease(r, st, [S.Active, S.Ended])?.id ?? 1);
    return { kind: "claimMany", who: anyone(), ids };
  }
  if (roll < 53) {
    const l = pickLease(r, st, [S.Open, S.Active]);
    if (l) return { kind: "close", who: r.chance(0.9) ? l.renter : anyone(), id: l.id };
  }
  if (roll < 55) {
    const l = pickLease(r, st, [S.Active]);
    if (l) return { kind: "complete", who: r.chance(0.9) ? l.provider : anyone(), id: l.id };
  }
  if (roll < 57) {
    const l = pickLease(r, st, [S.Open, S.Active]);
    if (l) return { kind: "terminate", who: r.chance(0.9) ? l.provider : anyone(), id: l.id };
  }
  if (roll < 59) {
    const l = pickLease(r, st, [S.Open]);
    if (l) return { kind: "cancel", who: anyone(), id: l.id };
  }
  if (roll < 65) {
    const l = pickLease(r, st, [S.Active]);
    if (l) {
      const from = l.start;
      const to = Math.max(from, min(now, endOf(l) - 1));
      const observedAt = r.chance(0.05) ? to + 5 : r.int(from, to);
      const signers = r.chance(0.9) ? Math.min(3, st.quorum) : Math.max(0, st.quorum - 1);
      // Every kind: the two defined ones mostly, sometimes one the market must refuse (#34 finding 3).
      const faultKind = r.chance(0.88) ? r.pick([1, 1, 2, 2, 2]) : r.pick([0, 3, 7, 255]);
      return { kind: "signFault", id: l.id, faultKind, observedAt, signers, submit: r.chance(0.4) };
    }
  }
  if (roll < 71 && st.held.length) {
    const usable = st.held.map((h, i) => [h, i] as const).filter(([h]) => faultable(st.leases[h.leaseId - 1]));
    return { kind: "submitHeld", index: usable.length && r.chance(0.9) ? r.pick(usable)[1] : r.int(0, st.held.length - 1) };
  }
  if (roll < 76) {
    const l = pickLease(r, st, [S.Open, S.Active]);
    if (l) {
      const same = w.offers.map((o, i) => [o, i] as const).filter(([o]) => o.offer.machineId === l.machineId && getAddress(o.offer.provider) === l.provider);
      const offer = same.length && r.chance(0.85) ? r.pick(same)[1] : r.int(0, w.offers.length - 1);
      const extra = r.chance(0.2) ? r.int(1_000, 60_000) : r.int(1, 300);
      return { kind: "extend", who: r.chance(0.9) ? l.renter : anyone(), id: l.id, extra, offer };
    }
  }
  if (roll < 79) {
    const l = pickLease(r, st, [S.Open, S.Active]);
    if (l) return { kind: "shrink", who: r.chance(0.9) ? l.renter : anyone(), id: l.id, units: r.int(0, Math.max(1, l.units - 1)) };
  }
  if (roll < 82) {
    const l = pickLease(r, st, [S.Open, S.Active, S.Ended]);
    if (l) {
      const accrued = l.status === S.Active ? accruedUntil(l, min(now, endOf(l))) : l.status === S.Ended ? l.deposit : 0n;
      const amount = l.paid + (accrued > l.paid ? (BigInt(Math.floor(r.next() * 1000)) * (accrued - l.paid)) / 1000n : 0n);
      return { kind: "settle", id: l.id, amount, deadline: r.chance(0.9) ? now + 100 : now - 1 };
    }
  }
  if (roll < 85) {
    const who = r.pick(w.providers);
    return { kind: r.chance(0.5) ? "stake" : "unstake", who, amount: BigInt(r.int(0, 6_000)) };
  }
  if (roll < 86) return { kind: "withdraw", who: r.pick(w.providers) };
  if (roll < 90) {
    const who = r.pick(w.providers);
    const owned = Object.entries(st.machines)
      .filter(([, m]) => m.owner === who)
      .map(([id]) => Number(id));
    const id = owned.length && r.chance(0.9) ? r.pick(owned) : r.int(1, 5);
    const idle = owned.filter((id) => st.machines[id]!.onDemand + st.machines[id]!.interrupt === 0);
    const k = owned.length === 0 ? (r.chance(0.7) ? 3 : 2) : idle.length && r.chance(0.4) ? 1 : r.int(0, 3);
    if (k === 0) return { kind: "updateMachine", who, id, units: r.int(1, 6) };
    if (k === 1) return { kind: "removeMachine", who, id };
    if (k === 2) return { kind: "addMachine", who, units: r.int(1, 4) };
    const p = st.providers[who];
    return p?.registered ? { kind: "deregister", who } : { kind: "register", who };
  }
  if (roll < 92) {
    const who = r.pick(w.providers);
    if (r.chance(0.6)) return { kind: "revokeNonce", who, nonce: BigInt(r.pick([1, 2, 10, 11, 12, 13, 14])) };
    return { kind: "revokeNoncesBelow", who, floor: BigInt(r.pick([2, 3, 11, 13, 15])) };
  }
  if (roll < 96) {
    const who = r.chance(0.95) ? w.governance : w.A;
    const k = r.int(0, 2);
    if (k === 0) {
      return {
        kind: "setParams",
        who,
        params: {
          protocolFeeBps: r.chance(0.05) ? 1_001 : r.pick([0, 1, 100, 333, 1_000]),
          startPenaltyBps: r.pick([0, 1_000, 5_000, 10_000]),
          faultMinCreditBps: r.pick([0, 2_000, 10_000]),
          preemptionNotice: r.pick([0, 20, 300, 86_400]),
          treasury: r.chance(0.05) ? zeroAddress : r.pick(w.treasuries),
        },
      };
    }
    if (k === 1) return { kind: "setFaultQuorum", who, quorum: r.pick([0, 1, 2, 3, 3, 33]) };
    return { kind: "setUnbondingDelay", who, delay: r.pick([0, 30, 600]) };
  }
  if (roll < 97) {
    const creditors = Object.entries(st.owed)
      .filter(([, v]) => v > 0n)
      .map(([a]) => a as Address);
    const who = creditors.length && r.chance(0.9) ? r.pick(creditors) : r.pick([w.A, w.R2, w.P]);
    // The attacker may send what it is owed anywhere; an honest party only to itself or another honest address.
    const to = who === w.A ? r.pick([w.A, w.R1, w.treasuries[1]]) : r.chance(0.7) ? who : r.pick([w.R1, w.treasuries[1]]);
    return { kind: "withdrawOwed", who, to };
  }
  if (roll < 98) return { kind: "block", who: w.governance, target: r.pick([w.A, w.R2, w.P]), value: r.chance(0.6) };
  return { kind: "time", seconds: r.int(1, 120) };
}

// ---------------------------------------------------------------------------------------------
// Applying a step to chain and model

/** `label`: the #34 action the step was (a fault on a held completion, or on a held expiry), counted under that name. */
type Outcome = { ok: boolean; expected: boolean; reason?: string; chainError?: string; label?: string };

function modelRun(model: Model, f: (m: Model) => void): { ok: boolean; reason?: string } {
  const saved = structuredClone(model.st);
  try {
    f(model);
    return { ok: true };
  } catch (error) {
    if (!(error instanceof Revert)) throw error;
    model.st = saved;
    return { ok: false, reason: error.message };
  }
}

async function faultSignatures(w: World, fault: { leaseId: bigint; kind: number; observedAt: number }, signers: number): Promise<Hex[]> {
  const signed = await Promise.all(w.attestors.slice(0, signers).map(async (a) => ({ signer: a.address, signature: await signFault(a, w.domain, fault) })));
  return orderFaultSignatures(signed);
}

async function apply(w: World, model: Model, step: Step): Promise<Outcome> {
  const st = model.st;
  const at = st.now;
  const faultOn = step.kind === "signFault" && step.submit ? step.id : step.kind === "submitHeld" ? st.held[step.index]?.leaseId : undefined;
  const heldBefore = faultOn !== undefined && !!st.leases[faultOn - 1]?.held;
  // An expiry's hold (an Active lease ended after its end, within the fault window after it) counts apart.
  const expiryHold = heldBefore && st.leases[faultOn! - 1]?.endReason === R.Expired;
  const mkt = (from: Address, fn: string, args: readonly unknown[]) => sendAt(w.rpc, at, from, w.market, leaseMarketAbi as Abi, fn, args);
  const reg = (from: Address, fn: string, args: readonly unknown[]) => sendAt(w.rpc, at, from, w.registry, providerRegistryAbi as Abi, fn, args);
  let chain: { ok: boolean; error?: string };
  let expected: { ok: boolean; reason?: string };
  switch (step.kind) {
    case "time":
      await w.rpc.request({ method: "evm_mine", params: [at] });
      return { ok: true, expected: true };
    case "open": {
      const { offer, signature } = w.offers[step.offer]!;
      if (step.permit) {
        const key = w.keys[step.who]!;
        const permit = await signPermitFields(key, {
          owner: step.who,
          token: w.tokenDomain.verifyingContract,
          tokenName: w.tokenDomain.name,
          chainId: w.tokenDomain.chainId,
          spender: w.market,
          value: step.permit.value,
          nonce: st.permitNonce,
          deadline: BigInt(step.permit.deadline),
        });
        expected = modelRun(model, (m) => m.open(step.who, offer, step.terms, step.permit));
        chain = await mkt(step.who, "openLeaseWithPermit", [offer, signature, step.terms, permit]);
      } else {
        expected = modelRun(model, (m) => m.open(step.who, offer, step.terms));
        chain = await mkt(step.who, "openLease", [offer, signature, step.terms]);
      }
      break;
    }
    case "activate":
      expected = modelRun(model, (m) => m.activate(step.who, step.id));
      chain = await mkt(step.who, "activate", [BigInt(step.id)]);
      break;
    case "claim":
    case "release":
      expected = modelRun(model, (m) => m.claim(step.id));
      chain = await mkt(step.who, "claim", [BigInt(step.id)]);
      break;
    case "claimMany":
      expected = modelRun(model, (m) => m.claimMany(step.ids));
      chain = await mkt(step.who, "claimMany", [step.ids.map(BigInt)]);
      break;
    case "close":
      expected = modelRun(model, (m) => m.close(step.who, step.id));
      chain = await mkt(step.who, "close", [BigInt(step.id)]);
      break;
    case "complete":
      expected = modelRun(model, (m) => m.complete(step.who, step.id));
      chain = await mkt(step.who, "complete", [BigInt(step.id), 0, ZERO32, 1n]);
      break;
    case "terminate":
      expected = modelRun(model, (m) => m.terminate(step.who, step.id));
      chain = await mkt(step.who, "terminate", [BigInt(step.id)]);
      break;
    case "cancel":
      expected = modelRun(model, (m) => m.cancel(step.id));
      chain = await mkt(step.who, "cancel", [BigInt(step.id)]);
      break;
    case "signFault": {
      const fault = { leaseId: BigInt(step.id), kind: step.faultKind, observedAt: step.observedAt };
      const held: HeldFault = {
        leaseId: step.id,
        kind: step.faultKind,
        observedAt: step.observedAt,
        signers: step.signers,
        signatures: await faultSignatures(w, fault, step.signers),
      };
      // Signed whether or not it lands: its signers answer for it (disputes, support/invariants-staking.ts).
      st.staking.signed.push({ leaseId: step.id, kind: step.faultKind, observedAt: step.observedAt, signers: step.signers });
      if (!step.submit) {
        st.held.push(held);
        await w.rpc.request({ method: "evm_mine", params: [at] });
        return { ok: true, expected: true };
      }
      expected = modelRun(model, (m) => m.submitFault(held));
      chain = await mkt(w.R2, "submitFault", [fault, held.signatures]);
      break;
    }
    case "submitHeld": {
      const held = st.held[step.index]!;
      expected = modelRun(model, (m) => m.submitFault(held));
      chain = await mkt(w.R1, "submitFault", [{ leaseId: BigInt(held.leaseId), kind: held.kind, observedAt: held.observedAt }, held.signatures]);
      break;
    }
    case "extend": {
      const { offer, signature } = w.offers[step.offer]!;
      expected = modelRun(model, (m) => m.extend(step.who, step.id, step.extra, offer));
      chain = await mkt(step.who, "extend", [BigInt(step.id), step.extra, offer, signature]);
      break;
    }
    case "shrink":
      expected = modelRun(model, (m) => m.shrink(step.who, step.id, step.units));
      chain = await mkt(step.who, "shrink", [BigInt(step.id), step.units]);
      break;
    case "settle":
    case "cosign": {
      const l = st.leases[step.id - 1]!;
      const settlement = { leaseId: BigInt(step.id), providerAmount: step.amount, deadline: step.deadline };
      const signAs = (who: Address) => signSettlement(w.keys[who]!, w.domain, settlement);
      expected = modelRun(model, (m) => m.settle(step.id, step.amount, step.deadline));
      chain = await mkt(w.R1, "settle", [settlement, await signAs(l.renter), await signAs(l.provider)]);
      break;
    }
    case "stake":
      expected = modelRun(model, (m) => m.stake(step.who, step.amount));
      chain = await reg(step.who, "stake", [step.amount]);
      break;
    case "unstake":
      expected = modelRun(model, (m) => m.requestUnstake(step.who, step.amount));
      chain = await reg(step.who, "requestUnstake", [step.amount]);
      break;
    case "withdraw":
      expected = modelRun(model, (m) => m.withdraw(step.who));
      chain = await reg(step.who, "withdraw", []);
      break;
    case "deregister":
      expected = modelRun(model, (m) => m.deregister(step.who));
      chain = await reg(step.who, "deregister", []);
      break;
    case "register":
      expected = modelRun(model, (m) => m.register(step.who));
      chain = await reg(step.who, "register", [`peer-${step.who}`, ""]);
      break;
    case "addMachine":
      expected = modelRun(model, (m) => m.addMachine(step.who, step.units));
      chain = await reg(step.who, "addMachine", [MODEL, step.units, 23_034, 0, "eu", ZERO32]);
      break;
    case "updateMachine":
      expected = modelRun(model, (m) => m.updateMachine(step.who, step.id, step.units));
      chain = await reg(step.who, "updateMachine", [step.id, MODEL, step.units, 23_034, 0, "eu", ZERO32]);
      break;
    case "removeMachine":
      expected = modelRun(model, (m) => m.removeMachine(step.who, step.id));
      chain = await reg(step.who, "removeMachine", [step.id]);
      break;
    case "revokeNonce":
      expected = modelRun(model, (m) => m.revokeNonce(step.who, step.nonce));
      chain = await reg(step.who, "revokeNonce", [step.nonce]);
      break;
    case "revokeNoncesBelow":
      expected = modelRun(model, (m) => m.revokeNoncesBelow(step.who, step.floor));
      chain = await reg(step.who, "revokeNoncesBelow", [step.floor]);
      break;
    case "setParams":
      expected = modelRun(model, (m) => m.setParams(step.who, step.params));
      chain = await mkt(step.who, "setParams", [step.params]);
      break;
    case "setFaultQuorum":
      expected = modelRun(model, (m) => m.setFaultQuorum(step.who, step.quorum));
      chain = await reg(step.who, "setFaultQuorum", [step.quorum]);
      break;
    case "setUnbondingDelay":
      expected = modelRun(model, (m) => m.setUnbondingDelay(step.who, step.delay));
      chain = await reg(step.who, "setUnbondingDelay", [step.delay]);
      break;
    case "withdrawOwed":
      expected = modelRun(model, (m) => m.withdrawOwed(step.who, step.to));
      chain = await mkt(step.who, "withdraw", [step.to]);
      break;
    case "block":
      expected = modelRun(model, (m) => m.setBlocked(step.who, step.target, step.value));
      chain = await sendAt(w.rpc, at, step.who, w.token, w.tokenAbi, "setBlocked", [step.target, step.value]);
      break;
    default: {
      const lease = (id: number) => model.st.leases[id - 1];
      const call = await stakingCall(st.staking, w, step, at, lease);
      expected = modelRun(model, (m) => {
        const reason = modelStaking(m.st.staking, w, m.st, step, (id) => m.st.leases[id - 1]);
        if (reason) revert(reason);
      });
      chain = await sendAt(w.rpc, at, call.from, w.staking, attestorStakingAbi as Abi, call.functionName, call.args);
      break;
    }
  }
  return {
    ok: chain.ok,
    expected: expected.ok,
    reason: expected.reason,
    chainError: chain.error,
    label: expiryHold ? "faultDuringExpiryHold" : heldBefore ? "faultDuringHold" : undefined,
  };
}

// ---------------------------------------------------------------------------------------------
// Checks after every step

type Snapshot = {
  timestamp: bigint;
  totalSupply: bigint;
  balances: readonly bigint[];
  leases: readonly {
    renter: Address;
    provider: Address;
    machineId: number;
    units: number;
    pricePerUnitSecond: bigint;
    interruptible: boolean;
    collateralBps: number;
    collateral: bigint;
    deposit: bigint;
    paid: bigint;
    startDeadline: number;
    activatedAt: number;
    stopAt: number;
    status: number;
    endReason: number;
  }[];
  providers: readonly {
    registered: boolean;
    free: bigint;
    locked: bigint;
    unbonding: bigint;
    unlockAt: number;
    machineCount: number;
    nonceFloor: bigint;
    leasesCompleted: bigint;
    faults: bigint;
    unitSecondsDelivered: bigint;
  }[];
  machines: readonly { owner: Address; units: number; onDemandUnits: number; interruptibleUnits: number }[];
};

async function readChain(w: World): Promise<Snapshot> {
  const data = await w.rpc.request({
    method: "eth_call",
    params: [{ to: w.lens, data: encodeFunctionData({ abi: w.lensAbi, functionName: "snapshot", args: [w.market, w.accounts, w.providers, w.machineIds] }) }, "latest"],
  });
  return decodeFunctionResult({ abi: w.lensAbi, functionName: "snapshot", data: data as Hex }) as unknown as Snapshot;
}

export class Violation extends Error {}

function check(condition: unknown, message: string): asserts condition {
  if (!condition) throw new Violation(message);
}

/** Wealth of an account: its wallet plus its stake in the registry. */
function wealth(st: State, who: Address): bigint {
  const p = st.providers[who];
  return (st.balances[who] ?? 0n) + (p ? p.free + p.locked + p.unbonding : 0n);
}

/** What a lease's provider may be paid at most: units x price over the metered seconds, up to its stop (or a preemptor's minimum). */
function meteredBound(l: MLease, at: number): bigint {
  const limit = l.status === S.Open || l.status === S.Active ? Math.min(at, endOf(l)) : l.stopAt;
  let total = 0n;
  l.segments.forEach((segment, i) => {
    const to = Math.min(l.segments[i + 1]?.from ?? Infinity, limit);
    if (to > segment.from) total += BigInt(segment.units) * l.price * BigInt(to - segment.from);
  });
  // A preemptor closed by its renter pays at least the notice it imposed (rule 4), metered or not.
  return l.closeMinimum !== undefined && l.closeMinimum > total ? l.closeMinimum : total;
}

function compare(w: World, st: State, snap: Snapshot): void {
  check(Number(snap.timestamp) === st.now, `chain time ${snap.timestamp} != model time ${st.now}`);
  w.accounts.forEach((a, i) => check(snap.balances[i] === (st.balances[a] ?? 0n), `balance of ${label(w, a)}: chain ${snap.balances[i]}, model ${st.balances[a] ?? 0n}`));
  check(snap.leases.length === st.leases.length, `lease count: chain ${snap.leases.length}, model ${st.leases.length}`);
  st.leases.forEach((l, i) => {
    const v = snap.leases[i]!;
    const live = l.status === S.Open || l.status === S.Active;
    const fields: [string, unknown, unknown][] = [
      ["status", v.status, l.status],
      ["endReason", v.endReason, l.endReason],
      // A held completion shows the provider's total as its deposit and its collateral still locked.
      ["deposit", v.deposit, l.held ? heldTotal(l) : l.deposit],
      ["paid", v.paid, l.paid],
      ["units", v.units, l.units],
      ["stopAt", v.stopAt, live ? 0 : l.stopAt],
      ["activatedAt", v.activatedAt, l.activated ? l.start : 0],
      ["startDeadline", v.startDeadline, l.activated ? 0 : l.start],
      ["collateral", v.collateral, live || l.held ? collateralOf(l.deposit, l.collateralBps) : 0n],
      ["price", v.pricePerUnitSecond, l.price],
      ["renter", getAddress(v.renter), l.renter],
    ];
    for (const [name, chain, modelled] of fields) check(chain === modelled, `lease ${l.id} ${name}: chain ${chain}, model ${modelled}`);
  });
  w.providers.forEach((a, i) => {
    const v = snap.providers[i]!;
    const p = st.providers[a]!;
    const fields: [string, unknown, unknown][] = [
      ["registered", v.registered, p.registered],
      ["free", v.free, p.free],
      ["locked", v.locked, p.locked],
      ["unbonding", v.unbonding, p.unbonding],
      ["unlockAt", v.unlockAt, p.unlockAt],
      ["machineCount", v.machineCount, p.machineCount],
      ["nonceFloor", v.nonceFloor, p.nonceFloor],
      ["leasesCompleted", v.leasesCompleted, p.leasesCompleted],
      ["faults", v.faults, p.faults],
      ["unitSecondsDelivered", v.unitSecondsDelivered, p.unitSeconds],
    ];
    for (const [name, chain, modelled] of fields) check(chain === modelled, `provider ${label(w, a)} ${name}: chain ${chain}, model ${modelled}`);
  });
  w.machineIds.forEach((id, i) => {
    const v = snap.machines[i]!;
    const m = st.machines[id];
    check(getAddress(v.owner) === (m?.owner ?? zeroAddress), `machine ${id} owner: chain ${v.owner}, model ${m?.owner}`);
    check(v.units === (m?.units ?? 0), `machine ${id} units: chain ${v.units}, model ${m?.units}`);
    check(
      v.onDemandUnits === (m?.onDemand ?? 0) && v.interruptibleUnits === (m?.interrupt ?? 0),
      `machine ${id} used units: chain ${v.onDemandUnits}/${v.interruptibleUnits}, model ${m?.onDemand}/${m?.interrupt}`,
    );
  });
}

/** What the market owes each party (payments the token refused), chain against model. */
async function compareOwed(w: World, st: State): Promise<void> {
  for (const a of [w.P, w.A, w.R1, w.R2, w.RP, ...w.treasuries]) {
    const data = await w.rpc.request({
      method: "eth_call",
      params: [{ to: w.market, data: encodeFunctionData({ abi: leaseMarketAbi, functionName: "owed", args: [a] }) }, "latest"],
    });
    const chain = decodeFunctionResult({ abi: leaseMarketAbi, functionName: "owed", data: data as Hex }) as bigint;
    check(chain === (st.owed[a] ?? 0n), `owed to ${label(w, a)}: chain ${chain}, model ${st.owed[a] ?? 0n}`);
  }
}

/** The promises of docs/contracts.md "Threat model": they hold whatever the model says. */
function checkPromises(w: World, st: State, known: ReadonlySet<string>): void {
  // Conservation: nothing appears or vanishes; the market holds exactly what the leases escrow.
  const escrowed = st.leases.reduce((sum, l) => sum + escrowOf(l), 0n);
  const owed = Object.values(st.owed).reduce((sum, v) => sum + v, 0n);
  check(st.balances[w.market] === escrowed + owed, `market holds ${st.balances[w.market]}, leases escrow ${escrowed} and ${owed} is owed`);
  const staked = Object.values(st.providers).reduce((sum, p) => sum + p.free + p.locked + p.unbonding, 0n);
  check(st.balances[w.registry] === staked, `registry holds ${st.balances[w.registry]}, stakes are ${staked}`);
  // Every locked unit of collateral answers for a lease: a running one, or a completion inside its fault window
  // (#34 finding 1: a completion no longer releases the collateral at once, and nothing else keeps it).
  for (const a of w.providers) {
    const answering = st.leases
      .filter((l) => l.provider === a && (l.status === S.Open || l.status === S.Active || l.held))
      .reduce((sum, l) => sum + collateralOf(l.deposit, l.collateralBps), 0n);
    check(st.providers[a]!.locked === answering, `provider ${label(w, a)}: ${st.providers[a]!.locked} locked, its running and held leases answer for ${answering}`);
  }
  for (const l of st.leases) {
    // A provider is paid at most the metered price of the service.
    const bound = meteredBound(l, st.now);
    const total = providerTotal(l);
    check(total - l.recovered <= bound, `lease ${l.id}: provider total ${total} (less ${l.recovered} recovered) above the metered ${bound}`);
    // A renter gets from the provider's collateral at most what the rules promise for the event.
    check(l.credit <= l.promised, `lease ${l.id} (${END_REASON_NAMES[l.endReason]}): renter credited ${l.credit} from collateral, the rules promise at most ${l.promised}`);
    // A lease that preempted others pays for the units it took: at least the notice it imposed, at its price.
    // (docs/contracts.md rule 4: min(units x price x notice, deposit) at close; a shrink after the notice clears it.)
    if (l.preempted > 0 && l.endReason === R.RenterClosed && !l.cosigned && !known.has(FINDINGS.freePreemption) && (l.closeMinimum !== undefined || l.segments.length <= 1)) {
      const minimum = l.closeMinimum ?? bmin(l.openDeposit, BigInt(l.openNotice) * BigInt(l.openUnits) * l.price);
      check(total >= minimum, `lease ${l.id} preempted ${l.preempted} lease(s) and was closed paying ${total}, less than the notice it imposed (${minimum})`);
    }
    // A reserved-term lease closed by its renter pays its commitment (finding 4): at least units x price x minDuration.
    if (l.commitment !== 0 && l.activated && l.endReason === R.RenterClosed && !l.cosigned) {
      check(total >= rate(l) * BigInt(l.commitment), `lease ${l.id} on a ${l.commitment} s tier was closed paying ${total}, less than its commitment`);
    }
  }
  // The attacker's bound: its net gain is at most what it was promised by honest providers plus
  // the metered price of what it served honest renters.
  const initial = w.initial;
  const gain = wealth(st, w.A) - wealth(initial, w.A);
  let bound = 0n;
  for (const l of st.leases) {
    if (l.renter === w.A && l.provider !== w.A) bound += l.promised;
    if (l.provider === w.A && l.renter !== w.A) bound += meteredBound(l, st.now);
    // Tolerated only while the finding is open: the pay after a fault the collateral could not return.
    if (l.provider === w.A && l.renter !== w.A && known.has(FINDINGS.overpaidAboveCollateral)) bound += l.unrecovered ?? 0n;
  }
  // A provider wronged by a false fault is owed its share of the liar's slash (docs/attestation.md).
  bound += st.staking.shares[w.A] ?? 0n;
  check(gain <= bound, `attacker gained ${gain}, above its bound ${bound}`);
  // The staking: money in equals money out, and no attestor is better off than its slashes leave it (#34 finding 6).
  const broken = stakingPromises(st.staking, w, st.balances, initial.balances);
  check(broken === undefined, broken ?? "");
}

/** The staking's books on chain (each attestor's stake, what each account is owed) against the model. */
async function compareStaking(w: World, st: State): Promise<void> {
  const read = async (functionName: "stakeOf" | "owed", who: Address) => {
    const data = await w.rpc.request({
      method: "eth_call",
      params: [{ to: w.staking, data: encodeFunctionData({ abi: attestorStakingAbi, functionName, args: [who] }) }, "latest"],
    });
    return decodeFunctionResult({ abi: attestorStakingAbi, functionName, data: data as Hex });
  };
  for (const a of w.attestors) {
    const stake = (await read("stakeOf", a.address)) as { active: bigint; unbonding: bigint };
    check(
      stake.active === (st.staking.active[a.address] ?? 0n) && stake.unbonding === 0n,
      `stake of attestor ${label(w, a.address)}: chain ${stake.active}, model ${st.staking.active[a.address]}`,
    );
  }
  for (const who of [w.P, w.A, w.R1, w.R2, w.sink, ...w.attestors.map((a) => a.address)]) {
    const owed = (await read("owed", who)) as bigint;
    check(owed === (st.staking.owed[who] ?? 0n), `staking owes ${label(w, who)}: chain ${owed}, model ${st.staking.owed[who] ?? 0n}`);
  }
}

/**
 * Reputation costs what it measures (#34 finding 5): every unit-second a provider's reputation counts (on chain)
 * is one of its on-demand leases paid at that lease's price, time a real renter could not take back; interruptible
 * leases (its own at a floor bid included) add none.
 */
function checkReputation(w: World, st: State, snap: Snapshot): void {
  w.providers.forEach((a, i) => {
    let onDemand = 0n;
    for (const l of st.leases) if (l.provider === a && !l.interruptible) onDemand += meteredBound(l, st.now) / l.price;
    const counted = snap.providers[i]!.unitSecondsDelivered;
    check(counted <= onDemand, `provider ${label(w, a)}: reputation counts ${counted} unit-seconds, its on-demand leases paid for ${onDemand}`);
  });
}

/** Liveness after a step: someone can end each running lease; a provider can start unstaking its free stake. */
async function checkLiveness(w: World, st: State, known: ReadonlySet<string>): Promise<void> {
  for (const l of st.leases) {
    // A completion's hold ends: once its fault window is over, anyone's claim releases the collateral.
    if (l.held && st.now >= holdEnd(l)) {
      check(
        await callSucceeds(w.rpc, w.R1, w.market, leaseMarketAbi as Abi, "claim", [BigInt(l.id)]),
        `lease ${l.id}'s fault window is over but claim cannot release its collateral`,
      );
    }
    if (l.status !== S.Open && l.status !== S.Active) continue;
    if (known.has(FINDINGS.blockedRenterLocks) && st.blocked.includes(l.renter)) continue;
    const id = BigInt(l.id);
    const tries: [Address, string, readonly unknown[]][] = [
      [l.renter, "close", [id]],
      [l.provider, "complete", [id, 0, ZERO32, 1n]],
      [l.provider, "terminate", [id]],
      [w.R1, "claim", [id]],
      [w.R1, "cancel", [id]],
    ];
    let ended = false;
    for (const [from, fn, args] of tries) {
      if (await callSucceeds(w.rpc, from, w.market, leaseMarketAbi as Abi, fn, args)) {
        ended = true;
        break;
      }
    }
    check(ended, `lease ${l.id} (${["", "Open", "Active"][l.status]}) cannot be ended by anyone: close, complete, terminate, claim and cancel all revert`);
    // eth_call runs at the latest block's time: cancel needs it past the deadline.
    if (l.status === S.Open && st.now > l.start) {
      check(await callSucceeds(w.rpc, w.R1, w.market, leaseMarketAbi as Abi, "cancel", [id]), `lease ${l.id} is past its start deadline but cancel reverts`);
    }
  }
  for (const a of w.providers) {
    const p = st.providers[a]!;
    if (p.free > 0n) {
      check(await callSucceeds(w.rpc, a, w.registry, providerRegistryAbi as Abi, "requestUnstake", [p.free]), `provider ${label(w, a)} cannot unstake its free stake ${p.free}`);
    }
  }
}

function label(w: World, a: Address): string {
  const names: Record<string, string> = {
    [w.governance]: "governance",
    [w.P]: "P",
    [w.A]: "A (attacker)",
    [w.R1]: "R1",
    [w.R2]: "R2",
    [w.RP]: "RP",
    [w.market]: "market",
    [w.registry]: "registry",
    [w.treasuries[0]]: "treasury1",
    [w.treasuries[1]]: "treasury2",
  };
  return names[a] ?? a;
}

/**
 * The steps of drain phase `phase` (deterministic, from the model's state): 1 unblock everyone and
 * end every running lease; 2 let every notice run out and claim everything; 3 unstake all free
 * stake; 4 wait out the unbonding delay and withdraw.
 */
function drainSteps(w: World, st: State, phase: number): Step[] {
  const steps: Step[] = [];
  if (phase === 1) {
    for (const target of st.blocked) steps.push({ kind: "block", who: w.governance, target, value: false });
    for (const l of st.leases) {
      // Ending steps run one second apart, starting one second after the unblocking steps.
      const at = st.now + steps.length + 1;
      if (l.status === S.Open) steps.push(at > l.start ? { kind: "cancel", who: w.R1, id: l.id } : { kind: "close", who: l.renter, id: l.id });
      else if (l.status === S.Active) steps.push({ kind: "complete", who: l.provider, id: l.id });
    }
  } else if (phase === 2) {
    // Every notice runs out and every completion's fault window closes.
    const last = st.leases.reduce((latest, l) => Math.max(latest, l.held ? holdEnd(l) : l.stopAt), 0);
    if (last >= st.now) steps.push({ kind: "time", seconds: last - st.now + 1 });
    const ids = st.leases.filter((l) => l.status === S.Ended).map((l) => l.id);
    for (let i = 0; i < ids.length; i += MAX_BATCH) steps.push({ kind: "claimMany", who: w.R2, ids: ids.slice(i, i + MAX_BATCH) });
    for (const l of st.leases) if (l.held) steps.push({ kind: "release", who: w.R2, id: l.id });
    // Every open attestation dispute resolved once its answer window passed.
    const answerBy = lastAnswerBy(st.staking);
    const elapsed = steps.reduce((t, s) => t + (s.kind === "time" ? s.seconds : 1), 0);
    if (answerBy !== 0) steps.push({ kind: "time", seconds: Math.max(0, answerBy - (st.now + elapsed)) + 1 });
    steps.push(...drainResolve(st.staking, w));
  } else if (phase === 3) {
    // Everything owed (refused while blocked) is pulled.
    for (const [who, amount] of Object.entries(st.owed)) if (amount > 0n) steps.push({ kind: "withdrawOwed", who: who as Address, to: who as Address });
    steps.push(...drainClaims(st.staking));
    for (const a of w.providers) if (st.providers[a]!.free > 0n) steps.push({ kind: "unstake", who: a, amount: st.providers[a]!.free });
  } else if (phase === 4) {
    const unlock = Math.max(...w.providers.map((a) => st.providers[a]!.unlockAt));
    steps.push({ kind: "time", seconds: Math.max(st.delay, unlock - st.now) + 1 });
    for (const a of w.providers) if (st.providers[a]!.unbonding > 0n || st.providers[a]!.free > 0n) steps.push({ kind: "withdraw", who: a });
  }
  return steps;
}

/** After the drain: no lease runs, nothing is escrowed, every provider got its whole stake back. */
function checkDrained(w: World, st: State): void {
  for (const l of st.leases) {
    check(l.status !== S.Open && l.status !== S.Active && l.status !== S.Ended, `lease ${l.id} is still ${["", "Open", "Active", "Ended"][l.status]} after the drain`);
    check(!l.held, `lease ${l.id}'s completion still holds its collateral after the drain`);
  }
  check(st.balances[w.market] === 0n, `the market still holds ${st.balances[w.market]} after every lease settled`);
  for (const a of w.providers) {
    const p = st.providers[a]!;
    check(
      p.free === 0n && p.locked === 0n && p.unbonding === 0n,
      `provider ${label(w, a)} could not withdraw its stake: free ${p.free}, locked ${p.locked}, unbonding ${p.unbonding}`,
    );
  }
  check(st.balances[w.registry] === 0n, `the registry still holds ${st.balances[w.registry]}`);
  // The staking holds the attestors' stakes and nothing else: every fee and share was paid out.
  const stakes = Object.values(st.staking.active).reduce((sum, v) => sum + v, 0n);
  check(st.balances[w.staking] === stakes, `the staking holds ${st.balances[w.staking]} after the drain, its stakes are ${stakes}`);
}

const STAKING_STEPS: readonly string[] = ["disputeFault", "disputeCapacityFault", "disputeAttestation", "resolveDispute", "claimStaking", "attestorStake"];
function isStakingStep(step: Step): step is StakingStep {
  return STAKING_STEPS.includes(step.kind);
}

// ---------------------------------------------------------------------------------------------
// The runner

export type RunOptions = {
  sequences: number;
  minSteps: number;
  maxSteps: number;
  seed: number;
  /** Only this sequence (replaying a failure). */
  only?: number;
  /** Only the sequences i with i % count === index (parallel runs on several chains). */
  shard?: { index: number; count: number };
  progress?: (done: number) => void;
  /** FINDINGS tolerated (relaxed to what the contracts do). */
  known?: string[];
  /** Off only to debug the model against contracts with a known broken promise or exit. */
  promises?: boolean;
  liveness?: boolean;
};

export type RunResult = {
  seed: number;
  sequences: number;
  steps: number;
  succeeded: number;
  violations: number;
  byKind: Record<string, number>;
  endings: Record<string, number>;
  failure?: { seed: number; sequence: number; step: number; message: string; steps: Step[] };
};

function stringify(value: unknown): string {
  return JSON.stringify(value, (_k, v: unknown) => (typeof v === "bigint" ? `${v}n` : v));
}

export async function runInvariants(connection: Connection, options: RunOptions): Promise<RunResult> {
  const w = await deployWorld(connection);
  const rpc = w.rpc;
  const known = new Set(options.known ?? []);
  // Time starts where deployWorld left the chain.
  await rpc.request({ method: "evm_setNextBlockTimestamp", params: [w.startTime] });
  await rpc.request({ method: "evm_mine", params: [w.startTime] });
  const initialSnap = await readChain(w);
  compare(w, w.initial, initialSnap);
  let snapshotId = (await rpc.request({ method: "evm_snapshot", params: [] })) as string;
  const result: RunResult = { seed: options.seed, sequences: 0, steps: 0, succeeded: 0, violations: 0, byKind: {}, endings: {} };

  for (let index = 0; index < options.sequences; index++) {
    if (options.only !== undefined && index !== options.only) continue;
    if (options.shard && index % options.shard.count !== options.shard.index) continue;
    const r = rng(sequenceSeed(options.seed, index));
    const model = new Model(structuredClone(w.initial), w, known);
    const length = r.int(options.minSteps, options.maxSteps);
    const done: Step[] = [];
    let phase = 0;
    let queue: Step[] = [];
    try {
      for (let n = 0; ; n++) {
        let step: Step;
        if (n < length) step = generate(r, model.st, w);
        else {
          while (queue.length === 0 && phase < 4) queue = drainSteps(w, model.st, ++phase);
          if (queue.length === 0) break;
          step = queue.shift()!;
        }
        model.st.now += step.kind === "time" ? step.seconds : 1;
        done.push(step);
        const outcome = await apply(w, model, step);
        result.steps++;
        check(
          outcome.ok === outcome.expected,
          `step ${n} ${stringify(step)}: chain ${outcome.ok ? "succeeded" : `reverted (${outcome.chainError})`}, model ${outcome.expected ? "succeeds" : `reverts (${outcome.reason})`}`,
        );
        if (outcome.ok && step.kind !== "time") {
          result.succeeded++;
          const kind = outcome.label ?? step.kind;
          result.byKind[kind] = (result.byKind[kind] ?? 0) + 1;
        }
        if (outcome.reason === "SelfPreemption") {
          // Refused for that reason on chain too, not for another one the model happened to share.
          check(/SelfPreemption/.test(outcome.chainError ?? ""), `step ${n} ${stringify(step)}: the model refuses a self-preemption, the chain ${outcome.chainError ?? "took it"}`);
          result.byKind.selfPreemptionRefused = (result.byKind.selfPreemptionRefused ?? 0) + 1;
        }
        // While draining, the chain is read at the end of each phase (a wrong success or revert is caught at once above).
        if (phase > 0 && queue.length > 0) continue;
        const snap = await readChain(w);
        try {
          compare(w, model.st, snap);
          if (model.st.blocked.length || Object.values(model.st.owed).some((v) => v > 0n)) await compareOwed(w, model.st);
          if (isStakingStep(step) || phase > 0) await compareStaking(w, model.st);
          if (options.promises !== false) {
            checkPromises(w, model.st, known);
            checkReputation(w, model.st, snap);
          }
          if (phase === 0 && options.liveness !== false && outcome.ok) await checkLiveness(w, model.st, known);
        } catch (error) {
          if (error instanceof Violation) throw new Violation(`step ${n} ${stringify(step)}: ${error.message}`);
          throw error;
        }
      }
      checkDrained(w, model.st);
      for (const l of model.st.leases) result.endings[END_REASON_NAMES[l.endReason]!] = (result.endings[END_REASON_NAMES[l.endReason]!] ?? 0) + 1;
      result.sequences++;
    } catch (error) {
      if (!(error instanceof Violation) && !(error instanceof assert.AssertionError)) throw error;
      result.violations++;
      result.failure = { seed: options.seed, sequence: index, step: done.length - 1, message: (error as Error).message, steps: done };
      break;
    } finally {
      await rpc.request({ method: "evm_revert", params: [snapshotId] });
      snapshotId = (await rpc.request({ method: "evm_snapshot", params: [] })) as string;
    }
    options.progress?.(index + 1);
  }
  return result;
}

/** A failure as a message a person can act on: the seed to replay and the steps. */
export function describeFailure(result: RunResult): string {
  const f = result.failure;
  if (!f) return "no violation";
  return [
    `invariant violated in sequence ${f.sequence} of seed ${f.seed} (replay: SUANLI_PROPERTY_SEED=${f.seed} SUANLI_PROPERTY_SEQUENCE=${f.sequence})`,
    f.message,
    "steps:",
    ...f.steps.map((s, i) => `  ${i}: ${stringify(s)}`),
  ].join("\n");
}

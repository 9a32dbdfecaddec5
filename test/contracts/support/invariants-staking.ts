/**
 * The AttestorStaking part of the invariant suite (support/invariants.ts), issue #34 findings 3 and 6.
 *
 * The world's three attestors stake in an AttestorStaking attached to the registry, so a fault
 * counts only their signatures while they hold minStake. They sign faults of every kind, defined
 * (1 unresponsive, 2 capacity) or not (0, 3, 7, 255: the market refuses them), true or false,
 * and the generator disputes them: with the signer's own contradicting receipt (a ProbeReceipt
 * for kind 1, an Attestation of the leased machine passing for kind 2) inside or outside the
 * fault window, through the right or the wrong dispute path, sent by the wronged provider, by a
 * bystander or by the liar itself racing the provider. Attestors also sign forged attestations
 * that they (or the attacker for them) dispute first, racing the honest provider's dispute.
 *
 * The model (written from docs/contracts.md and docs/attestation.md) predicts every outcome and
 * the staking's books; the suite checks on chain, after every step: money in equals money out
 * (the staking holds exactly the stakes, the open dispute fees and what it owes), each
 * attestor's stake and what the staking owes each account equal the model's, and no attestor
 * ends better off than the slashes it earned leave it: whoever disputes, a slash's share never
 * comes back to the slashed attestor (it goes to the lease's provider, or to nobody for an
 * attestation), so a liar that disputes itself first ends where an honest disputer leaves it.
 */
import { hashTypedData, keccak256, toBytes, type Address, type Hex } from "viem";
import type { HDAccount } from "viem/accounts";
import { signProbeReceipt } from "../../../common/attest/liveness.js";
import { signAttestation, signFault } from "../../../common/chain/sign.js";
import { suanliTypes, type Attestation } from "../../../common/eip712.js";

/** The staking's parameters in the world (faultWindow as the node's default QoS window). */
export const STAKING = {
  minStake: 1_000n,
  slashAmount: 600n,
  disputeFee: 10n,
  answerWindow: 600,
  unbondingDelay: 600,
  disputerShareBps: 5_000,
  faultWindow: 30,
} as const;
/** Each attestor stakes this at deploy (four slashes take it below minStake) and keeps ATTESTOR_WALLET for fees. */
export const ATTESTOR_STAKE = 3_000n;
export const ATTESTOR_WALLET = 1_000n;
/** LeaseMarketBase.MAX_FAULT_KIND: 1 unresponsive, 2 capacity. */
export const MAX_FAULT_KIND = 2;

const BPS = 10_000n;

/** A fault the first `signers` attestors signed (submitted or not). */
export type SignedFault = { leaseId: number; kind: number; observedAt: number; signers: number };
/** An attestation `attestor` (index) signed for the honest provider's machine 1, and its dispute if any. */
export type Forged = { attestor: number; issuedAt: number; dispute?: { disputer: Address; fee: bigint; answerBy: number; open: boolean } };

export type StakingState = {
  /** Active stake per attestor (no attestor unstakes in this world: unbonding stays zero). */
  active: Record<Address, bigint>;
  /** What the staking owes each account (fees, slash shares). */
  owed: Record<Address, bigint>;
  /** Fault dispute ids slashed: `${leaseId}/${kind}/${observedAt}/${attestor}`. */
  disputed: string[];
  /** Total slashed from each attestor. */
  slashed: Record<Address, bigint>;
  /** Slash shares credited to each account (the wronged providers). */
  shares: Record<Address, bigint>;
  signed: SignedFault[];
  forged: Forged[];
};

export type StakingStep =
  | {
      /** disputeFault with a ProbeReceipt, or disputeCapacityFault with an Attestation (either, for any kind). */
      kind: "disputeFault" | "disputeCapacityFault";
      who: Address;
      fault: number;
      signer: number;
      /** The receipt's time after observedAt's second, in ms. */
      offsetMs: number;
      /** Who signed the receipt (usually the fault's signer). */
      receiptSigner: number;
      /** The attestation names another machine than the lease's. */
      otherMachine: boolean;
    }
  | { kind: "disputeAttestation"; who: Address; tag: number; attestor: number }
  | { kind: "resolveDispute"; who: Address; tag: number }
  | { kind: "claimStaking"; who: Address; to: Address }
  | { kind: "attestorStake"; attestor: number; amount: bigint };

/** What the model needs of the world and the market's state. */
export type StakingWorld = {
  staking: Address;
  attestors: HDAccount[];
  domain: Parameters<typeof signAttestation>[1];
  P: Address;
  A: Address;
  R1: Address;
  sink: Address;
};
type LeaseView = { provider: Address; machineId: number; units: number };
type Money = { balances: Record<Address, bigint>; blocked: Address[]; now: number };

export function initialStaking(attestors: readonly Address[]): StakingState {
  return { active: Object.fromEntries(attestors.map((a) => [a, ATTESTOR_STAKE])), owed: {}, disputed: [], slashed: {}, shares: {}, signed: [], forged: [] };
}

/** Whether `attestor` counts for fault quorums (ProviderRegistry.isAttestor with the staking attached). */
export function isStaked(st: StakingState, attestor: Address): boolean {
  return (st.active[attestor] ?? 0n) >= STAKING.minStake;
}

/** Token transfer of the model: a blocked sender or receiver reverts. Returns the revert reason, if any. */
function transfer(m: Money, from: Address, to: Address, amount: bigint): string | undefined {
  if (m.blocked.includes(from) || m.blocked.includes(to)) return "Blocked";
  if ((m.balances[from] ?? 0n) < amount) return "ERC20InsufficientBalance";
  m.balances[from] = (m.balances[from] ?? 0n) - amount;
  m.balances[to] = (m.balances[to] ?? 0n) + amount;
  return undefined;
}

/** AttestorStaking._slash: slashAmount capped by the stake; shareBps of it to `shareTo`, the rest to the sink. */
function slash(st: StakingState, w: StakingWorld, attestor: Address, shareTo: Address, shareBps: number): void {
  const active = st.active[attestor] ?? 0n;
  const amount = active < STAKING.slashAmount ? active : STAKING.slashAmount;
  st.active[attestor] = active - amount;
  const share = (amount * BigInt(shareBps)) / BPS;
  st.owed[shareTo] = (st.owed[shareTo] ?? 0n) + share;
  st.owed[w.sink] = (st.owed[w.sink] ?? 0n) + amount - share;
  st.slashed[attestor] = (st.slashed[attestor] ?? 0n) + amount;
  if (share !== 0n) st.shares[shareTo] = (st.shares[shareTo] ?? 0n) + share;
}

/** The attestation of the step: machine 1 of P for a forged one; the lease's machine (or not) for a capacity receipt. */
export function attestationOf(provider: Address, machineId: number, units: number, issuedAt: number, tag: string): Attestation {
  const root = keccak256(toBytes(`root-${tag}`));
  return {
    provider,
    machineId,
    model: keccak256(toBytes("L4-24GB")),
    units,
    vramMiB: 23_034,
    throughput: 1n,
    issuedAt,
    expiry: issuedAt + 100_000,
    challengeId: keccak256(toBytes(`challenge-${tag}`)),
    root,
    gpus: root,
    cc: `0x${"00".repeat(32)}`,
    failures: 0,
    lastFailureAt: 0,
  };
}

export function attestationId(w: StakingWorld, attestation: Attestation): Hex {
  return hashTypedData({ domain: w.domain, types: { Attestation: suanliTypes.Attestation }, primaryType: "Attestation", message: attestation });
}

/**
 * The model of one staking step on `st` (with the token `money` and the market's `lease`): the revert reason, or
 * undefined after applying it. State changes only when it succeeds.
 */
export function modelStaking(st: StakingState, w: StakingWorld, money: Money, step: StakingStep, lease: (id: number) => LeaseView | undefined): string | undefined {
  const addr = (i: number) => w.attestors[i]!.address;
  switch (step.kind) {
    case "disputeFault":
    case "disputeCapacityFault": {
      const f = st.signed[step.fault]!;
      const attestor = addr(step.signer);
      const l = lease(f.leaseId)!;
      if (step.kind === "disputeFault") {
        if (f.kind !== 1) return "NotALivenessFault";
        const ms = f.observedAt * 1000 + step.offsetMs;
        if (ms < (f.observedAt + 1) * 1000 || ms > (f.observedAt + STAKING.faultWindow) * 1000) return "ReceiptOutsideWindow";
      } else {
        if (f.kind !== 2) return "NotACapacityFault";
        // The receipt attests the lease's machine with the lease's units now (or another machine).
        if (step.otherMachine) return "AttestationNotOfLease";
        const issuedAt = f.observedAt + Math.floor(step.offsetMs / 1000);
        if (issuedAt < f.observedAt + 1 || issuedAt > f.observedAt + STAKING.faultWindow) return "AttestationOutsideWindow";
      }
      if (step.receiptSigner !== step.signer) return "SignersDiffer";
      const id = `${f.leaseId}/${f.kind}/${f.observedAt}/${attestor}`;
      if (st.disputed.includes(id)) return "AlreadyDisputed";
      if ((st.active[attestor] ?? 0n) === 0n) return "NothingAtStake";
      st.disputed.push(id);
      // The share goes to the lease's provider, whoever sent the evidence (the liar itself included).
      slash(st, w, attestor, l.provider, STAKING.disputerShareBps);
      return undefined;
    }
    case "disputeAttestation": {
      const forged = st.forged[step.tag];
      const attestor = addr(forged ? forged.attestor : step.attestor);
      if (forged?.dispute) return "AlreadyDisputed";
      if ((st.active[attestor] ?? 0n) === 0n) return "NothingAtStake";
      const refused = transfer(money, step.who, w.staking, STAKING.disputeFee);
      if (refused) return refused;
      const dispute = { disputer: step.who, fee: STAKING.disputeFee, answerBy: money.now + STAKING.answerWindow, open: true };
      if (forged) forged.dispute = dispute;
      else st.forged.push({ attestor: step.attestor, issuedAt: money.now, dispute });
      return undefined;
    }
    case "resolveDispute": {
      const dispute = st.forged[step.tag]?.dispute;
      if (!dispute?.open) return "DisputeNotOpen";
      if (money.now <= dispute.answerBy) return "AnswerWindowOpen";
      dispute.open = false;
      st.owed[dispute.disputer] = (st.owed[dispute.disputer] ?? 0n) + dispute.fee;
      // No share for the disputer (finding 6): the attestor itself may be it.
      slash(st, w, addr(st.forged[step.tag]!.attestor), dispute.disputer, 0);
      return undefined;
    }
    case "claimStaking": {
      const amount = st.owed[step.who] ?? 0n;
      if (amount === 0n) return "ZeroAmount";
      const refused = transfer(money, w.staking, step.to, amount);
      if (refused) return refused;
      st.owed[step.who] = 0n;
      return undefined;
    }
    case "attestorStake": {
      if (step.amount === 0n) return "ZeroAmount";
      const attestor = addr(step.attestor);
      const refused = transfer(money, attestor, w.staking, step.amount);
      if (refused) return refused;
      st.active[attestor] = (st.active[attestor] ?? 0n) + step.amount;
      return undefined;
    }
  }
}

/** The transaction of a staking step: sender, function and arguments (signatures made here). */
export async function stakingCall(
  st: StakingState,
  w: StakingWorld,
  step: StakingStep,
  now: number,
  lease: (id: number) => LeaseView | undefined,
): Promise<{ from: Address; functionName: string; args: readonly unknown[] }> {
  switch (step.kind) {
    case "disputeFault":
    case "disputeCapacityFault": {
      const f = st.signed[step.fault]!;
      const signer = w.attestors[step.signer]!;
      const by = w.attestors[step.receiptSigner]!;
      const fault = { leaseId: BigInt(f.leaseId), kind: f.kind, observedAt: f.observedAt };
      const faultSignature = await signFault(signer, w.domain, fault);
      if (step.kind === "disputeFault") {
        const receipt = {
          leaseId: fault.leaseId,
          challenge: keccak256(toBytes(`probe-${step.fault}-${step.offsetMs}`)),
          receivedAtMs: BigInt(f.observedAt * 1000 + step.offsetMs),
        };
        return { from: step.who, functionName: "disputeFault", args: [fault, faultSignature, receipt, await signProbeReceipt(by, w.domain, receipt)] };
      }
      const l = lease(f.leaseId)!;
      const issuedAt = f.observedAt + Math.floor(step.offsetMs / 1000);
      const attestation = attestationOf(l.provider, step.otherMachine ? l.machineId + 100 : l.machineId, l.units, issuedAt, `pass-${step.fault}-${step.offsetMs}`);
      const signed = await signAttestation(by, w.domain, attestation);
      return { from: step.who, functionName: "disputeCapacityFault", args: [fault, faultSignature, signed.attestation, signed.signature] };
    }
    case "disputeAttestation": {
      const forged = st.forged[step.tag];
      const attestor = w.attestors[forged ? forged.attestor : step.attestor]!;
      // A new one is issued now (the model records the same time when the dispute succeeds).
      const attestation = attestationOf(w.P, 1, 4, forged ? forged.issuedAt : now, `forged-${step.tag}`);
      return { from: step.who, functionName: "disputeAttestation", args: [attestation, (await signAttestation(attestor, w.domain, attestation)).signature] };
    }
    case "resolveDispute": {
      const forged = st.forged[step.tag];
      const attestation = attestationOf(w.P, 1, 4, forged?.issuedAt ?? 0, `forged-${step.tag}`);
      return { from: step.who, functionName: "resolveDispute", args: [attestationId(w, attestation)] };
    }
    case "claimStaking":
      return { from: step.who, functionName: "claim", args: [step.to] };
    case "attestorStake":
      return { from: w.attestors[step.attestor]!.address, functionName: "stake", args: [step.amount] };
  }
}

type Rng = { next(): number; int(min: number, max: number): number; chance(p: number): boolean; pick<T>(items: readonly T[]): T };

/** A staking step drawn from the state: mostly disputes of faults signed in this sequence. */
export function generateStaking(r: Rng, st: StakingState, w: StakingWorld, leaseProvider: (id: number) => Address | undefined): StakingStep {
  const disputable = st.signed.map((f, i) => [f, i] as const).filter(([f]) => f.signers > 0 && f.kind >= 1 && f.kind <= MAX_FAULT_KIND);
  const roll = r.next();
  if (disputable.length && roll < 0.55) {
    const [f, index] = r.pick(disputable);
    const signer = r.int(0, f.signers - 1);
    const right = f.kind === 2 ? "disputeCapacityFault" : "disputeFault";
    const kind = r.chance(0.85) ? right : right === "disputeFault" ? "disputeCapacityFault" : "disputeFault";
    // Inside the window mostly; at observedAt's own second, or after the window, sometimes.
    const offsetMs = r.chance(0.75) ? r.int(1_000, STAKING.faultWindow * 1000) : r.pick([0, 999, STAKING.faultWindow * 1000 + r.int(1, 5_000)]);
    // The wronged provider, the liar itself (racing the provider), the attacker or a renter sends it.
    const who = r.pick([leaseProvider(f.leaseId) ?? w.P, w.attestors[signer]!.address, w.A, w.R1]);
    return { kind, who, fault: index, signer, offsetMs, receiptSigner: r.chance(0.9) ? signer : r.int(0, 2), otherMachine: r.chance(0.08) };
  }
  const open = st.forged.map((f, i) => [f, i] as const).filter(([f]) => f.dispute?.open);
  if (open.length && roll < 0.7) {
    const [, tag] = r.pick(open);
    return { kind: "resolveDispute", who: r.pick([w.P, w.R1, w.A]), tag: r.chance(0.9) ? tag : r.int(0, st.forged.length) };
  }
  if (roll < 0.85) {
    // A new forged attestation, disputed first by its own attestor or the attacker for it, or by the honest provider;
    // or a second dispute of one already disputed (the race's loser).
    const attestor = r.int(0, 2);
    const tag = st.forged.length && r.chance(0.3) ? r.int(0, st.forged.length - 1) : st.forged.length;
    return { kind: "disputeAttestation", who: r.pick([w.attestors[attestor]!.address, w.A, w.P]), tag, attestor };
  }
  const creditors = Object.entries(st.owed)
    .filter(([, v]) => v > 0n)
    .map(([a]) => a as Address);
  if (creditors.length && roll < 0.95) {
    const who = r.pick(creditors);
    return { kind: "claimStaking", who, to: r.chance(0.9) ? who : w.R1 };
  }
  return { kind: "attestorStake", attestor: r.int(0, 2), amount: BigInt(r.pick([0, 100, 600, 1_000])) };
}

/**
 * The drain's staking steps: every open dispute resolved once its window passed (the caller moved time), then
 * everything owed claimed by its owner.
 */
export function drainResolve(st: StakingState, w: StakingWorld): StakingStep[] {
  return st.forged.flatMap((f, tag) => (f.dispute?.open ? [{ kind: "resolveDispute" as const, who: w.P, tag }] : []));
}
export function drainClaims(st: StakingState): StakingStep[] {
  return Object.entries(st.owed)
    .filter(([, v]) => v > 0n)
    .map(([who]) => ({ kind: "claimStaking" as const, who: who as Address, to: who as Address }));
}
/** The latest answerBy of an open dispute (0 without one). */
export function lastAnswerBy(st: StakingState): number {
  return st.forged.reduce((latest, f) => (f.dispute?.open ? Math.max(latest, f.dispute.answerBy) : latest), 0);
}

/**
 * The staking's promises: money in equals money out (its token balance is exactly the stakes, the open fees and what
 * it owes) and no attestor is better off than the slashes it earned leave it, whoever disputed (its wallet, stake,
 * what it is owed and the fees it has bonded add up to what it started with, plus what it staked from nowhere: nothing,
 * less what was slashed). Returns the violated promise, if any.
 */
export function stakingPromises(st: StakingState, w: StakingWorld, balances: Record<Address, bigint>, initialBalances: Record<Address, bigint>): string | undefined {
  const stakes = Object.values(st.active).reduce((sum, v) => sum + v, 0n);
  const owed = Object.values(st.owed).reduce((sum, v) => sum + v, 0n);
  const fees = st.forged.reduce((sum, f) => sum + (f.dispute?.open ? f.dispute.fee : 0n), 0n);
  if ((balances[w.staking] ?? 0n) !== stakes + owed + fees) return `the staking holds ${balances[w.staking]}, its books say stakes ${stakes} + owed ${owed} + open fees ${fees}`;
  for (const a of w.attestors) {
    const bonded = st.forged.reduce((sum, f) => sum + (f.dispute?.open && f.dispute.disputer === a.address ? f.dispute.fee : 0n), 0n);
    const worth = (balances[a.address] ?? 0n) + (st.active[a.address] ?? 0n) + (st.owed[a.address] ?? 0n) + bonded;
    const start = (initialBalances[a.address] ?? 0n) + ATTESTOR_STAKE;
    const slashed = st.slashed[a.address] ?? 0n;
    if (worth !== start - slashed) return `attestor ${a.address} is worth ${worth}: it started with ${start} and was slashed ${slashed} (a slash's share came back to it?)`;
  }
  return undefined;
}

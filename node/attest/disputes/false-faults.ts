/**
 * The provider's answer to a false liveness fault (docs/attestation.md, "A false liveness fault";
 * docs/provider.md). Scans LeaseMarket's `FaultSubmitted` events in bounded block ranges; for a
 * liveness fault (kind 1) of a lease this provider holds receipts of (probe-receipts.ts: only its
 * own leases' receipts are kept), it reads the fault from the event and its signatures from the
 * transaction's input (faultSignaturesIn: a direct submitFault or one wrapped in a multicall), and
 * for every signer whose own ProbeReceipt falls inside the fault window after observedAt (receiptContradictsFault with AttestorStaking's `faultWindowFor(observedAt)`) calls
 * `AttestorStaking.disputeFault` from the provider's wallet: the attestor is slashed at once and the
 * provider is owed the disputer's share (AttestorStaking.claim). Each (fault, attestor) is sent
 * once: the record notes it, and the contract's `disputedIn` is read first (a lie slashed in any staking of the
 * lineage, this one or one it replaced, is never sent again: the contract would refuse it, DisputedInLineage).
 *
 * A capacity fault (kind 2) of a lease of this provider is answered the same way with an attestation
 * (issue #34, finding 3): for every signer that passed the leased machine, for at least the lease's
 * units, in the fault window after observedAt (passed-attestations.ts keeps every pass of the last
 * 20 minutes), `AttestorStaking.disputeCapacityFault` is sent.
 */
import {
  bytesToHex,
  hashTypedData,
  hexToBytes,
  zeroAddress,
  type Account,
  type Address,
  type Chain,
  type Hex,
  type Transport,
  type TypedDataDomain,
  type WalletClient,
} from "viem";
import { attestorStakingAbi, leaseMarketAbi } from "../../../common/abi.js";
import { readLease } from "../../../common/chain/market.js";
import { receiptContradictsFault } from "../../../common/attest/liveness.js";
import { recoverDigestSigner } from "../../../common/eip712-recover.js";
import { FaultKind, suanliTypes, type Fault } from "../../../common/eip712.js";
import type { PassedAttestations } from "./passed-attestations.js";
import type { ProbeReceipts } from "./probe-receipts.js";
import { StakingScanner, type StakingScannerOptions } from "./staking-scanner.js";

/**
 * The distinct signers of `fault` whose signatures a transaction's input carries, each with its
 * signature: every ABI-encoded 65-byte `bytes` (a 32-byte length word of 65, then r ‖ s ‖ v), at any
 * byte offset, that recovers (as the contracts recover: low s, v 27/28) to a signer of `fault`'s
 * EIP-712 digest. That reads a direct `submitFault(fault, signatures)` and the same call wrapped in
 * another contract's call (Multicall3's aggregate, a forwarder, a Safe transaction: the inner
 * call is a `bytes` whose selector shifts its words by 4 bytes), so a liar cannot hide its
 * signature from the disputer by submitting through a multicall. A contract that rebuilds the
 * signatures from another encoding or from storage is not read. Every signer is returned (anyone
 * can sign a fault with throwaway keys: a cap would let a liar bury its own signature under
 * theirs); the caller looks up only those it holds receipts of. Bounded: one recovery per 65
 * length word in the input, whose size the block gas limit bounds.
 */
export function faultSignaturesIn(domain: TypedDataDomain, fault: Fault, input: Hex): { attestor: Address; signature: Hex }[] {
  const digest = hashTypedData({ domain, types: { Fault: suanliTypes.Fault }, primaryType: "Fault", message: fault });
  const bytes = hexToBytes(input);
  const found = new Map<Address, Hex>();
  let zeros = 0; // zero bytes in a row before index i
  for (let i = 0; i + 65 < bytes.length; i++) {
    const byte = bytes[i]!;
    // bytes[i] is the last byte of a length word of 65 when the 31 before it are zero.
    if (byte === 65 && zeros >= 31) {
      const signature = bytesToHex(bytes.subarray(i + 1, i + 66));
      const attestor = recoverDigestSigner(digest, signature);
      if (attestor && !found.has(attestor)) found.set(attestor, signature);
    }
    zeros = byte === 0 ? zeros + 1 : 0;
  }
  return [...found].map(([attestor, signature]) => ({ attestor, signature }));
}
/** Scans a failed dispute is tried again at (a node out of gas, an RPC error). */
const MAX_ATTEMPTS = 5;

export type FalseFaultDisputerOptions = StakingScannerOptions & {
  walletClient: WalletClient<Transport, Chain | undefined, Account>;
  market: Address;
  domain: TypedDataDomain;
  receipts: ProbeReceipts;
  /** The passes of this provider's machines: with them (and `provider`), capacity faults are disputed too. */
  passes?: PassedAttestations;
  /** This provider's address: a capacity fault is disputed only for its own leases. */
  provider?: Address;
};

/** The on-chain evidence against one signer: a probe receipt (disputeFault) or an attestation (disputeCapacityFault). */
type Evidence =
  | { functionName: "disputeFault"; evidence: readonly [ProbeReceiptArg, Hex]; at: bigint }
  | { functionName: "disputeCapacityFault"; evidence: readonly [AttestationArg, Hex]; at: bigint };
type ProbeReceiptArg = { leaseId: bigint; challenge: Hex; receivedAtMs: bigint };
type AttestationArg = NonNullable<Awaited<ReturnType<PassedAttestations["find"]>>>["attestation"];

/** What became of one signer of one fault. */
export type FalseFaultOutcome = {
  leaseId: bigint;
  attestor: Address;
  observedAt: number;
  outcome: "disputed" | "already_disputed" | "failed";
  /** The fault's kind: 1 (liveness, answered with a receipt) or 2 (capacity, answered with an attestation). */
  kind: number;
  /** When the contradicting evidence was stamped, ms (a receipt's receivedAtMs, an attestation's issuedAt × 1000). */
  receivedAtMs?: bigint;
  tx?: Hex;
  detail?: string;
};

export class FalseFaultDisputer extends StakingScanner<FalseFaultOutcome> {
  /** Faults whose dispute failed: checked again at the next scans. */
  private retry: { hash: Hex; fault: Fault; attempts: number }[] = [];

  constructor(private readonly o: FalseFaultDisputerOptions) {
    super(o, { without: "No attestor staking on this registry: false liveness and capacity faults cannot be disputed", what: "False-fault scan" });
  }

  /** The disputes that failed at an earlier scan, tried again. */
  protected override async beforeRanges(staking: Address): Promise<FalseFaultOutcome[]> {
    const outcomes: FalseFaultOutcome[] = [];
    const retry = this.retry;
    this.retry = [];
    for (const entry of retry) outcomes.push(...(await this.check(staking, entry.hash, entry.fault, entry.attempts + 1)));
    return outcomes;
  }

  /** Disputes every contradicted liveness or capacity fault of this provider's leases submitted in the range. */
  protected async scanRange(staking: Address, fromBlock: bigint, toBlock: bigint): Promise<FalseFaultOutcome[]> {
    const events = await this.o.publicClient.getContractEvents({
      address: this.o.market,
      abi: leaseMarketAbi,
      eventName: "FaultSubmitted",
      fromBlock,
      toBlock,
      strict: true,
    });
    const outcomes: FalseFaultOutcome[] = [];
    for (const event of events) {
      if (event.args.kind === FaultKind.capacity ? !(await this.ownsLease(event.args.leaseId)) : !(await this.o.receipts.holdsLease(event.args.leaseId))) continue;
      const fault: Fault = { leaseId: event.args.leaseId, kind: event.args.kind, observedAt: event.args.observedAt };
      outcomes.push(...(await this.check(staking, event.transactionHash, fault, 1)));
    }
    return outcomes;
  }

  /** Whether a capacity fault's lease is this provider's (and this node keeps its machines' passes). */
  private async ownsLease(leaseId: bigint): Promise<boolean> {
    if (!this.o.passes || !this.o.provider) return false;
    const lease = await readLease(this.o.publicClient, this.o.market, leaseId);
    return lease.provider.toLowerCase() === this.o.provider.toLowerCase();
  }

  /** The signer's own evidence inside the fault window after observedAt, if this node holds one. */
  private async evidenceAgainst(fault: Fault, attestor: Address, window: number): Promise<Evidence | undefined> {
    if (fault.kind === FaultKind.capacity) {
      const lease = await readLease(this.o.publicClient, this.o.market, fault.leaseId);
      const pass = await this.o.passes?.find(lease.machineId, attestor, lease.units, fault.observedAt + 1, fault.observedAt + window);
      if (!pass) return undefined;
      return { functionName: "disputeCapacityFault", evidence: [pass.attestation, pass.signature], at: BigInt(pass.attestation.issuedAt) * 1000n };
    }
    const record = await this.o.receipts.get(fault.leaseId, attestor);
    if (!record || record.disputed.includes(fault.observedAt)) return undefined;
    const held = record.receipts.find((kept) => receiptContradictsFault(fault, kept.receipt, window));
    if (!held) return undefined;
    return { functionName: "disputeFault", evidence: [held.receipt, held.signature], at: held.receipt.receivedAtMs };
  }

  /** The event's fault, and its signers and signatures read from the transaction that landed it. */
  private async check(staking: Address, hash: Hex, fault: Fault, attempt: number): Promise<FalseFaultOutcome[]> {
    const { input } = await this.o.publicClient.getTransaction({ hash });
    const signers = faultSignaturesIn(this.o.domain, fault, input);
    if (!signers.length) {
      this.o.logger.warn("A fault of this provider's lease landed in a transaction whose input carries none of its signatures: its signers cannot be read", {
        leaseId: fault.leaseId,
        tx: hash,
      });
      return [];
    }
    // The window that applies to this fault (a raise reaches only faults observed a day after it).
    const window = await this.o.publicClient.readContract({ address: staking, abi: attestorStakingAbi, functionName: "faultWindowFor", args: [fault.observedAt] });
    const outcomes: FalseFaultOutcome[] = [];
    for (const { attestor, signature } of signers) {
      const contradicting = await this.evidenceAgainst(fault, attestor, window);
      if (!contradicting) continue;
      outcomes.push(await this.dispute(staking, fault, attestor, signature, contradicting, window));
    }
    if (outcomes.some((entry) => entry.outcome === "failed") && attempt < MAX_ATTEMPTS) this.retry.push({ hash, fault, attempts: attempt });
    return outcomes;
  }

  private async dispute(staking: Address, fault: Fault, attestor: Address, faultSignature: Hex, held: Evidence, window: number): Promise<FalseFaultOutcome> {
    const base = { leaseId: fault.leaseId, attestor, observedAt: fault.observedAt, kind: fault.kind, receivedAtMs: held.at };
    const what = fault.kind === FaultKind.capacity ? "capacity" : "liveness";
    try {
      const id = await this.o.publicClient.readContract({ address: staking, abi: attestorStakingAbi, functionName: "faultDisputeId", args: [fault, attestor] });
      // Slashed here or in a staking this one replaced: the contract refuses it again (DisputedInLineage).
      const disputedIn = await this.o.publicClient.readContract({ address: staking, abi: attestorStakingAbi, functionName: "disputedIn", args: [id] });
      if (disputedIn !== zeroAddress) {
        if (fault.kind !== FaultKind.capacity) await this.o.receipts.markDisputed(fault.leaseId, attestor, fault.observedAt);
        return { ...base, outcome: "already_disputed" };
      }
      const { request } = await this.o.publicClient.simulateContract({
        address: staking,
        abi: attestorStakingAbi,
        functionName: held.functionName,
        args: [fault, faultSignature, ...held.evidence],
        account: this.o.walletClient.account,
      } as never);
      const tx = await this.o.walletClient.writeContract({ ...request, chain: this.o.walletClient.chain, account: this.o.walletClient.account });
      const receipt = await this.o.publicClient.waitForTransactionReceipt({ hash: tx });
      if (receipt.status !== "success") return { ...base, outcome: "failed", tx, detail: `transaction ${tx} reverted` };
      // A liveness dispute is noted with the receipts; a capacity one is found by the contract's disputedIn (above).
      if (fault.kind !== FaultKind.capacity) await this.o.receipts.markDisputed(fault.leaseId, attestor, fault.observedAt);
      this.o.logger.warn(`Disputed a false ${what} fault`, {
        attestor,
        leaseId: fault.leaseId,
        observedAt: fault.observedAt,
        evidenceAtMs: held.at,
        faultWindow: window,
        tx,
      });
      return { ...base, outcome: "disputed", tx };
    } catch (error) {
      this.o.logger.warn(`Disputing a false ${what} fault failed; trying again at the next scans`, { attestor, leaseId: fault.leaseId, observedAt: fault.observedAt }, error);
      return { ...base, outcome: "failed", detail: error instanceof Error ? error.message.split("\n")[0] : String(error) };
    }
  }
}

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
import { attestorStakingAbi, leaseMarketAbi } from "../../common/abi.js";
import { receiptContradictsFault } from "../../common/attest/liveness.js";
import { recoverDigestSigner } from "../../common/eip712-recover.js";
import { FaultKind, suanliTypes, type Fault } from "../../common/eip712.js";
import type { ProbeReceipts, StoredReceipt } from "./probe-receipts.js";
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
};

/** What became of one signer of one fault. */
export type FalseFaultOutcome = {
  leaseId: bigint;
  attestor: Address;
  observedAt: number;
  outcome: "disputed" | "already_disputed" | "failed";
  receivedAtMs?: bigint;
  tx?: Hex;
  detail?: string;
};

export class FalseFaultDisputer extends StakingScanner<FalseFaultOutcome> {
  /** Faults whose dispute failed: checked again at the next scans. */
  private retry: { hash: Hex; fault: Fault; attempts: number }[] = [];

  constructor(private readonly o: FalseFaultDisputerOptions) {
    super(o, { without: "No attestor staking on this registry: false liveness faults cannot be disputed", what: "False-fault scan" });
  }

  /** The disputes that failed at an earlier scan, tried again. */
  protected override async beforeRanges(staking: Address): Promise<FalseFaultOutcome[]> {
    const outcomes: FalseFaultOutcome[] = [];
    const retry = this.retry;
    this.retry = [];
    for (const entry of retry) outcomes.push(...(await this.check(staking, entry.hash, entry.fault, entry.attempts + 1)));
    return outcomes;
  }

  /** Disputes every contradicted liveness fault of this provider's leases submitted in the range. */
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
      if (event.args.kind !== FaultKind.unresponsive || !(await this.o.receipts.holdsLease(event.args.leaseId))) continue;
      const fault: Fault = { leaseId: event.args.leaseId, kind: event.args.kind, observedAt: event.args.observedAt };
      outcomes.push(...(await this.check(staking, event.transactionHash, fault, 1)));
    }
    return outcomes;
  }

  /** The event's fault, and its signers and signatures read from the transaction that landed it. */
  private async check(staking: Address, hash: Hex, fault: Fault, attempt: number): Promise<FalseFaultOutcome[]> {
    const { input } = await this.o.publicClient.getTransaction({ hash });
    const signers = faultSignaturesIn(this.o.domain, fault, input);
    if (!signers.length) {
      this.o.logger.warn("A liveness fault of this provider's lease landed in a transaction whose input carries none of its signatures: its signers cannot be read", {
        leaseId: fault.leaseId,
        tx: hash,
      });
      return [];
    }
    // The window that applies to this fault (a raise reaches only faults observed a day after it).
    const window = await this.o.publicClient.readContract({ address: staking, abi: attestorStakingAbi, functionName: "faultWindowFor", args: [fault.observedAt] });
    const outcomes: FalseFaultOutcome[] = [];
    for (const { attestor, signature } of signers) {
      const record = await this.o.receipts.get(fault.leaseId, attestor);
      if (!record || record.disputed.includes(fault.observedAt)) continue;
      const contradicting = record.receipts.find((held) => receiptContradictsFault(fault, held.receipt, window));
      if (!contradicting) continue;
      outcomes.push(await this.dispute(staking, fault, attestor, signature, contradicting, window));
    }
    if (outcomes.some((entry) => entry.outcome === "failed") && attempt < MAX_ATTEMPTS) this.retry.push({ hash, fault, attempts: attempt });
    return outcomes;
  }

  private async dispute(staking: Address, fault: Fault, attestor: Address, faultSignature: Hex, held: StoredReceipt, window: number): Promise<FalseFaultOutcome> {
    const base = { leaseId: fault.leaseId, attestor, observedAt: fault.observedAt, receivedAtMs: held.receipt.receivedAtMs };
    try {
      const id = await this.o.publicClient.readContract({ address: staking, abi: attestorStakingAbi, functionName: "faultDisputeId", args: [fault, attestor] });
      // Slashed here or in a staking this one replaced: the contract refuses it again (DisputedInLineage).
      const disputedIn = await this.o.publicClient.readContract({ address: staking, abi: attestorStakingAbi, functionName: "disputedIn", args: [id] });
      if (disputedIn !== zeroAddress) {
        await this.o.receipts.markDisputed(fault.leaseId, attestor, fault.observedAt);
        return { ...base, outcome: "already_disputed" };
      }
      const { request } = await this.o.publicClient.simulateContract({
        address: staking,
        abi: attestorStakingAbi,
        functionName: "disputeFault",
        args: [fault, faultSignature, held.receipt, held.signature],
        account: this.o.walletClient.account,
      });
      const tx = await this.o.walletClient.writeContract({ ...request, chain: this.o.walletClient.chain, account: this.o.walletClient.account });
      const receipt = await this.o.publicClient.waitForTransactionReceipt({ hash: tx });
      if (receipt.status !== "success") return { ...base, outcome: "failed", tx, detail: `transaction ${tx} reverted` };
      await this.o.receipts.markDisputed(fault.leaseId, attestor, fault.observedAt);
      this.o.logger.warn("Disputed a false liveness fault", {
        attestor,
        leaseId: fault.leaseId,
        observedAt: fault.observedAt,
        receivedAtMs: held.receipt.receivedAtMs,
        faultWindow: window,
        tx,
      });
      return { ...base, outcome: "disputed", tx };
    } catch (error) {
      this.o.logger.warn("Disputing a false liveness fault failed; trying again at the next scans", { attestor, leaseId: fault.leaseId, observedAt: fault.observedAt }, error);
      return { ...base, outcome: "failed", detail: error instanceof Error ? error.message.split("\n")[0] : String(error) };
    }
  }
}

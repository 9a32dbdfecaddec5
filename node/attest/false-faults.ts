/**
 * The provider's answer to a false liveness fault (docs/attestation.md, "A false liveness fault";
 * docs/provider.md). Scans LeaseMarket's `FaultSubmitted` events in bounded block ranges; for a
 * liveness fault (kind 1) of a lease this provider holds receipts of (probe-receipts.ts: only its
 * own leases' receipts are kept), it reads the submitFault transaction's calldata, recovers each
 * signer of the fault, and for every signer whose own ProbeReceipt falls inside the fault window
 * after observedAt (receiptContradictsFault with AttestorStaking's `faultWindowFor(observedAt)`) calls
 * `AttestorStaking.disputeFault` from the provider's wallet: the attestor is slashed at once and the
 * provider is owed the disputer's share (AttestorStaking.claim). Each (fault, attestor) is sent
 * once: the record notes it, and the contract's `faultDisputed` is read first.
 */
import { decodeFunctionData, type Account, type Address, type Chain, type Hex, type Transport, type TypedDataDomain, type WalletClient } from "viem";
import { attestorStakingAbi, leaseMarketAbi } from "../../common/abi.js";
import { receiptContradictsFault, recoverFaultSigner } from "../../common/attest/liveness.js";
import { FaultKind, type Fault } from "../../common/eip712.js";
import type { ProbeReceipts, StoredReceipt } from "./probe-receipts.js";
import { StakingScanner, type StakingScannerOptions } from "./staking-scanner.js";

/** Most signatures of one fault looked at (submitFault takes a quorum; more is noise). */
const MAX_SIGNERS = 32;
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
  private retry: { hash: Hex; leaseId: bigint; attempts: number }[] = [];

  constructor(private readonly o: FalseFaultDisputerOptions) {
    super(o, { without: "No attestor staking on this registry: false liveness faults cannot be disputed", what: "False-fault scan" });
  }

  /** The disputes that failed at an earlier scan, tried again. */
  protected override async beforeRanges(staking: Address): Promise<FalseFaultOutcome[]> {
    const outcomes: FalseFaultOutcome[] = [];
    const retry = this.retry;
    this.retry = [];
    for (const entry of retry) outcomes.push(...(await this.check(staking, entry.hash, entry.leaseId, entry.attempts + 1)));
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
      outcomes.push(...(await this.check(staking, event.transactionHash, event.args.leaseId, 1)));
    }
    return outcomes;
  }

  /** The fault and its signatures from the submitFault transaction; undefined when it was not a direct call. */
  private async submitted(hash: Hex): Promise<{ fault: Fault; signatures: readonly Hex[] } | undefined> {
    const transaction = await this.o.publicClient.getTransaction({ hash });
    try {
      const call = decodeFunctionData({ abi: leaseMarketAbi, data: transaction.input });
      if (call.functionName !== "submitFault") return undefined;
      const [fault, signatures] = call.args;
      return { fault: { leaseId: fault.leaseId, kind: fault.kind, observedAt: fault.observedAt }, signatures };
    } catch {
      return undefined;
    }
  }

  private async check(staking: Address, hash: Hex, leaseId: bigint, attempt: number): Promise<FalseFaultOutcome[]> {
    const submitted = await this.submitted(hash);
    if (!submitted || submitted.fault.leaseId !== leaseId) {
      this.o.logger.warn("A liveness fault of this provider's lease was not submitted by a direct submitFault call: its signers cannot be read", { leaseId, tx: hash });
      return [];
    }
    const { fault, signatures } = submitted;
    // The window that applies to this fault (a raise reaches only faults observed a day after it).
    const window = await this.o.publicClient.readContract({ address: staking, abi: attestorStakingAbi, functionName: "faultWindowFor", args: [fault.observedAt] });
    const outcomes: FalseFaultOutcome[] = [];
    for (const signature of signatures.slice(0, MAX_SIGNERS)) {
      const attestor = await recoverFaultSigner(this.o.domain, fault, signature);
      if (!attestor) continue;
      const record = await this.o.receipts.get(leaseId, attestor);
      if (!record || record.disputed.includes(fault.observedAt)) continue;
      const contradicting = record.receipts.find((held) => receiptContradictsFault(fault, held.receipt, window));
      if (!contradicting) continue;
      outcomes.push(await this.dispute(staking, fault, attestor, signature, contradicting, window));
    }
    if (outcomes.some((entry) => entry.outcome === "failed") && attempt < MAX_ATTEMPTS) this.retry.push({ hash, leaseId, attempts: attempt });
    return outcomes;
  }

  private async dispute(staking: Address, fault: Fault, attestor: Address, faultSignature: Hex, held: StoredReceipt, window: number): Promise<FalseFaultOutcome> {
    const base = { leaseId: fault.leaseId, attestor, observedAt: fault.observedAt, receivedAtMs: held.receipt.receivedAtMs };
    try {
      const id = await this.o.publicClient.readContract({ address: staking, abi: attestorStakingAbi, functionName: "faultDisputeId", args: [fault, attestor] });
      if (await this.o.publicClient.readContract({ address: staking, abi: attestorStakingAbi, functionName: "faultDisputed", args: [id] })) {
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

/**
 * Submitting a fault that holds a quorum: `LeaseMarket.submitFault(fault, signatures ordered by
 * signer)`, which stops accrual at `observedAt` and pays the renter back with the SLA credit in
 * the same transaction. Two submitters racing is harmless: the loser's transaction is not sent
 * (its simulation sees the lease no longer active) or reverts with InvalidLeaseStatus, and it
 * records the fault as landed.
 */
import type { Account, Address, Chain, Hex, LocalAccount, PublicClient, Transport, WalletClient } from "viem";
import { leaseMarketAbi } from "../../../common/abi.js";
import { orderFaultSignatures, readLease } from "../../../common/chain/market.js";
import { revertName } from "../../../common/chain/tx.js";
import type { Fault } from "../../../common/eip712.js";
import type { CachedChainView } from "../../../common/offers/chain-view.js";
import type { Logger } from "../../log/logger.js";
import type { Metrics } from "../../metrics/metrics.js";
import type { FaultRecord, FaultRecords } from "./fault-records.js";
import type { LeaseTracker } from "./leases.js";

/**
 * Gas limit of a submitFault sent without a simulation: about 128,000 are used with two
 * signatures (README, "Gas"); each further signature costs a recovery and a role lookup.
 */
const SUBMIT_FAULT_GAS_BASE = 250_000n;
const SUBMIT_FAULT_GAS_PER_SIGNATURE = 30_000n;

export type FaultSubmitterOptions = {
  market: Address;
  account: LocalAccount;
  publicClient: PublicClient<Transport, Chain>;
  walletClient: WalletClient<Transport, Chain, Account>;
  chainView: CachedChainView;
  tracker: LeaseTracker;
  records: FaultRecords;
  metrics: Metrics;
  logger: Logger;
  now: () => number;
  /** Signs the record's fault again at its `minObservedAt` (the submission window closed). */
  resign: (record: FaultRecord) => Promise<void>;
};

export class FaultSubmitter {
  constructor(private readonly o: FaultSubmitterOptions) {}

  async submit(record: FaultRecord): Promise<void> {
    const { records } = this.o;
    const lease = await readLease(this.o.publicClient, this.o.market, record.leaseId);
    if (lease.status !== "Active") {
      await this.settleFromChain(record, lease.status, lease.endReason);
      return;
    }
    const signatures = orderFaultSignatures(record.signatures);
    try {
      const hash = await this.send(record.fault, signatures);
      await records.update(record, { submittedTx: hash });
      this.o.metrics.attestFaults.inc({ event: "submitted", reason: "" });
      const receipt = await this.o.publicClient.waitForTransactionReceipt({ hash });
      if (receipt.status === "success") {
        await records.update(record, { status: "landed", landedBy: "self", note: null });
        this.o.metrics.attestFaults.inc({ event: "landed", reason: "self" });
        this.o.logger.warn("Fault submitted: the lease ended and the renter was credited", {
          leaseId: record.leaseId,
          kind: record.fault.kind,
          provider: record.provider,
          observedAt: record.fault.observedAt,
          signers: record.signatures.map((entry) => entry.signer),
          transaction: hash,
        });
        return;
      }
      const after = await readLease(this.o.publicClient, this.o.market, record.leaseId);
      await this.settleFromChain(record, after.status, after.endReason);
    } catch (error) {
      const name = revertName(error);
      if (name === "InvalidLeaseStatus") {
        const after = await readLease(this.o.publicClient, this.o.market, record.leaseId);
        await this.settleFromChain(record, after.status, after.endReason);
        return;
      }
      if (name === "FaultQuorumNotMet" || name === "NotAttestor") this.o.chainView.invalidateAttestors();
      if (name === "FaultObservedOutOfRange") {
        const tracked = this.o.tracker.get(record.leaseId);
        if (tracked && record.fault.observedAt >= tracked.end) {
          await records.update(record, { status: "abandoned", note: "observedAt is past the lease's end" });
          return;
        }
        // The chain's clock has not reached observedAt yet: the next round tries again.
      }
      if (name === "FaultSubmissionClosed") {
        // LeaseMarket.FAULT_SUBMISSION_WINDOW after observedAt this fault can no longer land: sign one observed
        // now and collect again (co-signers only sign it if they still hold their own evidence).
        await records.update(record, { minObservedAt: Math.max(record.minObservedAt, Math.floor(this.o.now() / 1000)), note: "the fault's submission window closed" });
        await this.o.resign(record);
        return;
      }
      await records.update(record, { note: `submitFault failed: ${name ?? (error as Error)?.message?.split("\n")[0] ?? String(error)}` });
      this.o.logger.warn("submitFault failed; retrying", { leaseId: record.leaseId, error: name }, name ? undefined : error);
    }
  }

  /** Records how the lease ended on-chain: landed when it ended Faulted (by anyone), ended otherwise. */
  async settleFromChain(record: FaultRecord, status: string, endReason: string): Promise<void> {
    if (endReason === "Faulted") {
      await this.o.records.update(record, { status: "landed", landedBy: record.landedBy ?? "other" });
      this.o.metrics.attestFaults.inc({ event: "landed", reason: "other" });
    } else if (status !== "Active") {
      await this.o.records.update(record, { status: "ended", note: `the lease is ${status} (${endReason})` });
    }
  }

  /**
   * Simulates submitFault, then sends it. A simulation runs against the latest block, whose
   * timestamp on an idle chain (a devnet mines only when a transaction comes) can lag our clock:
   * observedAt then looks "in the future" although the block this transaction opens will be
   * later. In exactly that case the transaction is sent without a simulation, with a fixed gas limit.
   */
  private async send(fault: Fault, signatures: Hex[]): Promise<Hex> {
    const call = { account: this.o.account, address: this.o.market, abi: leaseMarketAbi, functionName: "submitFault" as const, args: [fault, signatures] as const };
    try {
      const { request: simulated } = await this.o.publicClient.simulateContract(call);
      return await this.o.walletClient.writeContract(simulated);
    } catch (error) {
      if (revertName(error) !== "FaultObservedOutOfRange") throw error;
      const head = await this.o.publicClient.getBlock({ blockTag: "latest" });
      const nowS = Math.floor(this.o.now() / 1000);
      if (!(Number(head.timestamp) < fault.observedAt && fault.observedAt <= nowS)) throw error;
      this.o.logger.debug("The chain's latest block is older than observedAt; sending without a simulation", { leaseId: fault.leaseId, head: head.timestamp });
      return this.o.walletClient.writeContract({
        ...call,
        chain: this.o.walletClient.chain,
        gas: SUBMIT_FAULT_GAS_BASE + SUBMIT_FAULT_GAS_PER_SIGNATURE * BigInt(signatures.length),
      });
    }
  }
}

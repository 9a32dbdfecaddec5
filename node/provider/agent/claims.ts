/**
 * Getting paid: on a schedule, one `claimMany` (up to 64 leases per transaction) for the leases
 * with money waiting. An ended lease is claimed once its accrual is over (a preempted lease
 * accrues until its notice ends); an active lease once `provider.claims.minAmount` has accrued,
 * or when it is past its end (the claim finalizes it and frees its units, even when nothing is
 * claimable yet). Otherwise only leases whose claimable amount the chain reports as nonzero are
 * sent, so no claim transaction fails and none pays twice (the contract pays only what accrued
 * since the last claim). A claim pays until now - 600 s; a completed lease, or one finalized within
 * 600 s of its end, holds the provider's collateral and last fault window of pay (issue #34): once
 * the window is over, a `claim` of its own releases both. A pass remembers when each hold ends, and a watch
 * (every `provider.claims.releaseWatchMs`) runs the next pass as soon as the chain's clock is past one of them,
 * so held pay goes out within that long of the window's end rather than up to a claim interval later.
 */
import type { Address, Chain, PublicClient, Transport } from "viem";
import { leaseMarketAbi } from "../../../common/abi.js";
import { completionHeldUntil, readLease, type LeaseView } from "../../../common/chain/market.js";
import type { Logger } from "../../log/logger.js";
import type { TxSender } from "./chain-tx.js";
import type { LeaseRecords } from "./records.js";
import { runDetached } from "../../../common/detached.js";

/** The contract's MAX_BATCH. */
const CLAIM_BATCH = 64;

export type ClaimerOptions = {
  publicClient: PublicClient<Transport, Chain>;
  market: Address;
  tx: TxSender;
  records: LeaseRecords;
  intervalMs: number;
  minAmount: bigint;
  /** How often a known hold's end is checked against the chain's clock (provider.claims.releaseWatchMs). */
  releaseWatchMs: number;
  /** The chain's clock (unix seconds). */
  chainNow: () => Promise<number>;
  /** Called with the leases a claim touched (they may have settled). */
  onClaimed: (leaseIds: bigint[]) => void;
  logger: Logger;
};

/**
 * Whether to claim a lease now. `reportPending`: the node still owes the lease a completion
 * report (its task runs or just ended); a claim past the end would finalize the lease first and
 * the report would be lost, so such a lease is claimed past its end only by its report.
 */
export function claimWorthy(view: LeaseView, nowSeconds: number, minAmount: bigint, reportPending = false): boolean {
  // Past its end an Active lease is claimed to finalize it (its units go back) even with nothing claimable yet: within
  // the fault window after the end a claim pays only until end - 600 s (issue #34), zero for a shorter lease.
  if (view.status === "Active" && view.end > 0 && nowSeconds >= view.end) return !reportPending;
  if (view.claimable === 0n) return false;
  if (view.status === "Ended") return nowSeconds >= view.stopAt || view.claimable >= minAmount;
  if (view.status !== "Active") return false;
  return view.claimable >= minAmount;
}

export class Claimer {
  private timer: NodeJS.Timeout | undefined;
  private watch: NodeJS.Timeout | undefined;
  /** Held leases seen by the last pass, with the chain time their hold ends. */
  private readonly holds = new Map<bigint, number>();
  private running: Promise<void> | undefined;
  private soon: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(private readonly options: ClaimerOptions) {}

  start(): void {
    this.timer = setInterval(() => runDetached(this.claimNow(), this.options.logger, "Claiming payment"), this.options.intervalMs);
    this.timer.unref();
    this.watch = setInterval(() => runDetached(this.watchRelease(), this.options.logger, "Watching held pay"), this.options.releaseWatchMs);
    this.watch.unref();
  }

  /** Leases whose pay the node holds for their fault window, with the chain time each hold ends. */
  held(): ReadonlyMap<bigint, number> {
    return this.holds;
  }

  /** Runs a pass once the chain's clock is past a known hold's end (one block-time read; nothing while none is held). */
  private async watchRelease(): Promise<void> {
    if (this.holds.size === 0 || this.running || this.stopped) return;
    const now = await this.options.chainNow();
    for (const until of this.holds.values()) {
      if (now >= until) return this.claimNow();
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    if (this.watch) clearInterval(this.watch);
    if (this.soon) clearTimeout(this.soon);
    await this.running;
  }

  /** Claims shortly (a lease just ended); several calls coalesce into one pass. */
  trigger(delayMs = 500): void {
    if (this.stopped || this.soon) return;
    this.soon = setTimeout(() => {
      this.soon = undefined;
      runDetached(this.claimNow(), this.options.logger, "Claiming payment");
    }, delayMs);
    this.soon.unref();
  }

  /** One pass: reads the candidates and claims those worth it. Resolves with the lease ids claimed. */
  claimNow(): Promise<void> {
    if (this.stopped) return Promise.resolve();
    this.running ??= this.pass()
      .catch((error: unknown) => this.options.logger.warn("Claiming failed; retrying on the next pass", {}, error))
      .finally(() => {
        this.running = undefined;
      });
    return this.running;
  }

  private async pass(): Promise<void> {
    const { publicClient, market, records, minAmount, tx, logger } = this.options;
    const candidates = records.open().filter((record) => record.chain.status === "Active" || record.chain.status === "Ended" || record.chain.status === "Settled");
    this.holds.clear();
    if (candidates.length === 0) return;
    const now = await this.options.chainNow();
    const due: bigint[] = [];
    const held: bigint[] = [];
    let total = 0n;
    for (const record of candidates) {
      const view = await readLease(publicClient, market, record.leaseId);
      const heldUntil = completionHeldUntil(view);
      if (heldUntil !== undefined && now >= heldUntil) held.push(record.leaseId);
      else if (heldUntil !== undefined) this.holds.set(record.leaseId, heldUntil);
      const reportPending = record.phase === "preparing" || record.phase === "starting" || record.phase === "running" || record.endAction !== "none";
      if (claimWorthy(view, now, minAmount, reportPending)) {
        due.push(record.leaseId);
        total += view.claimable;
      }
    }
    for (let start = 0; start < due.length; start += CLAIM_BATCH) {
      const batch = due.slice(start, start + CLAIM_BATCH);
      await tx.send({ address: market, abi: leaseMarketAbi, functionName: "claimMany", args: [batch] });
      logger.info("Claimed", { leases: batch.map(String), claimable: total });
      this.options.onClaimed(batch);
    }
    for (const leaseId of held) {
      await tx.send({ address: market, abi: leaseMarketAbi, functionName: "claim", args: [leaseId] });
      logger.info("Collateral released after the completion's fault window", { leaseId });
      this.options.onClaimed([leaseId]);
    }
  }
}

/**
 * Which leases are this provider's, for renter requests about a lease that has no record here
 * (a request can come before the LeaseOpened event is handled). Answers cost as few chain reads
 * as possible: ids below the events already handled cost none, ids at or above the market's
 * counter cost a shared counter read, and only ids opened since the last event handled cost a
 * (shared, cached) read of the lease.
 */
import { getAddress, type Address, type Chain, type PublicClient, type Transport } from "viem";
import { LRUCache } from "lru-cache";
import { leaseMarketAbi } from "../../../common/abi.js";
import { readLease, type LeaseView } from "../../../common/chain/market.js";
import { LeaseNotConfirmedError } from "./errors.js";

/** How long one read of the market's lease counter answers for unknown lease ids. */
const NEXT_LEASE_ID_MAX_AGE_MS = 250;
/**
 * A lease id this close above the last counter read may have just been opened: the counter is
 * read again before the request is refused. Farther ids are refused without a read.
 */
const NEXT_LEASE_ID_SLACK = 64n;
/** How long a chain read of one lease answers concurrent and repeated requests about it. */
const LEASE_READ_TTL_MS = 2_000;
/** How often a request waiting for its lease's block to be confirmed reads the chain again. */
const CONFIRMATION_POLL_MS = 250;

export class LeaseLookup {
  /**
   * Every lease id below this one was opened on-chain and its LeaseOpened event handled here: a
   * lease below it without a record is not this provider's, and costs no chain read to say so.
   */
  private eventsNext = 1n;
  private counter: { value: bigint; at: number; pending?: Promise<bigint> | undefined } = { value: 0n, at: 0 };
  private readonly leaseReads = new LRUCache<string, Promise<LeaseView>>({ max: 10_000, ttl: LEASE_READ_TTL_MS });

  /** Blocks below the head a lease must be to be acted on (chain.confirmations). */
  readonly confirmations: bigint;

  constructor(private readonly deps: { publicClient: PublicClient<Transport, Chain>; market: Address; provider: Address; confirmations?: number }) {
    this.confirmations = BigInt(deps.confirmations ?? 0);
  }

  /** Events arrive in order: every lease up to this one has been handled. */
  saw(leaseId: bigint): void {
    if (leaseId >= this.eventsNext) this.eventsNext = leaseId + 1n;
  }

  /**
   * The market's lease counter. `shared`: read at most every NEXT_LEASE_ID_MAX_AGE_MS, concurrent
   * callers sharing one read. Otherwise a read of its own, started now: a shared read that began
   * before the caller's lease was opened would not count it.
   */
  private async nextLeaseId(shared: boolean): Promise<bigint> {
    const read = () =>
      this.deps.publicClient.readContract({ address: this.deps.market, abi: leaseMarketAbi, functionName: "nextLeaseId" }).then((value) => {
        if (value >= this.counter.value) this.counter = { ...this.counter, value, at: Date.now() };
        return value;
      });
    if (!shared) return read();
    if (this.counter.at > 0 && Date.now() - this.counter.at <= NEXT_LEASE_ID_MAX_AGE_MS) return this.counter.value;
    this.counter.pending ??= read().finally(() => {
      this.counter.pending = undefined;
    });
    return this.counter.pending;
  }

  /**
   * What the chain says about a lease that has no record here, when it may be this provider's;
   * undefined when it is not (or does not exist). Ids just above the last counter read (a lease
   * opened a moment ago) get a fresh counter read of their own. `fresh`: the lease is read again
   * rather than answered from a read of the last LEASE_READ_TTL_MS (a reorg may have replaced it).
   */
  async lookup(leaseId: bigint, options: { fresh?: boolean } = {}): Promise<LeaseView | undefined> {
    if (leaseId < this.eventsNext) return undefined;
    let next = await this.nextLeaseId(true);
    if (leaseId >= next && leaseId - next < NEXT_LEASE_ID_SLACK) next = await this.nextLeaseId(false);
    if (leaseId >= next) return undefined;
    const key = leaseId.toString();
    if (options.fresh) this.leaseReads.delete(key);
    let read = this.leaseReads.get(key);
    if (!read) {
      read = readLease(this.deps.publicClient, this.deps.market, leaseId);
      this.leaseReads.set(key, read);
      read.catch(() => this.leaseReads.delete(key));
    }
    const view = await read;
    return view.status === "None" || getAddress(view.provider) !== this.deps.provider ? undefined : view;
  }

  /**
   * With chain.confirmations above 0: the lease as it is at the confirmed head (the latest block
   * less the confirmations), the view the node may act on. A lease opened in a block still too
   * shallow is waited for, up to `waitMs`, then refused with LeaseNotConfirmedError (the renter
   * sends again); undefined when it is not this provider's there, or no longer exists at all (a
   * reorg removed it).
   */
  async confirmed(leaseId: bigint, waitMs: number): Promise<LeaseView | undefined> {
    const client = this.deps.publicClient;
    const deadline = Date.now() + waitMs;
    const notConfirmed = (cause?: unknown) =>
      new LeaseNotConfirmedError(`Lease ${leaseId} is not ${this.confirmations} blocks deep yet: this provider acts on a lease once its block is confirmed`, {
        metaMessages: [`The provider follows the chain ${this.confirmations} blocks below its head (chain.confirmations); send the request again in a few blocks.`],
        cause,
      });
    for (;;) {
      const head = await client.getBlockNumber({ cacheTime: 0 });
      const at = head - this.confirmations;
      let view: LeaseView | undefined;
      try {
        view = at > 0n ? await readLease(client, this.deps.market, leaseId, { blockNumber: at }) : undefined;
      } catch (error) {
        // A reorg between the head read and this one can take block `at` away ("invalid block tag"): read again, and
        // past the deadline refuse as not confirmed (the renter sends again), never as the node's own failure.
        if (Date.now() + CONFIRMATION_POLL_MS > deadline) throw notConfirmed(error);
        await new Promise((resolve) => setTimeout(resolve, CONFIRMATION_POLL_MS));
        continue;
      }
      if (view && view.status !== "None") return getAddress(view.provider) === this.deps.provider ? view : undefined;
      const latest = await readLease(client, this.deps.market, leaseId);
      // What the latest block says now replaces what lookup() read before (a reorg may have changed it).
      if (latest.status === "None") this.leaseReads.delete(leaseId.toString());
      else this.leaseReads.set(leaseId.toString(), Promise.resolve(latest));
      if (latest.status === "None" || getAddress(latest.provider) !== this.deps.provider) return undefined;
      if (Date.now() + CONFIRMATION_POLL_MS > deadline) throw notConfirmed();
      await new Promise((resolve) => setTimeout(resolve, CONFIRMATION_POLL_MS));
    }
  }

  /**
   * The chain's view of a lease a renter request names when the node has no record of it, as the
   * node may act on it; throws `refuse()` when `signer` is not its renter. Where reorgs are
   * expected (confirmations > 0) a refusal is not made on a read shared with earlier requests (a
   * reorg may have given the lease id to this signer since), and a lease not yet through the
   * confirmed events is taken as the confirmed head has it, waiting up to `waitMs`: a lease a
   * shallow reorg removes, or gives another renter, never gets this renter's task.
   */
  async forRenter(leaseId: bigint, signer: Address, refuse: () => Error, waitMs: number): Promise<LeaseView> {
    const isRenter = (view: LeaseView | undefined): view is LeaseView => view !== undefined && getAddress(view.renter) === signer;
    let view = await this.lookup(leaseId);
    if (!isRenter(view) && this.confirmations > 0n) view = await this.lookup(leaseId, { fresh: true });
    if (!isRenter(view)) throw refuse();
    if (this.confirmations > 0n) {
      view = await this.confirmed(leaseId, waitMs);
      if (!isRenter(view)) throw refuse();
    }
    return view;
  }
}

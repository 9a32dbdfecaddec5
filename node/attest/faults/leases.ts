/**
 * The active leases an attestor watches, rebuilt from LeaseMarket events as a subscriber of the
 * node's chain follower (`attest.leases`). Its cursor is kept in level (from the deployment block
 * on first start), so an attestor that was down still learns every lease activated meanwhile; the
 * lease table itself is in level too, so a restart does not re-read history it already has.
 */
import type { Address, Chain, PublicClient, Transport } from "viem";
import { getAddress } from "viem";
import type { Deployment } from "../../../common/deployment.js";
import { END_REASONS, readLease } from "../../../common/chain/market.js";
import type { ChainEvent, ChainFollower, Subscription } from "../../chain/follower.js";
import type { Logger } from "../../log/logger.js";
import { Bucket } from "../../store/buckets.js";
import type { Repository, Store } from "../../store/store.js";

/** A lease whose provider the attestor probes. Times are chain seconds. */
export type TrackedLease = {
  leaseId: bigint;
  provider: Address;
  renter: Address;
  machineId: number;
  activatedAt: number;
  /** When service ends (the deposit runs out, or the preemption notice's stopAt). */
  end: number;
};

/** The tracker's subscriber name on the follower. */
const SUBSCRIBER = "attest.leases";
/** Where trackers before the one follower kept their cursor: read once, as the starting block. */
const LEGACY_CURSOR_KEY = "attest.leases.cursor";

export type LeaseTrackerOptions = {
  publicClient: PublicClient<Transport, Chain>;
  deployment: Deployment;
  market: Address;
  store: Store;
  /** The node's chain follower. */
  follower: ChainFollower;
  logger: Logger;
  /** A lease ended on-chain (any reason); the fault coordinator closes its records. */
  onEnded?: (leaseId: bigint, reason: string) => void | Promise<void>;
  /** Clock, unix ms. */
  now?: () => number;
};

export class LeaseTracker {
  private readonly leases = new Map<string, TrackedLease & { trackedSinceMs: number }>();
  private readonly repo: Repository<TrackedLease>;
  private readonly cursors: Repository<string>;
  private subscription: Subscription | undefined;
  private readonly now: () => number;

  constructor(private readonly o: LeaseTrackerOptions) {
    this.repo = o.store.repository<TrackedLease>(Bucket.attestLeases);
    this.cursors = o.store.repository<string>(Bucket.meta);
    this.now = o.now ?? Date.now;
  }

  async start(): Promise<void> {
    const startedMs = this.now();
    for await (const [key, lease] of this.repo.entries()) this.leases.set(key, { ...lease, trackedSinceMs: startedMs });
    const legacy = await this.cursors.get(LEGACY_CURSOR_KEY);
    this.subscription = await this.o.follower.subscribe(SUBSCRIBER, (event) => this.apply(event), {
      from: legacy === undefined ? this.o.deployment.deploymentBlock : BigInt(legacy),
    });
    await this.o.follower.sync();
    this.o.logger.info("Watching leases", { active: this.leases.size, fromBlock: this.subscription.startedAt.block.toString() });
  }

  async stop(): Promise<void> {
    if (this.subscription) await this.o.follower.unsubscribe(this.subscription);
  }

  /** Reads the chain up to its head now. */
  async sync(): Promise<void> {
    await this.o.follower.sync();
  }

  /** Leases still in service at `nowSeconds` (wall clock; the chain's own clock may run slightly ahead or behind). */
  active(nowSeconds = Math.floor(this.now() / 1000)): (TrackedLease & { trackedSinceMs: number })[] {
    return [...this.leases.values()].filter((lease) => lease.end > nowSeconds);
  }

  get(leaseId: bigint): (TrackedLease & { trackedSinceMs: number }) | undefined {
    return this.leases.get(leaseId.toString());
  }

  get size(): number {
    return this.leases.size;
  }

  private async put(lease: TrackedLease): Promise<void> {
    const key = lease.leaseId.toString();
    const trackedSinceMs = this.leases.get(key)?.trackedSinceMs ?? this.now();
    this.leases.set(key, { ...lease, trackedSinceMs });
    await this.repo.put(key, lease);
  }

  private async drop(leaseId: bigint): Promise<void> {
    const key = leaseId.toString();
    this.leases.delete(key);
    await this.repo.del(key);
  }

  private async apply(event: ChainEvent): Promise<void> {
    switch (event.eventName) {
      case "LeaseActivated": {
        // The event lacks the parties; the lease as it is now also tells whether it already ended
        // (a replay of old history), in which case there is nothing to watch.
        const lease = await readLease(this.o.publicClient, this.o.market, event.args.leaseId);
        if (lease.status !== "Active") {
          await this.drop(event.args.leaseId);
          return;
        }
        await this.put({
          leaseId: event.args.leaseId,
          provider: getAddress(lease.provider),
          renter: getAddress(lease.renter),
          machineId: lease.machineId,
          activatedAt: event.args.activatedAt,
          end: lease.end,
        });
        this.o.logger.debug("Lease activated", { leaseId: event.args.leaseId, provider: lease.provider, end: lease.end });
        return;
      }
      case "LeasePreempted": {
        const tracked = this.get(event.args.leaseId);
        if (tracked) await this.put({ ...tracked, end: Math.min(tracked.end, event.args.stopAt) });
        return;
      }
      case "LeaseExtended": {
        const tracked = this.get(event.args.leaseId);
        if (tracked) await this.put({ ...tracked, end: event.args.end });
        return;
      }
      case "LeaseEnded": {
        await this.drop(event.args.leaseId);
        await this.o.onEnded?.(event.args.leaseId, END_REASONS[event.args.reason] ?? String(event.args.reason));
        return;
      }
      case "LeaseSettled":
        await this.drop(event.args.leaseId);
        return;
      default:
        return;
    }
  }
}

/**
 * The market index behind the HTTP API: which providers registered, which machines exist and which
 * leases each address holds, kept in level from the contracts' events. The chain answers "what is
 * provider X's stake" but not "which providers are there" or "which leases does address Y hold";
 * events do.
 *
 * The index is one subscriber of the node's chain follower (`api.index`). On its first start it
 * reads every event from the deployment block (a backfill); after a restart, from its cursor. Until
 * it reaches the head it saw at start, it defers lease status reads (once per lease at the
 * hand-off, rather than once per event) and announces nothing; from then on it applies and
 * announces each event as it comes. Every write is last-writer-wins (a put or a delete of one
 * key, or a lease status read from the chain at the time), so replaying a suffix of the event
 * sequence on top of a later state converges to the chain's state.
 */
import { EventEmitter } from "node:events";
import type { Address, Chain, PublicClient, Transport } from "viem";
import { getAddress } from "viem";
import { readLease, type LeaseStatusName, type LeaseView as ChainLease } from "../../common/chain/market.js";
import type { Deployment } from "../../common/deployment.js";
import { SuanliError } from "../../common/errors.js";
import type { ChainEvent, ChainFollower, Subscription } from "../chain/follower.js";
import type { Logger } from "../log/logger.js";
import { Bucket } from "../store/buckets.js";
import type { Repository, Store } from "../store/store.js";

/** What the index keeps of a lease: enough to list an address's leases and filter by status without the chain. */
export type LeaseSummary = {
  renter: Address;
  provider: Address;
  machineId: number;
  /** The status read from the chain after the lease's last event. */
  status: LeaseStatusName;
};

/** Changes the index saw while following the chain (not during the backfill). */
export type MarketIndexEvents = {
  /** A provider's registry record changed (registration, stake, profile, collateral, nonces). */
  provider: [provider: Address];
  /** A machine was declared, changed or removed. */
  machine: [machineId: number];
  /** A machine's units changed mode. */
  capacity: [machineId: number, usedUnits: number];
  /** The attestor set or quorum changed. */
  attestors: [];
  /** A lease was opened or changed; `lease` is its state right after the event. */
  lease: [lease: ChainLease];
};

export type MarketIndexOptions = {
  store: Store;
  publicClient: PublicClient<Transport, Chain>;
  deployment: Deployment;
  market: Address;
  /** The node's chain follower; the index subscribes to it. */
  follower: ChainFollower;
  logger: Logger;
};

/** The index's subscriber name on the follower (its cursor's key). */
const SUBSCRIBER = "api.index";
/** Where indexes before the one follower kept their cursor: read once, as the starting block. */
const LEGACY_CURSOR_KEY = "api.index.cursor";

export class MarketIndexError extends SuanliError {
  override name = "MarketIndexError";
}
const LEASE_ID_DIGITS = 78;

export const leaseKey = (leaseId: bigint): string => leaseId.toString().padStart(LEASE_ID_DIGITS, "0");
const machineKey = (machineId: number): string => String(machineId).padStart(10, "0");
const byAddressKey = (address: Address, role: "r" | "p", leaseId: bigint) => `${address.toLowerCase()}:${role}:${leaseKey(leaseId)}`;

/** Events that carry a lease id as `args.leaseId`. */
const LEASE_EVENTS = new Set([
  "LeaseOpened",
  "LeaseActivated",
  "LeasePreempted",
  "LeaseEnded",
  "LeaseClaimed",
  "LeaseExtended",
  "LeaseShrunk",
  "LeaseSettled",
  "CompletionReported",
  "FaultSubmitted",
]);

const PROVIDER_EVENTS = new Set([
  "ProviderRegistered",
  "ProfileUpdated",
  "ProviderDeregistered",
  "StakeChanged",
  "CollateralSlashed",
  "OfferNonceRevoked",
  "OfferNonceFloorRaised",
]);

/**
 * @example
 * const index = await MarketIndex.open({ store, publicClient, deployment, market, follower, logger });
 * index.on("lease", (lease) => ...);
 * await index.start();
 * const ids = await index.leaseIdsOf(renter, "renter");
 */
export class MarketIndex extends EventEmitter<MarketIndexEvents> {
  private readonly providerRepo: Repository<{ address: Address }>;
  private readonly machineRepo: Repository<{ provider: Address }>;
  private readonly leaseRepo: Repository<LeaseSummary>;
  private readonly byAddressRepo: Repository<1>;
  private readonly meta: Repository<string>;
  private readonly providerSet = new Map<string, Address>();
  private readonly machineOwners = new Map<number, Address>();
  private stopped = false;
  private starting: Promise<void> | undefined;
  private subscription: Subscription | undefined;
  /** Leases whose events the backfill applied and whose status it has not read yet. */
  private readonly dirty = new Set<bigint>();
  private backfillEvents = 0;
  /** The first block to read when the follower holds no cursor for the index. */
  private firstBlock: bigint;
  /** What the last start read from past events: its first block and how many events it applied. */
  backfill: { fromBlock: bigint; toBlock: bigint; events: number } | undefined;

  private constructor(private readonly options: MarketIndexOptions) {
    super();
    const { store } = options;
    this.providerRepo = store.repository(Bucket.apiProviders);
    this.machineRepo = store.repository(Bucket.apiMachines);
    this.leaseRepo = store.repository(Bucket.apiLeases);
    this.byAddressRepo = store.repository(Bucket.apiLeasesByAddress);
    this.meta = store.repository(Bucket.meta);
    this.firstBlock = options.deployment.deploymentBlock;
  }

  /** Opens the index and loads what it holds (providers and machines stay in memory: they are few). */
  static async open(options: MarketIndexOptions): Promise<MarketIndex> {
    const index = new MarketIndex(options);
    for await (const [key, value] of index.providerRepo.entries()) index.providerSet.set(key, value.address);
    for await (const [key, value] of index.machineRepo.entries()) index.machineOwners.set(Number(key), value.provider);
    const legacy = await index.meta.get(LEGACY_CURSOR_KEY);
    if (legacy !== undefined) index.firstBlock = BigInt(legacy);
    return index;
  }

  /**
   * Subscribes to the node's follower, which delivers what happened since the index's cursor (from
   * the deployment block on a first start) and then follows the chain. The returned promise
   * resolves once that backfill is applied; until then `ready` is false. A failing read or event
   * is retried by the follower with a growing delay, from where the index stood.
   */
  start(): Promise<void> {
    this.starting ??= this.follow();
    return this.starting;
  }

  private async follow(): Promise<void> {
    if (this.stopped) return;
    const subscription = await this.options.follower.subscribe(SUBSCRIBER, (event, { backfill }) => this.onEvent(event, backfill), {
      from: this.firstBlock,
      // The hand-off reads the statuses of the leases the backfill touched: a crash before it redoes the backfill.
      persistWhileCatchingUp: false,
      onCaughtUp: () => this.handOff(),
    });
    this.subscription = subscription;
    if (this.stopped) await this.options.follower.unsubscribe(subscription);
    await subscription.ready;
  }

  /** The last failure while the index is behind (a refused read, an event it could not apply); undefined once it succeeds. */
  get lastError(): Error | undefined {
    return this.subscription?.lastError ?? (this.ready ? undefined : this.options.follower.lastError);
  }

  private async onEvent(event: ChainEvent, backfill: boolean): Promise<void> {
    if (this.stopped) return;
    if (!backfill) return this.apply(event, { live: true });
    this.backfillEvents++;
    await this.apply(event, { live: false, dirty: this.dirty });
  }

  /** The end of the backfill: lease statuses are read once per lease, as they are now, rather than once per event. */
  private async handOff(): Promise<void> {
    for (const leaseId of [...this.dirty]) {
      if (this.stopped) return;
      await this.refreshLease(leaseId, false);
      this.dirty.delete(leaseId);
    }
    const subscription = this.subscription!;
    const toBlock = subscription.cursor.block - 1n;
    this.backfill = { fromBlock: subscription.startedAt.block, toBlock, events: this.backfillEvents };
    this.options.logger.info("Market index caught up", {
      fromBlock: subscription.startedAt.block.toString(),
      toBlock: toBlock.toString(),
      events: this.backfillEvents,
      providers: this.providerSet.size,
      machines: this.machineOwners.size,
    });
  }

  /** Stops applying events; the follower keeps the cursor. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    if (this.subscription) await this.options.follower.unsubscribe(this.subscription);
  }

  /** True once the backfill is done. */
  get ready(): boolean {
    return this.subscription?.caughtUp ?? false;
  }

  /** The next block the index will read: everything before it is applied. */
  get nextBlock(): bigint {
    return this.subscription?.cursor.block ?? this.firstBlock;
  }

  /** Every provider that ever registered (checksummed), in address order. */
  providers(): Address[] {
    return [...this.providerSet.entries()].sort(([a], [b]) => (a < b ? -1 : 1)).map(([, address]) => address);
  }

  hasProvider(address: Address): boolean {
    return this.providerSet.has(address.toLowerCase());
  }

  /** Ids of the machines declared and not removed, ascending. */
  machineIds(): number[] {
    return [...this.machineOwners.keys()].sort((a, b) => a - b);
  }

  machineOwner(machineId: number): Address | undefined {
    return this.machineOwners.get(machineId);
  }

  /** The machines of one provider, ascending. */
  machinesOf(provider: Address): number[] {
    const who = provider.toLowerCase();
    return this.machineIds().filter((id) => this.machineOwners.get(id)!.toLowerCase() === who);
  }

  lease(leaseId: bigint): Promise<LeaseSummary | undefined> {
    return this.leaseRepo.get(leaseKey(leaseId));
  }

  /** Ids of an address's leases as renter, provider or either, newest (highest id) first. */
  async leaseIdsOf(address: Address, role: "renter" | "provider" | "any"): Promise<bigint[]> {
    const roles: ("r" | "p")[] = role === "renter" ? ["r"] : role === "provider" ? ["p"] : ["r", "p"];
    const ids = new Set<bigint>();
    for (const tag of roles) {
      const prefix = `${address.toLowerCase()}:${tag}:`;
      for await (const [key] of this.byAddressRepo.entries({ gte: prefix, lt: `${prefix}~` })) ids.add(BigInt(key.slice(prefix.length)));
    }
    return [...ids].sort((a, b) => (a === b ? 0 : a > b ? -1 : 1));
  }

  private async apply(event: ChainEvent, mode: { live: boolean; dirty?: Set<bigint> }): Promise<void> {
    const name = event.eventName;
    if (name === "ProviderRegistered") {
      const provider = getAddress(event.args.provider);
      if (!this.providerSet.has(provider.toLowerCase())) {
        this.providerSet.set(provider.toLowerCase(), provider);
        await this.providerRepo.put(provider.toLowerCase(), { address: provider });
      }
    }
    if (PROVIDER_EVENTS.has(name)) {
      if (mode.live) this.emit("provider", getAddress((event.args as { provider: Address }).provider));
      return;
    }
    switch (name) {
      case "MachineAdded": {
        const provider = getAddress(event.args.provider);
        this.machineOwners.set(event.args.machineId, provider);
        await this.machineRepo.put(machineKey(event.args.machineId), { provider });
        if (mode.live) this.emit("machine", event.args.machineId);
        return;
      }
      case "MachineUpdated":
        if (mode.live) this.emit("machine", event.args.machineId);
        return;
      case "MachineRemoved":
        this.machineOwners.delete(event.args.machineId);
        await this.machineRepo.del(machineKey(event.args.machineId));
        if (mode.live) this.emit("machine", event.args.machineId);
        return;
      case "CapacityChanged":
        if (mode.live) this.emit("capacity", event.args.machineId, event.args.onDemandUnits + event.args.interruptibleUnits);
        return;
      case "RoleGranted":
      case "RoleRevoked":
      case "FaultQuorumChanged":
      case "FaultQuorumBpsChanged":
      case "AttestorStakingChanged":
      case "AttestorStakeChanged":
      case "AttestorSlashed":
        if (mode.live) this.emit("attestors");
        return;
      default:
        break;
    }
    if (!LEASE_EVENTS.has(name)) return;
    const leaseId = (event.args as { leaseId: bigint }).leaseId;
    if (name === "LeaseOpened") {
      const args = (event as Extract<ChainEvent, { eventName: "LeaseOpened" }>).args;
      const renter = getAddress(args.renter);
      const provider = getAddress(args.provider);
      const summary: LeaseSummary = { renter, provider, machineId: args.machineId, status: "Open" };
      const held = await this.leaseRepo.get(leaseKey(leaseId));
      await this.options.store.batch([
        this.leaseRepo.putOp(leaseKey(leaseId), held ?? summary),
        this.byAddressRepo.putOp(byAddressKey(renter, "r", leaseId), 1),
        this.byAddressRepo.putOp(byAddressKey(provider, "p", leaseId), 1),
      ]);
    }
    if (mode.dirty) mode.dirty.add(leaseId);
    else await this.refreshLease(leaseId, mode.live);
  }

  /** Reads a lease from the chain, stores its status and, when following, announces it. */
  private async refreshLease(leaseId: bigint, announce: boolean): Promise<void> {
    const lease = await readLease(this.options.publicClient, this.options.market, leaseId);
    if (lease.status === "None") return;
    const key = leaseKey(leaseId);
    const held = await this.leaseRepo.get(key);
    if (!held) {
      // An event of a lease whose opening this index did not see (a cursor moved by hand): index it now.
      await this.options.store.batch([
        this.leaseRepo.putOp(key, { renter: lease.renter, provider: lease.provider, machineId: lease.machineId, status: lease.status }),
        this.byAddressRepo.putOp(byAddressKey(lease.renter, "r", leaseId), 1),
        this.byAddressRepo.putOp(byAddressKey(lease.provider, "p", leaseId), 1),
      ]);
    } else if (held.status !== lease.status) {
      await this.leaseRepo.put(key, { ...held, status: lease.status });
    }
    if (announce) this.emit("lease", lease);
  }
}

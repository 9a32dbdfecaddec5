/**
 * The market index behind the HTTP API: which providers registered, which machines exist and which
 * leases each address holds, kept in level from the contracts' events. The chain answers "what is
 * provider X's stake" but not "which providers are there" or "which leases does address Y hold";
 * events do.
 *
 * On its first start the index reads every event from the deployment block (a backfill); after a
 * restart, from its stored cursor. Then it follows the node's ChainWatcher. Events that arrive
 * from the watcher while the backfill runs are queued and applied after it, in order: every write
 * is last-writer-wins (a put or a delete of one key, or a lease status read from the chain at the
 * time), so replaying a suffix of the event sequence on top of a later state converges to the
 * chain's state.
 */
import { EventEmitter } from "node:events";
import type { Address, Chain, PublicClient, Transport } from "viem";
import { getAddress } from "viem";
import { readLease, type LeaseStatusName, type LeaseView as ChainLease } from "../../common/chain/market.js";
import type { Deployment } from "../../common/deployment.js";
import { SuanliError } from "../../common/errors.js";
import { ChainWatcher, type ChainEvent } from "../chain/watcher.js";
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
  /** The node's watcher; the index adds a handler to it. */
  watcher: ChainWatcher;
  logger: Logger;
  /** Largest block range of one getLogs call during the backfill. */
  maxBlockRange?: bigint;
};

const CURSOR_KEY = "api.index.cursor";

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
 * const index = await MarketIndex.open({ store, publicClient, deployment, market, watcher, logger });
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
  private backfilling = true;
  private pending: ChainEvent[] = [];
  private stopped = false;
  private caughtUp: Promise<void> | undefined;
  private backfillWatcher: ChainWatcher | undefined;
  private failure: Error | undefined;
  private retry: { timer: NodeJS.Timeout; resolve: () => void } | undefined;
  /** Leases whose events the backfill applied and whose status it has not read yet. */
  private readonly dirty = new Set<bigint>();
  /** Next block whose events are not known to be applied. */
  private cursor: bigint;
  /** What the last start read from past events: its first block and how many events it applied. */
  backfill: { fromBlock: bigint; toBlock: bigint; events: number } | undefined;
  /** A write chain: events are applied one at a time, in the order they arrive. */
  private applying: Promise<void> = Promise.resolve();

  private constructor(private readonly options: MarketIndexOptions) {
    super();
    const { store } = options;
    this.providerRepo = store.repository(Bucket.apiProviders);
    this.machineRepo = store.repository(Bucket.apiMachines);
    this.leaseRepo = store.repository(Bucket.apiLeases);
    this.byAddressRepo = store.repository(Bucket.apiLeasesByAddress);
    this.meta = store.repository(Bucket.meta);
    this.cursor = options.deployment.deploymentBlock;
  }

  /** Opens the index and loads what it holds (providers and machines stay in memory: they are few). */
  static async open(options: MarketIndexOptions): Promise<MarketIndex> {
    const index = new MarketIndex(options);
    for await (const [key, value] of index.providerRepo.entries()) index.providerSet.set(key, value.address);
    for await (const [key, value] of index.machineRepo.entries()) index.machineOwners.set(Number(key), value.provider);
    const stored = await index.meta.get(CURSOR_KEY);
    if (stored !== undefined) index.cursor = BigInt(stored);
    return index;
  }

  /**
   * Follows the node's watcher, then reads what happened since the cursor (from the deployment
   * block on a first start) up to the chain head. The returned promise resolves once that
   * backfill is applied; until then `ready` is false. A backfill that fails (the endpoint refuses
   * a range, the chain is unreachable) is retried with a growing delay until it succeeds or the
   * index stops, continuing from the block it reached.
   */
  start(): Promise<void> {
    if (this.caughtUp) return this.caughtUp;
    // Registered before the backfill reads the head: whatever the watcher delivers from now on is
    // seen here, and whatever it delivered before is at or below that head.
    this.options.watcher.handle((event) => this.onLiveEvent(event));
    this.caughtUp = this.catchUpUntilDone();
    return this.caughtUp;
  }

  /** The last backfill failure, while the index retries; undefined once caught up. */
  get lastError(): Error | undefined {
    return this.failure;
  }

  private async catchUpUntilDone(): Promise<void> {
    for (let attempt = 1; !this.stopped; attempt++) {
      try {
        await this.catchUp();
        this.failure = undefined;
        return;
      } catch (error) {
        this.failure = error instanceof Error ? error : new Error(String(error));
        const delayMs = Math.min(30_000, 500 * 2 ** Math.min(attempt, 6));
        this.options.logger.warn("Market index cannot read past events; retrying", { fromBlock: this.cursor.toString(), retryInMs: delayMs }, error);
        await new Promise<void>((resolve) => {
          this.retry = { timer: setTimeout(resolve, delayMs), resolve };
        });
        this.retry = undefined;
      }
    }
  }

  private async catchUp(): Promise<void> {
    const from = this.cursor;
    const backfill = new ChainWatcher({
      publicClient: this.options.publicClient,
      deployment: this.options.deployment,
      fromBlock: from,
      maxBlockRange: this.options.maxBlockRange,
      // The same depth as the node's watcher, which takes over where the backfill ends.
      confirmations: Number(this.options.watcher.confirmations),
      logger: this.options.logger,
      onCursor: (next) => {
        this.cursor = next;
      },
    });
    this.backfillWatcher = backfill;
    let events = 0;
    backfill.handle(async (event) => {
      if (this.stopped) return;
      events++;
      await this.apply(event, { live: false, dirty: this.dirty });
    });
    // The watcher logs and swallows a failed poll; a backfill must reach the head it set out for.
    const target = (await this.options.publicClient.getBlockNumber({ cacheTime: 0 })) - this.options.watcher.confirmations;
    await backfill.sync();
    if (this.stopped) return;
    if (this.cursor <= target) {
      throw new MarketIndexError(`Cannot read the contracts' events from block ${this.cursor} to ${target}`, {
        metaMessages: ["Check that chain.rpcUrl answers eth_getLogs over this range (some providers cap it)."],
      });
    }
    // Lease statuses are read once per lease, as they are now, rather than once per event.
    for (const leaseId of [...this.dirty]) {
      if (this.stopped) return;
      await this.refreshLease(leaseId, false);
      this.dirty.delete(leaseId);
    }
    await this.meta.put(CURSOR_KEY, this.cursor.toString());
    this.backfill = { fromBlock: from, toBlock: this.cursor - 1n, events };
    this.options.logger.info("Market index caught up", {
      fromBlock: from.toString(),
      toBlock: (this.cursor - 1n).toString(),
      events,
      providers: this.providerSet.size,
      machines: this.machineOwners.size,
    });
    this.backfilling = false;
    const queued = this.pending;
    this.pending = [];
    for (const event of queued) await this.enqueue(event);
  }

  /** Stops applying events and saves the cursor. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    if (this.retry) {
      clearTimeout(this.retry.timer);
      this.retry.resolve();
    }
    await this.backfillWatcher?.stop();
    await this.caughtUp?.catch(() => undefined);
    await this.applying.catch(() => undefined);
    if (this.caughtUp && !this.backfilling) {
      // Every event up to the watcher's head reached this index's handler (it was registered first).
      const head = this.options.watcher.head + 1n;
      if (head > this.cursor) this.cursor = head;
      await this.meta.put(CURSOR_KEY, this.cursor.toString()).catch(() => undefined);
    }
  }

  /** True once the backfill is done. */
  get ready(): boolean {
    return !this.backfilling;
  }

  /** The next block the index will read: everything before it is applied. */
  get nextBlock(): bigint {
    return this.cursor;
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

  private onLiveEvent(event: ChainEvent): Promise<void> | void {
    if (this.stopped) return;
    if (this.backfilling) {
      this.pending.push(event);
      return;
    }
    return this.enqueue(event);
  }

  private enqueue(event: ChainEvent): Promise<void> {
    const run = this.applying.then(async () => {
      if (this.stopped) return;
      await this.apply(event, { live: true });
      if (event.blockNumber > this.cursor) {
        // Events of this block may follow: a restart replays the block, which is harmless.
        this.cursor = event.blockNumber;
        await this.meta.put(CURSOR_KEY, this.cursor.toString());
      }
    });
    this.applying = run.catch((error: unknown) => this.options.logger.warn("Market index could not apply an event", { event: event.eventName }, error));
    return this.applying;
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

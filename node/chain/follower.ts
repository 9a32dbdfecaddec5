/**
 * The node's one chain follower. It polls the ProviderRegistry and LeaseMarket logs once for the
 * whole process and hands every decoded event, in chain order, to each subscriber (the offer book,
 * the provider agent, the attestor's lease table, the API's market index).
 *
 * Each subscriber has its own cursor: the position of the first event it has not yet handled.
 * The cursor moves only after the subscriber's handler returned; a handler that throws leaves it
 * on the failed event, the subscriber pauses with a growing delay (the others go on), and the
 * event is delivered again when the delay is over. Cursors are kept in level (the meta bucket,
 * `follower.<name>`), so a restarted node resumes each subscriber where it stopped. Delivery is at
 * least once: a crash between a handler and the cursor write replays that event, so handlers must
 * be idempotent.
 *
 * A subscriber that starts behind the head (a first start from the deployment block, a restart
 * after downtime) is catching up until its cursor passes the head the follower saw when it
 * subscribed; events it gets until then say so (`backfill: true`), and its `onCaughtUp` hook runs
 * once at the hand-off to live events (the market index reads lease statuses there once per lease).
 */
import { parseEventLogs, type Address, type Chain, type Log, type PublicClient, type Transport } from "viem";
import { attestorStakingAbi, leaseMarketAbi, providerRegistryAbi } from "../../common/abi.js";
import type { Deployment } from "../../common/deployment.js";
import { contractAddress } from "../../common/deployment.js";
import { SuanliError } from "../../common/errors.js";
import type { Logger } from "../log/logger.js";
import type { Metrics } from "../metrics/metrics.js";
import { Bucket } from "../store/buckets.js";
import type { Repository, Store } from "../store/store.js";

/** The contracts' events, decoded by one ABI (the market's extension emits through the market; event names are distinct across them). */
const watchedAbi = [
  ...providerRegistryAbi.filter((item) => item.type === "event"),
  ...leaseMarketAbi.filter((item) => item.type === "event"),
  ...attestorStakingAbi.filter((item) => item.type === "event"),
];

type Decoded = ReturnType<typeof parseEventLogs<typeof watchedAbi>>[number];
/** A decoded Suanli contract event with its block and log position. */
export type ChainEvent = Decoded & { blockNumber: bigint; logIndex: number; address: Address };
export type ChainEventName = ChainEvent["eventName"];
/** The arguments of one event, by name: `EventArgs<"LeaseOpened">`. */
export type EventArgs<N extends ChainEventName> = Extract<ChainEvent, { eventName: N }>["args"];

/** Where a subscriber stands: the first event it has not handled is at or after this position. */
export type ChainCursor = { block: bigint; logIndex: number };

/** What a handler learns besides the event. */
export type Delivery = {
  /** True while the subscriber is reading history up to the head it started at (see onCaughtUp). */
  backfill: boolean;
};

export type ChainEventHandler = (event: ChainEvent, delivery: Delivery) => Promise<void> | void;

export type SubscribeOptions = {
  /**
   * Where a subscriber without a stored cursor starts: a block number, or "head" (the first block
   * after the current confirmed head: only changes from now on). Default: the deployment block.
   */
  from?: bigint | "head";
  /** Keep the cursor in level so a restart resumes there (default true; false always starts at `from`). */
  persist?: boolean;
  /**
   * Persist the cursor while still catching up (default true). False for a subscriber whose
   * catch-up leaves work for `onCaughtUp`: a crash before the hand-off redoes the catch-up.
   */
  persistWhileCatchingUp?: boolean;
  /** Runs after the subscriber handled every event of a block range (per-batch bookkeeping). */
  onRange?: () => Promise<void> | void;
  /** Runs once, when the subscriber first reaches the head it subscribed at; retried like a handler. */
  onCaughtUp?: () => Promise<void> | void;
};

export class ChainFollowerError extends SuanliError {
  override name = "ChainFollowerError";
}

/** One subscriber's state, as the follower and its owner see it. */
export class Subscription {
  /** First event not yet handled. */
  cursor: ChainCursor;
  /** How many times in a row the handler (or a hook) failed; 0 once it succeeds. */
  failures = 0;
  /** The last handler failure, until the subscriber succeeds again. */
  lastError: Error | undefined;
  /** While failing: not delivered to before this time (unix ms). */
  retryAtMs = 0;
  /** The block it started from on this run. */
  readonly startedAt: ChainCursor;
  /** The confirmed head seen on the first poll after it subscribed: reaching it ends the catch-up. */
  target: bigint | undefined;
  caughtUp = false;
  /** Resolves when the catch-up ends (or the subscription is closed first). */
  readonly ready: Promise<void>;
  closed = false;
  private markReady!: () => void;

  constructor(
    readonly name: string,
    readonly handler: ChainEventHandler,
    readonly options: SubscribeOptions,
    start: ChainCursor,
  ) {
    this.cursor = start;
    this.startedAt = start;
    this.ready = new Promise<void>((resolve) => {
      this.markReady = resolve;
    });
  }

  /** @internal */
  settle(): void {
    this.markReady();
  }
}

export type RetryOptions = {
  /** Delay after a first failure. */
  initialMs: number;
  /** Longest delay between two tries (the delay doubles per failure up to it). */
  maxMs: number;
};

export type ChainFollowerOptions = {
  publicClient: PublicClient<Transport, Chain>;
  deployment: Deployment;
  /** Further contracts to follow besides the registry and the market: the AttestorStaking the registry names. */
  extraAddresses?: readonly Address[];
  /** Where cursors are kept (the meta bucket). Without it cursors live only in memory (tests, tools). */
  store?: Store;
  pollIntervalMs?: number;
  /** Largest block range per getLogs call. */
  maxBlockRange?: bigint;
  /** Read only blocks at least this many below the head (default 0: up to the head). */
  confirmations?: number;
  /** Backoff of a failing subscriber (default 500 ms doubling up to 60 s). */
  retry?: Partial<RetryOptions>;
  logger: Logger;
  metrics?: Pick<Metrics, "chainPolls" | "chainLastPollSuccess" | "chainHead">;
  /** Clock, unix ms. */
  now?: () => number;
};

const CURSOR_PREFIX = "follower.";
const encodeCursor = (cursor: ChainCursor): string => `${cursor.block}:${cursor.logIndex}`;
function decodeCursor(stored: string): ChainCursor {
  const match = /^(\d+):(\d+)$/.exec(stored);
  if (!match) throw new ChainFollowerError(`Stored chain cursor "${stored}" is not <block>:<logIndex>`);
  return { block: BigInt(match[1]!), logIndex: Number(match[2]) };
}
const before = (event: ChainEvent, cursor: ChainCursor): boolean => event.blockNumber < cursor.block || (event.blockNumber === cursor.block && event.logIndex < cursor.logIndex);

/**
 * @example
 * const follower = new ChainFollower({ publicClient, deployment, store, logger });
 * await follower.start();
 * const subscription = await follower.subscribe("attest.leases", (event) => tracker.apply(event));
 * await follower.sync();
 */
export class ChainFollower {
  private readonly subscriptions: Subscription[] = [];
  private readonly cursors: Repository<string> | undefined;
  private readonly addresses: Address[];
  private readonly retry: RetryOptions;
  private readonly now: () => number;
  private timer: NodeJS.Timeout | undefined;
  private running = false;
  /** Set by stop(): a poll in progress ends after its current range. */
  private halted = false;
  private polling: Promise<void> | undefined;
  /** The newest confirmed block the follower read up to. */
  head = 0n;
  /** Blocks below the chain head this follower stops at. */
  readonly confirmations: bigint;
  /** The last failed poll (the endpoint refused or was unreachable); undefined after a good one. */
  lastError: Error | undefined;

  constructor(private readonly options: ChainFollowerOptions) {
    this.confirmations = BigInt(options.confirmations ?? 0);
    this.addresses = [contractAddress(options.deployment, "registry"), contractAddress(options.deployment, "market"), ...(options.extraAddresses ?? [])];
    this.cursors = options.store?.repository<string>(Bucket.meta);
    this.retry = { initialMs: options.retry?.initialMs ?? 500, maxMs: options.retry?.maxMs ?? 60_000 };
    this.now = options.now ?? Date.now;
  }

  /**
   * Adds a subscriber. Its stored cursor wins over `options.from`. It gets events from the next
   * poll on (call `sync()` to read now). Names are unique per follower: they key the stored cursor.
   */
  async subscribe(name: string, handler: ChainEventHandler, options: SubscribeOptions = {}): Promise<Subscription> {
    if (this.subscriptions.some((subscription) => subscription.name === name)) {
      throw new ChainFollowerError(`A chain subscriber named "${name}" already exists`);
    }
    let start: ChainCursor | undefined;
    if (options.persist !== false && this.cursors) {
      const stored = await this.cursors.get(CURSOR_PREFIX + name);
      if (stored !== undefined) start = decodeCursor(stored);
    }
    if (!start) {
      const from = options.from ?? this.options.deployment.deploymentBlock;
      start = { block: from === "head" ? await this.nextConfirmedBlock() : from, logIndex: 0 };
    }
    const subscription = new Subscription(name, handler, options, start);
    this.subscriptions.push(subscription);
    return subscription;
  }

  /** Removes a subscriber after its current delivery, keeping its cursor. */
  async unsubscribe(subscription: Subscription): Promise<void> {
    const at = this.subscriptions.indexOf(subscription);
    if (at < 0) return;
    // Closed first: a poll in progress skips it from its next event on.
    subscription.closed = true;
    subscription.settle();
    while (this.polling) await this.polling;
    this.subscriptions.splice(this.subscriptions.indexOf(subscription), 1);
    await this.save(subscription);
  }

  /** Reads everything up to the chain head once, then keeps polling. */
  async start(): Promise<void> {
    if (this.running) return;
    this.running = true;
    this.halted = false;
    await this.poll();
    this.schedule();
  }

  /** Reads up to the current head (less the confirmations) now, for every subscriber not waiting out a failure. */
  async sync(): Promise<void> {
    while (this.polling) await this.polling;
    await this.poll();
  }

  /** Stops polling and saves every cursor. */
  async stop(): Promise<void> {
    this.running = false;
    this.halted = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    while (this.polling) await this.polling;
    for (const subscription of this.subscriptions.splice(0)) {
      subscription.closed = true;
      subscription.settle();
      await this.save(subscription);
    }
  }

  private async nextConfirmedBlock(): Promise<bigint> {
    const confirmed = (await this.options.publicClient.getBlockNumber({ cacheTime: 0 })) - this.confirmations;
    // On a chain younger than the confirmations, start at the deployment (never a negative block).
    return confirmed < this.options.deployment.deploymentBlock ? this.options.deployment.deploymentBlock : confirmed + 1n;
  }

  private schedule(): void {
    if (!this.running) return;
    this.timer = setTimeout(() => {
      this.poll()
        .finally(() => this.schedule())
        .catch(() => undefined);
    }, this.options.pollIntervalMs ?? 500);
    this.timer.unref?.();
  }

  private poll(): Promise<void> {
    if (this.polling) return this.polling;
    const metrics = this.options.metrics;
    this.polling = this.pollOnce()
      .then(() => {
        this.lastError = undefined;
        metrics?.chainPolls.inc({ outcome: "ok" });
        metrics?.chainLastPollSuccess.set(Date.now() / 1000);
        metrics?.chainHead.set(Number(this.head));
      })
      .catch((error: unknown) => {
        this.lastError = error instanceof Error ? error : new Error(String(error));
        metrics?.chainPolls.inc({ outcome: "error" });
        this.options.logger.warn("Chain poll failed; retrying", {}, error);
      })
      .finally(() => {
        this.polling = undefined;
      });
    return this.polling;
  }

  /** Subscribers due now: not closed, not waiting out a failure. */
  private due(): Subscription[] {
    const now = this.now();
    return this.subscriptions.filter((subscription) => !subscription.closed && subscription.retryAtMs <= now);
  }

  private async pollOnce(): Promise<void> {
    const latest = (await this.options.publicClient.getBlockNumber({ cacheTime: 0 })) - this.confirmations;
    if (latest < 0n) return;
    for (const subscription of this.subscriptions) subscription.target ??= latest;
    // Subscribers that reached their target earlier but whose hand-off failed retry it first.
    for (const subscription of this.due()) if (!subscription.caughtUp && subscription.cursor.block > subscription.target!) await this.handOff(subscription);
    const range = this.options.maxBlockRange ?? 2_000n;
    const failed = new Set<Subscription>();
    while (!this.halted) {
      const active = this.due().filter((subscription) => !failed.has(subscription) && subscription.cursor.block <= latest);
      if (active.length === 0) break;
      const from = active.reduce((low, subscription) => (subscription.cursor.block < low ? subscription.cursor.block : low), latest);
      const to = from + range - 1n < latest ? from + range - 1n : latest;
      const logs = await this.options.publicClient.getLogs({ address: this.addresses, fromBlock: from, toBlock: to });
      const events = parseEventLogs({ abi: watchedAbi, logs: logs as Log[], strict: true }) as ChainEvent[];
      const inRange = active.filter((subscription) => subscription.cursor.block <= to);
      for (const event of events) {
        for (const subscription of inRange) {
          if (failed.has(subscription) || subscription.closed || before(event, subscription.cursor)) continue;
          try {
            await subscription.handler(event, { backfill: !subscription.caughtUp });
            subscription.cursor = { block: event.blockNumber, logIndex: event.logIndex + 1 };
          } catch (error) {
            this.fail(subscription, error, { event: event.eventName, block: event.blockNumber, logIndex: event.logIndex });
            failed.add(subscription);
            await this.save(subscription);
          }
        }
      }
      for (const subscription of inRange) {
        if (failed.has(subscription) || subscription.closed) continue;
        try {
          await subscription.options.onRange?.();
        } catch (error) {
          this.fail(subscription, error, { toBlock: to });
          failed.add(subscription);
          continue;
        }
        subscription.cursor = { block: to + 1n, logIndex: 0 };
        this.succeed(subscription);
        if (!subscription.caughtUp && to >= subscription.target!) await this.handOff(subscription);
        await this.save(subscription);
      }
      if (to > this.head) this.head = to;
    }
    if (latest > this.head && !this.halted && failed.size === 0) this.head = latest;
    // A subscriber that subscribed at the head is caught up without a range to read.
    for (const subscription of this.due()) {
      if (!subscription.caughtUp && subscription.cursor.block > subscription.target! && !failed.has(subscription)) await this.handOff(subscription);
    }
  }

  private async handOff(subscription: Subscription): Promise<void> {
    try {
      await subscription.options.onCaughtUp?.();
    } catch (error) {
      this.fail(subscription, error, { step: "caught up" });
      return;
    }
    subscription.caughtUp = true;
    this.succeed(subscription);
    await this.save(subscription);
    subscription.settle();
  }

  private fail(subscription: Subscription, error: unknown, context: Record<string, unknown>): void {
    subscription.failures++;
    subscription.lastError = error instanceof Error ? error : new Error(String(error));
    const delayMs = Math.min(this.retry.maxMs, this.retry.initialMs * 2 ** Math.min(subscription.failures - 1, 30));
    subscription.retryAtMs = this.now() + delayMs;
    this.options.logger.error(
      "Chain event handler failed; the event will be delivered again",
      { subscriber: subscription.name, ...context, failures: subscription.failures, retryInMs: delayMs },
      error,
    );
  }

  private succeed(subscription: Subscription): void {
    subscription.failures = 0;
    subscription.lastError = undefined;
    subscription.retryAtMs = 0;
  }

  private async save(subscription: Subscription): Promise<void> {
    if (!this.cursors || subscription.options.persist === false) return;
    if (!subscription.caughtUp && subscription.options.persistWhileCatchingUp === false) return;
    await this.cursors.put(CURSOR_PREFIX + subscription.name, encodeCursor(subscription.cursor));
  }
}

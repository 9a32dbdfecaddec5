import { EventEmitter } from "node:events";
import { parseEventLogs, type Address, type Chain, type Log, type PublicClient, type Transport } from "viem";
import { leaseMarketAbi, providerRegistryAbi } from "../../common/abi.js";
import type { Deployment } from "../../common/deployment.js";
import { contractAddress } from "../../common/deployment.js";
import type { Logger } from "../log/logger.js";
import type { Metrics } from "../metrics/metrics.js";

/** Both contracts' events, decoded by one ABI (the market's extension emits through the market). */
const watchedAbi = [
  ...providerRegistryAbi.filter((item) => item.type === "event"),
  ...leaseMarketAbi.filter((item) => item.type === "event"),
];

type Decoded = ReturnType<typeof parseEventLogs<typeof watchedAbi>>[number];
/** A decoded Suanli contract event with its block and log position. */
export type ChainEvent = Decoded & { blockNumber: bigint; logIndex: number; address: Address };
export type ChainEventName = ChainEvent["eventName"];
/** The arguments of one event, by name: `EventArgs<"LeaseOpened">`. */
export type EventArgs<N extends ChainEventName> = Extract<ChainEvent, { eventName: N }>["args"];

export type ChainWatcherOptions = {
  publicClient: PublicClient<Transport, Chain>;
  deployment: Deployment;
  /** First block to read (default: the deployment block). */
  fromBlock?: bigint;
  pollIntervalMs?: number;
  /** Largest block range per getLogs call. */
  maxBlockRange?: bigint;
  /** Read only blocks at least this many below the head (default 0: up to the head). */
  confirmations?: number;
  logger: Logger;
  /** Where to count polls of the RPC endpoint (one watcher per node does: the base node's). */
  metrics?: Pick<Metrics, "chainPolls" | "chainLastPollSuccess" | "chainHead">;
  /** Called after every delivered batch with the next block to read (persist it to resume there). */
  onCursor?: (nextBlock: bigint) => Promise<void> | void;
};

/**
 * Follows the ProviderRegistry and LeaseMarket logs by polling `eth_getLogs` and emits every
 * decoded event, in chain order, as `event` (and under its own name). Handlers run to completion,
 * one event at a time, before the cursor moves: a node that crashes mid-batch sees the batch again
 * (handlers must be idempotent). Polling rather than filters keeps it working across RPC restarts.
 *
 * @example
 * const watcher = new ChainWatcher({ publicClient, deployment, logger });
 * watcher.on("LeaseOpened", (args, event) => ...);
 * await watcher.start();
 */
export class ChainWatcher extends EventEmitter {
  private next: bigint;
  private timer: NodeJS.Timeout | undefined;
  private running = false;
  /** Set by stop(): a poll in progress ends after its current range instead of reading to the head. */
  private halted = false;
  private polling: Promise<void> | undefined;
  private readonly addresses: Address[];
  private readonly handlers: ((event: ChainEvent) => Promise<void> | void)[] = [];
  /** The newest block fully delivered. */
  head = 0n;
  /** Blocks below the chain head this watcher stops at. */
  readonly confirmations: bigint;

  constructor(private readonly options: ChainWatcherOptions) {
    super();
    this.next = options.fromBlock ?? options.deployment.deploymentBlock;
    this.confirmations = BigInt(options.confirmations ?? 0);
    this.addresses = [contractAddress(options.deployment, "registry"), contractAddress(options.deployment, "market")];
  }

  /** Registers an async handler awaited for every event, in order (errors are logged, not fatal). */
  handle(handler: (event: ChainEvent) => Promise<void> | void): void {
    this.handlers.push(handler);
  }

  /** Reads everything up to the chain head once, then keeps polling. */
  async start(): Promise<void> {
    if (this.running) return;
    this.running = true;
    this.halted = false;
    await this.poll();
    this.schedule();
  }

  /** Reads up to the current head (less the confirmations) now (tests and callers that just sent a transaction). */
  async sync(): Promise<void> {
    while (this.polling) await this.polling;
    await this.poll();
  }

  async stop(): Promise<void> {
    this.running = false;
    this.halted = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    while (this.polling) await this.polling;
  }

  private schedule(): void {
    if (!this.running) return;
    this.timer = setTimeout(() => {
      void this.poll().finally(() => this.schedule());
    }, this.options.pollIntervalMs ?? 500);
    this.timer.unref?.();
  }

  private poll(): Promise<void> {
    if (this.polling) return this.polling;
    const metrics = this.options.metrics;
    this.polling = this.pollOnce()
      .then(() => {
        metrics?.chainPolls.inc({ outcome: "ok" });
        metrics?.chainLastPollSuccess.set(Date.now() / 1000);
        metrics?.chainHead.set(Number(this.next - 1n));
      })
      .catch((error: unknown) => {
        metrics?.chainPolls.inc({ outcome: "error" });
        this.options.logger.warn("Chain poll failed; retrying", {}, error);
      })
      .finally(() => {
        this.polling = undefined;
      });
    return this.polling;
  }

  private async pollOnce(): Promise<void> {
    const latest = (await this.options.publicClient.getBlockNumber({ cacheTime: 0 })) - this.confirmations;
    if (latest < 0n) return;
    const range = this.options.maxBlockRange ?? 2_000n;
    while (this.next <= latest && !this.halted) {
      const to = this.next + range - 1n < latest ? this.next + range - 1n : latest;
      const logs = await this.options.publicClient.getLogs({ address: this.addresses, fromBlock: this.next, toBlock: to });
      const events = parseEventLogs({ abi: watchedAbi, logs: logs as Log[], strict: true });
      for (const decoded of events) {
        const event = decoded as ChainEvent;
        for (const handler of this.handlers) {
          try {
            await handler(event);
          } catch (error) {
            this.options.logger.error("Chain event handler failed", { event: event.eventName, block: event.blockNumber }, error);
          }
        }
        this.emit("event", event);
        this.emit(event.eventName, event.args, event);
      }
      this.next = to + 1n;
      this.head = to;
      await this.options.onCursor?.(this.next);
    }
  }
}

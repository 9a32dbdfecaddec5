/**
 * What the attestor's dispute answerer (disputes.ts) and the provider's false-fault disputer
 * (false-faults.ts) share: find the registry's AttestorStaking at start (none: nothing to do), then
 * every `intervalMs` scan the chain's events in bounded block ranges from where the last scan
 * ended, one scan at a time, until stopped. Subclasses say what a range yields.
 */
import { zeroAddress, type Address, type Chain, type PublicClient, type Transport } from "viem";
import { providerRegistryAbi } from "../../../common/abi.js";
import type { Logger } from "../../log/logger.js";

/** Most blocks one log query covers. */
const MAX_RANGE = 5_000n;

export type StakingScannerOptions = {
  publicClient: PublicClient<Transport, Chain>;
  registry: Address;
  /** First block to scan (the deployment block). */
  fromBlock: bigint;
  /** Milliseconds between scans. */
  intervalMs: number;
  logger: Logger;
};

export abstract class StakingScanner<T> {
  private staking: Address | undefined;
  private next: bigint;
  private timer: NodeJS.Timeout | undefined;
  private scanning: Promise<T[]> | undefined;
  private stopped = false;

  /** `without`: logged when the registry has no staking; `what`: the scan, in the failure line. */
  constructor(
    private readonly scanner: StakingScannerOptions,
    private readonly lines: { without: string; what: string },
  ) {
    this.next = scanner.fromBlock;
  }

  /** Reads the registry's staking contract; scans on an interval when there is one. */
  async start(): Promise<void> {
    const staking = await this.scanner.publicClient.readContract({ address: this.scanner.registry, abi: providerRegistryAbi, functionName: "attestorStaking" });
    if (staking === zeroAddress) {
      this.scanner.logger.info(this.lines.without);
      return;
    }
    this.staking = staking;
    this.schedule();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.scanning?.catch(() => undefined);
  }

  /** One scan now (joined if one is running): everything found since the last scan. */
  scan(): Promise<T[]> {
    this.scanning ??= this.scanOnce().finally(() => {
      this.scanning = undefined;
    });
    return this.scanning;
  }

  /** Work owed from earlier scans, done before the new blocks are read. */
  protected beforeRanges(_staking: Address): Promise<T[]> {
    return Promise.resolve([]);
  }

  /** What blocks `from`..`to` (inclusive) yield. */
  protected abstract scanRange(staking: Address, from: bigint, to: bigint): Promise<T[]>;

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.scan()
        .catch((error: unknown) => this.scanner.logger.warn(`${this.lines.what} failed; retrying at the next interval`, {}, error))
        .finally(() => this.schedule());
    }, this.scanner.intervalMs);
    this.timer.unref();
  }

  private async scanOnce(): Promise<T[]> {
    const staking = this.staking;
    if (!staking) return [];
    const head = await this.scanner.publicClient.getBlockNumber({ cacheTime: 0 });
    const found = await this.beforeRanges(staking);
    while (this.next <= head && !this.stopped) {
      const to = this.next + MAX_RANGE - 1n < head ? this.next + MAX_RANGE - 1n : head;
      found.push(...(await this.scanRange(staking, this.next, to)));
      this.next = to + 1n;
    }
    return found;
  }
}

/**
 * The provider node's estimate of the chain's clock. Lease timing (the start deadline, the end, a
 * preemption notice) is in chain time; this host's wall clock may be off by any amount (a host
 * without NTP), so the node does not read chain time off its own clock: it learns how far its
 * clock runs ahead of the chain's from blocks it saw as they were made.
 *
 * A block seen at local time W with timestamp T gives W - T >= skew (the block cannot be from the
 * future), with equality up to the block's rounding and the polling delay when the block is fresh.
 * So the smallest such offset over fresh blocks bounds the skew from above, and W - offset is the
 * chain's time now, at most that rounding and delay behind. A block counts as fresh when it was
 * new (its number had advanced) at a look that came within 12 s of the previous one, or when it
 * carried a lease event the follower delivered live (not from history). Offsets older than
 * `windowMs` are forgotten (a clock stepped by NTP is relearned). With no fresh block seen yet the
 * local clock is taken as is (offset 0).
 */

import type { StepClock } from "./lease-step.js";

/** How long an offset sample counts. */
const WINDOW_MS = 10 * 60_000;
/** A look counts as prompt (its new block as fresh) within this much of the previous look: the default reconcile pass (5 s) qualifies. */
const PROMPT_LOOK_MS = 12_000;
/** Samples kept at most (the oldest go first). */
const MAX_SAMPLES = 256;

export class ChainClock {
  private readonly samples: { atMs: number; offsetMs: number }[] = [];
  private lastLook: { atMs: number; block: bigint } | undefined;

  constructor(
    private readonly wallMs: () => number = Date.now,
    private readonly monotonicMs: () => number = () => performance.now(),
  ) {}

  /** A block known to be fresh (just made) as this node sees it now. */
  fresh(blockTimestamp: number): void {
    const atMs = this.monotonicMs();
    this.samples.push({ atMs, offsetMs: this.wallMs() - blockTimestamp * 1000 });
    if (this.samples.length > MAX_SAMPLES) this.samples.shift();
  }

  /** The latest block, as read now: a sample when its number advanced since a look just before. */
  look(blockNumber: bigint, blockTimestamp: number): void {
    const atMs = this.monotonicMs();
    const previous = this.lastLook;
    if (previous && blockNumber > previous.block && atMs - previous.atMs <= PROMPT_LOOK_MS) this.fresh(blockTimestamp);
    if (!previous || blockNumber >= previous.block) this.lastLook = { atMs, block: blockNumber };
  }

  /** How far (ms) this node's wall clock runs ahead of the chain's, as bounded by fresh blocks; 0 before any. */
  offsetMs(): number {
    const since = this.monotonicMs() - WINDOW_MS;
    while (this.samples.length > 0 && this.samples[0]!.atMs < since) this.samples.shift();
    if (this.samples.length === 0) return 0;
    return Math.min(...this.samples.map((s) => s.offsetMs));
  }

  /** The chain's time now (ms), as well as this node can tell. */
  nowMs(): number {
    return this.wallMs() - this.offsetMs();
  }
}

/** A head reader: what ChainTime needs of a viem public client. */
export type HeadReader = { getBlock(args: { blockTag: "latest" }): Promise<{ number: bigint; timestamp: bigint }> };

/**
 * The lease loop's times, read from the chain's head: each read of the latest block also teaches
 * the ChainClock when the block is fresh. Lease timing goes through here, never the host's clock.
 */
export class ChainTime {
  readonly clock = new ChainClock();

  constructor(private readonly head: HeadReader) {}

  /** The latest block, which also teaches the chain clock when it is fresh. */
  async latestBlock(): Promise<{ number: bigint; timestamp: bigint }> {
    const block = await this.head.getBlock({ blockTag: "latest" });
    this.clock.look(block.number, Number(block.timestamp));
    return block;
  }

  /** The chain's time as this node estimates it and the latest block's time, read once per reconcile pass. */
  async step(): Promise<StepClock> {
    const block = await this.latestBlock();
    return { wallMs: this.clock.nowMs(), blockTimestamp: Number(block.timestamp) };
  }

  /** The time the next block will carry, at least: the chain's clock may run ahead of ours (a devnet mines a block per transaction). */
  async nextBlockTime(): Promise<number> {
    const block = await this.latestBlock();
    return Math.max(Math.floor(this.clock.nowMs() / 1000), Number(block.timestamp) + 1);
  }

  /** The chain's time now, as well as we can tell: for notices, which must not be cut short. */
  async now(): Promise<number> {
    const block = await this.latestBlock();
    return Math.max(this.clock.nowMs() / 1000, Number(block.timestamp));
  }
}

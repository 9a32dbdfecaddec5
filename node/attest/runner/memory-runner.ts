/**
 * The provider's side of the memory phase (common/attest/memory.ts): the CPU reference runner,
 * which really fills every unit's buffer and runs every walk (exact, for small sizes: the devnet
 * and tests), and the MemoryResponder that drives a runner through the protocol's messages.
 *
 * A GPU runner program answers the runner contract's `mem-*` requests with one buffer per device
 * (runner/external-memory.ts drives it through the same MemoryRunner interface); the CPU
 * runner can also be told to hold only part of a buffer (`capacityWords`) and recompute the rest
 * when a walk meets it: what a card with less memory than it claims must do. It counts what it
 * did (words stored, hash iterations, reads, recomputed words) so a simulated device can turn
 * the work into time (test/support/attest-memory.ts).
 */
import { bytesToHex, getAddress, hexToBytes, type Address, type Hex, type LocalAccount, type TypedDataDomain } from "viem";
import { computeWord, deriveWalkKeys, deriveWordKeys, fillWords, walk, walkLeaf, walkResultBytes } from "../../../common/attest/memory.js";
import {
  memChallengeSchema,
  memOpenSchema,
  memWalkSchema,
  signMemCommit,
  MEMORY_PROTOCOL_VERSION,
  type MemChallenge,
  type MemCommit,
  type MemFilled,
  type MemWalks,
  type OpenedWalk,
} from "../../../common/attest/memory-messages.js";
import { MerkleTree } from "../../../common/attest/merkle.js";
import { parseInput } from "../../../common/validation.js";
import { ChallengeRefusedError } from "../errors.js";
import { nodeSha256 } from "./hash.js";

/** What a unit did in one challenge. */
export type UnitWork = { storedWords: number; fillHashes: number; reads: number; recomputedWords: number; walkHashes: number };

export interface MemoryWalked {
  /** Merkle root over each unit's walk results (index = unit). */
  readonly roots: Hex[];
  /** GPU UUID per unit (index = unit); empty for the CPU runner. */
  readonly devices: string[];
  /** What each unit did, where the runner counts it (the CPU runner; an external program does not say). */
  readonly work?: UnitWork[];
  open(walks: readonly { unit: number; index: number }[]): Promise<OpenedWalk[]>;
}

export interface MemoryBuffers {
  readonly work?: UnitWork[];
  /** Runs every unit's W walks with the nonce and commits to the results. */
  walk(nonce: Hex, options?: { signal?: AbortSignal }): Promise<MemoryWalked>;
  release(): Promise<void>;
}

/**
 * Runs the memory phase: the CPU reference runner below, or an external runner program's `mem-*`
 * requests (runner/external-memory.ts).
 */
export interface MemoryRunner {
  readonly name: string;
  /** Fills one buffer per unit from the unit's seed. */
  fill(challenge: MemChallenge, options?: { signal?: AbortSignal }): Promise<MemoryBuffers>;
}

/** The CPU runner's buffers, which always count their work. */
export interface CpuMemoryWalked extends MemoryWalked {
  readonly work: UnitWork[];
}
export interface CpuMemoryBuffers extends MemoryBuffers {
  readonly work: UnitWork[];
  walk(nonce: Hex, options?: { signal?: AbortSignal }): Promise<CpuMemoryWalked>;
}

export type CpuMemoryRunnerOptions = {
  /** Words of unit `unit`'s buffer this runner keeps (default: all); the rest are recomputed on demand. */
  capacityWords?: (unit: number, words: number) => number;
  /** UUIDs to name per unit (a simulated GPU's); default none. */
  devices?: (units: number) => string[];
};

function checkSignal(signal?: AbortSignal): void {
  if (signal?.aborted) throw signal.reason instanceof Error ? signal.reason : new ChallengeRefusedError("expired", "The challenge was aborted.");
}

/** Runs synchronous chunks with a yield between them, so timers and aborts get through. */
const yieldNow = () => new Promise<void>((resolve) => setImmediate(resolve));

export class CpuMemoryRunner implements MemoryRunner {
  readonly name = "cpu-memory";
  constructor(private readonly options: CpuMemoryRunnerOptions = {}) {}

  async fill(challenge: MemChallenge, options: { signal?: AbortSignal } = {}): Promise<CpuMemoryBuffers> {
    const { words, hashIterations: iterations } = challenge;
    const units = challenge.seeds.map((seed, unit) => {
      const stored = Math.max(0, Math.min(words, Math.floor(this.options.capacityWords?.(unit, words) ?? words)));
      return { seed: hexToBytes(seed), keys: deriveWordKeys(hexToBytes(seed)), buffer: new Uint32Array(2 * stored), stored };
    });
    const work: UnitWork[] = units.map((u) => ({ storedWords: u.stored, fillHashes: u.stored * iterations, reads: 0, recomputedWords: 0, walkHashes: 0 }));
    const chunk = Math.max(1, Math.floor(4_000_000 / iterations));
    for (const unit of units) {
      for (let from = 0; from < unit.stored; from += chunk) {
        checkSignal(options.signal);
        fillWords(unit.keys, iterations, unit.buffer, from, Math.min(unit.stored, from + chunk));
        await yieldNow();
      }
    }
    let released = false;
    const devices = this.options.devices?.(units.length) ?? [];
    const id = hexToBytes(challenge.id);
    return {
      work,
      release: async () => {
        released = true;
        for (const unit of units) unit.buffer = new Uint32Array(0);
      },
      walk: async (nonce, walkOptions = {}) => {
        if (released) throw new ChallengeRefusedError("expired", "The buffers were released.");
        const trees: MerkleTree[] = [];
        const results: Uint32Array[] = [];
        for (const [u, unit] of units.entries()) {
          const walkKeys = deriveWalkKeys(hexToBytes(nonce), unit.seed);
          const out = new Uint32Array(2 * challenge.walks);
          const stats = work[u]!;
          const read = (index: number, word: Uint32Array) => {
            stats.reads++;
            if (index < unit.stored) {
              word[0] = unit.buffer[2 * index]!;
              word[1] = unit.buffer[2 * index + 1]!;
            } else {
              stats.recomputedWords++;
              stats.walkHashes += iterations;
              computeWord(unit.keys, index, iterations, word);
            }
          };
          for (let w = 0; w < challenge.walks; w++) {
            if (w % 256 === 0) {
              checkSignal(walkOptions.signal);
              await yieldNow();
            }
            walk(walkKeys, w, words, challenge.steps, read, out, 2 * w);
          }
          results.push(out);
          trees.push(
            MerkleTree.fromLeaves(
              Array.from({ length: challenge.walks }, (_, w) => walkLeaf(id, u, w, walkResultBytes(out, 2 * w), nodeSha256)),
              nodeSha256,
            ),
          );
        }
        return {
          roots: trees.map((tree) => bytesToHex(tree.root)),
          devices,
          work,
          open: async (refs) =>
            refs.map(({ unit, index }) => {
              const tree = trees[unit];
              const out = results[unit];
              if (!tree || !out || index >= challenge.walks) throw new ChallengeRefusedError("runner_failed", `There is no walk ${index} of unit ${unit}.`);
              return { unit, index, result: bytesToHex(walkResultBytes(out, 2 * index)), proof: tree.proof(index).map((s) => bytesToHex(s)) };
            }),
        };
      },
    };
  }
}

export type MemoryResponderOptions = {
  provider: Address;
  signer: Pick<LocalAccount, "address" | "signTypedData">;
  domain: TypedDataDomain;
  runner: MemoryRunner;
  /** Units of the machine the GEMM challenge `challengeId` named, or undefined when no such challenge was answered here. */
  unitsOf: (challengeId: Hex) => number | undefined;
  /** Largest buffer accepted, in words over all units. Default 2⁴² (32 TiB of 8-byte words). */
  maxWords?: number;
  /** How long a phase waits for the attestor's next message before it ends (MEMORY_IDLE_MS). */
  idleMs?: number;
  now?: () => number;
};

type Session = { challenge: MemChallenge; buffers?: MemoryBuffers; walked?: MemoryWalked; idle?: NodeJS.Timeout };

/** Tolerated difference between the attestor's clock and ours when stopping work past a cutoff. */
const CLOCK_SKEW_MS = 30_000;
/**
 * How long filled buffers (or committed walks) wait for the attestor's next message before the
 * phase ends and the buffers are freed: an attestor that went away (or never meant to continue)
 * does not pin the GPUs' memory and block every later memory phase.
 */
export const MEMORY_IDLE_MS = CLOCK_SKEW_MS + 60_000;

/** Answers the memory phase's messages with a MemoryRunner. One phase at a time. */
export class MemoryResponder {
  private readonly sessions = new Map<string, Session>();
  private busy = false;

  constructor(private readonly options: MemoryResponderOptions) {
    if (getAddress(options.signer.address) !== getAddress(options.provider)) throw new RangeError("the memory commit signer must be the provider's wallet");
  }

  /** A signal that fires once the attestor no longer listens (cutoff + skew), joined with the caller's. */
  private untilCutoff(cutoffAtMs: number, signal?: AbortSignal): { signal: AbortSignal; clear: () => void } {
    const controller = new AbortController();
    const now = (this.options.now ?? Date.now)();
    const timer = setTimeout(() => controller.abort(new ChallengeRefusedError("expired", "The memory phase's cutoff passed.")), Math.max(0, cutoffAtMs + CLOCK_SKEW_MS - now));
    timer.unref();
    return { signal: signal ? AbortSignal.any([signal, controller.signal]) : controller.signal, clear: () => clearTimeout(timer) };
  }

  /** Whether the attestor no longer listens: the cutoff plus the clock skew has passed. */
  private pastCutoff(cutoffAtMs: number): boolean {
    return cutoffAtMs + CLOCK_SKEW_MS <= (this.options.now ?? Date.now)();
  }

  /** Ends the phase `id` unless its next message comes within MEMORY_IDLE_MS. */
  private armIdle(id: string, session: Session): void {
    clearTimeout(session.idle);
    // A release that fails (the runner died) has nothing left to free.
    session.idle = setTimeout(() => {
      this.end(id as Hex).catch(() => undefined);
    }, this.options.idleMs ?? MEMORY_IDLE_MS);
    session.idle.unref();
  }

  /** mem-challenge → mem-filled once every buffer is full (the fill stops past the cutoff). */
  async fill(input: unknown, options: { signal?: AbortSignal } = {}): Promise<MemFilled> {
    const challenge = parseInput(memChallengeSchema, input, "memory challenge");
    // Refused before the runner hears of it: a phase already past its cutoff would only start work that is then stopped.
    if (this.pastCutoff(challenge.fillCutoffAtMs)) throw new ChallengeRefusedError("expired", "The memory phase's fill cutoff has passed.");
    const units = this.options.unitsOf(challenge.challengeId);
    if (units === undefined) throw new ChallengeRefusedError("expired", "No challenge with this id was answered here.");
    if (challenge.seeds.length !== units) throw new ChallengeRefusedError("claim_mismatch", `The machine has ${units} units; the memory phase names ${challenge.seeds.length}.`);
    if (challenge.words * units > (this.options.maxWords ?? 2 ** 42))
      throw new ChallengeRefusedError("too_large", `${challenge.words} words per unit is more than this node accepts.`);
    if (this.sessions.has(challenge.id)) throw new ChallengeRefusedError("duplicate", "This memory phase was already started.");
    if (this.busy) throw new ChallengeRefusedError("busy", "Another memory phase is running.");
    this.busy = true;
    const session: Session = { challenge };
    this.sessions.set(challenge.id, session);
    const stop = this.untilCutoff(challenge.fillCutoffAtMs, options.signal);
    try {
      session.buffers = await this.options.runner.fill(challenge, { signal: stop.signal });
    } catch (error) {
      this.sessions.delete(challenge.id);
      this.busy = false;
      if (error instanceof ChallengeRefusedError) throw error;
      throw new ChallengeRefusedError("runner_failed", "The memory runner failed to fill the buffers.", { cause: error });
    } finally {
      stop.clear();
    }
    this.armIdle(challenge.id, session);
    return { v: MEMORY_PROTOCOL_VERSION, type: "mem-filled", id: challenge.id };
  }

  /** mem-walk → the signed mem-commit. */
  async walk(input: unknown, options: { signal?: AbortSignal } = {}): Promise<MemCommit> {
    const message = parseInput(memWalkSchema, input, "memory walk");
    const session = this.sessions.get(message.id);
    if (!session?.buffers || session.walked) throw new ChallengeRefusedError("expired", "No filled buffers wait for this nonce.");
    clearTimeout(session.idle);
    if (this.pastCutoff(message.cutoffAtMs)) {
      await this.end(message.id);
      throw new ChallengeRefusedError("expired", "The memory phase's walk cutoff has passed.");
    }
    const stop = this.untilCutoff(message.cutoffAtMs, options.signal);
    try {
      session.walked = await session.buffers.walk(message.nonce, { signal: stop.signal });
    } catch (error) {
      await this.end(message.id);
      throw error instanceof ChallengeRefusedError ? error : new ChallengeRefusedError("runner_failed", "The memory runner failed to walk.", { cause: error });
    } finally {
      stop.clear();
    }
    this.armIdle(message.id, session);
    const { roots, devices } = session.walked;
    const signature = await signMemCommit(this.options.signer, this.options.domain, message.id, roots, devices);
    return { v: MEMORY_PROTOCOL_VERSION, type: "mem-commit", id: message.id, roots, gpus: devices, signature };
  }

  /** mem-open → mem-walks; the phase ends. */
  async open(input: unknown): Promise<MemWalks> {
    const request = parseInput(memOpenSchema, input, "memory open");
    const session = this.sessions.get(request.id);
    if (!session?.walked) throw new ChallengeRefusedError("expired", "No committed walks for this id.");
    try {
      return { v: MEMORY_PROTOCOL_VERSION, type: "mem-walks", id: request.id, walks: await session.walked.open(request.walks) };
    } finally {
      await this.end(request.id);
    }
  }

  /** What the runner did in a phase still held (for benches and simulated devices). */
  work(id: Hex) {
    return this.sessions.get(id)?.buffers?.work;
  }

  private async end(id: Hex): Promise<void> {
    const session = this.sessions.get(id);
    if (!session) return;
    clearTimeout(session.idle);
    this.sessions.delete(id);
    this.busy = false;
    await session.buffers?.release();
  }

  async close(): Promise<void> {
    await Promise.all([...this.sessions.keys()].map((id) => this.end(id as Hex)));
  }
}

/**
 * The CPU reference runner: computes every unit's sub-challenge on worker threads (rows split
 * across workers, each unit's B generated once into shared memory), hashes them with node:crypto's SHA-256
 * and keeps only the Merkle tree; opened rows are recomputed on demand (k rows cost what the
 * attestor's check costs), so memory stays at B plus 64 bytes per row.
 *
 * It is exact and slow: it lets the devnet and the tests run the whole protocol without a GPU.
 * Its `recompute` also serves the attestor as a multi-threaded row verifier.
 */
import { availableParallelism } from "node:os";
import { bytesToHex, hexToBytes } from "viem";
import { assertShape } from "../../../common/attest/arithmetic.js";
import { MerkleTree } from "../../../common/attest/merkle.js";
import type { OpenedRowMessage } from "../../../common/attest/messages.js";
import type { RowRecomputer } from "../../../common/attest/verify.js";
import { nodeSha256, rowBytesView } from "./hash.js";
import { WorkerPool } from "./pool.js";
import { RunnerError, type Runner, type RunnerChallenge, type RunnerCommitment, type RunnerUnit } from "./types.js";

export type CpuRunnerOptions = {
  /** Worker threads; default: the machine's available parallelism. */
  workers?: number;
  /** Rows per task: small enough to balance across workers, large enough to amortize messaging. */
  rowsPerTask?: number;
};

function splitRange(total: number, parts: number): [number, number][] {
  const ranges: [number, number][] = [];
  const size = Math.ceil(total / parts);
  for (let from = 0; from < total; from += size) ranges.push([from, Math.min(total, from + size)]);
  return ranges;
}

export class CpuRunner implements Runner {
  readonly name = "cpu";
  readonly workers: number;
  private readonly pool: WorkerPool;
  private readonly rowsPerTask: number | undefined;

  constructor(options: CpuRunnerOptions = {}) {
    this.workers = options.workers ?? availableParallelism();
    this.pool = new WorkerPool(this.workers);
    this.rowsPerTask = options.rowsPerTask;
  }

  /** Fills B (cols × cols) in shared memory, slices in parallel. */
  private async generateB(seed: Uint8Array, cols: number, signal?: AbortSignal): Promise<SharedArrayBuffer> {
    const b = new SharedArrayBuffer(cols * cols);
    await Promise.all(splitRange(cols, this.workers).map(([from, to]) => this.pool.run({ op: "genB", seed, cols, b, from, to }, signal)));
    return b;
  }

  private async rowsOf(seed: Uint8Array, cols: number, rounds: number, b: SharedArrayBuffer, indices: readonly number[], signal?: AbortSignal): Promise<Int32Array[]> {
    const chunks = splitRange(indices.length, this.workers).map(([from, to]) => indices.slice(from, to));
    const results = await Promise.all(chunks.map((chunk) => this.pool.run({ op: "rows", seed, cols, rounds, b, indices: chunk }, signal)));
    return results.flatMap((reply) => reply.rows ?? []);
  }

  /** One unit's tree: B generated once into shared memory, leaves hashed on the workers. */
  private async computeUnit(
    unit: RunnerUnit,
    rows: number,
    cols: number,
    rounds: number,
    signal?: AbortSignal,
  ): Promise<{ seed: Uint8Array; b: SharedArrayBuffer; tree: MerkleTree }> {
    const seed = hexToBytes(unit.seed);
    const leafKey = hexToBytes(unit.leafKey);
    const b = await this.generateB(seed, cols, signal);
    // At least 4 tasks per worker so a slow worker does not hold the others up.
    const perTask = this.rowsPerTask ?? Math.max(1, Math.ceil(rows / (this.workers * 4)));
    const ranges = splitRange(rows, Math.ceil(rows / perTask));
    const leaves = new Uint8Array(rows * 32);
    await Promise.all(
      ranges.map(async ([from, to]) => {
        const reply = await this.pool.run({ op: "leaves", seed, challengeId: leafKey, cols, rounds, b, from, to }, signal);
        if (!reply.leaves || reply.leaves.length !== (to - from) * 32) throw new RunnerError("A CPU runner worker returned the wrong number of leaves.");
        leaves.set(reply.leaves, from * 32);
      }),
    );
    return { seed, b, tree: MerkleTree.fromLeafBytes(leaves, rows, nodeSha256) };
  }

  async computeCommit(challenge: RunnerChallenge, options: { signal?: AbortSignal } = {}): Promise<RunnerCommitment> {
    const { signal } = options;
    assertShape(challenge.cols, challenge.rounds);
    const started = performance.now();
    const { rowsPerUnit: rows, cols, rounds } = challenge;
    // Every unit at once: the pool spreads all units' tasks over the workers.
    let units: { seed: Uint8Array; b: SharedArrayBuffer; tree: MerkleTree }[] | undefined = await Promise.all(
      challenge.units.map((unit) => this.computeUnit(unit, rows, cols, rounds, signal)),
    );
    const computeMs = performance.now() - started;
    return {
      roots: units.map((unit) => bytesToHex(unit.tree.root)),
      rowsPerUnit: rows,
      computeMs,
      openRows: async (picks, openOptions = {}) => {
        const held = units;
        if (!held) throw new RunnerError("This answer was released; it cannot be opened any more.");
        for (const { unit, index } of picks) {
          if (!Number.isInteger(unit) || unit < 0 || unit >= held.length) throw new RunnerError(`Unit ${unit} is outside the answer (0..${held.length - 1}).`);
          if (!Number.isInteger(index) || index < 0 || index >= rows) throw new RunnerError(`Row ${index} is outside the unit's answer (0..${rows - 1}).`);
        }
        const opened = await Promise.all(
          picks.map(async ({ unit, index }): Promise<OpenedRowMessage> => {
            const { seed, b, tree } = held[unit]!;
            const [values] = await this.rowsOf(seed, cols, rounds, b, [index], openOptions.signal);
            return { unit, index, data: bytesToHex(rowBytesView(values!)), proof: tree.proof(index).map((sibling) => bytesToHex(sibling)) };
          }),
        );
        return opened;
      },
      release: async () => {
        units = undefined;
      },
    };
  }

  /** Recomputes rows from a seed on the workers: a multi-threaded verifier for the attestor. */
  readonly recompute: RowRecomputer = async ({ seed, cols, rounds, indices }) => {
    assertShape(cols, rounds);
    const b = await this.generateB(seed, cols);
    return this.rowsOf(seed, cols, rounds, b, indices);
  };

  async close(): Promise<void> {
    await this.pool.close();
  }
}

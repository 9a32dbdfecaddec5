/**
 * The Merkle commitment over answer rows. SHA-256 with RFC 6962-style domain separation:
 *
 *   leaf(i) = sha256(0x00 ‖ challengeId (32 bytes) ‖ uint32be(i) ‖ row i as int32 little-endian)
 *   node    = sha256(0x01 ‖ left ‖ right)
 *
 * The leaf count is padded to the next power of two with 32 zero bytes (no preimage is known,
 * so a padding leaf can never be opened as a row). A proof is the list of siblings from the
 * leaf level up; the index's bits say on which side each sibling sits.
 *
 * Why written here rather than taken from a library: the tree's exact shape is part of the
 * runner contract a CUDA program must reproduce, so it has to be the simplest shape there is;
 * @openzeppelin/merkle-tree uses keccak over sorted pairs in a heap layout (position not bound
 * by the proof, keccak not in Node's crypto) and hashing gigabytes of rows wants SHA-256, which
 * CPUs (SHA-NI through node:crypto) and GPUs compute fast. The hash is injectable so node code
 * can use node:crypto while this file stays pure.
 */
import { sha256 } from "@noble/hashes/sha2.js";

export type Sha256 = (data: Uint8Array) => Uint8Array;

/** @noble/hashes SHA-256 (the audited implementation viem builds on): pure JS, runs in browsers. */
export const pureSha256: Sha256 = (data) => sha256(data);

/** Deepest tree any challenge may need (2²⁸ rows). */
export const MAX_TREE_DEPTH = 28;

const ZERO_LEAF = new Uint8Array(32);

/** Hashes one answer row into its leaf. */
export function leafHash(challengeId: Uint8Array, index: number, rowBytes: Uint8Array, hash: Sha256 = pureSha256): Uint8Array {
  if (challengeId.length !== 32) throw new RangeError("challengeId must be 32 bytes");
  const input = new Uint8Array(1 + 32 + 4 + rowBytes.length);
  input[0] = 0x00;
  input.set(challengeId, 1);
  new DataView(input.buffer).setUint32(33, index >>> 0, false);
  input.set(rowBytes, 37);
  return hash(input);
}

/** Hashes two children into their parent. */
export function nodeHash(left: Uint8Array, right: Uint8Array, hash: Sha256 = pureSha256): Uint8Array {
  const input = new Uint8Array(65);
  input[0] = 0x01;
  input.set(left, 1);
  input.set(right, 33);
  return hash(input);
}

/** Number of sibling hashes in a proof for a tree of `leafCount` leaves. */
export function treeDepth(leafCount: number): number {
  if (!Number.isInteger(leafCount) || leafCount < 1) throw new RangeError("a tree needs at least one leaf");
  let depth = 0;
  while (2 ** depth < leafCount) depth++;
  return depth;
}

/**
 * A Merkle tree over leaf hashes. Levels are kept as flat byte arrays (32 bytes per node) so a
 * tree over millions of rows is a few arrays, not millions of objects.
 */
export class MerkleTree {
  /** levels[0] are the (padded) leaves, the last level is the root. */
  private readonly levels: Uint8Array[];
  readonly leafCount: number;
  readonly depth: number;

  private constructor(levels: Uint8Array[], leafCount: number, depth: number) {
    this.levels = levels;
    this.leafCount = leafCount;
    this.depth = depth;
  }

  /** Builds the tree from `leafCount` leaf hashes laid out back to back in `leaves` (32 bytes each). */
  static fromLeafBytes(leaves: Uint8Array, leafCount: number, hash: Sha256 = pureSha256): MerkleTree {
    if (leaves.length !== leafCount * 32) throw new RangeError(`expected ${leafCount * 32} leaf bytes, got ${leaves.length}`);
    const depth = treeDepth(leafCount);
    if (depth > MAX_TREE_DEPTH) throw new RangeError(`at most 2^${MAX_TREE_DEPTH} leaves`);
    const padded = new Uint8Array(2 ** depth * 32);
    padded.set(leaves, 0);
    for (let i = leafCount; i < 2 ** depth; i++) padded.set(ZERO_LEAF, i * 32);
    const levels = [padded];
    let current = padded;
    const pair = new Uint8Array(65);
    pair[0] = 0x01;
    while (current.length > 32) {
      const next = new Uint8Array(current.length / 2);
      for (let i = 0; i < next.length / 32; i++) {
        pair.set(current.subarray(i * 64, i * 64 + 64), 1);
        next.set(hash(pair), i * 32);
      }
      levels.push(next);
      current = next;
    }
    return new MerkleTree(levels, leafCount, depth);
  }

  /** Builds the tree from a list of leaf hashes. */
  static fromLeaves(leaves: readonly Uint8Array[], hash: Sha256 = pureSha256): MerkleTree {
    const flat = new Uint8Array(leaves.length * 32);
    leaves.forEach((leaf, i) => flat.set(leaf, i * 32));
    return MerkleTree.fromLeafBytes(flat, leaves.length, hash);
  }

  get root(): Uint8Array {
    return this.levels[this.levels.length - 1]!.slice(0, 32);
  }

  leaf(index: number): Uint8Array {
    this.checkIndex(index);
    return this.levels[0]!.slice(index * 32, index * 32 + 32);
  }

  /** Siblings from the leaf level up. */
  proof(index: number): Uint8Array[] {
    this.checkIndex(index);
    const siblings: Uint8Array[] = [];
    let position = index;
    for (let level = 0; level < this.depth; level++) {
      const sibling = position ^ 1;
      siblings.push(this.levels[level]!.slice(sibling * 32, sibling * 32 + 32));
      position >>>= 1;
    }
    return siblings;
  }

  private checkIndex(index: number): void {
    if (!Number.isInteger(index) || index < 0 || index >= this.leafCount) {
      throw new RangeError(`leaf index ${index} out of range 0..${this.leafCount - 1}`);
    }
  }
}

/**
 * True when `leaf` sits at `index` of a tree with `leafCount` leaves and root `root`. The proof
 * must have exactly the tree's depth, so a proof for another tree shape never passes.
 */
export function verifyMerkleProof(root: Uint8Array, leaf: Uint8Array, index: number, leafCount: number, proof: readonly Uint8Array[], hash: Sha256 = pureSha256): boolean {
  if (!Number.isInteger(index) || index < 0 || index >= leafCount) return false;
  if (proof.length !== treeDepth(leafCount)) return false;
  let current = leaf;
  let position = index;
  for (const sibling of proof) {
    if (sibling.length !== 32) return false;
    current = (position & 1) === 0 ? nodeHash(current, sibling, hash) : nodeHash(sibling, current, hash);
    position >>>= 1;
  }
  return bytesEqual(current, root);
}

export function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a[i]! ^ b[i]!;
  return diff === 0;
}

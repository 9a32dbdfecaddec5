/**
 * The memory phase of a challenge: hard on each unit's memory capacity and bandwidth, sized to
 * the VRAM the machine declares per unit (docs/attestation.md, "Memory phase").
 *
 * Every unit u gets its own 32-byte seed. Its buffer holds N 64-bit words (N = fillFraction of
 * the declared VRAM per unit, in 8-byte words); word i is `word(seed, i)`: K sequential rounds
 * of a 32-bit mixer, so each word costs K hash iterations to (re)compute and words cannot be
 * derived from one another. The unit fills its buffer and says so (the fill is timed); then a
 * second nonce arrives and the unit runs W pointer-chasing walks of L steps: each step reads the
 * word at the current index and the next index comes from the accumulated value, so the reads
 * are random, dependent and unknown before the nonce. Each walk ends in an 8-byte result; the
 * unit Merkle-commits its W results (merkle.ts leaves, bound to the challenge and the unit).
 *
 * A card that holds only a fraction v of the buffer must recompute the missing words it meets:
 * (1 − v)·W·L·K hash iterations instead of W·L reads, which misses the walk deadline when K·(read
 * rate / hash rate) is large (memoryParams sizes K for it). The attestor opens a few walks per
 * unit and checks each by recomputing its L words from the seed (L·K iterations per walk).
 *
 * Specified bit for bit so that a CUDA runner gives the same results as this reference code.
 * Pure: no Node APIs.
 */
import { sha256 } from "@noble/hashes/sha2.js";
import { mix32 } from "./arithmetic.js";
import { leafHash, type Sha256, pureSha256 } from "./merkle.js";

export const MEMORY_KEY_TAG = "suanli/attest/v1/memory";
export const WALK_KEY_TAG = "suanli/attest/v1/walk";
/** Bytes of one buffer word. */
export const WORD_BYTES = 8;
/** Bytes of one walk result (two uint32, little-endian). */
export const WALK_RESULT_BYTES = 8;

/** Eight 32-bit keys. */
export type Keys8 = readonly [number, number, number, number, number, number, number, number];

function keysOf(tag: string, ...parts: Uint8Array[]): Keys8 {
  const tagBytes = new TextEncoder().encode(tag);
  const input = new Uint8Array(tagBytes.length + parts.reduce((sum, part) => sum + part.length, 0));
  input.set(tagBytes, 0);
  let at = tagBytes.length;
  for (const part of parts) {
    input.set(part, at);
    at += part.length;
  }
  const digest = sha256(input);
  const view = new DataView(digest.buffer, digest.byteOffset, digest.byteLength);
  return Array.from({ length: 8 }, (_, i) => view.getUint32(i * 4, false)) as unknown as Keys8;
}

/** Word keys of a unit: sha256("suanli/attest/v1/memory" ‖ unitSeed) as eight big-endian uint32. */
export function deriveWordKeys(unitSeed: Uint8Array): Keys8 {
  if (unitSeed.length !== 32) throw new RangeError(`a unit seed must be 32 bytes, got ${unitSeed.length}`);
  return keysOf(MEMORY_KEY_TAG, unitSeed);
}

/** Walk keys: sha256("suanli/attest/v1/walk" ‖ nonce ‖ unitSeed). */
export function deriveWalkKeys(nonce: Uint8Array, unitSeed: Uint8Array): Keys8 {
  if (nonce.length !== 32) throw new RangeError(`the walk nonce must be 32 bytes, got ${nonce.length}`);
  return keysOf(WALK_KEY_TAG, nonce, unitSeed);
}

/**
 * Word i (0 ≤ i < 2⁵³) of a unit's buffer, written as (lo, hi) into out[at], out[at + 1]:
 *   x = mix32(i_lo ⊕ k0), y = mix32(i_hi ⊕ k1 ⊕ x)
 *   K times, j = 0..K−1:  x = mix32(x ⊕ y ⊕ k2 ⊕ j);  y = mix32((y + x + k3) mod 2³²)
 * where i_lo = i mod 2³², i_hi = ⌊i / 2³²⌋. Each iteration depends on the previous one.
 */
export function computeWord(keys: Keys8, index: number, iterations: number, out: Uint32Array, at = 0): void {
  let x = mix32((index >>> 0) ^ keys[0]);
  let y = mix32((Math.floor(index / 4294967296) >>> 0) ^ keys[1] ^ x);
  const k2 = keys[2];
  const k3 = keys[3];
  for (let j = 0; j < iterations; j++) {
    x = mix32(x ^ y ^ k2 ^ j);
    y = mix32((y + x + k3) | 0);
  }
  out[at] = x;
  out[at + 1] = y;
}

/** Fills words [from, to) of a buffer (two uint32 per word). */
export function fillWords(keys: Keys8, iterations: number, buffer: Uint32Array, from = 0, to = buffer.length / 2): void {
  for (let i = from; i < to; i++) computeWord(keys, i, iterations, buffer, 2 * i);
}

/** The next index from an accumulator: ((hi mod 2²¹)·2³² + lo) mod N (exact in doubles). */
export function nextIndex(lo: number, hi: number, words: number): number {
  return ((hi & 0x1fffff) * 4294967296 + (lo >>> 0)) % words;
}

/** Reads word `index` into out[0], out[1]: from the buffer, or recomputed (a card without the word). */
export type WordSource = (index: number, out: Uint32Array) => void;

/**
 * Walk w (0 ≤ w < W) of a unit with walk keys n over N words, L steps:
 *   a = mix32(w ⊕ n0), b = mix32(a ⊕ n1), idx = nextIndex(a, b, N)
 *   L times: (lo, hi) = word(idx); a = mix32(a ⊕ lo); b = mix32((b + hi) mod 2³² ⊕ a ⊕ n2); idx = nextIndex(a, b, N)
 * The result is (a, b). Writes it into out[at], out[at + 1].
 */
export function walk(walkKeys: Keys8, walkIndex: number, words: number, steps: number, read: WordSource, out: Uint32Array, at = 0): void {
  const word = new Uint32Array(2);
  let a = mix32(walkIndex ^ walkKeys[0]);
  let b = mix32(a ^ walkKeys[1]);
  let index = nextIndex(a, b, words);
  const n2 = walkKeys[2];
  for (let s = 0; s < steps; s++) {
    read(index, word);
    a = mix32(a ^ word[0]!);
    b = mix32(((b + word[1]!) | 0) ^ a ^ n2);
    index = nextIndex(a, b, words);
  }
  out[at] = a;
  out[at + 1] = b;
}

/** A walk result's bytes as hashed: (a, b) each uint32 little-endian. */
export function walkResultBytes(result: Uint32Array, at = 0): Uint8Array {
  const bytes = new Uint8Array(WALK_RESULT_BYTES);
  const view = new DataView(bytes.buffer);
  view.setUint32(0, result[at]!, true);
  view.setUint32(4, result[at + 1]!, true);
  return bytes;
}

/** The key a unit's leaves are bound to: sha256(challengeId ‖ uint32be(unit)). */
export function unitLeafKey(challengeId: Uint8Array, unit: number): Uint8Array {
  const input = new Uint8Array(challengeId.length + 4);
  input.set(challengeId, 0);
  new DataView(input.buffer).setUint32(challengeId.length, unit, false);
  return sha256(input);
}

/** Leaf of walk w of unit u: merkle.ts leafHash(unitLeafKey(id, u), w, result bytes). */
export function walkLeaf(challengeId: Uint8Array, unit: number, walkIndex: number, result: Uint8Array, hash: Sha256 = pureSha256): Uint8Array {
  return leafHash(unitLeafKey(challengeId, unit), walkIndex, result, hash);
}

/**
 * The attestor's check of one walk: recomputes the L words it reads directly from the seed
 * (L·K hash iterations) and returns the result bytes.
 */
export function recomputeWalk(unitSeed: Uint8Array, nonce: Uint8Array, walkIndex: number, words: number, steps: number, iterations: number): Uint8Array {
  const wordKeys = deriveWordKeys(unitSeed);
  const out = new Uint32Array(2);
  walk(deriveWalkKeys(nonce, unitSeed), walkIndex, words, steps, (index, word) => computeWord(wordKeys, index, iterations, word), out);
  return walkResultBytes(out);
}

/** Hash iterations the attestor spends per opened walk. */
export function walkCheckIterations(steps: number, iterations: number): number {
  return steps * iterations;
}

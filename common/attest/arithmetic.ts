/**
 * The proof-of-capacity workload: integer matrices derived from a challenge seed and their exact
 * product. Everything here is specified bit for bit (docs/attestation.md, "Arithmetic") so that a
 * CUDA runner doing int8 tensor-core GEMM with int32 accumulation produces the very same rows as
 * this reference code; the attestor recomputes a few rows with it to check a provider's answer.
 *
 * Shape: A is `rows × cols`, B is `cols × cols`, both int8. X₀ = A; for round t = 1..R,
 * Pₜ = Xₜ₋₁ · B (int32, exact); Xₜ = requant(Pₜ) for t < R. The answer is P_R (int32 rows).
 * Row r of every Pₜ depends only on row r of A and on B, so the attestor checks one row for
 * R·cols² multiply-adds while the provider must compute rows·R·cols² of them.
 *
 * Pure: no Node APIs (the SDK may import it).
 */
import { sha256 } from "@noble/hashes/sha2.js";

/** Largest inner dimension: |Σ a·b| ≤ cols·128·128 = cols·2¹⁴ must stay below 2³¹ (int32). */
export const MAX_COLS = 65_536;
/** Domain tag of the key derivation, so seeds used elsewhere never give the same matrices. */
export const MATRIX_KEY_TAG = "suanli/attest/v1/matrix";

/** The multiplier of `requant`: 2³²/φ, odd, so x ↦ x·c mod 2³² is a bijection. */
const REQUANT_MULTIPLIER = 0x9e3779b1 | 0;

/**
 * lowbias32 (Chris Wellons' hash-prospector): a 32-bit bijective integer mixer. Cheap on any
 * hardware (two 32-bit multiplies), so GPU threads generate matrix elements on the fly.
 */
export function mix32(value: number): number {
  let x = value | 0;
  x ^= x >>> 16;
  x = Math.imul(x, 0x7feb352d);
  x ^= x >>> 15;
  x = Math.imul(x, 0x846ca68b | 0);
  x ^= x >>> 16;
  return x >>> 0;
}

/** requant(x) = the int8 whose bits are the top byte of (x·0x9E3779B1 mod 2³²). Not linear over ℤ, so rounds cannot be folded into B^R. */
export function requant(value: number): number {
  return Math.imul(value, REQUANT_MULTIPLIER) >> 24;
}

/** Four 32-bit keys of one matrix. */
export type MatrixKey = readonly [number, number, number, number];
/** The keys of A and B derived from a seed. */
export type MatrixKeys = { a: MatrixKey; b: MatrixKey };

/**
 * K = sha256(utf8("suanli/attest/v1/matrix") ‖ seed) read as eight big-endian uint32 k0..k7;
 * A uses (k0, k1, k2, k3), B uses (k4, k5, k6, k7).
 */
export function deriveMatrixKeys(seed: Uint8Array): MatrixKeys {
  if (seed.length !== 32) throw new RangeError(`seed must be 32 bytes, got ${seed.length}`);
  const tag = new TextEncoder().encode(MATRIX_KEY_TAG);
  const input = new Uint8Array(tag.length + seed.length);
  input.set(tag, 0);
  input.set(seed, tag.length);
  const digest = sha256(input);
  const view = new DataView(digest.buffer, digest.byteOffset, digest.byteLength);
  const k = Array.from({ length: 8 }, (_, i) => view.getUint32(i * 4, false));
  return { a: [k[0]!, k[1]!, k[2]!, k[3]!], b: [k[4]!, k[5]!, k[6]!, k[7]!] };
}

/**
 * Writes row `row` of a matrix with key `key` and `cols` columns into `out` (int8):
 * s = mix32(mix32(row ⊕ k0) ⊕ k1), t = mix32(mix32(row ⊕ k2) ⊕ k3), and for each word q,
 * w = mix32(mix32(q ⊕ s) ⊕ t); elements 4q..4q+3 are the bytes of w, least significant first,
 * read as two's-complement int8. Any element is computable on its own (counter-based).
 */
export function fillMatrixRow(key: MatrixKey, row: number, cols: number, out: Int8Array, offset = 0): void {
  const s = mix32(mix32(row ^ key[0]) ^ key[1]);
  const t = mix32(mix32(row ^ key[2]) ^ key[3]);
  const words = cols >>> 2;
  for (let q = 0, i = offset; q < words; q++, i += 4) {
    const w = mix32(mix32(q ^ s) ^ t);
    // Int8Array stores keep the low 8 bits as two's complement: exactly "byte as int8".
    out[i] = w;
    out[i + 1] = w >>> 8;
    out[i + 2] = w >>> 16;
    out[i + 3] = w >>> 24;
  }
}

/** B (cols × cols, row-major int8), or rows [fromRow, toRow) of it into `into` at the same offsets. */
export function generateMatrixB(keys: MatrixKeys, cols: number, into?: Int8Array, fromRow = 0, toRow = cols): Int8Array {
  const out = into ?? new Int8Array(cols * cols);
  for (let r = fromRow; r < toRow; r++) fillMatrixRow(keys.b, r, cols, out, r * cols);
  return out;
}

/** Checks the shape rules every participant enforces (see docs/attestation.md). */
export function assertShape(cols: number, rounds: number): void {
  if (!Number.isInteger(cols) || cols < 16 || cols > MAX_COLS || cols % 16 !== 0) {
    throw new RangeError(`cols must be a multiple of 16 between 16 and ${MAX_COLS}, got ${cols}`);
  }
  if (!Number.isInteger(rounds) || rounds < 1 || rounds > 1024) throw new RangeError(`rounds must be 1..1024, got ${rounds}`);
}

/**
 * Computes answer row `row` (P_R[row], int32) from A's key, B and the shape. Cost: rounds·cols²
 * multiply-adds. `scratch` buffers may be passed to avoid allocation in loops.
 */
export function computeAnswerRow(
  keyA: MatrixKey,
  b: Int8Array,
  row: number,
  cols: number,
  rounds: number,
  out: Int32Array = new Int32Array(cols),
  scratch: Int8Array = new Int8Array(cols),
): Int32Array {
  return computeAnswerRows(keyA, b, [row], cols, rounds, [out], [scratch])[0]!; // one row in, one row out
}

/**
 * Computes several answer rows together: each row of B is read once per round for the whole
 * block and reused from L1 cache, about twice as fast as row by row once B outgrows the caches.
 */
export function computeAnswerRows(
  keyA: MatrixKey,
  b: Int8Array,
  rows: readonly number[],
  cols: number,
  rounds: number,
  outs: Int32Array[] = rows.map(() => new Int32Array(cols)),
  scratch: Int8Array[] = rows.map(() => new Int8Array(cols)),
): Int32Array[] {
  const count = rows.length;
  for (let j = 0; j < count; j++) fillMatrixRow(keyA, rows[j]!, cols, scratch[j]!);
  for (let round = 1; round <= rounds; round++) {
    for (let j = 0; j < count; j++) outs[j]!.fill(0);
    for (let k = 0; k < cols; k++) {
      const base = k * cols;
      for (let j = 0; j < count; j++) {
        const a = scratch[j]![k]!;
        if (a === 0) continue;
        const out = outs[j]!;
        // Exact: every partial sum stays below cols·2¹⁴ ≤ 2³⁰.
        for (let c = 0; c < cols; c++) out[c]! += a * b[base + c]!;
      }
    }
    if (round < rounds) {
      for (let j = 0; j < count; j++) {
        const x = scratch[j]!;
        const out = outs[j]!;
        for (let c = 0; c < cols; c++) x[c] = requant(out[c]!);
      }
    }
  }
  return outs;
}

/** Rows computed together by recomputeRows and the CPU runner. */
export const ROW_BLOCK = 8;

/** Answer rows for the given indices, from the seed alone (what the attestor does). Cost: cols² + k·rounds·cols². */
export function recomputeRows(seed: Uint8Array, cols: number, rounds: number, indices: readonly number[]): Int32Array[] {
  assertShape(cols, rounds);
  const keys = deriveMatrixKeys(seed);
  const b = generateMatrixB(keys, cols);
  const out: Int32Array[] = [];
  for (let i = 0; i < indices.length; i += ROW_BLOCK) out.push(...computeAnswerRows(keys.a, b, indices.slice(i, i + ROW_BLOCK), cols, rounds));
  return out;
}

/** Multiply-adds counted as two operations: the total work of a challenge, rows·rounds·cols²·2. */
export function challengeOps(rows: number, cols: number, rounds: number): bigint {
  return 2n * BigInt(rows) * BigInt(cols) * BigInt(cols) * BigInt(rounds);
}

/** The bytes of an answer row as hashed and sent: each int32 little-endian. */
export function rowToBytes(row: Int32Array): Uint8Array {
  const bytes = new Uint8Array(row.length * 4);
  const view = new DataView(bytes.buffer);
  for (let i = 0; i < row.length; i++) view.setInt32(i * 4, row[i]!, true);
  return bytes;
}

/** Inverse of rowToBytes. */
export function rowFromBytes(bytes: Uint8Array): Int32Array {
  if (bytes.length % 4 !== 0) throw new RangeError("row bytes must be a multiple of 4");
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const row = new Int32Array(bytes.length / 4);
  for (let i = 0; i < row.length; i++) row[i] = view.getInt32(i * 4, true);
  return row;
}

/** Constant-shape comparison of two rows. */
export function rowsEqual(a: Int32Array, b: Int32Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

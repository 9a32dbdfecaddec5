import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { bytesToHex } from "viem";
import { unitLeafKey, unitSeed } from "../../../common/attest/units.js";
import {
  MAX_COLS,
  assertShape,
  challengeOps,
  computeAnswerRow,
  deriveMatrixKeys,
  generateMatrixB,
  mix32,
  recomputeRows,
  requant,
  rowFromBytes,
  rowToBytes,
  type MatrixKey,
} from "../../../common/attest/arithmetic.js";
import { MerkleTree, leafHash } from "../../../common/attest/merkle.js";

// An independent transcription of docs/attestation.md ("Arithmetic"): element by element with
// BigInt and 64-bit masks instead of typed-array wrapping and Math.imul.
const M32 = (1n << 32n) - 1n;
function lowbias32(value: bigint): bigint {
  let x = value & M32;
  x ^= x >> 16n;
  x = (x * 0x7feb352dn) & M32;
  x ^= x >> 15n;
  x = (x * 0x846ca68bn) & M32;
  x ^= x >> 16n;
  return x;
}
function toInt8(byte: bigint): bigint {
  return byte >= 128n ? byte - 256n : byte;
}
function element(key: MatrixKey, row: number, col: number): bigint {
  const k = key.map(BigInt);
  const r = BigInt(row);
  const s = lowbias32(lowbias32(r ^ k[0]!) ^ k[1]!);
  const t = lowbias32(lowbias32(r ^ k[2]!) ^ k[3]!);
  const q = BigInt(col >> 2);
  const w = lowbias32(lowbias32(q ^ s) ^ t);
  return toInt8((w >> (8n * BigInt(col & 3))) & 0xffn);
}
function requantSpec(x: bigint): bigint {
  const u = x & M32;
  return toInt8(((u * 0x9e3779b1n) & M32) >> 24n);
}
function answerRowSpec(seed: Uint8Array, row: number, cols: number, rounds: number): bigint[] {
  const digest = createHash("sha256")
    .update(Buffer.concat([Buffer.from("suanli/attest/v1/matrix"), seed]))
    .digest();
  const k = Array.from({ length: 8 }, (_, i) => digest.readUInt32BE(i * 4));
  const keyA: MatrixKey = [k[0]!, k[1]!, k[2]!, k[3]!];
  const keyB: MatrixKey = [k[4]!, k[5]!, k[6]!, k[7]!];
  let x = Array.from({ length: cols }, (_, c) => element(keyA, row, c));
  let p: bigint[] = [];
  for (let round = 1; round <= rounds; round++) {
    p = Array.from({ length: cols }, (_, c) => {
      let sum = 0n;
      for (let j = 0; j < cols; j++) sum += x[j]! * element(keyB, j, c);
      return sum;
    });
    if (round < rounds) x = p.map(requantSpec);
  }
  return p;
}

describe("attest arithmetic", () => {
  it("matches an independent element-by-element transcription of the spec", () => {
    const seed = createHash("sha256").update("arithmetic spec check").digest();
    for (const [cols, rounds] of [
      [16, 1],
      [32, 3],
      [48, 2],
    ] as const) {
      const rows = [0, 1, 7, 1_000_003];
      const fast = recomputeRows(seed, cols, rounds, rows);
      rows.forEach((row, i) => {
        assert.deepEqual(Array.from(fast[i]!).map(BigInt), answerRowSpec(seed, row, cols, rounds), `row ${row} cols ${cols} rounds ${rounds}`);
      });
    }
  });

  it("reproduces the golden vector published in docs/attestation.md", () => {
    const seed = new Uint8Array(32).fill(1);
    const id = new Uint8Array(32).fill(2);
    const keys = deriveMatrixKeys(seed);
    const b = generateMatrixB(keys, 16);
    assert.deepEqual(Array.from(b.slice(0, 16)), [-34, -35, 101, 26, 20, 14, 113, 116, -28, 82, -41, 122, -60, -80, 74, -11]);
    const rows = [0, 1, 2, 3, 4].map((r) => computeAnswerRow(keys.a, b, r, 16, 3));
    assert.deepEqual(Array.from(rows[4]!), [22768, 9944, 15313, 17829, -4630, 2752, -12918, -3577, -14601, -32866, 1269, 2945, -28908, 5119, 16748, -8966]);
    const tree = MerkleTree.fromLeaves(rows.map((row, i) => leafHash(id, i, rowToBytes(row))));
    assert.equal(bytesToHex(tree.root), "0x5b847be2aa7c9a7be7e5891598fc12fdcb6e879cbca993eb79bc907f60573b84");
  });

  it("pins the per-unit seeds and leaf keys of protocol v2 (golden vector in docs/attestation.md)", () => {
    const seed = `0x${"01".repeat(32)}` as const;
    const id = `0x${"02".repeat(32)}` as const;
    assert.equal(unitSeed(seed, 0), "0x12b85f8bef617ecbda120d232699a9656ef9e4c51c204d2094c6af5f527265f2");
    assert.equal(unitSeed(seed, 7), "0xbc2d2a0a7cd25694bb37d1b6846787bbae460baa24e45f4e5207eda9b7ddc25f");
    assert.equal(unitLeafKey(id, 0), "0x2703b5a5a85a25acb3a2fc14620d517f3a7df15f9975ddef7556c209106dced9");
    assert.equal(unitLeafKey(id, 7), "0xfe3a9289d8725c87e2dbec688ee1b5c73a417108a55404dd448f3b5cddcd971b");
    // The same as hashing the documented layout with node:crypto.
    const u32 = (n: number) => Buffer.from([n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255]);
    const spec = createHash("sha256")
      .update(Buffer.concat([Buffer.from("suanli/attest/v2/unit"), Buffer.alloc(32, 1), u32(7)]))
      .digest("hex");
    assert.equal(unitSeed(seed, 7), `0x${spec}`);
  });

  it("pins the mixer and the requantization", () => {
    assert.deepEqual([0, 1, 0xdeadbeef, 0xffffffff].map(mix32), [0, 0x688990c0, 0xe628c683, 0x6768824a]);
    assert.deepEqual([0, 1, -1, 123456, -987654321, 2 ** 30].map(requant), [0, -98, 97, 0, 112, 64]);
    for (const x of [0, 1, -1, 123456, -987654321, 2 ** 30, -(2 ** 30)]) assert.equal(BigInt(requant(x)), requantSpec(BigInt(x)));
  });

  it("derives different matrices from different seeds and the same from the same seed", () => {
    const a = recomputeRows(new Uint8Array(32).fill(7), 32, 2, [5]);
    const again = recomputeRows(new Uint8Array(32).fill(7), 32, 2, [5]);
    const other = recomputeRows(new Uint8Array(32).fill(8), 32, 2, [5]);
    assert.deepEqual(a, again);
    assert.notDeepEqual(a, other);
  });

  it("stays exact at the worst case of the largest inner dimension", () => {
    // |Σ a·b| ≤ cols·128·128 must fit int32 for every accepted cols.
    assert.ok(MAX_COLS * 128 * 128 < 2 ** 31);
    assert.throws(() => assertShape(MAX_COLS + 16, 1), RangeError);
    assert.throws(() => assertShape(40, 1), RangeError);
    assert.throws(() => assertShape(64, 0), RangeError);
    assert.doesNotThrow(() => assertShape(64, 1));
  });

  it("counts operations and round-trips rows through their wire bytes", () => {
    assert.equal(challengeOps(1024, 64, 2), 2n * 1024n * 64n * 64n * 2n);
    const row = Int32Array.from([0, -1, 2 ** 31 - 1, -(2 ** 31), 12345]);
    const bytes = rowToBytes(row);
    assert.deepEqual(Array.from(bytes.slice(4, 8)), [0xff, 0xff, 0xff, 0xff]);
    assert.deepEqual(rowFromBytes(bytes), row);
  });
});

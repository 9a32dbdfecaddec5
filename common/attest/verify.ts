/**
 * The attestor's check of opened rows: each row must hash to the committed root at its index
 * (cheap, checked first) and be the exact product the seed defines (recomputed: rounds·cols²
 * multiply-adds per row, plus generating B once).
 */
import { bytesToHex, hexToBytes, type Hex } from "viem";
import { recomputeRows, rowFromBytes, rowsEqual } from "./arithmetic.js";
import { leafHash, treeDepth, verifyMerkleProof, type Sha256, pureSha256 } from "./merkle.js";
import type { OpenResponseMessage } from "./messages.js";

/** Recomputes answer rows from the seed; a node may run this on worker threads. */
export type RowRecomputer = (request: { seed: Uint8Array; cols: number; rounds: number; indices: number[] }) => Int32Array[] | Promise<Int32Array[]>;

/** The pure single-threaded recomputer. */
export const recomputeRowsInline: RowRecomputer = ({ seed, cols, rounds, indices }) => recomputeRows(seed, cols, rounds, indices);

export type OpeningCheck = { ok: true } | { ok: false; reason: "malformed" | "bad_proof" | "wrong_rows"; detail: string };

export type VerifyOpeningInput = {
  challengeId: Hex;
  seed: Hex;
  rows: number;
  cols: number;
  rounds: number;
  root: Hex;
  /** What the attestor asked to open. */
  indices: readonly number[];
  response: OpenResponseMessage;
  recompute?: RowRecomputer;
  hash?: Sha256;
};

export async function verifyOpening(input: VerifyOpeningInput): Promise<OpeningCheck> {
  const { response, indices, cols } = input;
  const hash = input.hash ?? pureSha256;
  const wanted = new Set(indices);
  const byIndex = new Map<number, OpenResponseMessage["rows"][number]>();
  for (const row of response.rows) {
    if (!wanted.has(row.index)) return { ok: false, reason: "malformed", detail: `row ${row.index} was not asked for` };
    if (byIndex.has(row.index)) return { ok: false, reason: "malformed", detail: `row ${row.index} sent twice` };
    byIndex.set(row.index, row);
  }
  for (const index of indices) {
    if (!byIndex.has(index)) return { ok: false, reason: "malformed", detail: `row ${index} missing` };
  }
  const idBytes = hexToBytes(input.challengeId);
  const rootBytes = hexToBytes(input.root);
  const depth = treeDepth(input.rows);
  const received = new Map<number, Int32Array>();
  for (const index of indices) {
    const row = byIndex.get(index)!;
    const data = hexToBytes(row.data as Hex);
    if (data.length !== cols * 4) return { ok: false, reason: "malformed", detail: `row ${index} has ${data.length} bytes, expected ${cols * 4}` };
    if (row.proof.length !== depth) return { ok: false, reason: "bad_proof", detail: `row ${index}: proof of ${row.proof.length} hashes, the tree has depth ${depth}` };
    const leaf = leafHash(idBytes, index, data, hash);
    const proof = row.proof.map((sibling) => hexToBytes(sibling));
    if (!verifyMerkleProof(rootBytes, leaf, index, input.rows, proof, hash)) {
      return { ok: false, reason: "bad_proof", detail: `row ${index} does not hash to the committed root` };
    }
    received.set(index, rowFromBytes(data));
  }
  const recompute = input.recompute ?? recomputeRowsInline;
  const expected = await recompute({ seed: hexToBytes(input.seed), cols, rounds: input.rounds, indices: [...indices] });
  for (const [i, index] of indices.entries()) {
    if (!rowsEqual(expected[i]!, received.get(index)!)) return { ok: false, reason: "wrong_rows", detail: `row ${index} is not the product of the challenge's matrices` };
  }
  return { ok: true };
}

/** Encodes an opened row's data for the wire. */
export function encodeRowData(bytes: Uint8Array): Hex {
  return bytesToHex(bytes);
}

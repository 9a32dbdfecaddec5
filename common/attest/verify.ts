/**
 * The attestor's check of opened rows: each row must hash to its unit's committed root at its index
 * (cheap, checked first) and be the exact product the seed defines (recomputed: rounds·cols²
 * multiply-adds per row, plus generating B once).
 */
import { bytesToHex, hexToBytes, type Hex } from "viem";
import { recomputeRows, rowFromBytes, rowsEqual } from "./arithmetic.js";
import { leafHash, treeDepth, verifyMerkleProof, type Sha256, pureSha256 } from "./merkle.js";
import type { OpenResponseMessage } from "./messages.js";
import { unitLeafKeyBytes, unitSeedBytes } from "./units.js";

/** Recomputes answer rows from the seed; a node may run this on worker threads. */
export type RowRecomputer = (request: { seed: Uint8Array; cols: number; rounds: number; indices: number[] }) => Int32Array[] | Promise<Int32Array[]>;

/** The pure single-threaded recomputer. */
export const recomputeRowsInline: RowRecomputer = ({ seed, cols, rounds, indices }) => recomputeRows(seed, cols, rounds, indices);

export type OpeningCheck = { ok: true } | { ok: false; reason: "malformed" | "bad_proof" | "wrong_rows"; detail: string };

export type VerifyOpeningInput = {
  challengeId: Hex;
  /** The challenge's seed: each unit's is derived from it (units.ts). */
  seed: Hex;
  rowsPerUnit: number;
  cols: number;
  rounds: number;
  /** One root per unit, in unit order. */
  roots: readonly Hex[];
  /** What the attestor asked to open. */
  picks: readonly { unit: number; index: number }[];
  response: OpenResponseMessage;
  recompute?: RowRecomputer;
  hash?: Sha256;
};

/** Checks opened rows: each hashes to its unit's root at its index, then each is the exact product of its unit's matrices. */
export async function verifyOpening(input: VerifyOpeningInput): Promise<OpeningCheck> {
  const { response, picks, cols } = input;
  const hash = input.hash ?? pureSha256;
  const key = (unit: number, index: number) => `${unit}:${index}`;
  const wanted = new Set(picks.map((p) => key(p.unit, p.index)));
  const byKey = new Map<string, OpenResponseMessage["rows"][number]>();
  for (const row of response.rows) {
    const k = key(row.unit, row.index);
    if (!wanted.has(k)) return { ok: false, reason: "malformed", detail: `unit ${row.unit} row ${row.index} was not asked for` };
    if (byKey.has(k)) return { ok: false, reason: "malformed", detail: `unit ${row.unit} row ${row.index} sent twice` };
    byKey.set(k, row);
  }
  for (const pick of picks) {
    if (!byKey.has(key(pick.unit, pick.index))) return { ok: false, reason: "malformed", detail: `unit ${pick.unit} row ${pick.index} missing` };
  }
  const idBytes = hexToBytes(input.challengeId);
  const depth = treeDepth(input.rowsPerUnit);
  const byUnit = new Map<number, { index: number; data: Int32Array }[]>();
  for (const pick of picks) {
    const row = byKey.get(key(pick.unit, pick.index))!;
    const root = input.roots[pick.unit];
    if (root === undefined) return { ok: false, reason: "malformed", detail: `unit ${pick.unit} has no root` };
    const data = hexToBytes(row.data as Hex);
    const where = `unit ${pick.unit} row ${pick.index}`;
    if (data.length !== cols * 4) return { ok: false, reason: "malformed", detail: `${where} has ${data.length} bytes, expected ${cols * 4}` };
    if (row.proof.length !== depth) return { ok: false, reason: "bad_proof", detail: `${where}: proof of ${row.proof.length} hashes, the tree has depth ${depth}` };
    const leaf = leafHash(unitLeafKeyBytes(idBytes, pick.unit), pick.index, data, hash);
    const proof = row.proof.map((sibling) => hexToBytes(sibling));
    if (!verifyMerkleProof(hexToBytes(root), leaf, pick.index, input.rowsPerUnit, proof, hash)) {
      return { ok: false, reason: "bad_proof", detail: `${where} does not hash to the unit's committed root` };
    }
    const list = byUnit.get(pick.unit) ?? [];
    list.push({ index: pick.index, data: rowFromBytes(data) });
    byUnit.set(pick.unit, list);
  }
  const recompute = input.recompute ?? recomputeRowsInline;
  const seed = hexToBytes(input.seed);
  for (const [unit, list] of byUnit) {
    const expected = await recompute({ seed: unitSeedBytes(seed, unit), cols, rounds: input.rounds, indices: list.map((row) => row.index) });
    for (const [i, row] of list.entries()) {
      if (!rowsEqual(expected[i]!, row.data)) return { ok: false, reason: "wrong_rows", detail: `unit ${unit} row ${row.index} is not the product of the unit's matrices` };
    }
  }
  return { ok: true };
}

/** Encodes an opened row's data for the wire. */
export function encodeRowData(bytes: Uint8Array): Hex {
  return bytesToHex(bytes);
}

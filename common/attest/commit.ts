/**
 * The provider's signed commit and the evidence it makes of a wrong answer.
 *
 * A provider signs its commit (EIP-712 `AttestCommit` in the deployment's Suanli domain, so the
 * chain id and the market are bound; the challenge id binds the attestor's seed, the machine and
 * the claim). Every opened row carries a Merkle proof to that root, so a row that is not the
 * product the seed defines, under a root the provider signed, is proof that the provider answered
 * falsely: anyone holding the attestor-signed challenge, the provider-signed commit and the row
 * can check it (`verifyCommitFraud`), without trusting the attestor that reports it. The attestor
 * keeps this transcript with the failure (node/attest/challenge/results.ts) for slashing (docs/attestation.md,
 * "Slashable evidence").
 *
 * Pure: viem and @noble only (the SDK and browsers may import it).
 */
import { hashTypedData, hexToBytes, keccak256, recoverAddress, stringToBytes, type Address, type Hex, type TypedDataDomain } from "viem";
import { z } from "zod";
import { signTyped, type TypedDataSigner } from "../chain/sign.js";
import { verifyChallengeSignature } from "./challenge.js";
import { rowFromBytes, rowsEqual } from "./arithmetic.js";
import { leafHash, treeDepth, verifyMerkleProof, pureSha256 } from "./merkle.js";
import { challengeMessageSchema, commitMessageSchema, openedRowSchema, type ChallengeMessage, type CommitMessage, type OpenedRowMessage } from "./messages.js";
import { MAX_OPEN_ROWS } from "./params.js";
import { unitLeafKeyBytes, unitSeedBytes } from "./units.js";
import { recomputeRowsInline, type RowRecomputer } from "./verify.js";

/**
 * EIP-712 type the provider signs over its commit (v2): one root per unit and the GPU UUID of each
 * unit, in unit order, so a wrong row in any unit's tree is evidence and each unit is bound to the
 * device the provider named for it.
 */
export const attestCommitTypes = {
  AttestCommitV2: [
    { name: "challengeId", type: "bytes32" },
    { name: "rowsPerUnit", type: "uint32" },
    { name: "roots", type: "bytes32[]" },
    { name: "devices", type: "string[]" },
  ],
} as const;

export type CommitFields = { challengeId: Hex; rowsPerUnit: number; roots: readonly Hex[]; devices: readonly string[] };

/** `gpus` when the runner names no device (the CPU reference runner). */
export const NO_GPUS: Hex = `0x${"00".repeat(32)}`;

/**
 * The `gpus` of an attestation: keccak256 of the commit's device UUIDs (as the driver prints them, e.g.
 * "GPU-5e0c…"), sorted and joined by newlines; NO_GPUS for none.
 */
export function gpusHash(uuids: readonly string[]): Hex {
  if (!uuids.length) return NO_GPUS;
  return keccak256(
    stringToBytes(
      byteOrder(uuids)
        .map((i) => uuids[i]!)
        .join("\n"),
    ),
  );
}

/** The indices of `values` in ascending UTF-8 byte order (the order AttestorStaking checks; for ASCII, JavaScript's). */
function byteOrder(values: readonly string[]): number[] {
  const bytes = values.map((value) => stringToBytes(value));
  return values.map((_, i) => i).sort((a, b) => compareBytes(bytes[a]!, bytes[b]!));
}

function compareBytes(x: Uint8Array, y: Uint8Array): number {
  const n = Math.min(x.length, y.length);
  for (let i = 0; i < n; i++) if (x[i] !== y[i]) return x[i]! - y[i]!;
  return x.length - y.length;
}

/**
 * A passed challenge's signed commit as AttestorStaking.answerDispute takes it: the per-unit roots
 * and devices in unit order (as signed), and the devices' byte order, which the contract checks
 * against the attestation's `gpus` without sorting on-chain.
 */
export function disputeCommitArgs(commit: { rowsPerUnit: number; roots: readonly Hex[]; devices: readonly string[] }) {
  return { rowsPerUnit: commit.rowsPerUnit, roots: [...commit.roots], devices: [...commit.devices], sortedOrder: commit.devices.length ? byteOrder(commit.devices) : [] };
}

function typedData(domain: TypedDataDomain, fields: CommitFields) {
  return {
    domain,
    types: attestCommitTypes,
    primaryType: "AttestCommitV2" as const,
    message: { challengeId: fields.challengeId, rowsPerUnit: fields.rowsPerUnit, roots: [...fields.roots], devices: [...fields.devices] },
  };
}

/** The digest the provider signs. */
export function commitDigest(domain: TypedDataDomain, fields: CommitFields): Hex {
  return hashTypedData(typedData(domain, fields));
}

/** Signs a commit with the provider's wallet. */
export async function signCommit(account: TypedDataSigner, domain: TypedDataDomain, fields: CommitFields): Promise<Hex> {
  return signTyped(account, typedData(domain, fields));
}

/** The address that signed a commit message, or undefined when the signature recovers to nothing. */
export async function commitSigner(domain: TypedDataDomain, commit: CommitMessage): Promise<Address | undefined> {
  try {
    return await recoverAddress({ hash: commitDigest(domain, commit), signature: commit.signature });
  } catch {
    return undefined;
  }
}

/** A transcript that shows a provider signed a wrong answer: what the attestor stores with a `wrong_rows` failure. */
export const commitFraudProofSchema = z.strictObject({
  /** The challenge as the attestor signed and sent it. */
  challenge: challengeMessageSchema,
  /** The provider's signed commit. */
  commit: commitMessageSchema,
  /** Opened rows with their Merkle proofs (at least one of them wrong). */
  rows: z.array(openedRowSchema).min(1).max(MAX_OPEN_ROWS),
});
export type CommitFraudProof = z.output<typeof commitFraudProofSchema>;

export type CommitFraudVerdict =
  | { proven: true; provider: Address; attestor: Address; challengeId: Hex; wrongRows: { unit: number; index: number }[] }
  | { proven: false; reason: "malformed" | "bad_challenge" | "not_signed_by_provider" | "other_challenge" | "bad_proof" | "rows_correct"; detail: string };

/**
 * Checks a fraud proof: the challenge is signed by its attestor, the commit is for it and signed
 * by the challenge's provider, every row proves into its unit's signed root, and at least one row
 * is not the product its unit's seed defines (a wrong row in any unit's tree is proof). `proven` names the provider to slash and the wrong rows. The
 * caller decides whether the attestor was in the attestor set when it signed the challenge.
 */
export async function verifyCommitFraud(domain: TypedDataDomain, input: unknown, options: { recompute?: RowRecomputer } = {}): Promise<CommitFraudVerdict> {
  const parsed = commitFraudProofSchema.safeParse(input);
  if (!parsed.success) return { proven: false, reason: "malformed", detail: parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ") };
  const { challenge, commit, rows } = parsed.data;
  const challengeCheck = await verifyChallengeSignature(domain, challenge);
  if (!challengeCheck.ok)
    return {
      proven: false,
      reason: "bad_challenge",
      detail: `the challenge's ${challengeCheck.reason === "bad_id" ? "id does not match its fields" : "signature is not its attestor's"}`,
    };
  if (commit.challengeId.toLowerCase() !== challenge.id.toLowerCase())
    return { proven: false, reason: "other_challenge", detail: `the commit is for ${commit.challengeId}, not ${challenge.id}` };
  if (commit.rowsPerUnit !== challenge.rowsPerUnit || commit.roots.length !== challenge.units) {
    return {
      proven: false,
      reason: "malformed",
      detail: `the commit covers ${commit.roots.length} units of ${commit.rowsPerUnit} rows, the challenge has ${challenge.units} of ${challenge.rowsPerUnit}`,
    };
  }
  const signer = await commitSigner(domain, commit);
  if (!signer || signer.toLowerCase() !== challenge.provider.toLowerCase()) {
    return { proven: false, reason: "not_signed_by_provider", detail: `the commit is signed by ${signer ?? "nobody"}, not the challenge's provider ${challenge.provider}` };
  }
  const check = await checkRowsAgainstRoot(challenge, commit, rows, options.recompute);
  if (!check.ok) return { proven: false, reason: check.reason, detail: check.detail };
  if (!check.wrong.length) return { proven: false, reason: "rows_correct", detail: "every row is the product the challenge's seed defines" };
  return { proven: true, provider: signer, attestor: challengeCheck.attestor, challengeId: challenge.id, wrongRows: check.wrong };
}

async function checkRowsAgainstRoot(
  challenge: ChallengeMessage,
  commit: CommitMessage,
  rows: readonly OpenedRowMessage[],
  recompute: RowRecomputer = recomputeRowsInline,
): Promise<{ ok: true; wrong: { unit: number; index: number }[] } | { ok: false; reason: "malformed" | "bad_proof"; detail: string }> {
  const idBytes = hexToBytes(challenge.id);
  const seed = hexToBytes(challenge.seed);
  const depth = treeDepth(challenge.rowsPerUnit);
  const keys = rows.map((row) => `${row.unit}:${row.index}`);
  if (new Set(keys).size !== keys.length) return { ok: false, reason: "malformed", detail: "a row appears twice" };
  const byUnit = new Map<number, { index: number; data: Int32Array }[]>();
  for (const row of rows) {
    const root = commit.roots[row.unit];
    if (root === undefined) return { ok: false, reason: "malformed", detail: `unit ${row.unit} is outside the challenge's ${challenge.units} units` };
    if (row.index >= challenge.rowsPerUnit) return { ok: false, reason: "malformed", detail: `row ${row.index} is outside the unit's ${challenge.rowsPerUnit} rows` };
    const data = hexToBytes(row.data as Hex);
    if (data.length !== challenge.cols * 4) return { ok: false, reason: "malformed", detail: `row ${row.index} has ${data.length} bytes, expected ${challenge.cols * 4}` };
    if (
      row.proof.length !== depth ||
      !verifyMerkleProof(
        hexToBytes(root),
        leafHash(unitLeafKeyBytes(idBytes, row.unit), row.index, data, pureSha256),
        row.index,
        challenge.rowsPerUnit,
        row.proof.map((s) => hexToBytes(s)),
        pureSha256,
      )
    ) {
      return { ok: false, reason: "bad_proof", detail: `unit ${row.unit} row ${row.index} does not hash to the signed root: it is not what the provider committed` };
    }
    const list = byUnit.get(row.unit) ?? [];
    list.push({ index: row.index, data: rowFromBytes(data) });
    byUnit.set(row.unit, list);
  }
  const wrong: { unit: number; index: number }[] = [];
  for (const [unit, list] of byUnit) {
    const expected = await recompute({ seed: unitSeedBytes(seed, unit), cols: challenge.cols, rounds: challenge.rounds, indices: list.map((r) => r.index) });
    list.forEach((row, i) => {
      if (!rowsEqual(expected[i]!, row.data)) wrong.push({ unit, index: row.index });
    });
  }
  return { ok: true, wrong };
}

/**
 * Wire messages of the memory phase (memory.ts), versioned and parsed with zod before use:
 *
 *   attestor → provider  MemChallenge   per-unit seeds, buffer size, walk shape, fill deadline
 *   provider → attestor  MemFilled      every unit's buffer is full (timed)
 *   attestor → provider  MemWalk        the walk nonce, sent only now; walk deadline
 *   provider → attestor  MemCommit      per-unit walk roots and GPU UUIDs, signed by the provider
 *   attestor → provider  MemOpen        walks picked at random after the commit
 *   provider → attestor  MemWalks       their results with Merkle proofs
 *
 * The phase runs inside the session of a signed GEMM challenge (`challengeId`); its own `id`
 * (memChallengeId) covers every field the provider computes from, and the provider's signed
 * commit (`AttestMemoryCommit`) binds the roots and the GPU UUID of each unit to it.
 */
import { hashTypedData, keccak256, recoverAddress, stringToBytes, type Address, type Hex, type LocalAccount, type TypedDataDomain } from "viem";
import { z } from "zod";
import { bytes32Schema, signatureSchema } from "../schemas.js";
import { MAX_TREE_DEPTH } from "./merkle.js";
import { MAX_OPEN_WALKS, MAX_UNITS, MAX_WALKS } from "./memory-params.js";

/** Version carried in every memory-phase message (`v`). */
export const MEMORY_PROTOCOL_VERSION = 1;

const timeMs = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);
const v = z.literal(MEMORY_PROTOCOL_VERSION);
const gpuUuid = z
  .string()
  .min(1)
  .max(128)
  .regex(/^[\x21-\x7e]+$/, "expected printable ASCII without spaces");

export const memChallengeFieldsSchema = z.strictObject({
  /** The GEMM challenge whose session this phase belongs to. */
  challengeId: bytes32Schema,
  /** One fresh 32-byte seed per unit. */
  seeds: z.array(bytes32Schema).min(1).max(MAX_UNITS),
  words: z
    .number()
    .int()
    .min(2)
    .max(Number.MAX_SAFE_INTEGER / 2),
  hashIterations: z
    .number()
    .int()
    .min(1)
    .max(1 << 20),
  walks: z.number().int().min(1).max(MAX_WALKS),
  steps: z
    .number()
    .int()
    .min(1)
    .max(1 << 20),
  issuedAtMs: timeMs,
  fillDeadlineAtMs: timeMs,
  fillCutoffAtMs: timeMs,
});
export type MemChallengeFields = z.output<typeof memChallengeFieldsSchema>;

/** keccak256 of the fields as canonical JSON (keys in schema order): the phase's id. */
export function memChallengeId(f: MemChallengeFields): Hex {
  const canonical = [f.challengeId, f.seeds, f.words, f.hashIterations, f.walks, f.steps, f.issuedAtMs, f.fillDeadlineAtMs, f.fillCutoffAtMs];
  return keccak256(stringToBytes(JSON.stringify(["suanli/attest/v1/mem-challenge", ...canonical]).toLowerCase()));
}

export const memChallengeSchema = memChallengeFieldsSchema
  .extend({ v, type: z.literal("mem-challenge"), id: bytes32Schema })
  .refine((m) => m.issuedAtMs <= m.fillDeadlineAtMs && m.fillDeadlineAtMs <= m.fillCutoffAtMs, {
    message: "expected issuedAtMs <= fillDeadlineAtMs <= fillCutoffAtMs",
    path: ["fillDeadlineAtMs"],
  })
  .refine((m) => memChallengeId(m).toLowerCase() === m.id.toLowerCase(), { message: "the id does not match the fields", path: ["id"] });
export type MemChallenge = z.output<typeof memChallengeSchema>;

export const memFilledSchema = z.strictObject({ v, type: z.literal("mem-filled"), id: bytes32Schema });
export type MemFilled = z.output<typeof memFilledSchema>;

export const memWalkSchema = z
  .strictObject({ v, type: z.literal("mem-walk"), id: bytes32Schema, nonce: bytes32Schema, issuedAtMs: timeMs, deadlineAtMs: timeMs, cutoffAtMs: timeMs })
  .refine((m) => m.issuedAtMs <= m.deadlineAtMs && m.deadlineAtMs <= m.cutoffAtMs, { message: "expected issuedAtMs <= deadlineAtMs <= cutoffAtMs", path: ["deadlineAtMs"] });
export type MemWalk = z.output<typeof memWalkSchema>;

export const memCommitSchema = z
  .strictObject({
    v,
    type: z.literal("mem-commit"),
    id: bytes32Schema,
    /** Merkle root over each unit's walk results, index = unit. */
    roots: z.array(bytes32Schema).min(1).max(MAX_UNITS),
    /** The GPU UUID that ran each unit, index = unit; empty for a runner that names no device (CPU). */
    gpus: z.array(gpuUuid).max(MAX_UNITS),
    /** EIP-712 `AttestMemoryCommit` by the provider's wallet. */
    signature: signatureSchema,
  })
  .refine((m) => m.gpus.length === 0 || m.gpus.length === m.roots.length, { message: "expected one GPU UUID per unit, or none", path: ["gpus"] });
export type MemCommit = z.output<typeof memCommitSchema>;

const walkRef = z.strictObject({
  unit: z
    .number()
    .int()
    .min(0)
    .max(MAX_UNITS - 1),
  index: z
    .number()
    .int()
    .min(0)
    .max(MAX_WALKS - 1),
});

export const memOpenSchema = z
  .strictObject({ v, type: z.literal("mem-open"), id: bytes32Schema, walks: z.array(walkRef).min(1).max(MAX_OPEN_WALKS) })
  .refine((m) => new Set(m.walks.map((w) => `${w.unit}:${w.index}`)).size === m.walks.length, { message: "walks must be distinct", path: ["walks"] });
export type MemOpen = z.output<typeof memOpenSchema>;

export const openedWalkSchema = walkRef.extend({
  /** The walk's result: two uint32 little-endian, 0x + 16 hex digits. */
  result: z.string().regex(/^0x[0-9a-fA-F]{16}$/, "expected 0x followed by 16 hex digits"),
  proof: z.array(bytes32Schema).max(MAX_TREE_DEPTH),
});
export type OpenedWalk = z.output<typeof openedWalkSchema>;

export const memWalksSchema = z.strictObject({ v, type: z.literal("mem-walks"), id: bytes32Schema, walks: z.array(openedWalkSchema).min(1).max(MAX_OPEN_WALKS) });
export type MemWalks = z.output<typeof memWalksSchema>;

/** Any message a provider receives in the memory phase. */
export const memRequestSchema = z.union([memChallengeSchema, memWalkSchema, memOpenSchema]);

/** Why a machine failed the memory phase (stable codes). */
export const MEMORY_FAILURE_REASONS = [
  "malformed",
  "slow_fill",
  "late_fill",
  "slow_walk",
  "late_commit",
  "bad_commit_signature",
  "duplicate_gpus",
  "bad_proof",
  "wrong_walks",
  "late_open",
  "replayed",
] as const;
export type MemoryFailureReason = (typeof MEMORY_FAILURE_REASONS)[number];

export const attestMemoryCommitTypes = {
  AttestMemoryCommit: [
    { name: "id", type: "bytes32" },
    { name: "roots", type: "bytes32" },
    { name: "gpus", type: "bytes32" },
  ],
} as const;

/** keccak256 of the roots concatenated in unit order. */
export function rootsHash(roots: readonly Hex[]): Hex {
  return keccak256(`0x${roots.map((root) => root.slice(2).toLowerCase()).join("")}`);
}

/** keccak256 of the UUIDs in unit order joined by newlines (order matters: it binds each unit to its GPU); zero for none. */
export function unitGpusHash(uuids: readonly string[]): Hex {
  if (!uuids.length) return `0x${"00".repeat(32)}`;
  return keccak256(stringToBytes(uuids.join("\n")));
}

function typedData(domain: TypedDataDomain, id: Hex, roots: readonly Hex[], gpus: readonly string[]) {
  return { domain, types: attestMemoryCommitTypes, primaryType: "AttestMemoryCommit" as const, message: { id, roots: rootsHash(roots), gpus: unitGpusHash(gpus) } };
}

/** The provider signs its memory commit. */
export async function signMemCommit(account: Pick<LocalAccount, "signTypedData">, domain: TypedDataDomain, id: Hex, roots: readonly Hex[], gpus: readonly string[]): Promise<Hex> {
  return account.signTypedData(typedData(domain, id, roots, gpus));
}

/** The signer of a memory commit, or undefined. */
export async function memCommitSigner(domain: TypedDataDomain, commit: MemCommit): Promise<Address | undefined> {
  try {
    return await recoverAddress({ hash: hashTypedData(typedData(domain, commit.id, commit.roots, commit.gpus)), signature: commit.signature });
  } catch {
    return undefined;
  }
}

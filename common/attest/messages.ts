/**
 * Wire messages of the proof-of-capacity challenge, transport-agnostic (the attest protocol over
 * libp2p carries them as JSON). Every message is parsed with these schemas before anything reads
 * it; bigints do not occur, times are unix milliseconds on the attestor's clock, byte strings are
 * 0x hex.
 *
 *   attestor → provider  ChallengeMessage
 *   provider → attestor  CommitMessage        (before the deadline)   or RefusalMessage
 *   attestor → provider  OpenRequestMessage   (rows picked at random after the commit)
 *   provider → attestor  OpenResponseMessage  (rows + Merkle proofs)
 *
 * Version 2: the GEMM phase is one sub-challenge per declared unit, all run at once (units.ts):
 * each unit has its own seed (derived from the challenge's), its own `rowsPerUnit` rows, its own
 * Merkle root and GPU UUID; rows are opened per unit. Version 1 (one tree for the whole machine)
 * is not accepted: a v1 message is answered with an error naming the version (LEGACY_V1).
 */
import { boundedGpuEvidenceSchema, MAX_CC_EVIDENCE_JSON_BYTES } from "./cc.js";
import { z } from "zod";
import { canonicalGpuName, knownGpuNames } from "../gpu.js";
import { addressSchema, bytes32Schema, signatureSchema } from "../schemas.js";
import { MAX_COLS } from "./arithmetic.js";
import { MAX_TREE_DEPTH } from "./merkle.js";
import { MAX_OPEN_ROWS, MAX_ROWS, MAX_UNITS } from "./params.js";

/** Protocol version carried in every message (`v`). */
export const ATTEST_PROTOCOL_VERSION = 2 as const;

/** What a v2 node says to a peer that sent a version-1 message (one Merkle tree for the whole machine). */
export const LEGACY_V1_MESSAGE =
  "attest protocol v1 (one answer for the whole machine) is no longer accepted: this node speaks v2 (one sub-challenge per unit, docs/attestation.md); upgrade the peer's node";

/** Any version-1 message of this protocol: recognised only to answer it with LEGACY_V1_MESSAGE. */
export const legacyV1MessageSchema = z.looseObject({
  v: z.literal(1),
  type: z.enum(["challenge", "open", "result", "commit", "rows", "refused", "ack"]),
  id: bytes32Schema.optional(),
  challengeId: bytes32Schema.optional(),
});
export type LegacyV1Message = z.output<typeof legacyV1MessageSchema>;

const uint16 = z
  .number()
  .int()
  .min(0)
  .max(2 ** 16 - 1);
const uint32 = z
  .number()
  .int()
  .min(0)
  .max(2 ** 32 - 1);
const timeMs = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);
const rowIndex = z
  .number()
  .int()
  .min(0)
  .max(MAX_ROWS - 1);

const unitIndex = z
  .number()
  .int()
  .min(0)
  .max(MAX_UNITS - 1);

const canonicalModelSchema = z
  .string()
  .min(1)
  .max(64)
  .refine((name) => canonicalGpuName(name) === name, { message: `expected a canonical GPU model name (${knownGpuNames().join(", ")}), MIG slices as MODEL/PROFILE` });

/** The fields of a challenge that its id and the attestor's signature cover. */
export const challengeFieldsSchema = z.strictObject({
  /** The attestor that issued it; the signature must recover to this address. */
  attestor: addressSchema,
  provider: addressSchema,
  machineId: uint32.min(1),
  /** Canonical model name as declared on-chain (keccak256 of it is the typed data's `model`). */
  model: canonicalModelSchema,
  units: uint16.min(1).max(MAX_UNITS),
  vramMiB: uint32,
  /** 32 fresh random bytes: each unit's seed, and so its matrices, are derived from it (units.ts unitSeed). */
  seed: bytes32Schema,
  /** Rows of each unit's sub-challenge (every unit computes this many rows of its own product). */
  rowsPerUnit: z.number().int().min(1).max(MAX_ROWS),
  cols: z.number().int().min(16).max(MAX_COLS).multipleOf(16),
  rounds: z.number().int().min(1).max(1024),
  issuedAtMs: timeMs,
  /** A commit received after this is late for the claimed class. */
  deadlineAtMs: timeMs,
  /** The attestor stops waiting for a commit here; a provider may drop the challenge after it. */
  cutoffAtMs: timeMs,
});
export type ChallengeFields = z.output<typeof challengeFieldsSchema>;

export const challengeMessageSchema = challengeFieldsSchema
  .extend({
    v: z.literal(ATTEST_PROTOCOL_VERSION),
    type: z.literal("challenge"),
    /** EIP-712 digest of the fields (see challenge.ts): binds attestor, provider, machine, seed and times. */
    id: bytes32Schema,
    /** The attestor's signature of `id`. */
    signature: signatureSchema,
  })
  .refine((m) => m.issuedAtMs <= m.deadlineAtMs && m.deadlineAtMs <= m.cutoffAtMs, {
    message: "expected issuedAtMs <= deadlineAtMs <= cutoffAtMs",
    path: ["deadlineAtMs"],
  })
  .refine((m) => m.rowsPerUnit * m.units <= MAX_ROWS * MAX_UNITS, { message: "too many rows", path: ["rowsPerUnit"] });
export type ChallengeMessage = z.output<typeof challengeMessageSchema>;

const deviceUuid = z.string().min(1).max(128);

export const commitMessageSchema = z
  .strictObject({
    v: z.literal(ATTEST_PROTOCOL_VERSION),
    type: z.literal("commit"),
    challengeId: bytes32Schema,
    /** Rows each unit's root covers; must equal the challenge's rowsPerUnit. */
    rowsPerUnit: z.number().int().min(1).max(MAX_ROWS),
    /** One Merkle root per unit, in unit order (merkle.ts, leaves bound to units.ts unitLeafKey(id, unit)). */
    roots: z.array(bytes32Schema).min(1).max(MAX_UNITS),
    /**
     * The UUID of the GPU that computed each unit's sub-challenge, in unit order, as the runner
     * names them ("GPU-…"); empty when the runner names none (the CPU reference runner).
     */
    devices: z.array(deviceUuid).max(MAX_UNITS),
    /**
     * The provider's EIP-712 signature of (challengeId, rowsPerUnit, roots, devices) as `AttestCommitV2` (commit.ts):
     * a wrong opened row under a signed root is evidence against the provider.
     */
    signature: signatureSchema,
    /**
     * Confidential-computing evidence, one per unit in unit order, when the provider's GPUs run in
     * CC mode (cc.ts): each GPU's signed measurements for a request whose nonce is the challenge
     * id. Outside the commit's signature: the GPU's own signature binds it to the challenge.
     */
    cc: z.array(boundedGpuEvidenceSchema).min(1).max(MAX_UNITS).optional(),
  })
  .refine((m) => m.devices.length === 0 || m.devices.length === m.roots.length, { message: "expected one device per root, or none", path: ["devices"] })
  .refine((m) => m.cc === undefined || m.cc.length === m.roots.length, { message: "expected one piece of CC evidence per root, or none", path: ["cc"] });
export type CommitMessage = z.output<typeof commitMessageSchema>;

export const openRequestMessageSchema = z.strictObject({
  v: z.literal(ATTEST_PROTOCOL_VERSION),
  type: z.literal("open"),
  challengeId: bytes32Schema,
  /** The rows to open, per unit (every unit gets at least one: units.ts openPerUnit). */
  picks: z
    .array(z.strictObject({ unit: unitIndex, index: rowIndex }))
    .min(1)
    .max(MAX_OPEN_ROWS)
    .refine((picks) => new Set(picks.map((p) => `${p.unit}:${p.index}`)).size === picks.length, { message: "picks must be distinct" }),
});
export type OpenRequestMessage = z.output<typeof openRequestMessageSchema>;

export const openedRowSchema = z.strictObject({
  /** The unit whose sub-challenge the row belongs to. */
  unit: unitIndex,
  index: rowIndex,
  /** The row's cols int32 values, little-endian, as 0x hex (8·cols hex digits). */
  data: z
    .string()
    .max(2 + MAX_COLS * 8)
    .regex(/^0x([0-9a-fA-F]{8})+$/, "expected 0x followed by 8 hex digits per int32"),
  /** Sibling hashes from the leaf level up. */
  proof: z.array(bytes32Schema).max(MAX_TREE_DEPTH),
});
export type OpenedRowMessage = z.output<typeof openedRowSchema>;

export const openResponseMessageSchema = z.strictObject({
  v: z.literal(ATTEST_PROTOCOL_VERSION),
  type: z.literal("rows"),
  challengeId: bytes32Schema,
  rows: z.array(openedRowSchema).min(1).max(MAX_OPEN_ROWS),
});
export type OpenResponseMessage = z.output<typeof openResponseMessageSchema>;

/** Why a provider declined a challenge (stable codes). */
export const REFUSAL_REASONS = [
  "bad_signature",
  "not_attestor",
  "wrong_provider",
  "unknown_machine",
  "claim_mismatch",
  "expired",
  "too_large",
  "busy",
  "duplicate",
  "runner_failed",
  "unsupported_version",
  // Signed by the provider (refusal.ts), checked by the attestor, never the provider's failure:
  /** The challenge's window or size is out of the protocol's bounds (bounds.ts). */
  "out_of_bounds",
  /** The attestor has held the provider's slot for its share of the last hour (bounds.ts MAX_ATTESTOR_SLOT_MS). */
  "attestor_share",
  /** The leased machine's check budget is spent for this attestor (bounds.ts leaseCheckLimitMs). */
  "lease_budget",
] as const;
export type RefusalReason = (typeof REFUSAL_REASONS)[number];

export const refusalMessageSchema = z.strictObject({
  v: z.literal(ATTEST_PROTOCOL_VERSION),
  type: z.literal("refused"),
  challengeId: bytes32Schema,
  reason: z.enum(REFUSAL_REASONS),
  message: z.string().max(512),
  /** With a signed reason (refusal.ts): the attestor's use the provider counted and the limit it met, in ms. */
  usage: z.strictObject({ attestorMs: timeMs, limitMs: timeMs }).optional(),
  /** With a signed reason: the provider's EIP-712 signature of (challengeId, reason, usage) as `AttestRefusal`. */
  signature: signatureSchema.optional(),
});
export type RefusalMessage = z.output<typeof refusalMessageSchema>;

/**
 * Why a machine failed a challenge (stable codes, what the attestor reports and logs):
 * - `wrong_rows`: an opened row is not the product the seed defines.
 * - `bad_proof`: an opened row does not hash to the committed root at its index.
 * - `late_commit`: no commit by the cutoff.
 * - `slow_for_class`: the commit came after the class deadline (the machine computes slower than the class it claims).
 * - `replayed`: the answer belongs to another (older) challenge.
 * - `late_open`: the rows did not come back within the open timeout.
 * - `busy_too_often`: no longer produced (a `busy` refusal is never the provider's failure, issue 35
 *   item 1); kept so that records and messages of older nodes still parse.
 * - `bad_commit_signature`: the commit is not signed by the challenge's provider (commit.ts).
 * - `duplicate_gpus`: two units' sub-challenges name the same GPU (one device cannot be two units),
 *   or a unit names a GPU another machine passed with within the attestor's reuse window (one
 *   device cannot back two machines: node/attest/cc/device-registry.ts).
 * - `missing_gpus`: the profile requires a GPU UUID per unit (`requireDevices`) and the commit names none.
 * - `cc_evidence`: the attestor requires confidential-computing evidence (`attest.cc.required`) and
 *   the commit carries none, or the evidence it carries does not verify for this challenge and class,
 *   names one device twice, or names a device another machine presented (node/attest/cc/cc-policy.ts).
 * - `malformed`: a message broke the protocol (schema, row count, missing rows, out of order).
 * - `refused`: the provider declined the challenge or its runner failed.
 * - `memory_phase`: the GEMM phase passed but the memory phase failed (memory-messages.ts; the
 *   detail starts with the memory phase's own reason, e.g. `slow_walk:`).
 * - `too_fast_for_class`: correct rows, committed at a rate above the claimed class's ceiling
 *   (datasheet × units × 1.15): the machine is another, faster class and must claim it.
 */
export const FAILURE_REASONS = [
  "wrong_rows",
  "bad_proof",
  "late_commit",
  "slow_for_class",
  "replayed",
  "late_open",
  "malformed",
  "refused",
  "bad_commit_signature",
  "busy_too_often",
  "memory_phase",
  "duplicate_gpus",
  "missing_gpus",
  "cc_evidence",
  "too_fast_for_class",
] as const;
export type FailureReason = (typeof FAILURE_REASONS)[number];

/** Upper bound on an open response's JSON size: transports cap reads with it. */
export function maxOpenResponseBytes(cols: number, openRows: number): number {
  const perRow = 64 + (2 + cols * 8) + MAX_TREE_DEPTH * 70;
  return 256 + openRows * perRow;
}

/** Upper bound on every other message's JSON size. */
export const MAX_CONTROL_MESSAGE_BYTES = 4096;

/**
 * Upper bound on a commit's JSON size (an attestor reads commits with it): one root (66 bytes
 * quoted) and one UUID (up to 128 characters, at most 6 bytes each JSON-escaped) per unit, and at
 * most one piece of CC evidence per unit.
 */
export const MAX_COMMIT_MESSAGE_BYTES = MAX_CONTROL_MESSAGE_BYTES + MAX_UNITS * (70 + 128 * 6 + 4 + MAX_CC_EVIDENCE_JSON_BYTES);

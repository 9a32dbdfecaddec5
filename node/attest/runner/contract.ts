/**
 * The stdin/stdout contract of an external runner program (docs/attestation.md, "Runner
 * contract"): one JSON object per line each way; stdout carries protocol lines only, stderr is
 * free-form logging. One challenge at a time, in order.
 *
 *   runner → node   {"type":"hello","protocol":"suanli-attest-runner/2","name":"…"}          (first line)
 *   node → runner   {"type":"challenge","id":"0x…","rowsPerUnit":R,"cols":C,"rounds":N,"units":[{"seed":"0x…","leafKey":"0x…"},…]}
 *   runner → node   {"type":"commit","id":"0x…","rowsPerUnit":R,"units":[{"root":"0x…","device":"GPU-…","cc":{…}},…],"computeMs":1234.5}
 *   node → runner   {"type":"open","id":"0x…","picks":[{"unit":u,"index":i},…]}
 *   runner → node   {"type":"rows","id":"0x…","rows":[{"unit":u,"index":i,"data":"0x…","proof":["0x…",…]},…]}
 *   node → runner   {"type":"release","id":"0x…"}                                            (no answer)
 *   runner → node   {"type":"error","id":"0x…"|null,"message":"…"}                           (instead of an answer)
 *
 * The memory phase (docs/attestation.md, "Memory phase"), for a runner whose hello lists the
 * `memory` capability ({"type":"hello",…,"capabilities":["memory"]}):
 *
 *   node → runner   {"type":"mem-fill","id":"0x…","words":N,"hashIterations":K,"walks":W,"steps":L,"units":[{"seed":"0x…"},…]}
 *   runner → node   {"type":"mem-filled","id":"0x…"}
 *   node → runner   {"type":"mem-walk","id":"0x…","nonce":"0x…"}
 *   runner → node   {"type":"mem-commit","id":"0x…","units":[{"root":"0x…","device":"GPU-…"},…]}
 *   node → runner   {"type":"mem-open","id":"0x…","walks":[{"unit":u,"index":w},…]}
 *   runner → node   {"type":"mem-walks","id":"0x…","walks":[{"unit":u,"index":w,"result":"0x…","proof":["0x…",…]},…]}
 *   node → runner   {"type":"mem-release","id":"0x…"}                                        (no answer)
 *
 * Version 2: one sub-challenge per unit, computed at once, one root (and device) per unit. A
 * program that says hello with another protocol is stopped with an error naming both versions.
 * End of stdin means exit.
 */
import { z } from "zod";
import { bytes32Schema } from "../../../common/schemas.js";
import { boundedGpuEvidenceSchema } from "../../../common/attest/cc.js";
import { openResponseMessageSchema } from "../../../common/attest/messages.js";
import { MAX_OPEN_WALKS, MAX_UNITS as MAX_MEMORY_UNITS } from "../../../common/attest/memory-params.js";
import { openedWalkSchema } from "../../../common/attest/memory-messages.js";
import { MAX_ROWS, MAX_UNITS } from "../../../common/attest/params.js";
import { RUNNER_PROTOCOL } from "./contract-version.js";

export { RUNNER_PROTOCOL };

/** A line longer than this is a broken runner (rows of 65536 columns × 64 rows fit). */
export const RUNNER_MAX_LINE_BYTES = 40 * 1024 * 1024;

export const runnerHelloSchema = z.object({
  type: z.literal("hello"),
  /** Checked against RUNNER_PROTOCOL after parsing, so an older program gets an error naming its version. */
  protocol: z.string().min(1).max(64),
  name: z.string().min(1).max(128),
  /** Optional parts of the contract the program implements: `memory` (the memory phase's requests). Unknown names are ignored. */
  capabilities: z.array(z.string().min(1).max(32)).max(16).optional(),
});

/** The capability a runner's hello lists when it answers the memory phase's requests. */
export const MEMORY_CAPABILITY = "memory";

export const runnerCommitSchema = z.object({
  type: z.literal("commit"),
  id: bytes32Schema,
  rowsPerUnit: z.number().int().min(1).max(MAX_ROWS),
  /**
   * One entry per unit, in unit order: its root, the UUID of the GPU that computed it (nvidia-smi
   * -L's "GPU-…"; absent for none) and, from a GPU in confidential-computing mode, its signed
   * measurements for a request whose nonce is ccEvidenceNonce(id, unit, root) with the host's
   * `nvidia-smi conf-compute -f -grs` output as `mode` (`cc`; common/attest/cc.ts).
   */
  units: z
    .array(z.object({ root: bytes32Schema, device: z.string().min(1).max(128).optional(), cc: boundedGpuEvidenceSchema.optional() }))
    .min(1)
    .max(MAX_UNITS),
  computeMs: z.number().nonnegative().optional(),
});

export const runnerRowsSchema = z.object({
  type: z.literal("rows"),
  id: bytes32Schema,
  rows: openResponseMessageSchema.shape.rows,
});

export const runnerErrorSchema = z.object({
  type: z.literal("error"),
  id: bytes32Schema.nullable().optional(),
  message: z.string().max(4096),
});

/** Every unit's buffer is full. */
export const runnerMemFilledSchema = z.object({ type: z.literal("mem-filled"), id: bytes32Schema });

/** The walks are done: one Merkle root over each unit's walk results, and the GPU that held the unit's buffer. */
export const runnerMemCommitSchema = z.object({
  type: z.literal("mem-commit"),
  id: bytes32Schema,
  units: z
    .array(z.object({ root: bytes32Schema, device: z.string().min(1).max(128).optional() }))
    .min(1)
    .max(MAX_MEMORY_UNITS),
});

/** Opened walks with their proofs. */
export const runnerMemWalksSchema = z.object({
  type: z.literal("mem-walks"),
  id: bytes32Schema,
  walks: z.array(openedWalkSchema).min(1).max(MAX_OPEN_WALKS),
});

export const runnerLineSchema = z.discriminatedUnion("type", [
  runnerHelloSchema,
  runnerCommitSchema,
  runnerRowsSchema,
  runnerErrorSchema,
  runnerMemFilledSchema,
  runnerMemCommitSchema,
  runnerMemWalksSchema,
]);
export type RunnerLine = z.output<typeof runnerLineSchema>;

export type RunnerRequest =
  | { type: "challenge"; id: string; rowsPerUnit: number; cols: number; rounds: number; units: { seed: string; leafKey: string }[] }
  | { type: "open"; id: string; picks: { unit: number; index: number }[] }
  | { type: "release"; id: string }
  | { type: "mem-fill"; id: string; words: number; hashIterations: number; walks: number; steps: number; units: { seed: string }[] }
  | { type: "mem-walk"; id: string; nonce: string }
  | { type: "mem-open"; id: string; walks: { unit: number; index: number }[] }
  | { type: "mem-release"; id: string };

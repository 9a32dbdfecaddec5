/**
 * The stdin/stdout contract of an external runner program (docs/attestation.md, "Runner
 * contract"): one JSON object per line each way; stdout carries protocol lines only, stderr is
 * free-form logging. One challenge at a time, in order.
 *
 *   runner → node   {"type":"hello","protocol":"suanli-attest-runner/1","name":"…"}          (first line)
 *   node → runner   {"type":"challenge","id":"0x…","seed":"0x…","rows":R,"cols":C,"rounds":N,"units":U}
 *   runner → node   {"type":"commit","id":"0x…","root":"0x…","rows":R,"computeMs":1234.5}
 *   node → runner   {"type":"open","id":"0x…","indices":[…]}
 *   runner → node   {"type":"rows","id":"0x…","rows":[{"index":i,"data":"0x…","proof":["0x…",…]},…]}
 *   node → runner   {"type":"release","id":"0x…"}                                            (no answer)
 *   runner → node   {"type":"error","id":"0x…"|null,"message":"…"}                           (instead of an answer)
 *
 * End of stdin means exit.
 */
import { z } from "zod";
import { bytes32Schema } from "../../../common/schemas.js";
import { openResponseMessageSchema } from "../../../common/attest/messages.js";
import { MAX_ROWS } from "../../../common/attest/params.js";
import { RUNNER_PROTOCOL } from "./contract-version.js";

export { RUNNER_PROTOCOL };

/** A line longer than this is a broken runner (rows of 65536 columns × 64 rows fit). */
export const RUNNER_MAX_LINE_BYTES = 40 * 1024 * 1024;

export const runnerHelloSchema = z.object({
  type: z.literal("hello"),
  protocol: z.literal(RUNNER_PROTOCOL),
  name: z.string().min(1).max(128),
});

export const runnerCommitSchema = z.object({
  type: z.literal("commit"),
  id: bytes32Schema,
  root: bytes32Schema,
  rows: z.number().int().min(1).max(MAX_ROWS),
  computeMs: z.number().nonnegative().optional(),
  /** UUIDs of the GPUs that computed the answer (nvidia-smi -L's "GPU-…"), at most 64. */
  devices: z.array(z.string().min(1).max(128)).max(64).optional(),
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

export const runnerLineSchema = z.discriminatedUnion("type", [runnerHelloSchema, runnerCommitSchema, runnerRowsSchema, runnerErrorSchema]);
export type RunnerLine = z.output<typeof runnerLineSchema>;

export type RunnerRequest =
  | { type: "challenge"; id: string; seed: string; rows: number; cols: number; rounds: number; units: number }
  | { type: "open"; id: string; indices: number[] }
  | { type: "release"; id: string };

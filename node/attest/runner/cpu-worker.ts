/**
 * A worker thread of the CPU reference runner. Tasks: fill a slice of B in shared memory,
 * compute a range of answer rows and return their leaf hashes, or recompute given rows.
 */
import { parentPort } from "node:worker_threads";
import { ROW_BLOCK, computeAnswerRows, deriveMatrixKeys, generateMatrixB } from "../../../common/attest/arithmetic.js";
import { leafHash } from "../../../common/attest/merkle.js";
import { nodeSha256, rowBytesView } from "./hash.js";

export type WorkerTask =
  | { op: "genB"; seed: Uint8Array; cols: number; b: SharedArrayBuffer; from: number; to: number }
  | { op: "leaves"; seed: Uint8Array; challengeId: Uint8Array; cols: number; rounds: number; b: SharedArrayBuffer; from: number; to: number }
  | { op: "rows"; seed: Uint8Array; cols: number; rounds: number; b: SharedArrayBuffer; indices: number[] };

export type WorkerRequest = { taskId: number; task: WorkerTask };
export type WorkerReply = { taskId: number; ok: true; leaves?: Uint8Array; rows?: Int32Array[] } | { taskId: number; ok: false; message: string };

function run(task: WorkerTask): { leaves?: Uint8Array; rows?: Int32Array[] } {
  const keys = deriveMatrixKeys(task.seed);
  const b = new Int8Array(task.b);
  switch (task.op) {
    case "genB":
      generateMatrixB(keys, task.cols, b, task.from, task.to);
      return {};
    case "leaves": {
      const leaves = new Uint8Array((task.to - task.from) * 32);
      const outs = Array.from({ length: ROW_BLOCK }, () => new Int32Array(task.cols));
      const scratch = Array.from({ length: ROW_BLOCK }, () => new Int8Array(task.cols));
      for (let from = task.from; from < task.to; from += ROW_BLOCK) {
        const block = Array.from({ length: Math.min(ROW_BLOCK, task.to - from) }, (_, i) => from + i);
        const rows = computeAnswerRows(keys.a, b, block, task.cols, task.rounds, outs.slice(0, block.length), scratch.slice(0, block.length));
        rows.forEach((row, i) => leaves.set(leafHash(task.challengeId, block[i]!, rowBytesView(row), nodeSha256), (block[i]! - task.from) * 32));
      }
      return { leaves };
    }
    case "rows": {
      const rows: Int32Array[] = [];
      for (let i = 0; i < task.indices.length; i += ROW_BLOCK) rows.push(...computeAnswerRows(keys.a, b, task.indices.slice(i, i + ROW_BLOCK), task.cols, task.rounds));
      return { rows };
    }
  }
}

parentPort!.on("message", (request: WorkerRequest) => {
  let reply: WorkerReply;
  const transfer: ArrayBuffer[] = [];
  try {
    const result = run(request.task);
    reply = { taskId: request.taskId, ok: true, ...result };
    if (result.leaves) transfer.push(result.leaves.buffer as ArrayBuffer);
    for (const row of result.rows ?? []) transfer.push(row.buffer as ArrayBuffer);
  } catch (error) {
    reply = { taskId: request.taskId, ok: false, message: error instanceof Error ? error.message : String(error) };
  }
  parentPort!.postMessage(reply, transfer);
});

// Tells the pool the worker is loaded and listening.
parentPort!.postMessage({ ready: true });

/**
 * The reference external runner: a complete, single-threaded implementation of the runner
 * contract (contract.ts) on the CPU. GPU runner authors diff their program's commits against it;
 * the tests drive it as a real child process through ExternalRunner.
 *
 *   node --import tsx node/attest/runner/reference-runner.ts [--name NAME]
 */
import { createInterface } from "node:readline";
import { assertShape, computeAnswerRow, deriveMatrixKeys, generateMatrixB, type MatrixKeys } from "../../../common/attest/arithmetic.js";
import { MAX_TREE_DEPTH, MerkleTree, leafHash } from "../../../common/attest/merkle.js";
import { RUNNER_PROTOCOL } from "./contract-version.js";
import { nodeSha256, rowBytesView } from "./hash.js";

type Held = { id: string; keys: MatrixKeys; b: Int8Array; cols: number; rounds: number; tree: MerkleTree };

// Plain Buffer hex and no schema library: a runner program should start in well under a second.
const MAX_ROWS = 2 ** MAX_TREE_DEPTH;
const bytesToHex = (bytes: Uint8Array): string => `0x${Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("hex")}`;
function hexToBytes(hex: string): Uint8Array {
  if (!/^0x([0-9a-fA-F]{2})*$/.test(hex)) throw new RangeError("expected 0x-prefixed hex");
  return new Uint8Array(Buffer.from(hex.slice(2), "hex"));
}

const nameFlag = process.argv.indexOf("--name");
const name = nameFlag >= 0 ? process.argv[nameFlag + 1] : "reference-cpu";

function send(line: unknown): void {
  process.stdout.write(`${JSON.stringify(line)}\n`);
}

let held: Held | undefined;

function onChallenge(request: { id: string; seed: string; rows: number; cols: number; rounds: number }): void {
  held = undefined;
  const started = performance.now();
  assertShape(request.cols, request.rounds);
  if (!Number.isInteger(request.rows) || request.rows < 1 || request.rows > MAX_ROWS) throw new RangeError(`rows must be 1..${MAX_ROWS}`);
  const keys = deriveMatrixKeys(hexToBytes(request.seed));
  const b = generateMatrixB(keys, request.cols);
  const idBytes = hexToBytes(request.id);
  const leaves = new Uint8Array(request.rows * 32);
  const row = new Int32Array(request.cols);
  const scratch = new Int8Array(request.cols);
  for (let r = 0; r < request.rows; r++) {
    computeAnswerRow(keys.a, b, r, request.cols, request.rounds, row, scratch);
    leaves.set(leafHash(idBytes, r, rowBytesView(row), nodeSha256), r * 32);
  }
  const tree = MerkleTree.fromLeafBytes(leaves, request.rows, nodeSha256);
  held = { id: request.id.toLowerCase(), keys, b, cols: request.cols, rounds: request.rounds, tree };
  send({ type: "commit", id: request.id, root: bytesToHex(tree.root), rows: request.rows, computeMs: performance.now() - started });
}

function onOpen(request: { id: string; indices: number[] }): void {
  if (!held || held.id !== request.id.toLowerCase()) {
    send({ type: "error", id: request.id, message: "no answer held for this challenge" });
    return;
  }
  const { keys, b, cols, rounds, tree } = held;
  const rows = request.indices.map((index) => ({
    index,
    data: bytesToHex(rowBytesView(computeAnswerRow(keys.a, b, index, cols, rounds))),
    proof: tree.proof(index).map((sibling) => bytesToHex(sibling)),
  }));
  send({ type: "rows", id: request.id, rows });
}

send({ type: "hello", protocol: RUNNER_PROTOCOL, name });
for await (const text of createInterface({ input: process.stdin, crlfDelay: Infinity })) {
  if (!text.trim()) continue;
  let request: { type?: string; id?: string };
  try {
    request = JSON.parse(text);
  } catch {
    send({ type: "error", id: null, message: "expected one JSON object per line" });
    continue;
  }
  try {
    if (request.type === "challenge") onChallenge(request as Parameters<typeof onChallenge>[0]);
    else if (request.type === "open") onOpen(request as Parameters<typeof onOpen>[0]);
    else if (request.type === "release") {
      if (held?.id === request.id?.toLowerCase()) held = undefined;
    } else send({ type: "error", id: request.id ?? null, message: `unknown request type ${String(request.type)}` });
  } catch (error) {
    send({ type: "error", id: request.id ?? null, message: error instanceof Error ? error.message : String(error) });
  }
}

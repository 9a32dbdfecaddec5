/**
 * The reference external runner: a complete, single-threaded implementation of the runner
 * contract (contract.ts) on the CPU. GPU runner authors diff their program's commits against it;
 * the tests drive it as a real child process through ExternalRunner.
 *
 *   node --import tsx node/attest/runner/reference-runner.ts [--name NAME] [--devices GPU-a,GPU-b,…]
 *
 * `--devices` names a device per unit (unit u gets the (u mod count)-th), as a GPU runner would;
 * without it the runner names none. It implements the memory phase's requests too (its hello
 * lists the `memory` capability; `--no-memory` leaves them out, as an older program would).
 */
import { createInterface } from "node:readline";
import { assertShape, computeAnswerRow, deriveMatrixKeys, generateMatrixB, type MatrixKeys } from "../../../common/attest/arithmetic.js";
import { deriveWalkKeys, deriveWordKeys, fillWords, walk, walkLeaf, walkResultBytes } from "../../../common/attest/memory.js";
import { MAX_TREE_DEPTH, MerkleTree, leafHash } from "../../../common/attest/merkle.js";
import { RUNNER_PROTOCOL } from "./contract-version.js";
import { nodeSha256, rowBytesView } from "./hash.js";

type HeldUnit = { keys: MatrixKeys; b: Int8Array; tree: MerkleTree };
type Held = { id: string; cols: number; rounds: number; units: HeldUnit[] };

// Plain Buffer hex and no schema library: a runner program should start in well under a second.
const MAX_ROWS = 2 ** MAX_TREE_DEPTH;
const bytesToHex = (bytes: Uint8Array): string => `0x${Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("hex")}`;
function hexToBytes(hex: string): Uint8Array {
  if (!/^0x([0-9a-fA-F]{2})*$/.test(hex)) throw new RangeError("expected 0x-prefixed hex");
  return new Uint8Array(Buffer.from(hex.slice(2), "hex"));
}

const nameFlag = process.argv.indexOf("--name");
const name = nameFlag >= 0 ? process.argv[nameFlag + 1] : "reference-cpu";
const devicesFlag = process.argv.indexOf("--devices");
const devices = devicesFlag >= 0 ? (process.argv[devicesFlag + 1] ?? "").split(",").filter(Boolean) : [];
const memory = !process.argv.includes("--no-memory");

function send(line: unknown): void {
  process.stdout.write(`${JSON.stringify(line)}\n`);
}

let held: Held | undefined;

type ChallengeRequest = { id: string; rowsPerUnit: number; cols: number; rounds: number; units: { seed: string; leafKey: string }[] };

/** Computes one unit's sub-challenge: its matrices from its seed, its leaves bound to its leaf key. */
function computeUnit(unit: { seed: string; leafKey: string }, rows: number, cols: number, rounds: number): HeldUnit {
  const keys = deriveMatrixKeys(hexToBytes(unit.seed));
  const b = generateMatrixB(keys, cols);
  const leafKey = hexToBytes(unit.leafKey);
  const leaves = new Uint8Array(rows * 32);
  const row = new Int32Array(cols);
  const scratch = new Int8Array(cols);
  for (let r = 0; r < rows; r++) {
    computeAnswerRow(keys.a, b, r, cols, rounds, row, scratch);
    leaves.set(leafHash(leafKey, r, rowBytesView(row), nodeSha256), r * 32);
  }
  return { keys, b, tree: MerkleTree.fromLeafBytes(leaves, rows, nodeSha256) };
}

function onChallenge(request: ChallengeRequest): void {
  held = undefined;
  const started = performance.now();
  assertShape(request.cols, request.rounds);
  if (!Number.isInteger(request.rowsPerUnit) || request.rowsPerUnit < 1 || request.rowsPerUnit > MAX_ROWS) throw new RangeError(`rowsPerUnit must be 1..${MAX_ROWS}`);
  if (!Array.isArray(request.units) || request.units.length < 1) throw new RangeError("units must list each unit's seed and leafKey");
  // A GPU runner gives each unit its own device and runs them at once; this one runs them in turn.
  const units = request.units.map((unit) => computeUnit(unit, request.rowsPerUnit, request.cols, request.rounds));
  held = { id: request.id.toLowerCase(), cols: request.cols, rounds: request.rounds, units };
  send({
    type: "commit",
    id: request.id,
    rowsPerUnit: request.rowsPerUnit,
    units: units.map((unit, u) => ({ root: bytesToHex(unit.tree.root), ...(devices.length ? { device: devices[u % devices.length] } : {}) })),
    computeMs: performance.now() - started,
  });
}

function onOpen(request: { id: string; picks: { unit: number; index: number }[] }): void {
  if (!held || held.id !== request.id.toLowerCase()) {
    send({ type: "error", id: request.id, message: "no answer held for this challenge" });
    return;
  }
  const { cols, rounds, units } = held;
  const rows = request.picks.map(({ unit, index }) => {
    const answer = units[unit];
    if (!answer) throw new RangeError(`unit ${unit} is not in this answer`);
    return {
      unit,
      index,
      data: bytesToHex(rowBytesView(computeAnswerRow(answer.keys.a, answer.b, index, cols, rounds))),
      proof: answer.tree.proof(index).map((sibling) => bytesToHex(sibling)),
    };
  });
  send({ type: "rows", id: request.id, rows });
}

// The memory phase: one phase held at a time, one buffer per unit (a GPU runner: one per device).
type MemoryUnit = { seed: Uint8Array; buffer: Uint32Array; results?: Uint32Array; tree?: MerkleTree };
type MemoryPhase = { id: string; words: number; walks: number; steps: number; units: MemoryUnit[] };
let phase: MemoryPhase | undefined;

type MemFillRequest = { id: string; words: number; hashIterations: number; walks: number; steps: number; units: { seed: string }[] };

function onMemFill(request: MemFillRequest): void {
  phase = undefined;
  const { words, hashIterations, walks, steps } = request;
  for (const [key, value] of Object.entries({ words, hashIterations, walks, steps })) {
    if (!Number.isSafeInteger(value) || value < 1) throw new RangeError(`${key} must be a positive integer`);
  }
  if (!Array.isArray(request.units) || request.units.length < 1) throw new RangeError("units must list each unit's seed");
  // Word i of unit u: computeWord from the unit's seed (common/attest/memory.ts), two uint32 per word.
  const units = request.units.map(({ seed }) => {
    const bytes = hexToBytes(seed);
    const buffer = new Uint32Array(2 * words);
    fillWords(deriveWordKeys(bytes), hashIterations, buffer);
    return { seed: bytes, buffer };
  });
  phase = { id: request.id.toLowerCase(), words, walks, steps, units };
  send({ type: "mem-filled", id: request.id });
}

function onMemWalk(request: { id: string; nonce: string }): void {
  if (!phase || phase.id !== request.id.toLowerCase()) throw new RangeError("no filled buffers held for this id");
  const { words, walks, steps } = phase;
  const id = hexToBytes(request.id);
  for (const [u, unit] of phase.units.entries()) {
    const keys = deriveWalkKeys(hexToBytes(request.nonce), unit.seed);
    const results = new Uint32Array(2 * walks);
    const read = (index: number, word: Uint32Array) => {
      word[0] = unit.buffer[2 * index]!;
      word[1] = unit.buffer[2 * index + 1]!;
    };
    const leaves = new Uint8Array(walks * 32);
    for (let w = 0; w < walks; w++) {
      walk(keys, w, words, steps, read, results, 2 * w);
      leaves.set(walkLeaf(id, u, w, walkResultBytes(results, 2 * w), nodeSha256), w * 32);
    }
    unit.results = results;
    unit.tree = MerkleTree.fromLeafBytes(leaves, walks, nodeSha256);
  }
  send({
    type: "mem-commit",
    id: request.id,
    units: phase.units.map((unit, u) => ({ root: bytesToHex(unit.tree!.root), ...(devices.length ? { device: devices[u % devices.length] } : {}) })),
  });
}

function onMemOpen(request: { id: string; walks: { unit: number; index: number }[] }): void {
  if (!phase || phase.id !== request.id.toLowerCase()) throw new RangeError("no committed walks held for this id");
  const held = phase;
  const walks = request.walks.map(({ unit, index }) => {
    const u = held.units[unit];
    if (!u?.results || !u.tree || !Number.isInteger(index) || index < 0 || index >= held.walks) throw new RangeError(`there is no walk ${index} of unit ${unit}`);
    return { unit, index, result: bytesToHex(walkResultBytes(u.results, 2 * index)), proof: u.tree.proof(index).map((sibling) => bytesToHex(sibling)) };
  });
  send({ type: "mem-walks", id: request.id, walks });
}

send({ type: "hello", protocol: RUNNER_PROTOCOL, name, ...(memory ? { capabilities: ["memory"] } : {}) });
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
    } else if (memory && request.type === "mem-fill") onMemFill(request as MemFillRequest);
    else if (memory && request.type === "mem-walk") onMemWalk(request as Parameters<typeof onMemWalk>[0]);
    else if (memory && request.type === "mem-open") onMemOpen(request as Parameters<typeof onMemOpen>[0]);
    else if (memory && request.type === "mem-release") {
      if (phase?.id === request.id?.toLowerCase()) phase = undefined;
    } else send({ type: "error", id: request.id ?? null, message: `unknown request type ${String(request.type)}` });
  } catch (error) {
    send({ type: "error", id: request.id ?? null, message: error instanceof Error ? error.message : String(error) });
  }
}

/**
 * The memory phase on an external runner program (the runner contract's `mem-*` requests,
 * node/attest/runner/external-memory.ts), driven for real as a child process: the reference
 * program's fills, walks and opened walks are those of the CPU memory runner and of the
 * attestor's own recomputation; a program without the capability, one whose walks do not match
 * its roots, one restarted between fill and walk, and one aborted mid-fill each end in a clear
 * RunnerError, and the program serves the next GEMM challenge.
 */
import assert from "node:assert/strict";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { bytesToHex, hexToBytes, type Hex } from "viem";
import { recomputeWalk } from "../../../common/attest/memory.js";
import { memChallengeId, type MemChallenge } from "../../../common/attest/memory-messages.js";
import { unitSubChallenges } from "../../../common/attest/units.js";
import { CpuMemoryRunner, ExternalRunner } from "../../../node/attest/runner/index.js";
import { calibrate } from "../../../bench/_attest-memory.js";
import { isAlive, waitFor } from "../../support/wait.js";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "../../..");
const tsxLoader = import.meta.resolve("tsx");
const referenceRunner = path.join(root, "node/attest/runner/reference-runner.ts");
const faultyRunner = path.join(here, "fixtures/faulty-runner.mjs");

const bytes32 = (fill: number): Hex => bytesToHex(new Uint8Array(32).fill(fill));

function memChallenge(units: number, shape: { words: number; hashIterations: number; walks: number; steps: number }, tag = 1): MemChallenge {
  const fields = {
    challengeId: bytes32(tag),
    seeds: Array.from({ length: units }, (_, u) => bytes32(tag + 10 + u)),
    ...shape,
    issuedAtMs: 0,
    fillDeadlineAtMs: 0,
    fillCutoffAtMs: 0,
  };
  return { v: 1, type: "mem-challenge", ...fields, id: memChallengeId(fields) };
}

/** A GEMM challenge the program must still answer after a failed memory phase. */
async function gemmStillWorks(runner: ExternalRunner): Promise<void> {
  const id = bytes32(90);
  const commitment = await runner.computeCommit({ id, rowsPerUnit: 4, cols: 16, rounds: 1, units: unitSubChallenges(id, bytes32(91), 1) });
  assert.equal(commitment.roots.length, 1);
  await commitment.release();
}

describe("memory phase on an external runner program (runner contract, mem-* requests)", function () {
  this.timeout(60_000);
  const reference = (...args: string[]) => new ExternalRunner({ command: process.execPath, args: ["--import", tsxLoader, referenceRunner, ...args] });
  const SMALL = { words: 600, hashIterations: 8, walks: 64, steps: 20 };

  it("the reference program's roots, devices and opened walks are the CPU memory runner's and the attestor's", async () => {
    const runner = reference("--devices", "GPU-a,GPU-b");
    try {
      const challenge = memChallenge(2, SMALL);
      const nonce = bytes32(0x33);
      const walked = await (await runner.memory.fill(challenge)).walk(nonce);
      const cpu = await (await new CpuMemoryRunner().fill(challenge)).walk(nonce);
      assert.deepEqual(walked.roots, cpu.roots);
      assert.deepEqual(walked.devices, ["GPU-a", "GPU-b"]);
      const refs = [
        { unit: 1, index: 63 },
        { unit: 0, index: 0 },
        { unit: 1, index: 5 },
      ];
      const opened = await walked.open(refs);
      assert.deepEqual(
        opened.map(({ unit, index }) => ({ unit, index })),
        refs,
      );
      for (const walk of opened) {
        const expected = recomputeWalk(hexToBytes(challenge.seeds[walk.unit]!), hexToBytes(nonce), walk.index, SMALL.words, SMALL.steps, SMALL.hashIterations);
        assert.equal(walk.result, bytesToHex(expected), `unit ${walk.unit} walk ${walk.index}`);
      }
      // One program serves both phases: the GEMM challenge runs on the process that held the buffers.
      const pid = runner.pid;
      await gemmStillWorks(runner);
      assert.equal(runner.pid, pid);
    } finally {
      await runner.close();
    }
  });

  it("a program whose hello lists no memory capability is refused with an error naming it, and still computes GEMM challenges", async () => {
    const runner = reference("--no-memory");
    try {
      await assert.rejects(runner.memory.fill(memChallenge(1, SMALL)), (error: Error) => {
        assert.equal(error.name, "RunnerError");
        assert.match(error.message, /does not implement the memory requests: its hello lists no "memory" capability/);
        return true;
      });
      await gemmStillWorks(runner);
    } finally {
      await runner.close();
    }
  });

  it("an opened walk that does not match the program's committed root is the runner's error, not an answer", async () => {
    const runner = new ExternalRunner({ command: process.execPath, args: [faultyRunner, "badwalks"] });
    try {
      const challenge = memChallenge(2, SMALL, 2);
      const walked = await (await runner.memory.fill(challenge)).walk(bytes32(0x44));
      assert.deepEqual(walked.roots, [bytes32(20), bytes32(21)]);
      await assert.rejects(walked.open([{ unit: 1, index: 7 }]), /unit 1 walk 7 does not match the root it committed to/);
    } finally {
      await runner.close();
    }
  });

  it("a program out of step (an answer for another id) is stopped rather than read against later requests; a phase aborted while waiting for its turn sends nothing", async () => {
    const faulty = new ExternalRunner({ command: process.execPath, args: [faultyRunner, "wrongid"] });
    try {
      await faulty.warm();
      const pid = faulty.pid!;
      await assert.rejects(faulty.memory.fill(memChallenge(1, SMALL, 5)), /answered a mem-fill request with a mem-filled line for 0xee.*; the program was stopped/);
      assert.equal(isAlive(pid), false);
    } finally {
      await faulty.close();
    }
    const runner = reference();
    try {
      await runner.warm();
      const pid = runner.pid!;
      const aborted = AbortSignal.abort(new Error("the cutoff passed while it waited"));
      await assert.rejects(runner.memory.fill(memChallenge(1, SMALL, 6), { signal: aborted }), /the cutoff passed while it waited/);
      // Nothing was sent, so nothing was stopped: the same program answers the next request.
      assert.equal(runner.pid, pid);
      await gemmStillWorks(runner);
      assert.equal(runner.pid, pid);
    } finally {
      await runner.close();
    }
  });

  it("buffers held by a program that has since restarted are gone: the walk fails instead of asking the new process", async () => {
    const runner = reference();
    try {
      const buffers = await runner.memory.fill(memChallenge(1, SMALL, 3));
      const pid = runner.pid!;
      process.kill(pid, "SIGKILL");
      await waitFor("the killed program seen dead", () => !isAlive(pid) && runner.pid === undefined, { timeoutMs: 5_000 });
      await assert.rejects(buffers.walk(bytes32(0x55)), /restarted since it filled the buffers/);
      await gemmStillWorks(runner);
    } finally {
      await runner.close();
    }
  });

  it("a fill aborted at the phase's cutoff stops the program (a GPU kernel cannot be interrupted otherwise); the next request starts a new one", async () => {
    const runner = reference();
    try {
      await runner.warm();
      const pid = runner.pid!;
      // 2²² words × 4096 iterations: minutes on the reference program.
      const big = memChallenge(1, { words: 1 << 22, hashIterations: 4096, walks: 64, steps: 20 }, 4);
      const controller = new AbortController();
      const filling = runner.memory.fill(big, { signal: controller.signal });
      setTimeout(() => controller.abort(new Error("cutoff")), 200);
      await assert.rejects(filling, /cutoff/);
      assert.equal(isAlive(pid), false);
      await gemmStillWorks(runner);
      assert.notEqual(runner.pid, pid);
    } finally {
      await runner.close();
    }
  });
});

describe("attest calibrate on an external runner program", function () {
  this.timeout(60_000);
  const args = (command: string) =>
    ["--model", "A100-80GB", "--runner", "external", "--command", command, "--rows", "16", "--cols", "16", "--rounds", "1"].concat([
      "--words",
      "4096",
      "--walks",
      "64",
      "--steps",
      "32",
    ]);
  it("measures the program's own memory phase (not the CPU's) and records the GPU it names", async () => {
    const printed: string[] = [];
    const log = console.log;
    console.log = (...parts: unknown[]) => void printed.push(parts.join(" "));
    try {
      const command = path.join(here, "fixtures/reference-runner-gpu.sh");
      const record = await calibrate(args(command));
      assert.equal(record.runner, "external:reference-runner-gpu.sh");
      assert.deepEqual(record.devices, ["GPU-calibrate-0"]);
      assert.ok(record.measuredRandomReadsPerSecond > 0 && record.measuredHashesPerSecond > 0);
      assert.deepEqual(JSON.parse(printed[0]!), record);
      // The same program without the memory requests: no record, rather than the CPU's figures under the GPU's name.
      process.env.REFERENCE_RUNNER_FLAGS = "--no-memory";
      await assert.rejects(calibrate(args(command)), /does not implement the memory requests/);
    } finally {
      console.log = log;
      delete process.env.REFERENCE_RUNNER_FLAGS;
    }
  });
});

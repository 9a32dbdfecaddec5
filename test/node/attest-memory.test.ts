/**
 * Issue 24, item 2: the memory phase in the live protocol. An attestor with `attest.memory`
 * enabled challenges two providers over libp2p on the devnet: one whose runner holds every
 * unit's buffer passes (the attestation is delivered); one that keeps no buffer and walks over
 * zeros instead of recomputing the words (a consistent Merkle tree over wrong walks) fails
 * `memory_phase` (wrong_walks) and gets no attestation. The deadlines carry a 10 s allowance,
 * as the cpu-devnet GEMM preset does, so a loaded test machine does not decide the outcome: the
 * timing bounds (a card short of memory that recomputes) are test/node/attest/memory-phase.test.ts's,
 * on a virtual clock.
 */
import assert from "node:assert/strict";
import path from "node:path";
import { devnetAccount } from "../../common/devnet.js";
import { bytesToHex, hexToBytes, type Hex } from "viem";
import { NO_CC } from "../../common/attest/cc.js";
import { deriveWalkKeys, walk, walkLeaf, walkResultBytes } from "../../common/attest/memory.js";
import type { MemChallenge } from "../../common/attest/memory-messages.js";
import { MerkleTree } from "../../common/attest/merkle.js";
import {
  CpuMemoryRunner,
  type MemoryBuffers,
  type MemoryRunner,
  CpuRunner,
  ExternalRunner,
  type Runner,
  type RunnerChallenge,
  type RunnerCommitment,
} from "../../node/attest/runner/index.js";
import { addrOf, challengeVerdict, startAttestorDaemon, startProviderWithMachine, type TestDaemon } from "../support/attest.js";
import { startDevnet, type Devnet } from "../support/devnet.js";
import { waitFor } from "../support/wait.js";

const A100 = { model: "A100-80GB", units: 1, vramMiB: 81_920 };
const MEMORY = {
  enabled: true,
  profile: {
    wordsPerMiB: 1 / 64,
    hashIterations: 1_024,
    walksPerUnit: 64,
    stepsPerWalk: 32,
    openWalks: 8,
    efficiency: 1,
    latencyAllowanceMs: 10_000,
    classes: { "A100-80GB": { randomReadsPerSecond: 1e6, hashesPerSecond: 1e6 } },
  },
};

/** Keeps no buffer: every word reads as zero. Its walks are consistent with its roots, and wrong. */
class NoMemoryRunner implements MemoryRunner {
  readonly name = "no-memory";
  async fill(challenge: MemChallenge): Promise<MemoryBuffers> {
    const work = challenge.seeds.map(() => ({ storedWords: 0, fillHashes: 0, reads: 0, recomputedWords: 0, walkHashes: 0 }));
    return {
      work,
      release: async () => undefined,
      walk: async (nonce: Hex) => {
        const results = challenge.seeds.map((seed) => {
          const out = new Uint32Array(2 * challenge.walks);
          const keys = deriveWalkKeys(hexToBytes(nonce), hexToBytes(seed));
          for (let w = 0; w < challenge.walks; w++) walk(keys, w, challenge.words, challenge.steps, (_index, word) => word.fill(0), out, 2 * w);
          return out;
        });
        const trees = results.map((out, unit) =>
          MerkleTree.fromLeaves(Array.from({ length: challenge.walks }, (_, w) => walkLeaf(hexToBytes(challenge.id), unit, w, walkResultBytes(out, 2 * w)))),
        );
        return {
          roots: trees.map((tree) => bytesToHex(tree.root)),
          devices: [],
          work,
          open: async (refs) =>
            refs.map(({ unit, index }) => ({
              unit,
              index,
              result: bytesToHex(walkResultBytes(results[unit]!, 2 * index)),
              proof: trees[unit]!.proof(index).map((s) => bytesToHex(s)),
            })),
        };
      },
    };
  }
}

/** The CPU reference runner's answers, naming one GPU per unit in unit order (what a GPU runner reports). */
class NamingRunner implements Runner {
  readonly name = "naming";
  constructor(
    private readonly cpu: Runner,
    private readonly gpus: readonly string[],
  ) {}
  async computeCommit(challenge: RunnerChallenge, options?: { signal?: AbortSignal }): Promise<RunnerCommitment> {
    return { ...(await this.cpu.computeCommit(challenge, options)), devices: challenge.units.map((_, u) => this.gpus[u]!) };
  }
  async close(): Promise<void> {}
}

const referenceRunner = path.resolve(import.meta.dirname, "../../node/attest/runner/reference-runner.ts");

describe("memory phase over libp2p (issue 24, item 2)", function () {
  this.timeout(240_000);
  let devnet: Devnet;
  let cpu: CpuRunner;
  const nodes: TestDaemon[] = [];
  before(async () => {
    devnet = await startDevnet({ attestors: [devnetAccount(7).address, devnetAccount(8).address, devnetAccount(9).address] });
    cpu = new CpuRunner({ workers: 1 });
  });
  after(async () => {
    for (const node of nodes.reverse()) await node.close().catch(() => undefined);
    await cpu?.close();
    await devnet?.close();
  });

  const start = (index: number, memoryRunner: MemoryRunner, runner: Runner = cpu, machine = A100) =>
    startProviderWithMachine(devnet, index, { runner, machine, memoryRunner }, nodes);
  /** The attestor (devnet account `index`) with the memory phase on and no scheduled scans, once it has the providers' offers. */
  /** `gpuReuseWindowSeconds` 0 where two machines name the same GPUs on purpose (one GPU, one machine is attest-gpu-identity.test.ts's). */
  const attestorFor = async (index: number, providers: Awaited<ReturnType<typeof start>>[], gpuReuseWindowSeconds?: number) => {
    const { daemon, attestor } = await startAttestorDaemon(devnet, index, {
      p2p: { bootstrap: providers.map(({ provider }) => addrOf(provider.daemon)) },
      attest: {
        liveness: { enabled: false },
        attestor: { scheduleIntervalMs: 3_600_000, ...(gpuReuseWindowSeconds === undefined ? {} : { gpuReuseWindowSeconds }) },
        memory: MEMORY,
      },
    });
    nodes.push(daemon);
    for (const { machineId } of providers) {
      await waitFor(`machine ${machineId}'s offer in the attestor's book`, () => daemon.offers.book.byMachine(machineId).length > 0, { timeoutMs: 30_000 });
    }
    return attestor;
  };

  it("a provider holding the whole buffer passes; one without the buffer fails memory_phase without an attestation", async () => {
    const honest = await start(1, new CpuMemoryRunner());
    const short = await start(2, new NoMemoryRunner());
    const attestor = await attestorFor(7, [honest, short]);

    const pass = await challengeVerdict(attestor, honest.machineId);
    assert.equal(pass.outcome, "pass", `${pass.reason}: ${pass.detail}`);
    // No confidential-computing evidence verified (this attestor has no attest.cc): the attestation says so.
    assert.equal(pass.attestation?.attestation.cc, NO_CC);
    await waitFor("the attestation at the honest provider", () => honest.received.includes(honest.machineId), { timeoutMs: 30_000 });

    const fail = await challengeVerdict(attestor, short.machineId);
    assert.deepEqual([fail.outcome, fail.reason], ["fail", "memory_phase"], fail.detail ?? "");
    assert.match(fail.detail ?? "", /^wrong_walks:/);
    assert.equal(fail.attestation, null);
    assert.deepEqual(short.received, []);
  });
  it("the memory phase's unit u is the GEMM commit's unit u: a two-GPU machine naming its GPUs in the same order passes, one naming them swapped fails memory_phase", async () => {
    const TWO = { ...A100, units: 2 };
    const GPUS = ["GPU-0c1d2e3f-0000-4000-8000-00000000000a", "GPU-0c1d2e3f-0000-4000-8000-00000000000b"];
    const gemm = new NamingRunner(cpu, GPUS);
    const same = await start(3, new CpuMemoryRunner({ devices: () => [...GPUS] }), gemm, TWO);
    // The same two GPUs, so the same set (gpusHash sorts), but unit 0's buffer sits on the GPU that computed unit 1's rows.
    const swapped = await start(4, new CpuMemoryRunner({ devices: () => [...GPUS].reverse() }), gemm, TWO);
    const attestor = await attestorFor(8, [same, swapped], 0);
    const pass = await challengeVerdict(attestor, same.machineId);
    assert.equal(pass.outcome, "pass", `${pass.reason}: ${pass.detail}`);
    const fail = await challengeVerdict(attestor, swapped.machineId);
    assert.deepEqual([fail.outcome, fail.reason], ["fail", "memory_phase"], fail.detail ?? "");
    assert.equal(fail.detail, `the memory phase named other GPUs than the GEMM commit (unit 0: ${GPUS[0]} in the GEMM commit, ${GPUS[1]} in the memory phase)`);
    assert.equal(fail.attestation, null);
    assert.deepEqual(swapped.received, []);
  });
  it("an external runner program answers both phases (the provider's default memory runner is its program's): it passes naming its GPU; a program without the memory capability fails memory_phase", async () => {
    const program = (...args: string[]) => new ExternalRunner({ command: process.execPath, args: ["--import", import.meta.resolve("tsx"), referenceRunner, ...args] });
    const GPU = "GPU-0c1d2e3f-0000-4000-8000-0000000000cc";
    const withMemory = program("--devices", GPU);
    const withoutMemory = program("--devices", GPU.replace("cc", "dd"), "--no-memory");
    try {
      // No memoryRunner given: the provider uses its runner's (`runner.memory`).
      const full = await startProviderWithMachine(devnet, 5, { runner: withMemory, machine: A100 }, nodes);
      const gemmOnly = await startProviderWithMachine(devnet, 6, { runner: withoutMemory, machine: A100 }, nodes);
      const attestor = await attestorFor(9, [full, gemmOnly]);
      const pass = await challengeVerdict(attestor, full.machineId);
      assert.equal(pass.outcome, "pass", `${pass.reason}: ${pass.detail}`);
      await waitFor("the attestation at the provider", () => full.received.includes(full.machineId), { timeoutMs: 30_000 });
      const fail = await challengeVerdict(attestor, gemmOnly.machineId);
      assert.deepEqual([fail.outcome, fail.reason], ["fail", "memory_phase"], fail.detail ?? "");
      assert.match(fail.detail ?? "", /runner_failed/);
      assert.equal(fail.attestation, null);
    } finally {
      await withMemory.close();
      await withoutMemory.close();
    }
  });
});

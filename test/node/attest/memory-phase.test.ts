/**
 * Issue 24, item 2: the memory phase, sized to the declared VRAM per unit, run per unit at once.
 * Devices are simulated (VRAM, random-read rate, hash rate): the CPU runner really fills the
 * buffers, walks them and recomputes the words a device has no room for; the device model turns
 * that counted work into time, fed to the attestor as the arrival time (a virtual clock, so the
 * verdicts do not depend on the test machine's load). Sizes are scaled down (1 word per 32 MiB,
 * 128 walks of 64 steps, a 50 ms allowance) and so are the rates (RATE_SCALE); their ratios are the calibration
 * table's. Each simulated card reaches 85 % of its class's table rates.
 */
import assert from "node:assert/strict";
import { hexToBytes, type Hex } from "viem";
import { CALIBRATION } from "../../../common/attest/calibration.js";
import { memoryProfileSchema, type MemoryClaim } from "../../../common/attest/memory-params.js";
import { recomputeWalk } from "../../../common/attest/memory.js";
import { findGpuModel } from "../../../common/gpu.js";
import { MemoryPhase, type MemoryOutcome } from "../../../node/attest/memory/index.js";
import { MemoryResponder } from "../../../node/attest/runner/index.js";
import { SimulatedMemoryMachine, type DeviceSpec, type SimulatedMachineOptions } from "../../support/attest-memory.js";
import { domain, providerAccount } from "./helpers.js";

const RATE_SCALE = 5e-6;
const ACHIEVED = 0.85;
const WORDS_PER_MIB = 1 / 32;
/** One-way network time per message (virtual). */
const NETWORK_MS = 20;
const MODELS = ["H200-141GB", "H100-80GB-SXM", "A100-80GB", "A100-40GB", "RTX4090-24GB"];

function profile(efficiency = 0.5) {
  const classes = Object.fromEntries(
    MODELS.map((model) => [
      model,
      { randomReadsPerSecond: CALIBRATION[model]!.randomReadsPerSecond * RATE_SCALE, hashesPerSecond: CALIBRATION[model]!.hashesPerSecond * RATE_SCALE },
    ]),
  );
  return memoryProfileSchema.parse({
    wordsPerMiB: WORDS_PER_MIB,
    hashIterations: 512,
    walksPerUnit: 128,
    stepsPerWalk: 64,
    openWalks: 32,
    efficiency,
    latencyAllowanceMs: 50,
    classes,
  });
}

const vramOf = (model: string) => findGpuModel(model)!.vramMiB;
const claimOf = (model: string, units = 1): MemoryClaim => ({ model, units, vramMiB: vramOf(model) });

/** A simulated card of `model` at ACHIEVED of its table rates. */
function card(model: string, n = 0): DeviceSpec {
  const c = CALIBRATION[model]!;
  return {
    uuid: `GPU-${model}-${n}`,
    vramMiB: vramOf(model),
    randomReadsPerSecond: c.randomReadsPerSecond * RATE_SCALE * ACHIEVED,
    hashesPerSecond: c.hashesPerSecond * RATE_SCALE * ACHIEVED,
  };
}
const cards = (model: string, count: number) => Array.from({ length: count }, (_, i) => card(model, i));

const challengeId = `0x${"ab".repeat(32)}` as Hex;

async function run(
  claim: MemoryClaim,
  devices: DeviceSpec[],
  options: Partial<SimulatedMachineOptions> = {},
  efficiency = 0.5,
): Promise<MemoryOutcome & { machine: SimulatedMemoryMachine; phase: MemoryPhase }> {
  let clock = 1_700_000_000_000;
  const machine = new SimulatedMemoryMachine(devices, { wordsPerMiB: WORDS_PER_MIB, ...options });
  const phase = MemoryPhase.start({ profile: profile(efficiency), claim, challengeId, provider: providerAccount.address, domain, now: () => clock });
  const responder = new MemoryResponder({
    provider: providerAccount.address,
    signer: providerAccount,
    domain,
    runner: machine,
    unitsOf: (id) => (id === challengeId ? claim.units : undefined),
    // The phase's virtual clock: its cutoffs are in that time.
    now: () => clock,
  });
  const done = (outcome: MemoryOutcome) => ({ ...outcome, machine, phase });
  // Through JSON, as the wire carries it.
  const filled = await responder.fill(JSON.parse(JSON.stringify(phase.message)));
  clock += NETWORK_MS + machine.fillMs + NETWORK_MS;
  const walk = phase.onFilled(filled, clock);
  if (walk.outcome === "fail") return done(walk);
  const commit = await responder.walk(JSON.parse(JSON.stringify(walk.message)));
  clock += NETWORK_MS + machine.walkMs + NETWORK_MS;
  const open = await phase.onCommit(JSON.parse(JSON.stringify(commit)), clock);
  if (open.outcome === "fail") return done(open);
  const walks = await responder.open(open.request);
  clock += 2 * NETWORK_MS;
  return done(phase.onWalks(JSON.parse(JSON.stringify(walks)), clock));
}

/** Failed on time: correct but late (slow_walk), or so late the attestor stopped waiting (late_commit). */
function tooSlow(outcome: MemoryOutcome): boolean {
  return outcome.outcome === "fail" && (outcome.reason === "slow_walk" || outcome.reason === "late_commit");
}

function failure(outcome: MemoryOutcome): string {
  return outcome.outcome === "fail" ? `${outcome.reason}: ${outcome.detail}` : "pass";
}

describe("memory phase: capacity and bandwidth per declared unit (issue 24, item 2)", function () {
  this.timeout(60_000);

  it("honest cards pass: one H100, one A100-80GB, one A100-40GB, eight H100s (one seed, root and GPU UUID per unit)", async () => {
    for (const model of ["H100-80GB-SXM", "A100-80GB", "A100-40GB"]) {
      const outcome = await run(claimOf(model), cards(model, 1));
      assert.equal(outcome.outcome, "pass", `${model}: ${failure(outcome)}`);
    }
    const eight = await run(claimOf("H100-80GB-SXM", 8), cards("H100-80GB-SXM", 8));
    assert.equal(eight.outcome, "pass", failure(eight));
    if (eight.outcome !== "pass") return;
    assert.equal(new Set(eight.phase.message.seeds).size, 8);
    assert.equal(new Set(eight.roots).size, 8);
    assert.deepEqual(
      eight.gpus,
      cards("H100-80GB-SXM", 8).map((d) => d.uuid),
    );
    // The buffer is sized to the declared VRAM: 90 % of 81 559 MiB at 1 word per 32 MiB.
    assert.equal(eight.phase.params.words, Math.floor(81_559 * WORDS_PER_MIB * 0.9));
    assert.equal(eight.machine.devices.length, 8);
  });

  it("a card with less VRAM than it claims recomputes the words it lacks and misses the walk deadline: RTX 4090 as A100-80GB, H100 as H200, A100-40GB as A100-80GB", async () => {
    for (const [real, claimed] of [
      ["RTX4090-24GB", "A100-80GB"],
      ["H100-80GB-SXM", "H200-141GB"],
      ["A100-40GB", "A100-80GB"],
    ] as const) {
      const outcome = await run(claimOf(claimed), cards(real, 1));
      assert.ok(tooSlow(outcome), `${real} as ${claimed}: ${failure(outcome)}`);
      // It filled in time (a fill only writes what fits) and recomputed what it lacked during the walks.
      assert.ok(outcome.fillMs !== undefined && outcome.fillMs <= outcome.phase.params.fillDeadlineMs, `${real} as ${claimed}: fill ${outcome.fillMs} ms`);
      // The same card claiming its own class passes: the memory it lacks is what fails it.
      const own = await run(claimOf(real), cards(real, 1));
      assert.equal(own.outcome, "pass", `${real} as itself: ${failure(own)}`);
    }
  });

  it("unit inflation: five H100s claiming eight fail (naming a device twice, or inventing UUIDs and sharing memory)", async () => {
    const claim = claimOf("H100-80GB-SXM", 8);
    const named = await run(claim, cards("H100-80GB-SXM", 5));
    assert.equal(named.outcome === "fail" && named.reason, "duplicate_gpus", failure(named));
    const invented = await run(claim, cards("H100-80GB-SXM", 5), { reportedUuids: (units) => Array.from({ length: units }, (_, u) => `GPU-invented-${u}`) });
    assert.ok(tooSlow(invented), failure(invented));
  });

  it("parallel runners: a unit spread over two A100-40GB fails over PCIe; over NVLink it passes the memory phase (the stated bound) and is left to the GEMM phase", async () => {
    const claim = claimOf("A100-80GB");
    // Peer random reads: PCIe 4.0 x16 (~25 GB/s usable, 64-byte reads) vs NVLink 3 (600 GB/s, 32-byte sectors).
    const pcie = await run(claim, cards("A100-40GB", 2), { layout: "split", peerReadsPerSecond: (25e9 / 64) * RATE_SCALE });
    assert.ok(tooSlow(pcie), failure(pcie));
    const nvlink = await run(claim, cards("A100-40GB", 2), { layout: "split", peerReadsPerSecond: (600e9 / 32) * RATE_SCALE });
    assert.equal(nvlink.outcome, "pass", failure(nvlink));
  });

  it("cheap cards adding up (issue 35, item 7): 17 RTX 4090s that pass the GEMM phase as 8 × H100 fail the memory phase, dealt one unit a card or every unit spread over all of them over PCIe", async () => {
    const claim = claimOf("H100-80GB-SXM", 8);
    // One unit per card: a 24 GB card holds a third of a unit's 72 GiB buffer and recomputes the rest.
    const dealt = await run(claim, cards("RTX4090-24GB", 17), { reportedUuids: (units) => Array.from({ length: units }, (_, u) => `GPU-RTX4090-24GB-${u}`) });
    assert.ok(tooSlow(dealt), failure(dealt));
    // Spread: 16 of every 17 reads cross PCIe to another card.
    const spread = await run(claim, cards("RTX4090-24GB", 17), { layout: "split", peerReadsPerSecond: (25e9 / 64) * RATE_SCALE });
    assert.ok(tooSlow(spread), failure(spread));
  });

  it("wrong walks are caught by recomputing them from the seed; a commit signed by another key is refused", async () => {
    let clock = 1_700_000_000_000;
    const claim = claimOf("H100-80GB-SXM");
    const phase = MemoryPhase.start({ profile: profile(), claim, challengeId, provider: providerAccount.address, domain, now: () => clock });
    const responder = new MemoryResponder({
      provider: providerAccount.address,
      signer: providerAccount,
      domain,
      runner: new SimulatedMemoryMachine(cards("H100-80GB-SXM", 1), { wordsPerMiB: WORDS_PER_MIB }),
      unitsOf: () => 1,
      now: () => clock,
    });
    const walk = phase.onFilled(await responder.fill(phase.message), (clock += 100));
    assert.equal(walk.outcome, "walk");
    if (walk.outcome !== "walk") return;
    const commit = await responder.walk(walk.message);
    const open = await phase.onCommit(commit, (clock += 100));
    assert.equal(open.outcome, "open");
    if (open.outcome !== "open") return;
    const walks = await responder.open(open.request);
    // The honest results are what the attestor recomputes.
    const first = walks.walks[0]!;
    assert.deepEqual(
      hexToBytes(first.result as Hex),
      recomputeWalk(hexToBytes(phase.message.seeds[0]!), hexToBytes(walk.message.nonce), first.index, phase.params.words, phase.params.steps, phase.params.hashIterations),
    );
    const flipped = `0x${(BigInt(first.result) ^ 1n).toString(16).padStart(16, "0")}`;
    const outcome = phase.onWalks({ ...walks, walks: [{ ...first, result: flipped }, ...walks.walks.slice(1)] }, (clock += 100));
    // The result no longer hashes to the signed root.
    assert.equal(outcome.outcome === "fail" && outcome.reason, "bad_proof");

    const other = MemoryPhase.start({ profile: profile(), claim, challengeId, provider: "0x000000000000000000000000000000000000dEaD", domain, now: () => clock });
    const responder2 = new MemoryResponder({
      provider: providerAccount.address,
      signer: providerAccount,
      domain,
      runner: new SimulatedMemoryMachine(cards("H100-80GB-SXM", 1), { wordsPerMiB: WORDS_PER_MIB }),
      unitsOf: () => 1,
      now: () => clock,
    });
    const walk2 = other.onFilled(await responder2.fill(other.message), (clock += 100));
    if (walk2.outcome !== "walk") return assert.fail(failure(walk2));
    const refused = await other.onCommit(await responder2.walk(walk2.message), (clock += 100));
    assert.equal(refused.outcome === "fail" && refused.reason, "bad_commit_signature");
  });

  it("validates the wire: a changed seed breaks the id; the responder refuses a phase for a challenge it never answered", async () => {
    const phase = MemoryPhase.start({ profile: profile(), claim: claimOf("A100-80GB"), challengeId, provider: providerAccount.address, domain });
    const responder = new MemoryResponder({
      provider: providerAccount.address,
      signer: providerAccount,
      domain,
      runner: new SimulatedMemoryMachine(cards("A100-80GB", 1), { wordsPerMiB: WORDS_PER_MIB }),
      unitsOf: () => undefined,
    });
    await assert.rejects(responder.fill({ ...phase.message, seeds: [`0x${"00".repeat(32)}`] }), /id does not match/);
    await assert.rejects(responder.fill(phase.message), /No challenge with this id/);
  });
});

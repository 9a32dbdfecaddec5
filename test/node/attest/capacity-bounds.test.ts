/**
 * Issue 24, item 2: what a challenge's deadline bounds, with GPUs simulated at fixed rates (the
 * runner computes real rows; the device model only decides when the answer is ready). A setup
 * passes a claim of `units × class` iff its aggregate int8 rate reaches `efficiency` of the
 * class's datasheet rate times the claimed units (less the latency allowance's slack). At the old
 * single efficiency of 0.5, two A100s in parallel pass as an H100 and five H100s pass as eight; at
 * each class's calibrated efficiency (common/attest/calibration.ts: 0.7 for data-center parts,
 * `efficiency` left out of the profile), both fail while an honest H100 still passes. Rates below are scaled to CPU-test size; only their ratios matter:
 * each simulated card runs at 85 % of its datasheet rate.
 */
import assert from "node:assert/strict";
import { unitSubChallenges } from "../../../common/attest/units.js";
import { challengeProfileSchema, INT8_DENSE_TOPS } from "../../../common/attest/params.js";
import { Attestor, type ChallengeOutcome, ChallengeResponder } from "../../../node/attest/challenge/index.js";
import { CpuRunner, type Runner } from "../../../node/attest/runner/index.js";
import { SimulatedDevice, SimulatedGpuRunner } from "../../support/attest.js";
import { attestorAccount, domain, isAttestor, openRequestOf, providerAccount } from "./helpers.js";

/** Datasheet int8 TOPS of the scaled H100: 1 TOPS ↦ this many ops/s. */
const SCALE = 1e-6 / 1979;
const ACHIEVED = 0.85;
const cardRate = (model: string) => INT8_DENSE_TOPS[model]! * 1e12 * SCALE * ACHIEVED;

/** `calibrated`: no profile-wide figure, each class's from the calibration table. */
function profile(efficiency: number | "calibrated") {
  const scaled = (model: string) => ({ int8Tops: INT8_DENSE_TOPS[model]! * SCALE, cols: 16, rounds: 1 });
  return challengeProfileSchema.parse({
    // The gpu preset: it sets no efficiency of its own (cpu-devnet's 1e-6 would stand in for the calibration).
    preset: "gpu",
    ...(efficiency === "calibrated" ? {} : { efficiency }),
    targetComputeMs: 1_500,
    latencyAllowanceMs: 300,
    classes: { "H100-80GB-SXM": scaled("H100-80GB-SXM"), "A100-80GB": scaled("A100-80GB") },
  });
}

async function challenge(efficiency: number | "calibrated", claim: { model: string; units: number }, runner: Runner): Promise<ChallengeOutcome> {
  // Rows sized from targetComputeMs at the class's rate (the cpu-devnet preset's fixed rows dropped).
  const profileUsed = { ...profile(efficiency), rowsPerUnit: undefined };
  const attestor = new Attestor({ account: attestorAccount, domain, profile: profileUsed });
  const machine = { machineId: 11, vramMiB: 81_559, ...claim };
  const responder = new ChallengeResponder({ provider: providerAccount.address, signer: providerAccount, machine: () => machine, runner, domain, isAttestor });
  const state = await attestor.startChallenge({ provider: providerAccount.address, ...machine });
  const next = state.onCommit(await responder.respond(state.message), Date.now());
  if (next.outcome === "fail") return next;
  return state.onOpen(await responder.open(openRequestOf(next)), Date.now());
}

const devices = (model: string, count: number) => Array.from({ length: count }, () => new SimulatedDevice(cardRate(model)));

describe("capacity bounds of a challenge: slower classes, parallel runners, unit inflation (issue 24, item 2)", function () {
  this.timeout(60_000);
  let cpu: CpuRunner;
  before(async () => {
    cpu = new CpuRunner({ workers: 1 });
    await cpu.computeCommit({ id: `0x${"01".repeat(32)}`, rowsPerUnit: 4, cols: 16, rounds: 1, units: unitSubChallenges(`0x${"01".repeat(32)}`, `0x${"02".repeat(32)}`, 1) });
  });
  after(async () => {
    await cpu.close();
  });

  it("an honest H100 passes at the calibrated efficiency; an A100 claiming H100 fails (slow_for_class)", async () => {
    const honest = await challenge("calibrated", { model: "H100-80GB-SXM", units: 1 }, new SimulatedGpuRunner(cpu, devices("H100-80GB-SXM", 1)));
    assert.equal(honest.outcome, "pass", honest.outcome === "fail" ? honest.detail : "");
    const slower = await challenge("calibrated", { model: "H100-80GB-SXM", units: 1 }, new SimulatedGpuRunner(cpu, devices("A100-80GB", 1)));
    assert.equal(slower.outcome === "fail" && slower.reason, "slow_for_class");
  });

  it("two A100s in parallel pass as one H100 at efficiency 0.5 (the attack) and fail at the calibrated efficiency", async () => {
    const old = await challenge(0.5, { model: "H100-80GB-SXM", units: 1 }, new SimulatedGpuRunner(cpu, devices("A100-80GB", 2)));
    assert.equal(old.outcome, "pass", "the attack the issue reproduced");
    const calibrated = await challenge("calibrated", { model: "H100-80GB-SXM", units: 1 }, new SimulatedGpuRunner(cpu, devices("A100-80GB", 2)));
    assert.equal(calibrated.outcome === "fail" && calibrated.reason, "slow_for_class");
  });

  it("five H100s claiming eight pass at efficiency 0.5 (the attack) and fail at the calibrated efficiency; eight pass", async () => {
    const claim = { model: "H100-80GB-SXM", units: 8 };
    assert.equal((await challenge(0.5, claim, new SimulatedGpuRunner(cpu, devices("H100-80GB-SXM", 5)))).outcome, "pass", "the attack the issue reproduced");
    const inflated = await challenge("calibrated", claim, new SimulatedGpuRunner(cpu, devices("H100-80GB-SXM", 5)));
    assert.equal(inflated.outcome === "fail" && inflated.reason, "slow_for_class");
    const honest = await challenge("calibrated", claim, new SimulatedGpuRunner(cpu, devices("H100-80GB-SXM", 8)));
    assert.equal(honest.outcome, "pass", honest.outcome === "fail" ? honest.detail : "");
  });

  it("one device time-shared by two machine ids' simultaneous challenges: the device serves one after the other, so one answer comes late", async () => {
    const shared = devices("H100-80GB-SXM", 1);
    const [a, b] = await Promise.all([
      challenge("calibrated", { model: "H100-80GB-SXM", units: 1 }, new SimulatedGpuRunner(cpu, shared)),
      challenge("calibrated", { model: "H100-80GB-SXM", units: 1 }, new SimulatedGpuRunner(cpu, shared)),
    ]);
    // The device serves one after the other: at least the second misses the deadline.
    assert.ok([a, b].some((outcome) => outcome.outcome === "fail" && outcome.reason === "slow_for_class"));
  });
});

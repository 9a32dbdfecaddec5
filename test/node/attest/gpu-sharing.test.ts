/**
 * Issue 35, item 7: one faster card backing several machines, and cheap cards adding up to a
 * faster class, performed with simulated GPUs on a virtual clock (the CPU runner computes the real
 * rows; a device model turns the work into time; the attestor and provider read that clock, so the
 * verdicts do not depend on this machine's load). Rates are the datasheet's scaled to test size,
 * each card at 85 % of its datasheet rate, the class's calibrated efficiency (0.7) required, and
 * the gpu preset's ratio of compute to allowance (T = 1,500 ms, L = 300 ms, as 10 s and 2 s).
 *
 * What binds, attack by attack (docs/attestation.md, "One GPU, one machine"):
 * - the class's ceiling: a card faster than the class it claims fails `too_fast_for_class` unless it
 *   holds its commit back, which is then all it can do: pace itself as the slower class;
 * - the attestor's GPU registry: a card that names its real UUID backs one machine only;
 * - a card that invents a UUID per machine and paces itself backs one machine per challenge it can
 *   fit in between when they are challenged one after another; challenged at once, as the
 *   attestor's challenge rounds do (test/node/attest-rounds.test.ts), four A100s fit in one H100
 *   and five do not (the bound, measured here);
 * - what is left open: 17 RTX 4090s add up to 8 H100s in the GEMM phase; the memory phase and CC
 *   evidence go further.
 */
import assert from "node:assert/strict";
import { challengeProfileSchema, INT8_DENSE_TOPS } from "../../../common/attest/params.js";
import { Attestor, type ChallengeOutcome, ChallengeResponder } from "../../../node/attest/challenge/index.js";
import { CpuRunner, type Runner, type RunnerChallenge, type RunnerCommitment } from "../../../node/attest/runner/index.js";
import { attestorAccount, domain, isAttestor, openRequestOf, providerAccount } from "./helpers.js";

const SCALE = 1e-6 / 1979;
const ACHIEVED = 0.85;
const NETWORK_MS = 20;
const H100 = "H100-80GB-SXM";
const A100 = "A100-80GB";
const RTX4090 = "RTX4090-24GB";
const cardRate = (model: string) => INT8_DENSE_TOPS[model]! * 1e12 * SCALE * ACHIEVED;
const DAY_MS = 86_400_000;

const profile = challengeProfileSchema.parse({
  preset: "gpu",
  targetComputeMs: 1_500,
  latencyAllowanceMs: 300,
  classes: Object.fromEntries([H100, A100, RTX4090].map((model) => [model, { int8Tops: INT8_DENSE_TOPS[model]! * SCALE, cols: 16, rounds: 1 }])),
});

/**
 * Simulated cards of total rate `rate` (ops/s) serving `share` challenges at once, each unit's rows
 * spread over all of them (rows are independent): a challenge's answer is ready after
 * share × its ops / rate. `holdUntilMs`: the answer is held until then (ms after the challenge),
 * as a card pacing itself as a slower class does. `names(u)`: the UUID named for unit u.
 */
class VirtualCards implements Runner {
  readonly name = "virtual-cards";
  readyMs = 0;
  constructor(
    private readonly cpu: CpuRunner,
    private readonly rate: number,
    private readonly o: { share?: number; holdUntilMs?: number; names?: (unit: number) => string } = {},
  ) {}
  async computeCommit(challenge: RunnerChallenge): Promise<RunnerCommitment> {
    const ops = 2 * challenge.rowsPerUnit * challenge.units.length * challenge.cols * challenge.cols * challenge.rounds;
    this.readyMs = Math.max(((this.o.share ?? 1) * ops * 1000) / this.rate, this.o.holdUntilMs ?? 0);
    const base = await this.cpu.computeCommit(challenge);
    return { ...base, devices: challenge.units.map((_, unit) => (this.o.names ?? ((u) => `GPU-virtual-${u}`))(unit)) };
  }
  async close(): Promise<void> {}
}

/** An attestor on the virtual clock that challenges machines of one provider, remembering their GPUs for a day. */
function attestorOn(clock: { now: number }): Attestor {
  return new Attestor({ account: attestorAccount, domain, profile, now: () => clock.now, gpuReuseWindowMs: DAY_MS });
}

/** One challenge of `machineId` claiming `units × model`, answered by `cards`, on `clock`. */
async function challenge(attestor: Attestor, clock: { now: number }, machineId: number, claim: { model: string; units: number }, cards: VirtualCards): Promise<ChallengeOutcome> {
  const declared = { machineId, vramMiB: 81_920, ...claim };
  const responder = new ChallengeResponder({
    provider: providerAccount.address,
    signer: providerAccount,
    machine: () => declared,
    runner: cards,
    domain,
    isAttestor,
    now: () => clock.now,
  });
  const state = await attestor.startChallenge({ provider: providerAccount.address, ...declared });
  const start = clock.now;
  const commit = await responder.respond(JSON.parse(JSON.stringify(state.message)));
  clock.now = start + NETWORK_MS + cards.readyMs + NETWORK_MS;
  const next = state.onCommit(commit, clock.now);
  if (next.outcome === "fail") return next;
  clock.now += 2 * NETWORK_MS;
  return state.onOpen(await responder.open(openRequestOf(next)), clock.now);
}

const verdict = (outcome: ChallengeOutcome) => (outcome.outcome === "fail" ? `${outcome.reason}: ${outcome.detail}` : "pass");

describe("one card, several machines; cheap cards adding up (issue 35, item 7)", function () {
  this.timeout(120_000);
  let cpu: CpuRunner;
  before(() => {
    cpu = new CpuRunner({ workers: 1 });
  });
  after(async () => cpu.close());

  it("the class's ceiling binds: an H100 answering an A100 challenge at its own speed fails too_fast_for_class; holding its commit it passes as an A100", async () => {
    const clock = { now: 1_700_000_000_000 };
    const attestor = attestorOn(clock);
    const fast = await challenge(attestor, clock, 1, { model: A100, units: 1 }, new VirtualCards(cpu, cardRate(H100)));
    assert.equal(fast.outcome === "fail" && fast.reason, "too_fast_for_class", verdict(fast));
    // Pacing: the answer held until just inside the A100 deadline (1,500 ms budget + 300 ms allowance).
    const paced = await challenge(attestor, clock, 1, { model: A100, units: 1 }, new VirtualCards(cpu, cardRate(H100), { holdUntilMs: 1_700 }));
    assert.equal(paced.outcome, "pass", verdict(paced));
    // An honest A100 passes; its rate lies under the ceiling.
    const honest = await challenge(attestor, clock, 2, { model: A100, units: 1 }, new VirtualCards(cpu, cardRate(A100), { names: () => "GPU-a100-honest" }));
    assert.equal(honest.outcome, "pass", verdict(honest));
  });

  it("one H100 backing four A100 machines one after another: naming its UUID, the second machine on fails duplicate_gpus; a card that moves frees its UUID", async () => {
    const clock = { now: 1_700_000_000_000 };
    const attestor = attestorOn(clock);
    const h100 = () => new VirtualCards(cpu, cardRate(H100), { holdUntilMs: 1_700, names: () => "GPU-5e0c1d2e-0000-4000-8000-000000000001" });
    const outcomes: ChallengeOutcome[] = [];
    for (const machineId of [11, 12, 13, 14]) {
      outcomes.push(await challenge(attestor, clock, machineId, { model: A100, units: 1 }, h100()));
      clock.now += 60_000;
    }
    assert.equal(outcomes[0]!.outcome, "pass", verdict(outcomes[0]!));
    for (const outcome of outcomes.slice(1)) {
      assert.equal(outcome.outcome === "fail" && outcome.reason, "duplicate_gpus", verdict(outcome));
      assert.match(verdict(outcome), new RegExp(`GPU-5e0c1d2e-0000-4000-8000-000000000001 backs machine 0x[0-9a-f]{40}/11 \\(passed \\d+ s ago\\)`));
    }
    // The card moves to machine 12: machine 11 passes naming its new card, which frees the old UUID.
    const moved = await challenge(attestor, clock, 11, { model: A100, units: 1 }, new VirtualCards(cpu, cardRate(A100), { names: () => "GPU-replacement" }));
    assert.equal(moved.outcome, "pass", verdict(moved));
    assert.equal((await challenge(attestor, clock, 12, { model: A100, units: 1 }, h100())).outcome, "pass");
  });

  it("inventing a UUID per machine, the paced H100 passes all four challenged one after another; challenged at once (a challenge round), four fit in one H100 and five do not", async () => {
    const clock = { now: 1_700_000_000_000 };
    const attestor = attestorOn(clock);
    for (const machineId of [21, 22, 23, 24]) {
      const invented = new VirtualCards(cpu, cardRate(H100), { holdUntilMs: 1_700, names: () => `GPU-invented-${machineId}` });
      const outcome = await challenge(attestor, clock, machineId, { model: A100, units: 1 }, invented);
      assert.equal(outcome.outcome, "pass", `machine ${machineId}: ${verdict(outcome)}`);
      clock.now += 60_000;
    }
    // The bound of challenging all of a provider's machines at once: n A100 claims need
    // n × 0.7 × 624 × 1500/1800 = n × 364 (scaled) of the H100's 0.85 × 1979 = 1682: n ≤ 4.
    const atOnce = async (n: number) => {
      const outcomes: ChallengeOutcome[] = [];
      for (let machineId = 31; machineId < 31 + n; machineId++) {
        const start = clock.now;
        outcomes.push(
          await challenge(attestor, clock, machineId, { model: A100, units: 1 }, new VirtualCards(cpu, cardRate(H100), { share: n, names: () => `GPU-at-once-${machineId}` })),
        );
        clock.now = start; // the same instant for every machine of the round
      }
      clock.now += 60_000;
      return outcomes;
    };
    assert.deepEqual(
      (await atOnce(4)).map((o) => o.outcome),
      ["pass", "pass", "pass", "pass"],
    );
    const five = await atOnce(5);
    assert.ok(
      five.every((o) => o.outcome === "fail" && o.reason === "slow_for_class"),
      five.map(verdict).join("; "),
    );
  });

  it("cheap cards add up: 17 RTX 4090s pass the GEMM phase as 8 × H100 (φ = 17·660 / (8·1979) = 0.709 ≥ 0.686) and 16 do not (0.667)", async () => {
    const clock = { now: 1_700_000_000_000 };
    const attestor = attestorOn(clock);
    const claim = { model: H100, units: 8 };
    // Naming eight of their own UUIDs, all distinct: the registry sees nothing wrong.
    const seventeen = await challenge(attestor, clock, 41, claim, new VirtualCards(cpu, 17 * cardRate(RTX4090), { names: (u) => `GPU-4090-${u}` }));
    assert.equal(seventeen.outcome, "pass", verdict(seventeen));
    const sixteen = await challenge(attestor, clock, 42, claim, new VirtualCards(cpu, 16 * cardRate(RTX4090), { names: (u) => `GPU-4090-b${u}` }));
    assert.equal(sixteen.outcome === "fail" && sixteen.reason, "slow_for_class", verdict(sixteen));
    // Eight real H100s pass with room: 8 × 0.85 × 1979 against 8 × 0.7 × 1979 × 1500/1800.
    const honest = await challenge(attestor, clock, 43, claim, new VirtualCards(cpu, 8 * cardRate(H100), { names: (u) => `GPU-h100-${u}` }));
    assert.equal(honest.outcome, "pass", verdict(honest));
  });
});

/**
 * Issue 35, item 7, through the attestor's own scheduler over libp2p on the devnet: a provider's
 * machines are challenged together (challenge rounds, docs/attestation.md "Challenge rounds").
 * Simulated cards on the wall clock: the CPU runner computes the real rows, and a card model holds
 * each commit until the card, at 85 % of its datasheet rate (scaled to test size), would have
 * finished it. The attestor's classes are the datasheet's scaled the same way, with the class's
 * calibrated efficiency (0.7), T = 3,000 ms of compute and L = 800 ms of allowance (more than the
 * gpu preset's 1/5 of T: a loaded machine's delays make no commit earlier, only later, so the
 * room goes to the machines that must pass).
 *
 * - Five A100-80GB machine ids backed by one H100 that paces itself as an A100 and invents a UUID
 *   per machine: challenged together, the card finishes them one after another and four fit in the
 *   deadline: n × 0.7 × 624 × 3000/3800 = n × 345 of the card's 0.85 × 1979 = 1682 (scaled), n ≤ 4.
 *   The fifth fails `slow_for_class` (challenged one after another, as before rounds, all five pass:
 *   test/node/attest/gpu-sharing.test.ts).
 * - The same card answering `busy` for the machine it cannot fit (the old answer of a node
 *   computing one challenge at a time): that machine fails `refused`, not an error tried again alone.
 * - An honest provider with five machines, each its own A100: all five pass every round.
 */
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { INT8_DENSE_TOPS } from "../../common/attest/params.js";
import { devnetAccount } from "../../common/devnet.js";
import type { ChallengeRecord } from "../../node/attest/challenge/index.js";
import { ChallengeRefusedError } from "../../node/attest/errors.js";
import { CpuRunner, type Runner, type RunnerChallenge, type RunnerCommitment } from "../../node/attest/runner/index.js";
import { addrOf, startAttestorDaemon, startProviderWithMachines, type TestDaemon } from "../support/attest.js";
import { startDevnet, type Devnet } from "../support/devnet.js";
import { waitFor } from "../support/wait.js";

const A100 = "A100-80GB";
const H100 = "H100-80GB-SXM";
/** Datasheet TOPS to test ops per second: an A100's scaled rate is 16·10⁶ int8 ops/s. */
const SCALE = 16e6 / (INT8_DENSE_TOPS[A100]! * 1e12);
const ACHIEVED = 0.85;
const cardRate = (model: string) => INT8_DENSE_TOPS[model]! * 1e12 * SCALE * ACHIEVED;
const MACHINE = { model: A100, units: 1, vramMiB: 81_920 };
const MACHINES = 5;

/** One simulated card: its rate (ops/s), how long it holds a commit at least (pacing as a slower class), and when it is free. */
type Card = { rate: number; holdMs: number; freeAtMs: number; active: number };

/**
 * Simulated cards behind a provider's machines (`cardOf(machineId)`): a card computes the
 * challenges it gets one after another at its rate. `refuseBeyond`: a card already computing that
 * many answers `busy` instead.
 */
class SimulatedCards implements Runner {
  readonly name = "simulated-cards";
  constructor(
    private readonly cpu: CpuRunner,
    private readonly cardOf: (machineId: number) => Card,
    private readonly o: { refuseBeyond?: number; uuid: (machineId: number, unit: number) => string },
  ) {}
  async computeCommit(challenge: RunnerChallenge, options?: { signal?: AbortSignal }): Promise<RunnerCommitment> {
    const card = this.cardOf(challenge.machineId!);
    if (this.o.refuseBeyond !== undefined && card.active >= this.o.refuseBeyond) throw new ChallengeRefusedError("busy", "Another challenge is being computed.");
    const arrivedMs = Date.now();
    const ops = 2 * challenge.rowsPerUnit * challenge.units.length * challenge.cols * challenge.cols * challenge.rounds;
    const doneMs = Math.max(arrivedMs, card.freeAtMs) + (ops * 1000) / card.rate;
    card.freeAtMs = doneMs;
    card.active++;
    try {
      const base = await this.cpu.computeCommit(challenge, options);
      await sleep(Math.max(0, Math.max(doneMs, arrivedMs + card.holdMs) - Date.now()));
      return { ...base, devices: challenge.units.map((_, unit) => this.o.uuid(challenge.machineId!, unit)) };
    } finally {
      card.active--;
    }
  }
  async close(): Promise<void> {}
}

describe("challenge rounds: a provider's machines are challenged together, so one card cannot back several (issue 35, item 7)", function () {
  this.timeout(120_000);
  let devnet: Devnet;
  const nodes: TestDaemon[] = [];
  const cpu = new CpuRunner({ workers: 1 });
  before(async () => {
    devnet = await startDevnet({ attestors: [devnetAccount(7).address] });
  });
  after(async () => {
    for (const node of nodes.reverse()) await node.close().catch(() => undefined);
    await cpu.close();
    await devnet?.close();
  });

  /** A provider daemon (account `index`) with MACHINES A100 machines answered by `runner`, offers published. */
  const provider = (index: number, runner: Runner) => startProviderWithMachines(devnet, index, { runner, count: MACHINES, machine: MACHINE }, nodes);

  it("five A100 machine ids on one paced H100: challenged together four pass and the fifth fails slow_for_class (or refused when the card answers busy); five real A100s pass", async () => {
    // The H100 holds each commit at least 2.2 s: an A100's pace (the class ceiling, 1.15 × 624 scaled, needs ≥ 1.83 s).
    const h100 = (): Card => ({ rate: cardRate(H100), holdMs: 2_200, freeAtMs: 0, active: 0 });
    const lateCard = h100();
    const late = await provider(1, new SimulatedCards(cpu, () => lateCard, { uuid: (id, u) => `GPU-invented-${id}-${u}` }));
    const busyCard = h100();
    const busy = await provider(2, new SimulatedCards(cpu, () => busyCard, { refuseBeyond: 4, uuid: (id, u) => `GPU-invented-${id}-${u}` }));
    const a100s = new Map<number, Card>();
    const honest = await provider(
      3,
      new SimulatedCards(cpu, (id) => a100s.get(id) ?? a100s.set(id, { rate: cardRate(A100), holdMs: 0, freeAtMs: 0, active: 0 }).get(id)!, {
        uuid: (id, u) => `GPU-a100-${id}-${u}`,
      }),
    );

    const classes = Object.fromEntries([A100, H100].map((model) => [model, { int8Tops: INT8_DENSE_TOPS[model]! * SCALE, cols: 64, rounds: 1, efficiency: 0.7 }]));
    const started = await startAttestorDaemon(devnet, 7, {
      p2p: { bootstrap: [late, busy, honest].map(({ daemon }) => addrOf(daemon)) },
      attest: {
        liveness: { enabled: false },
        challenge: { preset: "gpu", targetComputeMs: 3_000, latencyAllowanceMs: 800, classes },
        // The scheduler's own scans only: the offers' arrival starts them; three providers' rounds at once.
        attestor: { scheduleIntervalMs: 3_600_000, maxConcurrentChallenges: 3 },
      },
    });
    nodes.push(started.daemon);

    // Offers arrive one by one, and each new machine's round takes its provider's others along; the
    // round that matters is the one of all five.
    const fullRound = async (ids: number[]): Promise<ChallengeRecord[] | undefined> => {
      const records = (await Promise.all(ids.map((id) => started.attestor.results.history(id, 20)))).flat();
      const byRound = new Map<string, ChallengeRecord[]>();
      for (const record of records.filter((r) => r.round?.machines.length === ids.length)) byRound.set(record.round!.id, [...(byRound.get(record.round!.id) ?? []), record]);
      return [...byRound.values()].find((group) => group.length === ids.length);
    };
    const show = (records: ChallengeRecord[]) => JSON.stringify(records.map((r) => [r.machineId, r.outcome, r.reason, r.detail]));
    const [lateRound, busyRound, honestRound] = (await Promise.all(
      [late, busy, honest].map(({ ids }) =>
        waitFor<ChallengeRecord[] | undefined>(`a round of machines ${ids.join(", ")}`, () => fullRound(ids), { timeoutMs: 40_000, intervalMs: 200 }),
      ),
    )) as ChallengeRecord[][] as [ChallengeRecord[], ChallengeRecord[], ChallengeRecord[]];

    // One round: every record names it, the same five machines, and the same issue-time deadline.
    for (const [round, ids] of [
      [lateRound, late.ids],
      [busyRound, busy.ids],
      [honestRound, honest.ids],
    ] as const) {
      assert.deepEqual(
        [...round.map((r) => r.machineId)].sort((a, b) => a - b),
        [...ids].sort((a, b) => a - b),
      );
      assert.deepEqual([...new Set(round.map((r) => r.round!.machines.join(",")))], [[...round[0]!.round!.machines].join(",")]);
      assert.ok(round.every((r) => r.trigger === "schedule"));
    }

    // The paced H100: four in time, the fifth late, measured at an A100's 364 (scaled) or less: the card's rate is spent.
    assert.equal(lateRound.filter((r) => r.outcome === "pass").length, 4, show(lateRound));
    const slow = lateRound.filter((r) => r.outcome !== "pass");
    assert.deepEqual(
      slow.map((r) => [r.outcome, r.reason]),
      [["fail", "slow_for_class"]],
      show(lateRound),
    );
    assert.match(slow[0]!.detail!, /correct rows, but committed \d+ ms after the challenge; a A100-80GB × 1 had 380\d ms/);

    // Answering busy for the one it cannot fit is the failure `refused`, naming the round and the machines committed.
    assert.equal(busyRound.filter((r) => r.outcome === "pass").length, 4, show(busyRound));
    const refused = busyRound.filter((r) => r.outcome !== "pass");
    assert.deepEqual(
      refused.map((r) => [r.outcome, r.reason]),
      [["fail", "refused"]],
      show(busyRound),
    );
    assert.match(
      refused[0]!.detail!,
      new RegExp(`^answered busy \\(Another challenge is being computed\\.\\) while its node committed machines [\\d, ]+ of the same round ${busyRound[0]!.round!.id}`),
    );
    // A failure, so the machine is in its backoff and its earlier attestation is revoked (a failure notice).
    assert.equal((await started.attestor.failures.ofMachine(refused[0]!.machineId, Date.now())).failures, 1);

    // Five real A100s, challenged together, all pass.
    assert.deepEqual(
      honestRound.map((r) => r.outcome),
      ["pass", "pass", "pass", "pass", "pass"],
      show(honestRound),
    );
  });
});

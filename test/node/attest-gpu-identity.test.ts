/**
 * Issue 35, item 7, over libp2p on the devnet: one GPU backs one machine. A provider declares four
 * A100 machines and answers every challenge with one card, its runner naming that card's UUID (as
 * `nvidia-smi -L` prints it) for each; another provider names the same UUID for its machine. The
 * attestor passes the first machine it challenges and fails the others `duplicate_gpus`, naming the
 * machine the card backs; it still knows after a restart (the registry is in level).
 * Simulated-GPU attacks on the class ceiling and time-sharing: test/node/attest/gpu-sharing.test.ts.
 */
import assert from "node:assert/strict";
import { multiaddr } from "@multiformats/multiaddr";
import { devnetAccount } from "../../common/devnet.js";
import type { ChallengeRecord } from "../../node/attest/challenge/index.js";
import { CpuRunner, type Runner, type RunnerChallenge, type RunnerCommitment } from "../../node/attest/runner/index.js";
import { addrOf, startAttestorDaemon, startProviderWithMachines, type TestDaemon } from "../support/attest.js";
import { startDevnet, type Devnet } from "../support/devnet.js";
import { waitFor } from "../support/wait.js";

const CARD = "GPU-5e0c1d2e-0000-4000-8000-00000000c0de";

/** The CPU runner's answers, naming `uuid(machineId)` for every unit. */
class OneCard implements Runner {
  readonly name = "one-card";
  constructor(
    private readonly cpu: Runner,
    private readonly uuid: (machineId: number) => string,
  ) {}
  async computeCommit(challenge: RunnerChallenge, options?: { signal?: AbortSignal }): Promise<RunnerCommitment> {
    return { ...(await this.cpu.computeCommit(challenge, options)), devices: challenge.units.map(() => this.uuid(challenge.machineId!)) };
  }
  async close(): Promise<void> {}
}

describe("one GPU backs one machine: the attestor's GPU registry over libp2p (issue 35, item 7)", function () {
  this.timeout(180_000);
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

  /** A provider daemon (account `index`) with `count` A100 machines, all answered by `runner`; their offers published. */
  const provider = (index: number, count: number, runner: Runner) => startProviderWithMachines(devnet, index, { runner, count }, nodes);

  const attestorConfig = (bootstrap: string[], dataDir?: string) => ({
    ...(dataDir ? { dataDir } : {}),
    p2p: { bootstrap },
    // One challenge at a time, and no backoff after a failure: each machine gets its own verdict here.
    attest: { liveness: { enabled: false }, attestor: { scheduleIntervalMs: 3_600_000, maxConcurrentChallenges: 1, retryAfterFailureSeconds: 0 } },
  });

  it("the first machine a card answers for passes; the provider's other machines and another provider's machine naming it fail duplicate_gpus, also after the attestor restarts", async () => {
    const named: Record<"four" | "other", (machineId: number) => string> = { four: () => CARD, other: () => CARD };
    const four = await provider(1, 4, new OneCard(cpu, (id) => named.four(id)));
    const other = await provider(2, 1, new OneCard(cpu, (id) => named.other(id)));
    const all = [...four.ids, ...other.ids];
    const started = await startAttestorDaemon(devnet, 7, attestorConfig([addrOf(four.daemon), addrOf(other.daemon)]));
    nodes.push(started.daemon);
    for (const machineId of all) {
      await waitFor(`machine ${machineId}'s offer in the attestor's book`, () => started.daemon.offers.book.byMachine(machineId).length > 0, { timeoutMs: 30_000 });
    }
    // Whichever machine the attestor happens to challenge first holds the card; every other fails.
    const verdicts: ChallengeRecord[] = [];
    for (const machineId of all) verdicts.push(await started.attestor.challenger.challenge(machineId, "request"));
    const passed = verdicts.filter((record) => record.outcome === "pass");
    assert.equal(passed.length, 1, JSON.stringify(verdicts.map((r) => [r.machineId, r.outcome, r.reason, r.detail])));
    const holder = passed[0]!.machineId;
    const backs = new RegExp(`^GPU ${CARD} backs machine 0x[0-9a-f]{40}/${holder} \\((passed \\d+ s ago|committed first in the same round)\\): one GPU cannot back two machines$`);
    const refused = verdicts.filter((r) => r.machineId !== holder);
    assert.equal(refused.length, 4);
    for (const record of refused) {
      assert.deepEqual([record.outcome, record.reason], ["fail", "duplicate_gpus"], record.detail ?? "");
      assert.match(record.detail ?? "", backs);
    }
    // Across providers too: the four-machine provider's and the other provider's machines are both refused.
    assert.ok(refused.some((r) => four.ids.includes(r.machineId)) && (holder === other.ids[0] || refused.some((r) => r.machineId === other.ids[0])));

    // Restarted on the same data dir, the attestor still knows which machine the card backs.
    const dataDir = started.daemon.config.dataDir;
    nodes.splice(nodes.indexOf(started.daemon), 1);
    await started.daemon.close({ keepData: true });
    const restarted = await startAttestorDaemon(devnet, 7, attestorConfig([addrOf(four.daemon), addrOf(other.daemon)], dataDir));
    nodes.push(restarted.daemon);
    const victim = refused[0]!.machineId;
    await restarted.daemon.p2p.host.dial(multiaddr(addrOf(four.ids.includes(victim) ? four.daemon : other.daemon)));
    const again = await restarted.attestor.challenger.challenge(victim, "request");
    assert.deepEqual([again.outcome, again.reason], ["fail", "duplicate_gpus"], again.detail ?? "");
    assert.match(again.detail ?? "", backs);

    // The card moves: the machine it backed passes naming its replacement, and the card is free.
    const holderIsOther = other.ids.includes(holder);
    // Its provider's machines, challenged together with it (a round), each name a card of their own now.
    named[holderIsOther ? "other" : "four"] = (id) => `GPU-5e0c1d2e-0000-4000-8000-00000000bee${id}`;
    // The freed card, named by all the machines of a provider challenged together (a round: docs/attestation.md
    // "Challenge rounds"), goes to the first to commit; the others fail duplicate_gpus. Exactly one machine of the round passes.
    const passedInRound = async (record: ChallengeRecord) => {
      const ofRound = async (id: number) => (await restarted.attestor.results.history(id, 20)).find((r) => r.round?.id === record.round!.id)!;
      const records = record.round ? await Promise.all(record.round.machines.map(ofRound)) : [record];
      return records.filter((r) => r.outcome === "pass").map((r) => r.machineId);
    };
    // The attestor's own scans challenge the failed machines too (no backoff here): a request may join one started
    // before the card moved, so the verdict asked for is that of a challenge started after.
    const movedAt = Date.now();
    const challengeAfterMove = async (machineId: number) => {
      for (let tries = 0; ; tries++) {
        const record = await restarted.attestor.challenger.challenge(machineId, "request");
        if (record.startedAtMs >= movedAt || tries === 5) return record;
      }
    };
    const replaced = await challengeAfterMove(holder);
    assert.equal(replaced.outcome, "pass", `${replaced.reason}: ${replaced.detail}`);
    const stillNaming = holderIsOther ? four.ids[0]! : other.ids[0]!;
    await restarted.daemon.p2p.host.dial(multiaddr(addrOf(holderIsOther ? four.daemon : other.daemon)));
    const freed = await challengeAfterMove(stillNaming);
    assert.equal((await passedInRound(freed)).length, 1, `${freed.reason}: ${freed.detail}`);
  });
});

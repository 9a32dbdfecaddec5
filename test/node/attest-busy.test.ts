/**
 * Issue 24, item 2: one GPU time-shared between two machine ids. While it computes a challenge of
 * one id, a challenge of the other is refused `busy`; a busy refusal is no verdict once, but a
 * machine that is busy `maxBusyRefusals` times in a row fails (busy_too_often), and its provider
 * is held in backoff like any failure.
 */
import assert from "node:assert/strict";
import { devnetAccount } from "../../common/devnet.js";
import type { ProviderMachine } from "../../node/attest/provider.js";
import { CpuRunner } from "../../node/attest/runner/cpu.js";
import type { Runner, RunnerChallenge, RunnerCommitment } from "../../node/attest/runner/types.js";
import { addrOf, machineOffer, startAttestorDaemon, startProviderDaemon, type TestDaemon } from "../support/attest.js";
import { registerProvider, startDevnet, type Devnet } from "../support/devnet.js";
import { waitFor } from "../support/wait.js";

const A100 = { model: "A100-80GB", units: 1, vramMiB: 81_920 };

/** One device behind every machine id: the first challenge holds it until `release()`. */
class SharedDeviceRunner implements Runner {
  readonly name = "shared-device";
  started = 0;
  private open!: () => void;
  private readonly gate = new Promise<void>((resolve) => (this.open = resolve));
  constructor(private readonly cpu: CpuRunner) {}
  release(): void {
    this.open();
  }
  async computeCommit(challenge: RunnerChallenge, options?: { signal?: AbortSignal }): Promise<RunnerCommitment> {
    if (this.started++ === 0) await this.gate;
    return this.cpu.computeCommit(challenge, options);
  }
  async close(): Promise<void> {}
}

describe("time-sharing one GPU between machine ids: busy counts as failed after a bound (issue 24, item 2)", function () {
  this.timeout(180_000);
  let devnet: Devnet;
  let cpu: CpuRunner;
  const nodes: TestDaemon[] = [];
  before(async () => {
    devnet = await startDevnet({ attestors: [devnetAccount(7).address] });
    cpu = new CpuRunner({ workers: 1 });
  });
  after(async () => {
    for (const node of nodes.reverse()) await node.close().catch(() => undefined);
    await cpu?.close();
    await devnet?.close();
  });

  it("the second machine id is busy while the first computes, and fails busy_too_often on the third refusal; the provider is then in backoff", async () => {
    const machines: ProviderMachine[] = [];
    const runner = new SharedDeviceRunner(cpu);
    const provider = await startProviderDaemon(devnet, 1, { runner, machines: () => machines });
    nodes.push(provider.daemon);
    const [first, second] = await registerProvider(devnet, await devnet.wallet(1), {
      peerId: provider.daemon.p2p.host.peerId.toString(),
      stake: 100_000_000n,
      machines: [A100, A100],
    });
    machines.push({ machineId: first!, ...A100 }, { machineId: second!, ...A100 });
    await provider.daemon.offers.publisher!.set(machineOffer(machines[0]!));

    const { daemon, attestor } = await startAttestorDaemon(devnet, 7, {
      p2p: { bootstrap: [addrOf(provider.daemon)] },
      attest: { liveness: { enabled: false }, attestor: { scheduleIntervalMs: 3_600_000, maxConcurrentChallenges: 4, maxBusyRefusals: 3 } },
    });
    nodes.push(daemon);
    await waitFor("the first offer in the attestor's book", () => daemon.offers.book.byMachine(first!).length > 0, { timeoutMs: 30_000 });
    // The first machine id takes the device (the scan started its challenge; this joins it).
    const holding = attestor.challenger.challenge(first!, "request");
    await waitFor("the device computing the first machine's challenge", () => runner.started >= 1, { timeoutMs: 30_000 });
    // The second machine id appears (its offer starts a scan too) and is challenged while the device is held.
    await provider.daemon.offers.publisher!.set(machineOffer(machines[1]!));
    await waitFor("the second offer in the attestor's book", () => daemon.offers.book.byMachine(second!).length > 0, { timeoutMs: 30_000 });
    let last = await attestor.challenger.challenge(second!, "request");
    for (let attempt = 0; attempt < 5 && last.outcome === "error" && last.reason === "busy"; attempt++) last = await attestor.challenger.challenge(second!, "request");
    assert.deepEqual([last.outcome, last.reason], ["fail", "busy_too_often"], last.detail ?? "");
    assert.match(last.detail ?? "", /busy to 3 challenges in a row/);
    // Exactly two busy answers were excused before the third failed.
    const history = await attestor.results.history(second!);
    assert.deepEqual(
      history.map((record) => record.reason),
      ["busy_too_often", "busy", "busy"],
    );
    const busyId = second;

    // A failure like any other: the provider's machines wait out the backoff, the holder included.
    const failure = await attestor.results.latestProviderFailure(devnetAccount(1).address);
    assert.equal(failure?.reason, "busy_too_often");
    runner.release();
    await holding;
    assert.equal(await attestor.challenger.isDue(first!), false);
    assert.equal(await attestor.challenger.isDue(busyId!), false);
    const held = await attestor.challenger.challenge(busyId!, "request");
    assert.deepEqual([held.outcome, held.reason], ["error", "backoff"]);
  });
});

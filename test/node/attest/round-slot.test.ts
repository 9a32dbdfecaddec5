/**
 * Issue 35, item 7, at the provider's ChallengeResponder (no network): a node serving several
 * machines computes one attestor's challenge round (its challenges of different machines, issued
 * at the same instant) concurrently, so an honest multi-machine node passes a round; anything else
 * while a round computes is `busy` as before: another attestor, another round, a second challenge of
 * a machine being computed, a runner that computes one challenge at a time. A round one of whose
 * challenges was answered `busy` is answered `busy` whole.
 */
import assert from "node:assert/strict";
import type { Hex } from "viem";
import { signChallenge } from "../../../common/attest/challenge.js";
import type { ChallengeMessage } from "../../../common/attest/messages.js";
import { ChallengeRefusedError } from "../../../node/attest/errors.js";
import { ChallengeResponder } from "../../../node/attest/challenge/index.js";
import { CpuRunner, type Runner, type RunnerChallenge, type RunnerCommitment } from "../../../node/attest/runner/index.js";
import { attestorAccount, domain, isAttestor, otherAttestorAccount, providerAccount } from "./helpers.js";

const MACHINES = [1, 2, 3].map((machineId) => ({ machineId, model: "A100-80GB", units: 1, vramMiB: 81_920 }));

/** A runner whose computes wait until released (those started before release()), counting how many run at once. */
class GatedRunner implements Runner {
  readonly name = "gated";
  running = 0;
  most = 0;
  private open!: () => void;
  private gate = this.closedGate();
  constructor(
    private readonly cpu: CpuRunner,
    readonly concurrent?: boolean,
  ) {}
  async computeCommit(challenge: RunnerChallenge, options?: { signal?: AbortSignal }): Promise<RunnerCommitment> {
    const gate = this.gate;
    this.running++;
    this.most = Math.max(this.most, this.running);
    try {
      const commitment = await this.cpu.computeCommit(challenge, options);
      await gate;
      return commitment;
    } finally {
      this.running--;
    }
  }
  release(): void {
    this.open();
    this.gate = this.closedGate();
  }
  private closedGate(): Promise<void> {
    return new Promise<void>((resolve) => (this.open = resolve));
  }
  async close(): Promise<void> {}
}

let seeds = 0;
function challenge(account: typeof attestorAccount, machineId: number, issuedAtMs: number): Promise<ChallengeMessage> {
  const machine = MACHINES.find((m) => m.machineId === machineId)!;
  return signChallenge(account, domain, {
    attestor: account.address,
    provider: providerAccount.address,
    ...machine,
    seed: `0x${(++seeds).toString(16).padStart(64, "0")}` as Hex,
    rowsPerUnit: 64,
    cols: 64,
    rounds: 1,
    issuedAtMs,
    deadlineAtMs: issuedAtMs + 10_000,
    cutoffAtMs: issuedAtMs + 40_000,
  });
}

/** Waits for `done`, failing at once when one of `works` ends first (it was refused). */
async function until(done: () => boolean, works: Promise<unknown>[]): Promise<void> {
  let ended: unknown;
  for (const work of works)
    work.then(
      () => (ended ??= "answered"),
      (error: unknown) => (ended ??= error),
    );
  for (let tries = 0; !done(); tries++) {
    if (ended !== undefined) throw new Error(`a challenge ended before the others were computing: ${String(ended)}`);
    if (tries > 1_000) throw new Error("the challenges were not computing after 5 s");
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

async function refusal(work: Promise<unknown>): Promise<string> {
  try {
    await work;
  } catch (error) {
    assert.ok(error instanceof ChallengeRefusedError, String(error));
    return `${error.reason}: ${error.shortMessage}`;
  }
  return "answered";
}

describe("a provider's node computes one attestor's challenge round at once (issue 35, item 7)", function () {
  this.timeout(30_000);
  const cpu = new CpuRunner({ workers: 1 });
  after(async () => cpu.close());
  const clock = { ms: 1_700_000_000_000 };
  const responder = (runner: Runner) =>
    new ChallengeResponder({
      provider: providerAccount.address,
      signer: providerAccount,
      machine: (id) => MACHINES.find((m) => m.machineId === id),
      runner,
      domain,
      isAttestor,
      now: () => clock.ms,
    });

  it("a round's three machines compute together and commit; another attestor, another round of the same attestor and a second challenge of a machine are busy meanwhile", async () => {
    const runner = new GatedRunner(cpu);
    const node = responder(runner);
    const issued = clock.ms;
    const round = await Promise.all(MACHINES.map((m) => challenge(attestorAccount, m.machineId, issued)));
    const commits = round.map((message) => node.respond(JSON.parse(JSON.stringify(message))));
    await until(() => runner.running === 3, commits);
    assert.equal(
      await refusal(node.respond(await challenge(otherAttestorAccount, 1, issued))),
      "busy: Another challenge is being computed.",
      "another attestor's challenge, even issued at the same instant",
    );
    assert.equal(await refusal(node.respond(await challenge(attestorAccount, 2, issued + 1))), "busy: Another challenge is being computed.", "another round of the same attestor");
    assert.equal(await refusal(node.respond(await challenge(attestorAccount, 3, issued))), "busy: A challenge of machine 3 is being computed.", "a second challenge of machine 3");
    runner.release();
    const answered = await Promise.all(commits);
    assert.deepEqual(
      answered.map((commit) => commit.challengeId),
      round.map((message) => message.id),
    );
    assert.equal(runner.most, 3);
    // Free again: anyone's challenge is taken.
    const next = node.respond(await challenge(otherAttestorAccount, 1, clock.ms + 100));
    await until(() => runner.running === 1, [next]);
    runner.release();
    assert.equal((await next).type, "commit");
  });

  it("a round met busy is busy whole, even once the slot is free; a runner that computes one challenge at a time answers the round's others busy", async () => {
    const runner = new GatedRunner(cpu);
    const node = responder(runner);
    const other = node.respond(await challenge(otherAttestorAccount, 1, clock.ms));
    await until(() => runner.running === 1, [other]);
    const issued = clock.ms + 5;
    const [first, second] = await Promise.all([2, 3].map((id) => challenge(attestorAccount, id, issued)));
    assert.equal(await refusal(node.respond(first)), "busy: Another challenge is being computed.");
    runner.release();
    await other;
    assert.equal(
      await refusal(node.respond(second)),
      "busy: Another challenge of this round was answered busy: a round is computed whole or not at all.",
      "the slot is free, but the round was refused",
    );

    const single = new GatedRunner(cpu, false);
    const one = responder(single);
    const at = clock.ms + 10;
    const [a, b] = await Promise.all([1, 2].map((id) => challenge(attestorAccount, id, at)));
    const committed = one.respond(a);
    await until(() => single.running === 1, [committed]);
    assert.equal(await refusal(one.respond(b)), "busy: This node's runner (gated) computes one challenge at a time: it cannot compute a round of several machines at once.");
    single.release();
    assert.equal((await committed).type, "commit");
  });
});

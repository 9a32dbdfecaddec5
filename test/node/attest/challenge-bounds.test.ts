/**
 * Issue 35, items 5 and 8, at the provider's ChallengeResponder (no network: the responder is
 * what enforces them). An attestor could sign a challenge of any size and window and hold the
 * provider's single slot for minutes; attestors together, or requests from anyone, could take most
 * of a leased GPU's time. Now a challenge out of the protocol's bounds (common/attest/bounds.ts) is
 * refused before any compute, an attestor past its share of the slot is refused, and all
 * challenges of a leased machine share one budget; each such refusal is signed by the provider
 * (common/attest/refusal.ts) and checks out against the challenge's fields.
 */
import assert from "node:assert/strict";
import { getAddress, type Hex } from "viem";
import { challengeBoundsViolation, MAX_ATTESTOR_SLOT_MS, MAX_CHALLENGE_WINDOW_MS } from "../../../common/attest/bounds.js";
import { signChallenge } from "../../../common/attest/challenge.js";
import type { ChallengeMessage, RefusalMessage } from "../../../common/attest/messages.js";
import { recoverRefusalSigner } from "../../../common/attest/refusal.js";
import { ChallengeRefusedError } from "../../../node/attest/errors.js";
import { ChallengeResponder, type ProviderLease } from "../../../node/attest/challenge/index.js";
import { CpuRunner, type Runner, type RunnerChallenge } from "../../../node/attest/runner/index.js";
import { attestorAccount, domain, isAttestor, otherAttestorAccount, providerAccount } from "./helpers.js";

const machine = { machineId: 7, model: "H100-80GB-SXM", units: 1, vramMiB: 81_559 };

/** A runner whose every compute takes `computeMs` on the test's clock (the CPU runner computes the rows). */
class ClockRunner implements Runner {
  readonly name = "clock";
  computed = 0;
  constructor(
    private readonly cpu: CpuRunner,
    private readonly clock: { ms: number },
    public computeMs: number,
  ) {}
  async computeCommit(challenge: RunnerChallenge, options?: { signal?: AbortSignal }) {
    this.computed++;
    const commitment = await this.cpu.computeCommit(challenge, options);
    this.clock.ms += this.computeMs;
    return commitment;
  }
  async close(): Promise<void> {}
}

let seedCounter = 0;
async function challengeFrom(
  account: typeof attestorAccount,
  nowMs: number,
  fields: { rowsPerUnit?: number; cols?: number; rounds?: number; windowMs?: number } = {},
): Promise<ChallengeMessage> {
  const seed = `0x${(++seedCounter).toString(16).padStart(64, "0")}` as Hex;
  const windowMs = fields.windowMs ?? 40_000;
  return signChallenge(account, domain, {
    attestor: account.address,
    provider: providerAccount.address,
    ...machine,
    seed,
    rowsPerUnit: fields.rowsPerUnit ?? 64,
    cols: fields.cols ?? 64,
    rounds: fields.rounds ?? 2,
    issuedAtMs: nowMs,
    deadlineAtMs: nowMs + Math.floor(windowMs / 4),
    cutoffAtMs: nowMs + windowMs,
  });
}

async function refusalOf(responder: ChallengeResponder, message: ChallengeMessage): Promise<RefusalMessage> {
  try {
    await responder.respond(JSON.parse(JSON.stringify(message)));
  } catch (error) {
    assert.ok(error instanceof ChallengeRefusedError, String(error));
    return responder.signedRefusal(message.id, error);
  }
  assert.fail("the challenge was answered");
}

/** The refusal is signed by the provider for exactly these fields. */
async function assertSignedByProvider(refusal: RefusalMessage, message: ChallengeMessage): Promise<void> {
  assert.ok(refusal.signature && refusal.usage, "the refusal is signed");
  const signer = await recoverRefusalSigner(domain, message.id, refusal.reason as "out_of_bounds", refusal.usage, refusal.signature);
  assert.equal(getAddress(signer!), getAddress(providerAccount.address));
  const forged = await recoverRefusalSigner(domain, message.id, refusal.reason as "out_of_bounds", { ...refusal.usage, limitMs: refusal.usage.limitMs + 1 }, refusal.signature);
  assert.notEqual(forged && getAddress(forged), getAddress(providerAccount.address), "the numbers are under the signature");
}

describe("challenge bounds, attestor share of the slot and one check budget per lease at the provider (issue 35, items 5 and 8)", function () {
  this.timeout(60_000);
  let cpu: CpuRunner;
  before(() => {
    cpu = new CpuRunner({ workers: 1 });
  });
  after(async () => {
    await cpu.close();
  });

  function responder(clock: { ms: number }, runner: Runner, extra: Partial<ConstructorParameters<typeof ChallengeResponder>[0]> = {}) {
    return new ChallengeResponder({
      provider: providerAccount.address,
      signer: providerAccount,
      machine: (id) => (id === machine.machineId ? machine : undefined),
      runner,
      domain,
      isAttestor,
      now: () => clock.ms,
      ...extra,
    });
  }

  it("an attestor asking for a 9-minute window or a huge challenge is refused out_of_bounds, signed, before any compute; the slot is free for the next attestor at once", async () => {
    const clock = { ms: 1_800_000_000_000 };
    const runner = new ClockRunner(cpu, clock, 1_000);
    const provider = responder(clock, runner);
    const long = await challengeFrom(attestorAccount, clock.ms, { windowMs: 9 * 60_000 });
    assert.match(challengeBoundsViolation(long) ?? "", /window/);
    const huge = await challengeFrom(attestorAccount, clock.ms, { rowsPerUnit: 2 ** 20, cols: 16_384, rounds: 1024 });
    assert.match(challengeBoundsViolation(huge) ?? "", /datasheet rate/);
    for (const message of [long, huge]) {
      const refusal = await refusalOf(provider, message);
      assert.equal(refusal.reason, "out_of_bounds");
      await assertSignedByProvider(refusal, message);
    }
    assert.equal(runner.computed, 0, "nothing was computed");
    // The window at the bound is accepted, and another attestor's challenge runs at once.
    const atBound = await challengeFrom(otherAttestorAccount, clock.ms, { windowMs: MAX_CHALLENGE_WINDOW_MS });
    assert.equal(challengeBoundsViolation(atBound), undefined);
    const commit = await provider.respond(JSON.parse(JSON.stringify(atBound)));
    assert.equal(commit.type, "commit");
    await provider.close();
  });

  it("one attestor holds the slot at most 15 min of an hour: past it, it is refused attestor_share (signed) while another attestor is answered; an hour later it is answered again", async () => {
    const clock = { ms: 1_800_000_000_000 };
    const runner = new ClockRunner(cpu, clock, 100_000);
    const provider = responder(clock, runner);
    let answered = 0;
    for (let n = 0; n < 20; n++) {
      const message = await challengeFrom(attestorAccount, clock.ms, { windowMs: MAX_CHALLENGE_WINDOW_MS });
      try {
        await provider.respond(JSON.parse(JSON.stringify(message)));
        answered++;
      } catch (error) {
        const refusal = await provider.signedRefusal(message.id, error);
        assert.equal(refusal.reason, "attestor_share");
        assert.deepEqual(refusal.usage, { attestorMs: 900_000, limitMs: MAX_ATTESTOR_SLOT_MS });
        await assertSignedByProvider(refusal, message);
        break;
      }
    }
    // 100 s a challenge: nine fit in 15 min (the ninth ends at 900 s), the tenth is refused.
    assert.equal(answered, 9);
    const other = await challengeFrom(otherAttestorAccount, clock.ms);
    assert.equal((await provider.respond(JSON.parse(JSON.stringify(other)))).type, "commit");
    clock.ms += 3_600_000;
    const later = await challengeFrom(attestorAccount, clock.ms);
    assert.equal((await provider.respond(JSON.parse(JSON.stringify(later)))).type, "commit");
    await provider.close();
  });

  it("all challenges of a leased machine share one budget, split over the attestor set: an attestor past its part is refused lease_budget (signed), the others are not, and the budget grows with the lease", async () => {
    const clock = { ms: 1_800_000_000_000 };
    const lease: ProviderLease = { leaseId: 3n, activatedAtMs: clock.ms, shareBps: 1_000 };
    const runner = new ClockRunner(cpu, clock, 30_000);
    const provider = responder(clock, runner, { leaseOf: (id) => (id === machine.machineId ? lease : undefined), attestorCount: () => 3 });
    const send = async (account: typeof attestorAccount) => {
      const message = await challengeFrom(account, clock.ms);
      try {
        await provider.respond(JSON.parse(JSON.stringify(message)));
        return undefined;
      } catch (error) {
        const refusal = await provider.signedRefusal(message.id, error);
        await assertSignedByProvider(refusal, message);
        return refusal;
      }
    };
    // Each attestor's first check is never refused, right at the lease's start.
    assert.equal(await send(attestorAccount), undefined);
    assert.equal(await send(otherAttestorAccount), undefined);
    // A second check of A 60 s into the lease: its part is 10 % × 60 s / 3 = 2 s, and it used 30 s.
    const refused = await send(attestorAccount);
    assert.equal(refused?.reason, "lease_budget");
    assert.deepEqual(refused?.usage, { attestorMs: 30_000, limitMs: 2_000 });
    // 960 s into the lease (10 % × 960 s / 3 = 32 s, above the 30 s it used): A may check again.
    clock.ms = lease.activatedAtMs + 960_000;
    assert.equal(await send(attestorAccount), undefined);
    // Over the lease: A's checks, 60 s, are at most its part (32 s) plus one check (30 s).
    assert.equal((await send(attestorAccount))?.reason, "lease_budget");
    await provider.close();
  });
});

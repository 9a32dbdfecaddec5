import assert from "node:assert/strict";
import type { Hex } from "viem";
import { verifyAttestation } from "../../../common/attest/attestation.js";
import { signCommit } from "../../../common/attest/commit.js";
import type { ChallengeMessage, CommitMessage, OpenResponseMessage } from "../../../common/attest/messages.js";
import { unitSubChallenges } from "../../../common/attest/units.js";
import { challengeProfileSchema, deriveChallengeParams, type ChallengeProfileInput } from "../../../common/attest/params.js";
import { modelHash } from "../../../common/gpu.js";
import { Attestor, type AttestorChallenge, type ChallengeFailure, type ChallengePass, type MachineClaim, ChallengeResponder } from "../../../node/attest/challenge/index.js";
import { CpuRunner, type Runner } from "../../../node/attest/runner/index.js";
import { attestorAccount, domain, isAttestor, openRequestOf, providerAccount, strangerAccount } from "./helpers.js";
import { WrongRowsRunner } from "../../support/attest.js";

const machine = { machineId: 7, model: "H100-80GB-SXM", units: 1, vramMiB: 81_559 };
const claim: MachineClaim = { provider: providerAccount.address, ...machine };

function attestorWith(profile: ChallengeProfileInput, recompute?: CpuRunner["recompute"]): Attestor {
  return new Attestor({ account: attestorAccount, domain, profile: challengeProfileSchema.parse(profile), recompute, attestationTtlSeconds: 3600 });
}

function responderWith(runner: Runner, options: Partial<ConstructorParameters<typeof ChallengeResponder>[0]> = {}): ChallengeResponder {
  return new ChallengeResponder({
    provider: providerAccount.address,
    signer: providerAccount,
    machine: (id) => (id === machine.machineId ? machine : undefined),
    runner,
    domain,
    isAttestor,
    ...options,
  });
}

/** Runs the exchange as a transport would: stamps receipt times with the clock. */
async function exchange(challenge: AttestorChallenge, responder: ChallengeResponder, tamper: { rows?: (r: OpenResponseMessage) => OpenResponseMessage } = {}) {
  const commit = await responder.respond(JSON.parse(JSON.stringify(challenge.message)));
  const next = challenge.onCommit(commit, Date.now());
  if (next.outcome !== "open") return next;
  let rows = await responder.open(next.request);
  if (tamper.rows) rows = tamper.rows(rows);
  return challenge.onOpen(rows, Date.now());
}

function expectFailure(outcome: unknown, reason: ChallengeFailure["reason"]): ChallengeFailure {
  const failure = outcome as ChallengeFailure;
  assert.equal(failure.outcome, "fail", `expected failure ${reason}, got ${JSON.stringify(outcome, (_k, v) => (typeof v === "bigint" ? String(v) : v))}`);
  assert.equal(failure.reason, reason, failure.detail);
  return failure;
}

describe("attest challenge protocol", function () {
  let runner: CpuRunner;
  before(async () => {
    runner = new CpuRunner({ workers: 2 });
    // Start the worker threads now: their start-up is not what the deadlines measure.
    await runner.computeCommit({ id: `0x${"01".repeat(32)}`, rowsPerUnit: 4, cols: 16, rounds: 1, units: unitSubChallenges(`0x${"01".repeat(32)}`, `0x${"02".repeat(32)}`, 1) });
  });
  after(async () => {
    await runner.close();
  });

  it("passes an honest provider and signs an attestation the offer book accepts", async () => {
    const attestor = attestorWith({ preset: "cpu-devnet" }, runner.recompute);
    const challenge = await attestor.startChallenge(claim);
    assert.equal(challenge.message.rowsPerUnit, 1024);
    const outcome = (await exchange(challenge, responderWith(runner))) as ChallengePass;
    assert.equal(outcome.outcome, "pass", JSON.stringify((outcome as unknown as ChallengeFailure).detail));
    assert.ok(outcome.measuredThroughput > 0n);
    assert.equal(outcome.measuredThroughput, (challenge.params.ops * 1000n) / BigInt(Math.max(1, outcome.elapsedMs)));
    const { attestation } = outcome.attestation;
    assert.equal(attestation.provider, providerAccount.address);
    assert.equal(attestation.machineId, 7);
    assert.equal(attestation.model, modelHash("H100-80GB-SXM"));
    assert.equal(attestation.units, 1);
    assert.equal(attestation.vramMiB, 81_559);
    assert.equal(attestation.throughput, outcome.measuredThroughput);
    assert.equal(attestation.expiry - attestation.issuedAt, 3600);
    const now = Math.floor(Date.now() / 1000);
    assert.deepEqual(await verifyAttestation(outcome.attestation, { domain, isAttestor, now }), { valid: true, attestor: attestorAccount.address });
    assert.equal((await verifyAttestation(outcome.attestation, { domain, isAttestor, now: now + 3601 })).valid, false);
    assert.equal(challenge.state, "done");
    assert.throws(() => challenge.onCommit({}, Date.now()), { name: "ChallengeStateError" });
  });

  it("fails a provider whose committed rows are not the product (wrong_rows)", async () => {
    const attestor = attestorWith({ preset: "cpu-devnet", rowsPerUnit: 64 });
    const outcome = await exchange(await attestor.startChallenge(claim), responderWith(new WrongRowsRunner()));
    expectFailure(outcome, "wrong_rows");
  });

  it("fails partial work: a runner that computed half the product never passes with 32 opened rows (issue 24, item 3)", async () => {
    const attestor = attestorWith({ preset: "cpu-devnet" });
    const responder = responderWith(new WrongRowsRunner(0.5));
    for (let attempt = 0; attempt < 6; attempt++) {
      const challenge = await attestor.startChallenge(claim);
      // 32 rows: passing needs every opened row in the computed half, probability < 2^-32 per try.
      assert.equal(challenge.params.openRows, 32);
      assert.ok(0.75 ** challenge.params.openRows <= 1.01e-4);
      expectFailure(await exchange(challenge, responder), "wrong_rows");
    }
  });

  it("fails rows that do not match the committed root (bad_proof)", async () => {
    const attestor = attestorWith({ preset: "cpu-devnet" }, runner.recompute);
    // A row changed after the commit: the right product for another row, say.
    const swapped = await exchange(await attestor.startChallenge(claim), responderWith(runner), {
      rows: (r) => ({ ...r, rows: r.rows.map((row, i) => ({ ...row, data: r.rows[(i + 1) % r.rows.length]!.data })) }),
    });
    expectFailure(swapped, "bad_proof");
    // A sibling hash changed.
    const badSibling = await exchange(await attestor.startChallenge(claim), responderWith(runner), {
      rows: (r) => ({ ...r, rows: r.rows.map((row, i) => (i === 3 ? { ...row, proof: row.proof.map((s, j) => (j === 2 ? (`0x${"ab".repeat(32)}` as Hex) : s)) } : row)) }),
    });
    expectFailure(badSibling, "bad_proof");
    // A proof cut short.
    const short = await exchange(await attestor.startChallenge(claim), responderWith(runner), {
      rows: (r) => ({ ...r, rows: r.rows.map((row) => ({ ...row, proof: row.proof.slice(1) })) }),
    });
    expectFailure(short, "bad_proof");
  });

  it("fails a commit after the cutoff (late_commit), and one that never comes", async () => {
    const attestor = attestorWith({ preset: "cpu-devnet" });
    const challenge = await attestor.startChallenge(claim);
    const commit = await responderWith(runner).respond(challenge.message);
    expectFailure(challenge.onCommit(commit, challenge.message.cutoffAtMs + 1), "late_commit");

    const silent = await attestor.startChallenge(claim);
    assert.equal(silent.timeoutAtMs, silent.message.cutoffAtMs);
    assert.equal(silent.onTimeout(silent.message.cutoffAtMs), undefined, "not yet");
    expectFailure(silent.onTimeout(silent.message.cutoffAtMs + 1), "late_commit");
  });

  it("fails a commit after the class deadline even with correct rows (slow_for_class)", async () => {
    const attestor = attestorWith({ preset: "cpu-devnet" }, runner.recompute);
    const challenge = await attestor.startChallenge(claim);
    const responder = responderWith(runner);
    const commit = await responder.respond(challenge.message);
    const next = challenge.onCommit(commit, challenge.message.deadlineAtMs + 1);
    assert.equal(next.outcome, "open", "a late commit is still opened, to measure the machine");
    const rows = await responder.open(openRequestOf(next));
    expectFailure(await challenge.onOpen(rows, challenge.message.deadlineAtMs + 2), "slow_for_class");
  }).timeout(20_000);

  it("catches a CPU claiming an H100 at H100 rates (slow_for_class, with its real rate)", async () => {
    // The gpu preset's H100 requirement (its calibrated 0.7 of 1979 TOPS) on a size a CPU finishes in a fraction
    // of a second: 2048 rows × 256² × 2 rounds = 5.4·10⁸ ops, due within 21 ms; two worker
    // threads of scalar JavaScript need well over 100 ms.
    // requireDevices off: the CPU runner names no GPU.
    const profile = { preset: "gpu", cols: 256, rounds: 2, rowsPerUnit: 2048, latencyAllowanceMs: 20, cutoffFactor: 3000, requireDevices: false } as const;
    const params = deriveChallengeParams(challengeProfileSchema.parse(profile), { model: "H100-80GB-SXM", units: 1 });
    assert.ok(params.deadlineMs <= 21);
    const attestor = attestorWith(profile, runner.recompute);
    const challenge = await attestor.startChallenge(claim);
    const failure = expectFailure(await exchange(challenge, responderWith(runner)), "slow_for_class");
    assert.ok(failure.measuredThroughput! < BigInt(Math.floor(params.requiredOpsPerSecond)));
    assert.equal(failure.fastestFittingModel, undefined, "no GPU class is as slow as a CPU");
    // The same machine, claiming what it is under the devnet profile, passes.
    const honest = await exchange(await attestorWith({ preset: "cpu-devnet" }, runner.recompute).startChallenge(claim), responderWith(runner));
    assert.equal(honest.outcome, "pass");
  }).timeout(30_000);

  it("fails an old answer replayed for a new challenge (replayed)", async () => {
    const attestor = attestorWith({ preset: "cpu-devnet" }, runner.recompute);
    const responder = responderWith(runner, { retainMs: 60_000 });
    const first = await attestor.startChallenge(claim);
    const oldCommit = await responder.respond(first.message);
    const firstNext = first.onCommit(oldCommit, Date.now());
    assert.equal(firstNext.outcome, "open");
    const oldRows = await responder.open(openRequestOf(firstNext));
    assert.equal((await first.onOpen(oldRows, Date.now())).outcome, "pass");

    // The old commit as it was.
    const second = await attestor.startChallenge(claim);
    expectFailure(second.onCommit(oldCommit, Date.now()), "replayed");
    // The old root relabelled with the new challenge id (and signed again by the provider).
    const third = await attestor.startChallenge(claim);
    const relabelledCommit = { ...oldCommit, challengeId: third.id };
    relabelledCommit.signature = await signCommit(providerAccount, domain, relabelledCommit);
    expectFailure(third.onCommit(relabelledCommit satisfies CommitMessage, Date.now()), "replayed");
    // A fresh commit, then the old challenge's rows.
    const fourth = await attestor.startChallenge(claim);
    const next = fourth.onCommit(await responder.respond(fourth.message), Date.now());
    assert.equal(next.outcome, "open");
    expectFailure(await fourth.onOpen(oldRows, Date.now()), "replayed");
    // The old rows relabelled: they do not hash to the new root (leaves are bound to the challenge id).
    const fifth = await attestor.startChallenge(claim);
    const fifthNext = fifth.onCommit(await responder.respond(fifth.message), Date.now());
    assert.equal(fifthNext.outcome, "open");
    const relabelled = { ...oldRows, challengeId: fifth.id, rows: oldRows.rows.map((row, i) => ({ ...row, ...openRequestOf(fifthNext).picks[i]! })) };
    expectFailure(await fifth.onOpen(relabelled, Date.now()), "bad_proof");
    // Each challenge has a fresh seed.
    assert.equal(new Set([first, second, third, fourth, fifth].map((c) => c.message.seed)).size, 5);
  }).timeout(20_000);

  it("fails broken messages, missing rows and a slow open (malformed, late_open)", async () => {
    const attestor = attestorWith({ preset: "cpu-devnet" }, runner.recompute);
    expectFailure((await attestor.startChallenge(claim)).onCommit({ v: 2, type: "commit", root: "0x12" }, Date.now()), "malformed");
    const wrongCount = await attestor.startChallenge(claim);
    const commit = await responderWith(runner).respond(wrongCount.message);
    expectFailure(wrongCount.onCommit({ ...commit, rowsPerUnit: commit.rowsPerUnit - 1 }, Date.now()), "malformed");
    expectFailure(await (await attestor.startChallenge(claim)).onOpen({ v: 2, type: "rows", challengeId: `0x${"00".repeat(32)}`, rows: [] }, Date.now()), "malformed");

    const missing = await exchange(await attestor.startChallenge(claim), responderWith(runner), { rows: (r) => ({ ...r, rows: r.rows.slice(1) }) });
    expectFailure(missing, "malformed");

    const slow = await attestor.startChallenge(claim);
    const slowResponder = responderWith(runner);
    const next = slow.onCommit(await slowResponder.respond(slow.message), Date.now());
    assert.equal(next.outcome, "open");
    const openDeadline = slow.timeoutAtMs!;
    const rows = await slowResponder.open(openRequestOf(next));
    expectFailure(await slow.onOpen(rows, openDeadline + 1), "late_open");
  }).timeout(20_000);

  it("lets a provider refuse challenges it should not compute", async () => {
    const attestor = attestorWith({ preset: "cpu-devnet" });
    const challenge = await attestor.startChallenge(claim);
    const responder = responderWith(runner);
    const refusedWith = async (input: unknown, reason: string, r = responder) => {
      await assert.rejects(r.respond(input), (error: Error & { reason?: string }) => {
        assert.equal(error.name, "ChallengeRefusedError");
        assert.equal(error.reason, reason);
        return true;
      });
    };
    // From an address outside the attestor set.
    const rogue = new Attestor({ account: strangerAccount, domain, profile: challengeProfileSchema.parse({ preset: "cpu-devnet" }) });
    await refusedWith((await rogue.startChallenge(claim)).message, "not_attestor");
    // Fields changed after signing (a bigger challenge, another seed).
    await refusedWith({ ...challenge.message, rowsPerUnit: challenge.message.rowsPerUnit * 2 } satisfies ChallengeMessage, "bad_signature");
    await refusedWith({ ...challenge.message, seed: `0x${"11".repeat(32)}` }, "bad_signature");
    // Not for this provider, an unknown machine, a different claim.
    await refusedWith((await attestor.startChallenge({ ...claim, provider: strangerAccount.address })).message, "wrong_provider");
    await refusedWith((await attestor.startChallenge({ ...claim, machineId: 99 })).message, "unknown_machine");
    await refusedWith((await attestor.startChallenge({ ...claim, model: "A100-80GB" })).message, "claim_mismatch");
    // Expired, too large for this node.
    await refusedWith(challenge.message, "expired", responderWith(runner, { now: () => challenge.message.cutoffAtMs + 60_000 }));
    await refusedWith(challenge.message, "too_large", responderWith(runner, { maxOps: 1000n }));
    // Not JSON of the right shape.
    await assert.rejects(responder.respond({ type: "challenge" }), { name: "InvalidInputError" });
    // Answered once; not twice.
    await responder.respond(challenge.message);
    await refusedWith(challenge.message, "duplicate");
    // The attestor records a refusal as a failure.
    const refused = await attestor.startChallenge(claim);
    const refusal = ChallengeResponder.refusal(refused.id, new Error("GPU fell off the bus"));
    expectFailure(refused.onRefused(refusal), "refused");
  }).timeout(20_000);

  it("refuses a second challenge while one is computing", async () => {
    const attestor = attestorWith({ preset: "cpu-devnet", rowsPerUnit: 20_000 });
    const responder = responderWith(runner);
    const first = responder.respond((await attestor.startChallenge(claim)).message);
    const second = await attestor.startChallenge(claim);
    await assert.rejects(responder.respond(second.message), { name: "ChallengeRefusedError", reason: "busy" });
    await first;
  }).timeout(20_000);

  it("stops the compute when the attestor that sent the challenge goes away, and takes the next challenge at once", async () => {
    const attestor = attestorWith({ preset: "cpu-devnet", rowsPerUnit: 20_000 });
    const responder = responderWith(runner);
    // The transport's signal: aborted when the requester's stream closes (an attestor SIGKILLed mid-challenge).
    const gone = new AbortController();
    const first = responder.respond((await attestor.startChallenge(claim)).message, { signal: gone.signal });
    gone.abort(new Error("the stream closed"));
    await assert.rejects(first, { name: "ChallengeRefusedError", reason: "expired" });
    // Not busy with the abandoned compute: the next attestor's challenge is answered.
    const next = await attestor.startChallenge(claim);
    assert.equal((await responder.respond(next.message)).type, "commit");
  }).timeout(20_000);
});

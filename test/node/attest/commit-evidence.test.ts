/**
 * Issue 24, item 3: the provider signs its commit, so a wrong opened row under a signed root is
 * evidence against it that anyone can check, and an attestor cannot fabricate such evidence.
 */
import assert from "node:assert/strict";
import { bytesToHex, hexToBytes, type Hex } from "viem";
import { NO_GPUS, gpusHash, signCommit, verifyCommitFraud, type CommitFraudProof } from "../../../common/attest/commit.js";
import type { ChallengeFailure, ChallengePass } from "../../../node/attest/attestor.js";
import { Attestor } from "../../../node/attest/attestor.js";
import { ChallengeResponder } from "../../../node/attest/provider.js";
import { CpuRunner } from "../../../node/attest/runner/cpu.js";
import type { Runner } from "../../../node/attest/runner/types.js";
import { challengeProfileSchema } from "../../../common/attest/params.js";
import { suanliDomain } from "../../../common/eip712.js";
import { rootsHash } from "../../../common/attest/units.js";
import { WrongRowsRunner } from "../../support/attest.js";
import { attestorAccount, domain, isAttestor, openRequestOf, providerAccount, strangerAccount } from "./helpers.js";

const machine = { machineId: 3, model: "A100-80GB", units: 1, vramMiB: 81_920 };

function attestor(): Attestor {
  return new Attestor({ account: attestorAccount, domain, profile: challengeProfileSchema.parse({ preset: "cpu-devnet", rowsPerUnit: 128 }) });
}

function responder(runner: Runner): ChallengeResponder {
  return new ChallengeResponder({ provider: providerAccount.address, signer: providerAccount, machine: () => machine, runner, domain, isAttestor });
}

/** A cheating runner's challenge run to its end: the failure with its evidence. */
async function cheat(fraction = 0.5): Promise<ChallengeFailure> {
  const challenge = await attestor().startChallenge({ provider: providerAccount.address, ...machine });
  const r = responder(new WrongRowsRunner(fraction));
  const next = challenge.onCommit(await r.respond(JSON.parse(JSON.stringify(challenge.message))), Date.now());
  const outcome = await challenge.onOpen(await r.open(openRequestOf(next)), Date.now());
  assert.equal(outcome.outcome, "fail");
  return outcome as ChallengeFailure;
}

/** JSON as stored and sent (bigints do not occur in a proof). */
const roundTrip = (proof: CommitFraudProof): unknown => JSON.parse(JSON.stringify(proof));

describe("signed commits: a wrong answer is evidence against the provider (issue 24, item 3)", function () {
  this.timeout(30_000);

  it("a cheating runner's wrong rows under its signed commit prove the fraud to a third party", async () => {
    const failure = await cheat();
    assert.equal(failure.reason, "wrong_rows");
    assert.ok(failure.evidence, "a wrong_rows failure carries its transcript");
    const verdict = await verifyCommitFraud(domain, roundTrip(failure.evidence));
    assert.equal(verdict.proven, true, JSON.stringify(verdict));
    if (!verdict.proven) return;
    assert.equal(verdict.provider, providerAccount.address);
    assert.equal(verdict.attestor, attestorAccount.address);
    assert.equal(verdict.challengeId, failure.challengeId);
    assert.ok(verdict.wrongRows.length >= 1);
    // The same transcript under another deployment (chain id) proves nothing.
    const elsewhere = await verifyCommitFraud(suanliDomain(1, "0x5FbDB2315678afecb367f032d93F642f64180aa3"), roundTrip(failure.evidence));
    assert.equal(elsewhere.proven, false);
  });

  it("an attestor cannot frame an honest provider: edited rows, a forged commit or correct rows prove nothing", async () => {
    const failure = await cheat();
    const evidence = failure.evidence!;
    // Keep only the rows that are right: nothing wrong remains.
    const verdict = await verifyCommitFraud(domain, roundTrip(evidence));
    assert.ok(verdict.proven);
    const wrong = new Set(verdict.wrongRows.map((w) => `${w.unit}:${w.index}`));
    const rightRows = evidence.rows.filter((row) => !wrong.has(`${row.unit}:${row.index}`));
    assert.ok(rightRows.length > 0, "half the rows were computed");
    assert.deepEqual(await verifyCommitFraud(domain, roundTrip({ ...evidence, rows: rightRows })).then((v) => v.proven || v.reason), "rows_correct");

    // An honest provider's transcript: the attestor flips a byte of a correct row.
    const runner = new CpuRunner({ workers: 1 });
    try {
      const challenge = await attestor().startChallenge({ provider: providerAccount.address, ...machine });
      const honest = responder(runner);
      const commit = await honest.respond(challenge.message);
      const next = challenge.onCommit(commit, Date.now());
      const rows = await honest.open(openRequestOf(next));
      const pass = await challenge.onOpen(rows, Date.now());
      assert.equal(pass.outcome, "pass");
      // The attestation names its transcript: the challenge, the root the provider signed, the GPUs it named (none: CPU).
      const signed = (pass as ChallengePass).attestation.attestation;
      assert.deepEqual([signed.challengeId, signed.root, signed.gpus], [challenge.id, rootsHash(commit.roots), NO_GPUS]);
      const transcript = { challenge: challenge.message, commit, rows: rows.rows };
      assert.deepEqual(await verifyCommitFraud(domain, roundTrip(transcript)).then((v) => v.proven || v.reason), "rows_correct");
      const bytes = hexToBytes(rows.rows[0]!.data as Hex);
      bytes[0]! ^= 1;
      const edited = { ...transcript, rows: [{ ...rows.rows[0]!, data: bytesToHex(bytes) }] };
      assert.deepEqual(await verifyCommitFraud(domain, roundTrip(edited)).then((v) => v.proven || v.reason), "bad_proof");
      // A commit to a made-up root, signed by someone else than the provider.
      const forged = { ...commit, roots: [`0x${"ab".repeat(32)}` as Hex] };
      forged.signature = await signCommit(strangerAccount, domain, forged);
      assert.deepEqual(await verifyCommitFraud(domain, roundTrip({ ...edited, commit: forged })).then((v) => v.proven || v.reason), "not_signed_by_provider");
      // A challenge the attestor did not sign as sent (seed changed afterwards).
      const reseeded = { ...transcript, challenge: { ...challenge.message, seed: `0x${"cd".repeat(32)}` as Hex } };
      assert.deepEqual(await verifyCommitFraud(domain, roundTrip(reseeded)).then((v) => v.proven || v.reason), "bad_challenge");
      assert.deepEqual(await verifyCommitFraud(domain, { challenge: challenge.message }).then((v) => v.proven || v.reason), "malformed");
    } finally {
      await runner.close();
    }
  });

  it("a runner that names its GPUs binds each unit's UUID into the signed commit; the attestation carries their hash", async () => {
    const cpu = new CpuRunner({ workers: 1 });
    const twoUnits = { ...machine, units: 2 };
    const respond2 = (runner: Runner) =>
      new ChallengeResponder({ provider: providerAccount.address, signer: providerAccount, machine: () => twoUnits, runner, domain, isAttestor });
    try {
      const named: Runner = {
        name: "named",
        computeCommit: async (c, o) => ({ ...(await cpu.computeCommit(c, o)), devices: ["GPU-bbbb", "GPU-aaaa"] }),
        close: async () => undefined,
      };
      const challenge = await attestor().startChallenge({ provider: providerAccount.address, ...twoUnits });
      const r = respond2(named);
      const commit = await r.respond(challenge.message);
      assert.deepEqual(commit.devices, ["GPU-bbbb", "GPU-aaaa"]);
      assert.equal(commit.roots.length, 2);
      const next = challenge.onCommit(commit, Date.now());
      const pass = await challenge.onOpen(await r.open(openRequestOf(next)), Date.now());
      assert.equal(pass.outcome, "pass");
      assert.equal((pass as ChallengePass).attestation.attestation.gpus, gpusHash(["GPU-aaaa", "GPU-bbbb"]));
      // Changing the GPUs (or swapping them between units) after signing breaks the provider's signature.
      const other = await attestor().startChallenge({ provider: providerAccount.address, ...twoUnits });
      const otherCommit = await respond2(named).respond(other.message);
      assert.equal((other.onCommit({ ...otherCommit, devices: ["GPU-aaaa", "GPU-bbbb"] }, Date.now()) as ChallengeFailure).reason, "bad_commit_signature");
    } finally {
      await cpu.close();
    }
  });

  it("the attestor opens no commit the provider did not sign (bad_commit_signature)", async () => {
    const runner = new CpuRunner({ workers: 1 });
    try {
      for (const signer of [strangerAccount, undefined]) {
        const challenge = await attestor().startChallenge({ provider: providerAccount.address, ...machine });
        const commit = await responder(runner).respond(challenge.message);
        const sent = signer ? { ...commit, signature: await signCommit(signer, domain, commit) } : { ...commit, signature: `0x${"00".repeat(65)}` };
        const result = challenge.onCommit(sent, Date.now());
        assert.equal(result.outcome, "fail");
        assert.equal((result as ChallengeFailure).reason, "bad_commit_signature");
      }
      const unsigned = await attestor().startChallenge({ provider: providerAccount.address, ...machine });
      const { signature: _dropped, ...bare } = await responder(runner).respond(unsigned.message);
      assert.equal((unsigned.onCommit(bare, Date.now()) as ChallengeFailure).reason, "malformed");
    } finally {
      await runner.close();
    }
  });
});

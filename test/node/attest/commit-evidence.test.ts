/**
 * Issue 24, item 3: the provider signs its commit, so a wrong opened row under a signed root is
 * evidence against it that anyone can check, and an attestor cannot fabricate such evidence.
 */
import assert from "node:assert/strict";
import { bytesToHex, hexToBytes, type Hex } from "viem";
import { NO_GPUS, gpusHash, signCommit, verifyCommitFraud, type CommitFraudProof } from "../../../common/attest/commit.js";
import { type ChallengeFailure, type ChallengePass, Attestor, ChallengeResponder } from "../../../node/attest/challenge/index.js";
import { CpuRunner, type Runner } from "../../../node/attest/runner/index.js";
import { MAX_UNITS, challengeProfileSchema } from "../../../common/attest/params.js";
import { recomputeRowsInline } from "../../../common/attest/verify.js";
import { FAULT_EVIDENCE_MAX_ROWS, FAULT_PROPOSAL_MAX_BYTES, faultProposalSchema } from "../../../common/attest/wire.js";
import { MAX_TREE_DEPTH } from "../../../common/attest/merkle.js";
import { FaultKind, suanliDomain } from "../../../common/eip712.js";
import { rootsHash } from "../../../common/attest/units.js";
import { TranscriptVerifier, transcriptOf } from "../../../node/attest/faults/fault-transcript.js";
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

describe("a capacity fault's transcript: trimmed by the proposer, verified at a bounded cost by co-signers (issue 24, items 3 and 4)", function () {
  this.timeout(30_000);
  const lease = {
    leaseId: 7n,
    provider: providerAccount.address,
    machineId: machine.machineId,
    activatedAt: Math.floor(Date.now() / 1000) - 600,
    end: Math.floor(Date.now() / 1000) + 3_600,
  };

  it("the proposer attaches only wrong rows, at most four; a correct answer makes no transcript", async () => {
    const half = (await cheat(0.5)).evidence!;
    const transcript = await transcriptOf(domain, roundTrip(half) as CommitFraudProof);
    assert.ok(transcript);
    const proven = await verifyCommitFraud(domain, roundTrip(half));
    assert.ok(proven.proven);
    assert.ok(transcript.rows.length >= 1 && transcript.rows.length <= FAULT_EVIDENCE_MAX_ROWS);
    const wrong = new Set(proven.wrongRows.map((w) => `${w.unit}:${w.index}`));
    assert.ok(transcript.rows.every((row) => wrong.has(`${row.unit}:${row.index}`)));
    assert.equal(await transcriptOf(domain, { ...half, rows: half.rows.filter((row) => !wrong.has(`${row.unit}:${row.index}`)) }), undefined);
  });

  it("rows are told apart by unit: the wrong rows of any unit are kept, a right row at the same index of another unit is not", async () => {
    // Three units; only unit 2 answers wrongly. The rows opened: indices 0..5 of unit 0 (right) and of unit 2 (wrong), index 0 of unit 1 (right).
    const threeUnits = { ...machine, units: 3 };
    const challenge = await attestor().startChallenge({ provider: providerAccount.address, ...threeUnits });
    const r = new ChallengeResponder({
      provider: providerAccount.address,
      signer: providerAccount,
      machine: () => threeUnits,
      runner: new WrongRowsRunner(0, [2]),
      domain,
      isAttestor,
    });
    const commit = await r.respond(JSON.parse(JSON.stringify(challenge.message)));
    const picks = [
      ...[0, 1, 2, 3, 4, 5].flatMap((index) => [
        { unit: 0, index },
        { unit: 2, index },
      ]),
      { unit: 1, index: 0 },
    ];
    const opened = await r.open({ v: challenge.message.v, type: "open", challengeId: challenge.id, picks });
    const evidence = roundTrip({ challenge: challenge.message, commit, rows: opened.rows }) as CommitFraudProof;
    const proven = await verifyCommitFraud(domain, evidence);
    assert.ok(proven.proven);
    assert.deepEqual(
      proven.wrongRows.map((w) => `${w.unit}:${w.index}`).sort(),
      [0, 1, 2, 3, 4, 5].map((index) => `2:${index}`),
    );
    const transcript = await transcriptOf(domain, evidence);
    assert.ok(transcript);
    assert.deepEqual(
      transcript.rows.map((row) => `${row.unit}:${row.index}`),
      [0, 1, 2, 3].map((index) => `2:${index}`),
    );
    // Relabelled as unit 0's row at the same index, a wrong row no longer proves into a signed root.
    const relabelled = { ...transcript, rows: [{ ...transcript.rows[0]!, unit: 0 }] };
    assert.deepEqual(await verifyCommitFraud(domain, roundTrip(relabelled)).then((v) => v.proven || v.reason), "bad_proof");
    // Without unit 2's rows, nothing is left to attach.
    assert.equal(await transcriptOf(domain, { ...evidence, rows: evidence.rows.filter((row) => row.unit !== 2) }), undefined);
  });

  it("a v2 transcript at its largest still fits a proposal: 64 units' roots and longest device names, four rows at the gpu preset's cols", async () => {
    const challenge = await attestor().startChallenge({ provider: providerAccount.address, ...machine });
    // Every field at its longest: a UUID of 128 control characters is 768 bytes of JSON escapes.
    const commit = {
      v: 2 as const,
      type: "commit" as const,
      challengeId: challenge.id,
      rowsPerUnit: 2 ** MAX_TREE_DEPTH,
      roots: Array.from({ length: MAX_UNITS }, () => `0x${"ab".repeat(32)}` as Hex),
      devices: Array.from({ length: MAX_UNITS }, () => "\u0001".repeat(128)),
      signature: `0x${"cd".repeat(65)}` as Hex,
    };
    const cols = challengeProfileSchema.parse({ preset: "gpu" }).cols ?? 4096;
    const row = {
      unit: MAX_UNITS - 1,
      index: 2 ** MAX_TREE_DEPTH - 1,
      data: `0x${"ff".repeat(cols * 4)}`,
      proof: Array.from({ length: MAX_TREE_DEPTH }, () => `0x${"ef".repeat(32)}`),
    };
    const proposal = {
      v: 1,
      chainId: 31_337,
      fault: { leaseId: "115792089237316195423570985008687907853269984665640564039457584007913129639935", kind: FaultKind.capacity, observedAt: 4_294_967_295 },
      signatures: Array.from({ length: 32 }, () => ({ signer: attestorAccount.address, signature: `0x${"cd".repeat(65)}` })),
      evidence: { challenge: { ...challenge.message, units: MAX_UNITS, cols }, commit, rows: Array.from({ length: FAULT_EVIDENCE_MAX_ROWS }, () => row) },
    };
    const parsed = faultProposalSchema.safeParse(proposal);
    assert.ok(parsed.success, parsed.error?.message);
    const bytes = Buffer.byteLength(JSON.stringify(proposal), "utf8");
    assert.ok(bytes <= FAULT_PROPOSAL_MAX_BYTES, `${bytes} bytes, the fault exchange reads ${FAULT_PROPOSAL_MAX_BYTES}`);
  });

  it("recompute is charged per peer after the cheap checks; a judged transcript is answered from the cache", async () => {
    let recomputed = 0;
    const verifier = new TranscriptVerifier({
      domain,
      isAttestor: async (address) => isAttestor(address),
      recompute: (request) => {
        recomputed += request.indices.length;
        return recomputeRowsInline(request);
      },
      now: Date.now,
      perPeerRows: 8,
    });
    const transcript = (await transcriptOf(domain, (await cheat()).evidence!))!;
    assert.equal(transcript.rows.length, 4);
    const fault = { leaseId: lease.leaseId, kind: FaultKind.capacity, observedAt: Math.floor(transcript.challenge.issuedAtMs / 1000) };
    assert.deepEqual(await verifier.check(lease, fault, transcript, "peer-a"), { ok: true });
    assert.equal(recomputed, 4);
    // Asked again: the cache answers, nothing is recomputed or charged.
    assert.deepEqual(await verifier.check(lease, fault, transcript, "peer-a"), { ok: true });
    assert.equal(recomputed, 4);
    // A forged commit costs no recompute at all.
    const forged = { ...transcript, commit: { ...transcript.commit, signature: await signCommit(strangerAccount, domain, transcript.commit) } };
    assert.equal(((await verifier.check(lease, fault, forged, "peer-a")) as { reason: string }).reason, "bad_evidence");
    assert.equal(recomputed, 4);
    // peer-a has 4 of its 8 rows left: one more distinct transcript, then it is refused; peer-b is not.
    const second = (await transcriptOf(domain, (await cheat()).evidence!))!;
    const third = (await transcriptOf(domain, (await cheat()).evidence!))!;
    const at = (t: typeof transcript) => ({ ...fault, observedAt: Math.floor(t.challenge.issuedAtMs / 1000) });
    assert.deepEqual(await verifier.check(lease, at(second), second, "peer-a"), { ok: true });
    assert.equal(((await verifier.check(lease, at(third), third, "peer-a")) as { reason: string }).reason, "rate_limited");
    assert.deepEqual(await verifier.check(lease, at(third), third, "peer-b"), { ok: true });
    assert.equal(recomputed, 12);
    // Not a capacity fault, or a transcript of another lease's machine: refused before any work.
    assert.equal(((await verifier.check(lease, { ...fault, kind: FaultKind.unresponsive }, transcript, "peer-c")) as { reason: string }).reason, "bad_evidence");
    assert.equal(((await verifier.check({ ...lease, machineId: 99 }, fault, transcript, "peer-c")) as { reason: string }).reason, "evidence_mismatch");
    assert.equal(recomputed, 12);
  });
});

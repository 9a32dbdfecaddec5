import assert from "node:assert/strict";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { bytesToHex, hexToBytes, type Hex } from "viem";
import { recomputeRows, rowToBytes } from "../../../common/attest/arithmetic.js";
import { MerkleTree, leafHash } from "../../../common/attest/merkle.js";
import { verifyOpening } from "../../../common/attest/verify.js";
import { unitLeafKey, unitSeed, unitSubChallenges } from "../../../common/attest/units.js";
import { challengeProfileSchema } from "../../../common/attest/params.js";
import { Attestor, ChallengeResponder, OPEN_WAIT_MS } from "../../../node/attest/challenge/index.js";
import { CpuRunner, ExternalRunner, type RunnerChallenge } from "../../../node/attest/runner/index.js";
import { attestorAccount, domain, isAttestor, openRequestOf, otherAttestorAccount, providerAccount } from "./helpers.js";
import { isAlive, waitFor } from "../../support/wait.js";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "../../..");
const tsxLoader = import.meta.resolve("tsx");
const referenceRunner = path.join(root, "node/attest/runner/reference-runner.ts");
const faultyRunner = path.join(here, "fixtures/faulty-runner.mjs");
const slowStartRunner = path.join(here, "fixtures/slow-start-runner.mjs");

type TestChallenge = RunnerChallenge & { seed: Hex; rows: number };

/** A runner challenge of `units` sub-challenges of `rows` rows each; `seed` is the challenge seed the units' are derived from. */
function challenge(rows: number, cols = 64, rounds = 2, tag = 1, units = 1): TestChallenge {
  const id = bytesToHex(new Uint8Array(32).fill(tag));
  const seed = bytesToHex(new Uint8Array(32).fill(tag + 100));
  return { id, seed, rows, rowsPerUnit: rows, cols, rounds, units: unitSubChallenges(id, seed, units) };
}

/** Unit `unit`'s root computed the slow, obvious way. */
function expectedRoot(c: TestChallenge, unit = 0): Hex {
  const rows = recomputeRows(
    hexToBytes(unitSeed(c.seed, unit)),
    c.cols,
    c.rounds,
    Array.from({ length: c.rows }, (_, i) => i),
  );
  const key = hexToBytes(unitLeafKey(c.id, unit));
  return bytesToHex(MerkleTree.fromLeaves(rows.map((row, i) => leafHash(key, i, rowToBytes(row)))).root);
}

const picksOf = (indices: number[], unit = 0) => indices.map((index) => ({ unit, index }));

describe("attest runners", function () {
  this.timeout(30_000);

  describe("CPU reference runner", () => {
    let runner: CpuRunner;
    before(() => {
      runner = new CpuRunner({ workers: 2, rowsPerTask: 5 });
    });
    after(async () => {
      await runner.close();
    });

    it("commits to the same root as a single-threaded computation, split over many tasks", async () => {
      for (const c of [challenge(77, 32, 3), challenge(1, 16, 1, 2), challenge(64, 64, 2, 3)]) {
        const commitment = await runner.computeCommit(c);
        assert.deepEqual(commitment.roots, [expectedRoot(c)], `${c.rows} rows`);
        assert.equal(commitment.rowsPerUnit, c.rows);
        assert.ok(commitment.computeMs > 0);
      }
    });

    it("computes one sub-challenge per unit: each unit's root from its own seed and leaf key, all different", async () => {
      const c = challenge(20, 16, 2, 4, 3);
      const commitment = await runner.computeCommit(c);
      assert.deepEqual(commitment.roots, [expectedRoot(c, 0), expectedRoot(c, 1), expectedRoot(c, 2)]);
      assert.equal(new Set(commitment.roots).size, 3);
      const rows = await commitment.openRows([
        { unit: 2, index: 19 },
        { unit: 0, index: 19 },
      ]);
      assert.deepEqual(
        rows.map((r) => [r.unit, r.index]),
        [
          [2, 19],
          [0, 19],
        ],
      );
      assert.notEqual(rows[0]!.data, rows[1]!.data, "units have different matrices");
      await assert.rejects(commitment.openRows([{ unit: 3, index: 0 }]), { name: "RunnerError" });
    });

    it("opens rows that verify, refuses rows outside the answer, and forgets released answers", async () => {
      const c = challenge(100);
      const commitment = await runner.computeCommit(c);
      const indices = [99, 0, 42];
      const rows = await commitment.openRows(picksOf(indices));
      assert.deepEqual(
        rows.map((r) => r.index),
        indices,
      );
      const check = await verifyOpening({
        challengeId: c.id,
        seed: c.seed,
        rowsPerUnit: 100,
        cols: 64,
        rounds: 2,
        roots: commitment.roots,
        picks: picksOf(indices),
        response: { v: 2, type: "rows", challengeId: c.id, rows },
      });
      assert.deepEqual(check, { ok: true });
      await assert.rejects(commitment.openRows(picksOf([100])), { name: "RunnerError" });
      await commitment.release();
      await assert.rejects(commitment.openRows(picksOf([1])), { name: "RunnerError" });
      // Its recompute is the attestor's multi-threaded verifier.
      assert.deepEqual(await runner.recompute({ seed: hexToBytes(c.seed), cols: 64, rounds: 2, indices: [5, 6] }), recomputeRows(hexToBytes(c.seed), 64, 2, [5, 6]));
    });

    it("stops on abort and works again afterwards; refuses work once closed", async () => {
      const abort = new AbortController();
      const pending = runner.computeCommit(challenge(4000, 256, 4), { signal: abort.signal });
      setTimeout(() => abort.abort(new Error("stop")), 50);
      await assert.rejects(pending, /stop/);
      const c = challenge(10);
      assert.deepEqual((await runner.computeCommit(c)).roots, [expectedRoot(c)]);
      const closed = new CpuRunner({ workers: 1 });
      await closed.close();
      await assert.rejects(closed.computeCommit(challenge(10)), { name: "RunnerError" });
    });
  });

  describe("external runner (stdin/stdout contract)", () => {
    const reference = () => new ExternalRunner({ command: process.execPath, args: ["--import", tsxLoader, referenceRunner] });

    it("drives the reference runner program: same root as the CPU runner, rows that verify", async () => {
      const runner = reference();
      try {
        const c = challenge(50, 48, 2, 5, 2);
        const commitment = await runner.computeCommit(c);
        assert.deepEqual(commitment.roots, [expectedRoot(c, 0), expectedRoot(c, 1)]);
        const pid = runner.pid!;
        assert.ok(isAlive(pid));
        const picks = [
          { unit: 0, index: 3 },
          { unit: 1, index: 49 },
        ];
        const rows = await commitment.openRows(picks);
        const check = await verifyOpening({
          challengeId: c.id,
          seed: c.seed,
          rowsPerUnit: 50,
          cols: 48,
          rounds: 2,
          roots: commitment.roots,
          picks,
          response: { v: 2, type: "rows", challengeId: c.id, rows },
        });
        assert.deepEqual(check, { ok: true });
        // The program stays up for the next challenge; the previous answer is gone then.
        const next = await runner.computeCommit(challenge(8, 16, 1, 6));
        assert.equal(runner.pid, pid);
        await assert.rejects(commitment.openRows(picksOf([1])), { name: "RunnerError" });
        assert.equal((await next.openRows(picksOf([7]))).length, 1);
        await runner.close();
        assert.equal(isAlive(pid), false);
      } finally {
        await runner.close();
      }
    });

    it("passes a full challenge through a provider using the external runner", async () => {
      const runner = reference();
      try {
        const machine = { machineId: 1, model: "L4-24GB", units: 2, vramMiB: 23_034 };
        const attestor = new Attestor({ account: attestorAccount, domain, profile: challengeProfileSchema.parse({ preset: "cpu-devnet", rowsPerUnit: 100 }) });
        const responder = new ChallengeResponder({ provider: providerAccount.address, signer: providerAccount, machine: () => machine, runner, domain, isAttestor });
        const challengeState = await attestor.startChallenge({ provider: providerAccount.address, ...machine });
        const next = challengeState.onCommit(await responder.respond(challengeState.message), Date.now());
        assert.equal(next.outcome, "open");
        const outcome = await challengeState.onOpen(await responder.open(openRequestOf(next)), Date.now());
        assert.equal(outcome.outcome, "pass");
        assert.equal(outcome.outcome === "pass" && outcome.attestation.attestation.units, 2);
      } finally {
        await runner.close();
      }
    });

    it("a runner warmed before the challenge passes; one started inside the deadline (CUDA start-up) does not (issue 24, item 6)", async function () {
      this.timeout(90_000);
      const STARTUP_MS = 8_000;
      // A deadline well above the compute and well below the start-up; no grace past it.
      const profile = challengeProfileSchema.parse({ preset: "cpu-devnet", rowsPerUnit: 100, latencyAllowanceMs: 4_000, cutoffFactor: 1 });
      const machine = { machineId: 1, model: "L4-24GB", units: 1, vramMiB: 23_034 };
      const attempt = async (runner: ExternalRunner): Promise<string> => {
        const attestor = new Attestor({ account: attestorAccount, domain, profile });
        const responder = new ChallengeResponder({ provider: providerAccount.address, signer: providerAccount, machine: () => machine, runner, domain, isAttestor });
        const state = await attestor.startChallenge({ provider: providerAccount.address, ...machine });
        let commit: unknown;
        try {
          commit = await responder.respond(state.message);
        } catch (error) {
          return `refused: ${(error as Error).name} ${(error as Error).message}`;
        }
        const next = state.onCommit(commit, Date.now());
        if (next.outcome !== "open") return `${next.outcome}: ${next.outcome === "fail" ? next.reason : ""}`;
        const outcome = await state.onOpen(await responder.open(openRequestOf(next)), Date.now());
        return outcome.outcome === "fail" ? `fail: ${outcome.reason}` : outcome.outcome;
      };
      const slow = () => new ExternalRunner({ command: process.execPath, args: ["--import", tsxLoader, slowStartRunner, String(STARTUP_MS)], startTimeoutMs: 60_000 });
      const cold = slow();
      const warmed = slow();
      try {
        const [coldOutcome] = await Promise.all([attempt(cold), warmed.warm()]);
        assert.notEqual(coldOutcome, "pass", "a start-up longer than the deadline must not fit inside it");
        assert.equal(await attempt(warmed), "pass");
      } finally {
        await Promise.all([cold.close(), warmed.close()]);
      }
    });

    it("reports a runner that breaks the contract, dies, says nothing or does not exist", async () => {
      const faulty = (mode: string, extra: Partial<ConstructorParameters<typeof ExternalRunner>[0]> = {}) =>
        new ExternalRunner({ command: process.execPath, args: [faultyRunner, mode], ...extra });
      for (const mode of ["garbage", "crash", "error"]) {
        const runner = faulty(mode);
        try {
          await assert.rejects(runner.computeCommit(challenge(4)), { name: "RunnerError" }, mode);
        } finally {
          await runner.close();
        }
      }
      // Rows that do not hash to the root the program committed to.
      const badRows = faulty("badrows");
      try {
        const commitment = await badRows.computeCommit(challenge(1024));
        await assert.rejects(commitment.openRows(picksOf([1, 2])), { name: "RunnerError" });
      } finally {
        await badRows.close();
      }
      // A program written for version 1 of the contract: stopped at its hello, with both versions named.
      const v1 = faulty("v1");
      try {
        await assert.rejects(v1.computeCommit(challenge(4)), (error: Error) => {
          assert.equal(error.name, "RunnerError");
          assert.match(error.message, /speaks suanli-attest-runner\/1; this node needs suanli-attest-runner\/2/);
          return true;
        });
      } finally {
        await v1.close();
      }
      // Confidential-computing evidence: passed on for every unit, or refused when only some units carry it.
      const cc = faulty("cc");
      try {
        const twoUnits = challenge(4, 64, 2, 1, 2);
        const commitment = await cc.computeCommit(twoUnits);
        assert.deepEqual(
          commitment.cc?.map((evidence) => evidence.request.slice(10, 74)),
          [twoUnits.id.slice(2).toLowerCase(), twoUnits.id.slice(2).toLowerCase()],
        );
      } finally {
        await cc.close();
      }
      const partial = faulty("cc-partial");
      try {
        await assert.rejects(partial.computeCommit(challenge(4, 64, 2, 1, 2)), /CC evidence for some units and not for others/);
      } finally {
        await partial.close();
      }
      // Evidence over the size a commit carries: refused here (the runner's fault, in the provider's log), not sent for the attestor to fail the commit as malformed.
      const oversized = faulty("cc-oversized");
      try {
        await assert.rejects(oversized.computeCommit(challenge(4, 64, 2, 1, 2)), (error: Error) => {
          assert.equal(error.name, "RunnerError");
          assert.match(error.message, /at most 32768 bytes as JSON/);
          return true;
        });
      } finally {
        await oversized.close();
      }
      // No hello within the start timeout.
      const silent = faulty("silent", { startTimeoutMs: 300 });
      try {
        await assert.rejects(silent.computeCommit(challenge(4)), { name: "RunnerError" });
      } finally {
        await silent.close();
      }
      // A program that does not exist.
      const missing = new ExternalRunner({ command: path.join(here, "fixtures/no-such-runner") });
      await assert.rejects(missing.computeCommit(challenge(4)), { name: "RunnerError" });
      await missing.close();
    });

    it("kills the runner when a challenge is aborted mid-compute, and starts a fresh one next time", async () => {
      const runner = reference();
      try {
        await runner.computeCommit(challenge(4, 16, 1, 7));
        const pid = runner.pid!;
        const abort = new AbortController();
        // About 10⁹ multiply-adds: seconds of work for the single-threaded reference.
        const pending = runner.computeCommit(challenge(4000, 256, 4, 8), { signal: abort.signal });
        setTimeout(() => abort.abort(new Error("cutoff")), 200);
        await assert.rejects(pending, /cutoff/);
        assert.equal(isAlive(pid), false);
        const c = challenge(6, 16, 1, 9);
        assert.deepEqual((await runner.computeCommit(c)).roots, [expectedRoot(c)]);
        assert.ok(runner.pid !== undefined && runner.pid !== pid);
      } finally {
        await runner.close();
      }
    });

    it("after a challenge is stopped mid-compute the program starts again at once, and the provider answers busy until it runs (its start-up never lands in the next deadline)", async function () {
      this.timeout(60_000);
      const STARTUP_MS = 1_500;
      const runner = new ExternalRunner({ command: process.execPath, args: ["--import", tsxLoader, slowStartRunner, String(STARTUP_MS)], startTimeoutMs: 30_000 });
      const machine = { machineId: 1, model: "L4-24GB", units: 1, vramMiB: 23_034 };
      const profile = challengeProfileSchema.parse({ preset: "cpu-devnet", rowsPerUnit: 100 });
      const attestor = new Attestor({ account: attestorAccount, domain, profile });
      const responder = new ChallengeResponder({ provider: providerAccount.address, signer: providerAccount, machine: () => machine, runner, domain, isAttestor });
      try {
        await runner.warm();
        assert.equal(runner.starting, false);
        const pid = runner.pid!;
        const abort = new AbortController();
        const pending = runner.computeCommit(challenge(4000, 256, 4, 8), { signal: abort.signal });
        setTimeout(() => abort.abort(new Error("the attestor went away")), 200);
        await assert.rejects(pending, /went away/);
        assert.equal(isAlive(pid), false);
        // Restarting already, with no challenge asking: one now is refused busy (tried again, never a failure).
        assert.equal(runner.starting, true);
        const early = await attestor.startChallenge({ provider: providerAccount.address, ...machine });
        await assert.rejects(responder.respond(early.message), { name: "ChallengeRefusedError", reason: "busy" });
        await waitFor("the restarted runner's hello", () => !runner.starting, { timeoutMs: 30_000 });
        const restarted = runner.pid;
        assert.ok(restarted !== undefined && restarted !== pid && isAlive(restarted));
        const state = await attestor.startChallenge({ provider: providerAccount.address, ...machine });
        const next = state.onCommit(await responder.respond(state.message), Date.now());
        assert.equal(next.outcome, "open");
        assert.equal((await state.onOpen(await responder.open(openRequestOf(next)), Date.now())).outcome, "pass");
        assert.equal(runner.pid, restarted, "the challenge ran on the program started in the background");
      } finally {
        await runner.close();
      }
    });

    it("a program holds one answer: another attestor's challenge arriving between a commit and its open is answered busy, so the first open gets its rows (never an honest provider's runner_failed)", async function () {
      this.timeout(60_000);
      const runner = reference();
      const machine = { machineId: 1, model: "L4-24GB", units: 1, vramMiB: 23_034 };
      const profile = challengeProfileSchema.parse({ preset: "cpu-devnet", rowsPerUnit: 100 });
      const first = new Attestor({ account: attestorAccount, domain, profile });
      const second = new Attestor({ account: otherAttestorAccount, domain, profile });
      let clock = Date.now();
      const responder = new ChallengeResponder({
        provider: providerAccount.address,
        signer: providerAccount,
        machine: () => machine,
        runner,
        domain,
        isAttestor,
        now: () => clock,
      });
      const claim = { provider: providerAccount.address, ...machine };
      try {
        assert.equal(runner.holdsOneAnswer, true);
        // The first attestor has its commit; before its open request arrives, the second attestor's challenge comes.
        const a = await first.startChallenge(claim);
        const opening = a.onCommit(await responder.respond(a.message), Date.now());
        assert.equal(opening.outcome, "open");
        const early = await second.startChallenge(claim);
        await assert.rejects(responder.respond(early.message), { name: "ChallengeRefusedError", reason: "busy", message: /waits for its open request/ });
        // The held answer was not replaced: the first attestor's open gets rows that verify.
        assert.equal((await a.onOpen(await responder.open(openRequestOf(opening)), Date.now())).outcome, "pass");
        // Opened: the slot is free for the second attestor at once.
        const b = await second.startChallenge(claim);
        const bOpening = b.onCommit(await responder.respond(b.message), Date.now());
        assert.equal(bOpening.outcome, "open");
        // An attestor that never opens holds the slot OPEN_WAIT_MS after its commit, no longer (its answer is then replaced).
        const c = await first.startChallenge(claim);
        await assert.rejects(responder.respond(c.message), { name: "ChallengeRefusedError", reason: "busy" });
        clock += OPEN_WAIT_MS + 1;
        const d = await first.startChallenge(claim);
        assert.equal(d.onCommit(await responder.respond(d.message), Date.now()).outcome, "open");
        await assert.rejects(responder.open(openRequestOf(bOpening)), { name: "ChallengeRefusedError", reason: "runner_failed" });
      } finally {
        await responder.close();
        await runner.close();
      }
    });
  });
});

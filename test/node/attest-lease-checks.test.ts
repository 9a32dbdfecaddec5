/**
 * Issue 24, items 3 and 4: in-lease checks. Attestors challenge leased machines at random times
 * within the share the offer announces; a machine that starts cheating during a lease (its runner
 * commits wrong rows) is faulted with a capacity fault (kind 2): the attestor whose check caught
 * it proposes the fault with the provider's signed wrong answer (the transcript), and a co-signer
 * that verifies it signs at once, without waiting for a check of its own; the renter is refunded
 * and credited. A lying proposer cannot get a capacity fault co-signed against a machine that
 * passes, with or without a transcript (forged, correct rows, another machine, before the lease),
 * nor make co-signers recompute rows without bound.
 */
import assert from "node:assert/strict";
import { multiaddr } from "@multiformats/multiaddr";
import { parseEventLogs, type Address, type Hex } from "viem";
import { leaseMarketAbi, testTokenAbi } from "../../common/abi.js";
import { signCommit, verifyCommitFraud, type CommitFraudProof } from "../../common/attest/commit.js";
import { recoverFaultSigner } from "../../common/attest/liveness.js";
import { challengeProfileSchema } from "../../common/attest/params.js";
import { signFault } from "../../common/chain/sign.js";
import { faultAnswerSchema, type FaultAnswer, type FaultTranscript } from "../../common/attest/wire.js";
import { computeCollateral, readLease } from "../../common/chain/market.js";
import { devnetAccount } from "../../common/devnet.js";
import { FaultKind, type Fault } from "../../common/eip712.js";
import { offerKey } from "../../common/offers/message.js";
import { FAULT_PROTOCOL } from "../../common/p2p/protocols.js";
import { request } from "../../common/p2p/reqresp.js";
import { toOfferView } from "../../node/api/offer-view.js";
import { Attestor, ChallengeResponder, type ProviderMachine } from "../../node/attest/challenge/index.js";
import { transcriptOf } from "../../node/attest/faults/fault-transcript.js";
import { CpuRunner, type Runner, type RunnerChallenge } from "../../node/attest/runner/index.js";
import {
  addrOf,
  COLLATERAL_BPS,
  DURATION,
  machineOffer,
  openActiveLease,
  PRICE,
  startAttestorDaemon,
  startProviderDaemon,
  TEST_MACHINE,
  WrongRowsRunner,
  type TestDaemon,
} from "../support/attest.js";
import { startTestDaemon } from "../support/daemons.js";
import { fund, registerProvider, send, startDevnet, type Devnet } from "../support/devnet.js";
import { waitFor } from "../support/wait.js";
import { openRequestOf } from "./attest/helpers.js";

const ATTESTORS = [6, 7];
const FAULT_MIN_CREDIT_BPS = 2_000;
/** The share the test providers announce: 10 %, the most an offer may. */
const SHARE_BPS = 1_000;
const LIVENESS = { probeIntervalMs: 400, probeTimeoutMs: 2_000, qosWindowSeconds: 30, minFailedProbes: 2, backupSubmitDelayMs: 3_000 };
/** Checks looked at often, with a small first-check cost so the first one comes within seconds of the lease. */
const LEASE_CHECKS = { tickMs: 200, assumedChallengeMs: 300 };
/** A first check assumed to cost 10 min: at a 10 % share the lease allows it after 100 min, so this attestor never checks during the test. */
const NO_OWN_CHECKS = { tickMs: 200, assumedChallengeMs: 600_000 };
/**
 * Scans every second: the two attestors challenge the new machine at once, and one CPU runner
 * answers the second `busy` while it computes the first (slowly on a loaded machine). A busy
 * answer is tried again at the next scan, which by default comes a minute later.
 */
const SCAN = { scheduleIntervalMs: 1_000 };

/** A runner that computes honestly until told to cheat (the machine is swapped for a slower or broken one mid-lease). */
class SwitchRunner implements Runner {
  readonly name = "switch";
  cheating = false;
  private readonly wrong = new WrongRowsRunner();
  constructor(private readonly honest: Runner) {}
  computeCommit(challenge: RunnerChallenge, options?: { signal?: AbortSignal }) {
    return this.cheating ? this.wrong.computeCommit(challenge) : this.honest.computeCommit(challenge, options);
  }
  async close(): Promise<void> {}
}

const nowSec = () => Math.floor(Date.now() / 1000);

describe("attestor role: in-lease capacity checks and capacity faults (issue 24, item 4)", function () {
  this.timeout(180_000);
  let devnet: Devnet;
  let cpu: CpuRunner;

  before(async () => {
    devnet = await startDevnet({
      params: { faultQuorum: 2, faultMinCreditBps: FAULT_MIN_CREDIT_BPS },
      attestors: ATTESTORS.map((i) => devnetAccount(i).address),
      wallClockBlocks: true,
    });
    cpu = new CpuRunner({ workers: 1 });
  });
  after(async () => {
    await cpu?.close();
    await devnet?.close();
  });

  /** A provider daemon with one registered machine, its offer announcing SHARE_BPS, and an active lease on it. */
  async function leasedProvider(index: number, runner: Runner) {
    const machines: ProviderMachine[] = [];
    const provider = await startProviderDaemon(devnet, index, { runner, machines: () => machines });
    const machineId = (
      await registerProvider(devnet, await devnet.wallet(index), { peerId: provider.daemon.p2p.host.peerId.toString(), stake: 10_000_000n, machines: [TEST_MACHINE] })
    )[0]!;
    machines.push({ machineId, ...TEST_MACHINE });
    await provider.daemon.offers.publisher!.set({ ...machineOffer(machines[0]!), leaseChecks: { shareBps: SHARE_BPS } });
    const market = devnet.deployment.contracts.market!;
    const renter = await devnet.wallet(5);
    const deposit = PRICE * BigInt(DURATION);
    await fund(devnet, renter, deposit);
    await send(renter, { address: devnet.deployment.contracts.token, abi: testTokenAbi, functionName: "approve", args: [market, deposit] } as never);
    const leaseId = await openActiveLease(devnet, renter, index, machineId);
    return { provider, machineId, leaseId, renter, deposit };
  }

  const tokenBalance = (address: Address) =>
    devnet.admin.publicClient.readContract({ address: devnet.deployment.contracts.token, abi: testTokenAbi, functionName: "balanceOf", args: [address] });

  it("a machine that starts cheating mid-lease fails an in-lease check and is faulted (kind 2) at once: the co-signer signs from the provider's signed wrong answer, without a check of its own; the renter is refunded and credited", async () => {
    const nodes: TestDaemon[] = [];
    const runner = new SwitchRunner(cpu);
    try {
      const market = devnet.deployment.contracts.market!;
      const { provider, machineId, leaseId, renter, deposit } = await leasedProvider(1, runner);
      nodes.push(provider.daemon);
      const renterBalance = await tokenBalance(renter.account.address);

      const attestors: Awaited<ReturnType<typeof startAttestorDaemon>>[] = [];
      // The first attestor checks the lease often; the second's budget allows it no check of its own during the test.
      for (const [n, index] of ATTESTORS.entries()) {
        const bootstrap = [addrOf(provider.daemon), ...attestors.map((started) => addrOf(started.daemon))];
        const started = await startAttestorDaemon(devnet, index, {
          p2p: { bootstrap },
          attest: { liveness: LIVENESS, leaseChecks: n === 0 ? LEASE_CHECKS : NO_OWN_CHECKS, attestor: SCAN },
        });
        nodes.push(started.daemon);
        attestors.push(started);
      }
      // The announced share reaches the attestors' books (and the API's offer view).
      for (const { daemon, attestor } of attestors) {
        const entry = await waitFor("the offer in the attestor's book", () => daemon.offers.book.get(offerKey(devnetAccount(1).address, machineId)), {
          timeoutMs: 30_000,
          intervalMs: 100,
        });
        assert.equal(toOfferView({ message: entry.message, verifiedAttestations: [], receivedAt: nowSec() }, nowSec()).leaseChecks.shareBps, SHARE_BPS);
        assert.equal(attestor.leaseChecks!.shareBps({ machineId, provider: devnetAccount(1).address }), SHARE_BPS);
      }
      // While the machine is honest, the first attestor's light in-lease checks pass and nothing is faulted. (The
      // second runs none, and no scheduled challenge: a leased machine gets only light in-lease checks, issue 35 item 4.)
      await waitFor(
        "a light pass during the lease",
        async () => (await attestors[0]!.attestor.results.history(machineId, 20)).some((record) => record.outcome === "pass" && record.light),
        {
          timeoutMs: 60_000,
          intervalMs: 200,
        },
      );
      assert.equal((await readLease(devnet.admin.publicClient, market, leaseId)).status, "Active");

      // The provider swaps the machine out: its runner now commits wrong rows. No challenge is announced.
      runner.cheating = true;
      const cheatingSince = nowSec();

      const ended = await waitFor(
        "the lease faulted on-chain",
        async () => {
          const lease = await readLease(devnet.admin.publicClient, market, leaseId);
          return lease.status !== "Active" ? lease : undefined;
        },
        { timeoutMs: 120_000, intervalMs: 250 },
      );
      assert.equal(ended.endReason, "Faulted");

      const logs = await devnet.admin.publicClient.getLogs({ address: market, fromBlock: devnet.deployment.deploymentBlock });
      const events = parseEventLogs({ abi: leaseMarketAbi, logs });
      const submitted = events.find((e) => e.eventName === "FaultSubmitted" && e.args.leaseId === leaseId) as Extract<(typeof events)[number], { eventName: "FaultSubmitted" }>;
      const end = events.find((e) => e.eventName === "LeaseEnded" && e.args.leaseId === leaseId) as Extract<(typeof events)[number], { eventName: "LeaseEnded" }>;
      const activated = events.find((e) => e.eventName === "LeaseActivated" && e.args.leaseId === leaseId) as Extract<(typeof events)[number], { eventName: "LeaseActivated" }>;
      assert.ok(submitted && end && activated);
      assert.equal(submitted.args.kind, FaultKind.capacity);
      const { observedAt } = submitted.args;
      assert.ok(observedAt >= cheatingSince - 1, `observedAt ${observedAt} is before the machine started cheating at ${cheatingSince}`);
      // The renter pays up to observedAt and gets the rest back with the SLA credit, without acting.
      const accrued = PRICE * BigInt(observedAt - activated.args.activatedAt);
      assert.equal(end.args.providerTotal, accrued);
      assert.equal(end.args.refund, deposit - accrued);
      const collateral = computeCollateral(deposit, COLLATERAL_BPS);
      const proRata = (collateral * BigInt(activated.args.end - observedAt)) / BigInt(activated.args.end - activated.args.activatedAt);
      const floor = (collateral * BigInt(FAULT_MIN_CREDIT_BPS)) / 10_000n;
      assert.equal(submitted.args.credit, proRata > floor ? proRata : floor);
      assert.equal(await tokenBalance(renter.account.address), renterBalance + end.args.refund + end.args.credit);

      // Two distinct attestors signed exactly that fault.
      const transaction = await devnet.admin.publicClient.getTransaction({ hash: submitted.transactionHash });
      const { decodeFunctionData } = await import("viem");
      const call = decodeFunctionData({ abi: leaseMarketAbi, data: transaction.input });
      const [fault, signatures] = call.args as readonly [Fault, readonly Hex[]];
      assert.deepEqual(fault, { leaseId, kind: FaultKind.capacity, observedAt });
      const signers = await Promise.all(signatures.map((signature) => recoverFaultSigner(provider.daemon.domain, fault, signature)));
      assert.deepEqual(new Set(signers), new Set(ATTESTORS.map((i) => devnetAccount(i).address)));
      // The proposer's own unannounced in-lease check caught the machine, during the lease, no later than observedAt.
      const [proposer, cosigner] = attestors as [(typeof attestors)[number], (typeof attestors)[number]];
      const caught = (await proposer.attestor.results.history(machineId, 20)).filter(
        (record) => record.outcome === "fail" && record.startedAtMs >= activated.args.activatedAt * 1000 && Math.floor(record.startedAtMs / 1000) <= observedAt,
      );
      assert.ok(
        caught.some((record) => record.trigger === "lease" && record.reason === "wrong_rows"),
        caught.map((record) => `${record.trigger}: ${record.reason}`).join(", "),
      );
      // The co-signer never failed the machine itself (its own check was not due for 100 min): it signed from the
      // proposal's transcript, which proves the provider signed a wrong answer to a challenge started during the lease.
      // (Its scans may have found the machine busy with the proposer's checks: a busy answer is no result.)
      const own = await cosigner.attestor.results.history(machineId, 20);
      assert.deepEqual(
        own.filter((record) => record.outcome !== "pass" && record.reason !== "busy").map((record) => `${record.trigger}: ${record.reason}`),
        [],
      );
      assert.ok(!own.some((record) => record.trigger === "lease"));
      const record = cosigner.attestor.faults!.get(leaseId, FaultKind.capacity);
      assert.equal(record?.role, "cosigner");
      assert.ok(record.evidence, "the co-signer kept the transcript it signed on");
      assert.ok(record.evidence.rows.length >= 1 && record.evidence.rows.length <= 4);
      const proof = await verifyCommitFraud(provider.daemon.domain, JSON.parse(JSON.stringify(record.evidence)));
      assert.ok(proof.proven, JSON.stringify(proof));
      assert.deepEqual([proof.provider, proof.attestor, proof.wrongRows.length], [devnetAccount(1).address, proposer.attestor.address, record.evidence.rows.length]);
      assert.ok(observedAt >= Math.floor(record.evidence.challenge.issuedAtMs / 1000), "observedAt is no earlier than the transcript's challenge");
      assert.ok(record.evidence.challenge.issuedAtMs >= activated.args.activatedAt * 1000);
    } finally {
      for (const node of nodes.reverse()) await node.close();
    }
  });

  it("a lying proposer cannot get a capacity fault co-signed against a machine that passes, with or without a transcript; transcripts cost a bounded recompute; in-lease checks stay within the announced share", async () => {
    const nodes: TestDaemon[] = [];
    try {
      const market = devnet.deployment.contracts.market!;
      const { provider, machineId, leaseId } = await leasedProvider(2, cpu);
      nodes.push(provider.daemon);
      const { activatedAt } = await readLease(devnet.admin.publicClient, market, leaseId);
      const honest = await startAttestorDaemon(devnet, ATTESTORS[1]!, { p2p: { bootstrap: [addrOf(provider.daemon)] }, attest: { liveness: LIVENESS, leaseChecks: LEASE_CHECKS } });
      nodes.push(honest.daemon);
      const liarNode = await startTestDaemon(devnet);
      nodes.push(liarNode);

      // The liar (an attestor on-chain) signs a capacity fault and asks the honest attestor to co-sign it.
      const liar = devnetAccount(ATTESTORS[0]!);
      const propose = async (observedAt: number, evidence?: unknown): Promise<FaultAnswer> => {
        const fault: Fault = { leaseId, kind: FaultKind.capacity, observedAt };
        const signature = await signFault(liar, provider.daemon.domain, fault);
        return request(
          liarNode.p2p.host,
          multiaddr(addrOf(honest.daemon)),
          FAULT_PROTOCOL,
          { v: 1, chainId: devnet.deployment.chainId, fault, signatures: [{ signer: liar.address, signature }], ...(evidence ? { evidence } : {}) },
          {
            responseSchema: faultAnswerSchema,
            timeoutMs: 15_000,
          },
        );
      };
      const first = await propose(Math.max(activatedAt, nowSec() - 1));
      assert.equal(first.outcome, "declined", JSON.stringify(first));
      assert.ok(first.outcome === "declined" && ["no_evidence", "seen_alive"].includes(first.reason), JSON.stringify(first));

      // The honest attestor challenges the machine itself; it passes, and the liar is refused again with the time it passed.
      const pass = await waitFor(
        "the honest attestor's pass during the lease",
        async () => (await honest.attestor.results.history(machineId, 20)).find((record) => record.outcome === "pass" && record.startedAtMs >= activatedAt * 1000),
        { timeoutMs: 60_000, intervalMs: 200 },
      );
      const again = await propose(Math.max(activatedAt, Math.floor(pass.finishedAtMs / 1000) - 1));
      assert.equal(again.outcome === "declined" && again.reason, "seen_alive", JSON.stringify(again));
      const later = await propose(nowSec());
      assert.equal(later.outcome, "declined", JSON.stringify(later));
      assert.equal(honest.attestor.faults!.get(leaseId, FaultKind.capacity), undefined);
      assert.equal((await readLease(devnet.admin.publicClient, market, leaseId)).status, "Active");

      // Transcripts. The liar challenges with its own attestor key, off the network, and the
      // provider's key signs the answers (what the provider's node would sign for that challenge).
      const domain = provider.daemon.domain;
      const signedTranscript = async (runner: Runner, options: { machineId?: number; atMs?: number } = {}): Promise<CommitFraudProof> => {
        const clock = options.atMs ?? Date.now();
        const target = { machineId: options.machineId ?? machineId, ...TEST_MACHINE };
        const challenger = new Attestor({ account: liar, domain, profile: challengeProfileSchema.parse({ preset: "cpu-devnet" }), now: () => clock });
        const challenge = await challenger.startChallenge({ provider: devnetAccount(2).address, ...target });
        const responder = new ChallengeResponder({
          provider: devnetAccount(2).address,
          signer: devnetAccount(2),
          machine: (id) => (id === target.machineId ? target : undefined),
          runner,
          domain,
          isAttestor: () => true,
          now: () => clock,
        });
        const commit = await responder.respond(challenge.message);
        const opened = await responder.open(openRequestOf(challenge.onCommit(commit, clock)));
        return JSON.parse(JSON.stringify({ challenge: challenge.message, commit, rows: opened.rows })) as CommitFraudProof;
      };
      const decline = (answer: FaultAnswer) => (answer.outcome === "declined" ? `${answer.reason}: ${answer.detail}` : "signed");
      // The wrong answer's challenge starts at least a second into the lease, so that a second before it is still in the lease.
      await waitFor("two seconds into the lease", () => nowSec() >= activatedAt + 2, { timeoutMs: 5_000, intervalMs: 100 });
      const wrong = (await transcriptOf(domain, await signedTranscript(new WrongRowsRunner())))!;
      assert.ok(wrong && wrong.rows.length === 4, "the proposer's transcript carries at most 4 wrong rows");
      // Rows the liar made up, under a root the provider never signed (the liar signs the commit itself): declined.
      const forged: FaultTranscript = { ...wrong, commit: { ...wrong.commit, roots: wrong.commit.roots.map(() => `0x${"ab".repeat(32)}` as Hex) } };
      forged.commit.signature = await signCommit(liar, domain, forged.commit);
      const inLease = Math.floor(wrong.challenge.issuedAtMs / 1000);
      assert.match(decline(await propose(inLease, forged)), /^bad_evidence: not_signed_by_provider/);
      // Rows edited under the provider's real signed root: declined.
      const edited = { ...wrong, rows: [{ ...wrong.rows[0]!, data: `0x${"00".repeat(wrong.rows[0]!.data.length / 2 - 1)}` }] };
      assert.match(decline(await propose(inLease, edited)), /^bad_evidence: bad_proof/);
      // The provider's real signed answer, but correct: declined.
      const honestAnswer = await signedTranscript(cpu);
      const correct = (k: number) => ({ ...honestAnswer, rows: honestAnswer.rows.slice(4 * k, 4 * k + 4) });
      assert.match(decline(await propose(Math.floor(honestAnswer.challenge.issuedAtMs / 1000), correct(0))), /^bad_evidence: rows_correct/);
      // A real wrong answer of another machine, or of a challenge started before the lease, or an observedAt before the challenge: declined, with why.
      const otherMachine = (await transcriptOf(domain, await signedTranscript(new WrongRowsRunner(), { machineId: machineId + 1 })))!;
      assert.match(decline(await propose(inLease, otherMachine)), /^evidence_mismatch: the transcript's challenge is of machine/);
      const beforeLease = (await transcriptOf(domain, await signedTranscript(new WrongRowsRunner(), { atMs: (activatedAt - 60) * 1000 })))!;
      assert.match(decline(await propose(inLease, beforeLease)), /^evidence_mismatch: .*outside lease/);
      assert.match(decline(await propose(inLease - 1, wrong)), /^evidence_mismatch: observedAt .* is before the transcript's challenge/);
      // More rows than a co-signer recomputes per proposal: the proposal is not even read.
      await assert.rejects(propose(inLease, { ...honestAnswer, rows: honestAnswer.rows.slice(0, 5) }));
      // A peer's transcripts get at most 16 rows recomputed a minute: distinct correct ones are soon refused unread;
      // one already judged is answered from the cache.
      // observedAt at the honest answer's own start (a loaded machine may start it a second after the wrong one's).
      const honestStart = Math.floor(honestAnswer.challenge.issuedAtMs / 1000);
      const answers: string[] = [];
      for (let k = 1; k < 8 && !answers.some((a) => a.startsWith("rate_limited")); k++) answers.push(decline(await propose(honestStart, correct(k))));
      assert.deepEqual(
        answers.map((answer) => answer.split(":")[0]),
        ["bad_evidence", "bad_evidence", "bad_evidence", "rate_limited"],
        answers.join("\n"),
      );
      assert.match(decline(await propose(honestStart, correct(0))), /^bad_evidence: rows_correct/);
      assert.equal(honest.attestor.faults!.get(leaseId, FaultKind.capacity), undefined);
      assert.equal((await readLease(devnet.admin.publicClient, market, leaseId)).status, "Active");

      // Random in-lease checks keep coming, and their time stays within the announced share of the lease's elapsed time.
      await waitFor(
        "two in-lease checks",
        async () => (await honest.attestor.results.history(machineId, 50)).filter((record) => record.trigger === "lease" && record.challengeId).length >= 2,
        { timeoutMs: 90_000, intervalMs: 250 },
      );
      const checks = (await honest.attestor.results.history(machineId, 50)).filter((record) => record.trigger === "lease" && record.challengeId);
      assert.ok(
        checks.every((record) => record.outcome === "pass"),
        JSON.stringify(checks.map((record) => record.reason)),
      );
      const spentMs = checks.reduce((sum, record) => sum + (record.finishedAtMs - record.startedAtMs), 0);
      const longest = Math.max(...checks.map((record) => record.finishedAtMs - record.startedAtMs));
      const allowanceMs = ((Date.now() - activatedAt * 1000) * SHARE_BPS) / 10_000;
      assert.ok(spentMs <= allowanceMs + longest, `in-lease checks took ${spentMs} ms of ${allowanceMs} ms allowed`);
      assert.equal((await readLease(devnet.admin.publicClient, market, leaseId)).status, "Active");
    } finally {
      for (const node of nodes.reverse()) await node.close();
    }
  });
});

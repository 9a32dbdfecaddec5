/**
 * Issue 24, item 4: in-lease checks. Attestors challenge leased machines at random times within
 * the share the offer announces; a machine that starts cheating during a lease (its runner
 * commits wrong rows) is faulted with a capacity fault (kind 2) signed by a quorum of attestors,
 * each from its own failed challenge, and the renter is refunded and credited. A lying proposer
 * cannot get a capacity fault co-signed against a machine that passes.
 */
import assert from "node:assert/strict";
import { multiaddr } from "@multiformats/multiaddr";
import { parseEventLogs, type Address, type Hex } from "viem";
import { leaseMarketAbi, testTokenAbi } from "../../common/abi.js";
import { recoverFaultSigner } from "../../common/attest/liveness.js";
import { signFault } from "../../common/chain/sign.js";
import { faultAnswerSchema, type FaultAnswer } from "../../common/attest/wire.js";
import { computeCollateral, readLease } from "../../common/chain/market.js";
import { devnetAccount } from "../../common/devnet.js";
import { FaultKind, type Fault } from "../../common/eip712.js";
import { offerKey } from "../../common/offers/message.js";
import { FAULT_PROTOCOL } from "../../common/p2p/protocols.js";
import { request } from "../../common/p2p/reqresp.js";
import { toOfferView } from "../../node/api/offer-view.js";
import type { ProviderMachine } from "../../node/attest/provider.js";
import { CpuRunner } from "../../node/attest/runner/cpu.js";
import type { Runner, RunnerChallenge } from "../../node/attest/runner/types.js";
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

const ATTESTORS = [6, 7];
const FAULT_MIN_CREDIT_BPS = 2_000;
/** The share the test providers announce: 10 %, the most an offer may. */
const SHARE_BPS = 1_000;
const LIVENESS = { probeIntervalMs: 400, probeTimeoutMs: 2_000, qosWindowSeconds: 30, minFailedProbes: 2, backupSubmitDelayMs: 3_000 };
/** Checks looked at often, with a small first-check cost so the first one comes within seconds of the lease. */
const LEASE_CHECKS = { tickMs: 200, assumedChallengeMs: 300 };

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

  it("a machine that starts cheating mid-lease fails an in-lease check and is faulted (kind 2) by a quorum, each signer from its own failed challenge; the renter is refunded and credited", async () => {
    const nodes: TestDaemon[] = [];
    const runner = new SwitchRunner(cpu);
    try {
      const market = devnet.deployment.contracts.market!;
      const { provider, machineId, leaseId, renter, deposit } = await leasedProvider(1, runner);
      nodes.push(provider.daemon);
      const renterBalance = await tokenBalance(renter.account.address);

      const attestors: Awaited<ReturnType<typeof startAttestorDaemon>>[] = [];
      for (const index of ATTESTORS) {
        const bootstrap = [addrOf(provider.daemon), ...attestors.map((started) => addrOf(started.daemon))];
        const started = await startAttestorDaemon(devnet, index, { p2p: { bootstrap }, attest: { liveness: LIVENESS, leaseChecks: LEASE_CHECKS } });
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
      // While the machine is honest, every attestor's challenges during the lease pass and nothing is faulted.
      for (const { attestor } of attestors) {
        await waitFor("a pass during the lease", async () => (await attestor.results.history(machineId, 20)).some((record) => record.outcome === "pass"), {
          timeoutMs: 60_000,
          intervalMs: 200,
        });
      }
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

      // Two distinct attestors signed exactly that fault, and each holds a failed challenge of its own, started during the lease no later than observedAt.
      const transaction = await devnet.admin.publicClient.getTransaction({ hash: submitted.transactionHash });
      const { decodeFunctionData } = await import("viem");
      const call = decodeFunctionData({ abi: leaseMarketAbi, data: transaction.input });
      const [fault, signatures] = call.args as readonly [Fault, readonly Hex[]];
      assert.deepEqual(fault, { leaseId, kind: FaultKind.capacity, observedAt });
      const signers = await Promise.all(signatures.map((signature) => recoverFaultSigner(provider.daemon.domain, fault, signature)));
      assert.deepEqual(new Set(signers), new Set(ATTESTORS.map((i) => devnetAccount(i).address)));
      const failures = (await Promise.all(attestors.map(({ attestor }) => attestor.results.history(machineId, 20)))).flat().filter((record) => record.outcome === "fail");
      assert.ok(
        failures.some((record) => record.trigger === "lease"),
        "an unannounced in-lease check caught the machine",
      );
      for (const { attestor } of attestors) {
        const failed = (await attestor.results.history(machineId, 20)).filter((record) => record.outcome === "fail" && record.startedAtMs >= activated.args.activatedAt * 1000);
        assert.ok(
          failed.some((record) => Math.floor(record.startedAtMs / 1000) <= observedAt),
          `attestor ${attestor.address} signed without a failed challenge of its own`,
        );
      }
    } finally {
      for (const node of nodes.reverse()) await node.close();
    }
  });

  it("a lying proposer cannot get a capacity fault co-signed against a machine that passes; in-lease checks stay within the announced share", async () => {
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
      const propose = async (observedAt: number): Promise<FaultAnswer> => {
        const fault: Fault = { leaseId, kind: FaultKind.capacity, observedAt };
        const signature = await signFault(liar, provider.daemon.domain, fault);
        return request(
          liarNode.p2p.host,
          multiaddr(addrOf(honest.daemon)),
          FAULT_PROTOCOL,
          { v: 1, chainId: devnet.deployment.chainId, fault, signatures: [{ signer: liar.address, signature }] },
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

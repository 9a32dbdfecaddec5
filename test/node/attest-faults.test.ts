import assert from "node:assert/strict";
import { rm } from "node:fs/promises";
import { multiaddr } from "@multiformats/multiaddr";
import { decodeFunctionData, parseEventLogs, type Address, type Hex } from "viem";
import { leaseMarketAbi, testTokenAbi } from "../../common/abi.js";
import { recoverFaultSigner, recoverHeartbeatSigner, signLivenessProbe } from "../../common/attest/liveness.js";
import { signFault } from "../../common/chain/sign.js";
import { faultAnswerSchema, signedHeartbeatSchema } from "../../common/attest/wire.js";
import { computeCollateral, readLease } from "../../common/chain/market.js";
import { devnetAccount } from "../../common/devnet.js";
import { FaultKind } from "../../common/eip712.js";
import { FAULT_PROTOCOL, LIVENESS_PROTOCOL } from "../../common/p2p/protocols.js";
import { request } from "../../common/p2p/reqresp.js";
import { revertName } from "../../common/chain/tx.js";
import { CpuRunner } from "../../node/attest/runner/index.js";
import {
  addrOf,
  COLLATERAL_BPS,
  TEST_MACHINE,
  DURATION,
  openActiveLease,
  PRICE,
  spawnProvider,
  startAttestorDaemon,
  startProviderDaemon,
  type TestDaemon,
} from "../support/attest.js";
import { startTestDaemon } from "../support/daemons.js";
import { fund, registerProvider, send, startDevnet, type Devnet } from "../support/devnet.js";
import { waitFor } from "../support/wait.js";

const FAULT_MIN_CREDIT_BPS = 2_000;
const ATTESTORS = [6, 7, 8];

/** Fast probes and a short QoS window, so an outage is faulted within seconds. */
const LIVENESS = { probeIntervalMs: 400, probeTimeoutMs: 2_000, qosWindowSeconds: 4, minFailedProbes: 2, backupSubmitDelayMs: 3_000 };

async function tokenBalance(devnet: Devnet, address: Address): Promise<bigint> {
  return devnet.admin.publicClient.readContract({ address: devnet.deployment.contracts.token, abi: testTokenAbi, functionName: "balanceOf", args: [address] });
}

describe("attestor role: liveness probes and quorum faults (three attestors, quorum two)", function () {
  this.timeout(180_000);
  let devnet: Devnet;

  before(async () => {
    // Blocks within one second share its timestamp: the chain clock must not run ahead of the
    // attestors' wall clocks (observedAt is checked against both).
    devnet = await startDevnet({
      params: { faultQuorum: 2, faultMinCreditBps: FAULT_MIN_CREDIT_BPS, attestorFaultWindow: LIVENESS.qosWindowSeconds },
      attestors: ATTESTORS.map((i) => devnetAccount(i).address),
      wallClockBlocks: true,
    });
  });
  after(async () => devnet?.close());

  it("a provider killed mid-lease is faulted by a quorum and the renter is refunded and credited without acting; a live provider never is", async () => {
    const nodes: TestDaemon[] = [];
    let killed: Awaited<ReturnType<typeof spawnProvider>> | undefined;
    const cpu = new CpuRunner({ workers: 1 });
    try {
      const market = devnet.deployment.contracts.market!;
      const renter = await devnet.wallet(5);
      const doomedWallet = await devnet.wallet(1);
      const liveWallet = await devnet.wallet(2);

      // Two providers: one in its own process (to be killed), one in this process that keeps answering.
      killed = await spawnProvider(devnet, 1);
      const live = await startProviderDaemon(devnet, 2, { runner: cpu, machines: () => [] });
      nodes.push(live.daemon);
      const [doomedMachine] = await registerProvider(devnet, doomedWallet, { peerId: killed.peerId, stake: 10_000_000n, machines: [TEST_MACHINE] });
      const [liveMachine] = await registerProvider(devnet, liveWallet, { peerId: live.daemon.p2p.host.peerId.toString(), stake: 10_000_000n, machines: [TEST_MACHINE] });

      const deposit = PRICE * BigInt(DURATION);
      await fund(devnet, renter, deposit * 2n);
      await send(renter, { address: devnet.deployment.contracts.token, abi: testTokenAbi, functionName: "approve", args: [market, deposit * 2n] });
      const doomedLease = await openActiveLease(devnet, renter, 1, doomedMachine!);
      const liveLease = await openActiveLease(devnet, renter, 2, liveMachine!);
      // From here on the renter sends nothing: the refund must reach it on its own.
      const renterNonce = await devnet.admin.publicClient.getTransactionCount({ address: renter.account.address });
      const renterBalance = await tokenBalance(devnet, renter.account.address);

      const providers = [killed.addrs[0], addrOf(live.daemon)];
      const first = await startAttestorDaemon(devnet, ATTESTORS[0]!, { p2p: { bootstrap: providers }, attest: { liveness: LIVENESS } });
      nodes.push(first.daemon);
      const probed = (attestor: typeof first.attestor, leaseId: bigint) => attestor.prober!.state(leaseId)?.lastSuccessAt !== undefined;
      await waitFor("the first attestor hearing from both providers", () => probed(first.attestor, doomedLease) && probed(first.attestor, liveLease), {
        timeoutMs: 30_000,
        intervalMs: 50,
      });

      // The provider's machine dies.
      killed.child.kill("SIGKILL");
      await new Promise((resolve) => killed!.child.once("exit", resolve));

      // One attestor alone signs a fault but cannot end the lease: the quorum is two.
      const proposal = await waitFor("the first attestor's fault proposal", () => first.attestor.faults!.get(doomedLease), { timeoutMs: 30_000, intervalMs: 50 });
      assert.equal(proposal.status, "collecting");
      assert.equal(proposal.role, "proposer");
      assert.equal(proposal.fault.kind, FaultKind.unresponsive);
      assert.deepEqual(
        proposal.signatures.map((entry) => entry.signer),
        [devnetAccount(ATTESTORS[0]!).address],
      );
      // Three more failed probes of the dead provider (the attestor's own record of them, not a
      // fixed sleep): the proposer has had its rounds to gather co-signers, and found none.
      const failuresAtProposal = first.attestor.prober!.state(doomedLease)!.failures;
      await waitFor("three more failed probes by the lone attestor", () => (first.attestor.prober!.state(doomedLease)?.failures ?? 0) >= failuresAtProposal + 3 || undefined, {
        timeoutMs: 30_000,
        intervalMs: 50,
      });
      assert.equal(first.attestor.faults!.get(doomedLease)?.status, "collecting", "the lone proposal is still collecting");
      assert.equal((await readLease(devnet.admin.publicClient, market, doomedLease)).status, "Active", "one signature must not end the lease");
      // On-chain too: one attestor's signature of a fault inside the lease is refused.
      const inRange = { ...proposal.fault, observedAt: (await readLease(devnet.admin.publicClient, market, doomedLease)).activatedAt };
      const loneSignature = await signFault(devnetAccount(ATTESTORS[0]!), first.daemon.domain, inRange);
      const lone = await devnet.admin.publicClient
        .simulateContract({ account: renter.account, address: market, abi: leaseMarketAbi, functionName: "submitFault", args: [inRange, [loneSignature]] })
        .then(
          () => undefined,
          (error: unknown) => error,
        );
      assert.equal(revertName(lone), "FaultQuorumNotMet");

      // Two more attestors join. They never heard from the dead provider; the live one answers them.
      const others: (typeof first)[] = [];
      for (const index of ATTESTORS.slice(1)) {
        const started = await startAttestorDaemon(devnet, index, { p2p: { bootstrap: [addrOf(first.daemon), ...providers] }, attest: { liveness: LIVENESS } });
        nodes.push(started.daemon);
        others.push(started);
      }

      const ended = await waitFor(
        "the doomed lease faulted on-chain",
        async () => {
          const lease = await readLease(devnet.admin.publicClient, market, doomedLease);
          return lease.status !== "Active" ? lease : undefined;
        },
        { timeoutMs: 60_000, intervalMs: 200 },
      );
      assert.equal(ended.endReason, "Faulted");

      // The chain's record: accrual stopped at observedAt, the unaccrued deposit came back with the SLA credit.
      const logs = await devnet.admin.publicClient.getLogs({ address: market, fromBlock: devnet.deployment.deploymentBlock });
      const events = parseEventLogs({ abi: leaseMarketAbi, logs });
      const activated = events.find((e) => e.eventName === "LeaseActivated" && e.args.leaseId === doomedLease) as Extract<(typeof events)[number], { eventName: "LeaseActivated" }>;
      const submitted = events.find((e) => e.eventName === "FaultSubmitted" && e.args.leaseId === doomedLease) as Extract<(typeof events)[number], { eventName: "FaultSubmitted" }>;
      const end = events.find((e) => e.eventName === "LeaseEnded" && e.args.leaseId === doomedLease) as Extract<(typeof events)[number], { eventName: "LeaseEnded" }>;
      assert.ok(submitted && end && activated);
      const { activatedAt, end: leaseEnd } = activated.args;
      const observedAt = submitted.args.observedAt;
      assert.ok(observedAt >= activatedAt && observedAt < leaseEnd);
      assert.equal(end.args.stopAt, observedAt);
      const accrued = PRICE * BigInt(observedAt - activatedAt);
      assert.equal(end.args.providerTotal, accrued);
      assert.equal(end.args.refund, deposit - accrued);
      const collateral = computeCollateral(deposit, COLLATERAL_BPS);
      const proRata = (collateral * BigInt(leaseEnd - observedAt)) / BigInt(leaseEnd - activatedAt);
      const floor = (collateral * BigInt(FAULT_MIN_CREDIT_BPS)) / 10_000n;
      assert.equal(submitted.args.credit, proRata > floor ? proRata : floor);
      assert.ok(submitted.args.credit > 0n);
      assert.equal(end.args.credit, submitted.args.credit);
      assert.equal(await tokenBalance(devnet, renter.account.address), renterBalance + end.args.refund + end.args.credit);
      assert.equal(await devnet.admin.publicClient.getTransactionCount({ address: renter.account.address }), renterNonce, "the renter sent no transaction");

      // The transaction carried the signatures of at least two distinct attestors, over the struct that landed.
      const transaction = await devnet.admin.publicClient.getTransaction({ hash: submitted.transactionHash });
      const call = decodeFunctionData({ abi: leaseMarketAbi, data: transaction.input });
      assert.equal(call.functionName, "submitFault");
      const [fault, signatures] = call.args as readonly [{ leaseId: bigint; kind: number; observedAt: number }, readonly Hex[]];
      assert.deepEqual(fault, { leaseId: doomedLease, kind: FaultKind.unresponsive, observedAt });
      const signers = await Promise.all(signatures.map((signature) => recoverFaultSigner(first.daemon.domain, fault, signature)));
      assert.ok(signers.length >= 2);
      assert.equal(new Set(signers).size, signers.length);
      assert.ok(
        signers.every((signer) => ATTESTORS.some((i) => devnetAccount(i).address === signer)),
        signers.join(),
      );
      // Every attestor that took part records the fault as landed.
      await waitFor("the proposer recording the landed fault", () => first.attestor.faults!.get(doomedLease)?.status === "landed", { timeoutMs: 15_000 });

      // The live provider kept answering every attestor and its lease runs on, never faulted.
      await waitFor("every attestor hearing from the live provider", () => [first, ...others].every((node) => probed(node.attestor, liveLease)), { timeoutMs: 15_000 });
      assert.equal((await readLease(devnet.admin.publicClient, market, liveLease)).status, "Active");
      for (const node of [first, ...others]) assert.equal(node.attestor.faults!.get(liveLease), undefined);
    } finally {
      for (const node of nodes.reverse()) await node.close();
      if (killed) {
        if (killed.child.exitCode === null && killed.child.signalCode === null) killed.child.kill("SIGKILL");
        await rm(killed.dataDir, { recursive: true, force: true });
      }
      await cpu.close();
    }
  });

  it("a provider signs heartbeats only for its active leases; an attestor does not co-sign a fault against a provider that answers it", async () => {
    const nodes: TestDaemon[] = [];
    const cpu = new CpuRunner({ workers: 1 });
    try {
      const market = devnet.deployment.contracts.market!;
      const renter = await devnet.wallet(5);
      const wallet = await devnet.wallet(3);
      const provider = await startProviderDaemon(devnet, 3, { runner: cpu, machines: () => [] });
      nodes.push(provider.daemon);
      const [machineId] = await registerProvider(devnet, wallet, { peerId: provider.daemon.p2p.host.peerId.toString(), stake: 10_000_000n, machines: [TEST_MACHINE] });
      await fund(devnet, renter, PRICE * BigInt(DURATION));
      await send(renter, { address: devnet.deployment.contracts.token, abi: testTokenAbi, functionName: "approve", args: [market, PRICE * BigInt(DURATION)] });
      const leaseId = await openActiveLease(devnet, renter, 3, machineId!);
      const lease = await readLease(devnet.admin.publicClient, market, leaseId);

      // The provider signs heartbeats for its own active leases only.
      const renterNode = await startTestDaemon(devnet);
      nodes.push(renterNode);
      // A probe signed by `signer` (an attestor unless said otherwise), with fields changed after signing by `tamper`.
      const probe = async (options: { signer?: number; leaseId?: bigint; issuedAtMs?: number; tamper?: Record<string, unknown> } = {}) => {
        const signer = devnetAccount(options.signer ?? ATTESTORS[0]!);
        const fields = { leaseId: options.leaseId ?? leaseId, challenge: `0x${"ab".repeat(32)}` as Hex, attestor: signer.address, issuedAtMs: options.issuedAtMs ?? Date.now() };
        const signature = await signLivenessProbe(signer, provider.daemon.domain, fields);
        const body = { v: 1, chainId: devnet.deployment.chainId, ...fields, leaseId: fields.leaseId.toString(), signature, ...options.tamper };
        return request(renterNode.p2p.host, multiaddr(addrOf(provider.daemon)), LIVENESS_PROTOCOL, body, { responseSchema: signedHeartbeatSchema });
      };
      const heartbeat = await probe();
      assert.equal(heartbeat.heartbeat.leaseId, leaseId);
      assert.equal(heartbeat.heartbeat.challenge, `0x${"ab".repeat(32)}`);
      assert.equal(await recoverHeartbeatSigner(provider.daemon.domain, heartbeat.heartbeat, heartbeat.signature), devnetAccount(3).address);
      await assert.rejects(probe({ leaseId: leaseId + 100n }), { name: "LeaseNotHeldError" });
      await assert.rejects(probe({ tamper: { chainId: 1 } }), { name: "WrongChainError" });
      // Only attestors' fresh probes are answered.
      await assert.rejects(probe({ signer: 9 }), { name: "UnauthorizedProbeError" });
      await assert.rejects(probe({ tamper: { challenge: `0x${"cd".repeat(32)}` } }), { name: "UnauthorizedProbeError" });
      await assert.rejects(probe({ issuedAtMs: Date.now() - 120_000 }), { name: "UnauthorizedProbeError" });

      const attestor = await startAttestorDaemon(devnet, ATTESTORS[1]!, { p2p: { bootstrap: [addrOf(provider.daemon)] }, attest: { liveness: LIVENESS } });
      nodes.push(attestor.daemon);
      await waitFor("the attestor hearing from the provider", () => attestor.attestor.prober!.state(leaseId)?.lastSuccessAt !== undefined, { timeoutMs: 20_000 });

      // A (lying or mistaken) attestor proposes a fault against a provider that is up.
      const fault = { leaseId, kind: FaultKind.unresponsive, observedAt: lease.activatedAt };
      const proposer = devnetAccount(ATTESTORS[0]!);
      const signature: Hex = await signFault(proposer, provider.daemon.domain, fault);
      const answer = await request(
        provider.daemon.p2p.host,
        multiaddr(addrOf(attestor.daemon)),
        FAULT_PROTOCOL,
        {
          v: 1,
          chainId: devnet.deployment.chainId,
          fault,
          signatures: [{ signer: proposer.address, signature }],
        },
        { responseSchema: faultAnswerSchema, timeoutMs: 15_000 },
      );
      assert.equal(answer.outcome, "declined");
      assert.ok(answer.outcome === "declined" && ["seen_alive", "provider_alive"].includes(answer.reason), JSON.stringify(answer));
      assert.equal(attestor.attestor.faults!.get(leaseId), undefined);

      // Nor one signed by someone outside the attestor set, whatever the provider's state.
      const stranger = devnetAccount(9);
      const forged = await request(
        provider.daemon.p2p.host,
        multiaddr(addrOf(attestor.daemon)),
        FAULT_PROTOCOL,
        {
          v: 1,
          chainId: devnet.deployment.chainId,
          fault,
          signatures: [{ signer: stranger.address, signature: await signFault(stranger, provider.daemon.domain, fault) }],
        },
        { responseSchema: faultAnswerSchema, timeoutMs: 15_000 },
      );
      assert.equal(forged.outcome === "declined" && forged.reason, "bad_proposal");
      assert.equal((await readLease(devnet.admin.publicClient, market, leaseId)).status, "Active");
    } finally {
      for (const node of nodes.reverse()) await node.close();
      await cpu.close();
    }
  });
});

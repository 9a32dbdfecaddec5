/**
 * Issue 35, item 6: an unsigned "seen alive" must not drop a proven fault, and a fault proposal
 * must reach staked attestors only. Two honest attestors (quorum two) watch a provider whose node
 * stops answering probes but stays connected; three parties then try to save it:
 *
 * - the provider's own node answers fault proposals with "seen alive just now" and shows a copy of
 *   a real attestor's peer binding;
 * - an outsider node does the same with another attestor's binding;
 * - a staked attestor (real key, real binding) answers "seen alive" with a receipt the provider
 *   forged.
 *
 * The fault lands at the outage's start through the proposer, and neither the provider nor the
 * outsider ever receives the proposal. Then a provider that still answers one honest attestor:
 * that attestor's signed probe receipt is what moves a fault past its answer.
 */
import assert from "node:assert/strict";
import { multiaddr } from "@multiformats/multiaddr";
import { bytesToHex, parseEventLogs, type Hex } from "viem";
import { leaseMarketAbi, testTokenAbi } from "../../common/abi.js";
import { attestorIdentityRequestSchema, attestorIdentitySchema, signAttestorPeer, type AttestorIdentity } from "../../common/attest/attestor-peer.js";
import { recoverProbeReceiptSigner, signHeartbeat, signProbeReceipt } from "../../common/attest/liveness.js";
import { faultAnswerSchema, faultProposalSchema, livenessProbeSchema, signedHeartbeatSchema, type FaultProposal } from "../../common/attest/wire.js";
import { signFault } from "../../common/chain/sign.js";
import { readLease } from "../../common/chain/market.js";
import { devnetAccount } from "../../common/devnet.js";
import { FaultKind } from "../../common/eip712.js";
import { ATTESTOR_IDENTITY_PROTOCOL, FAULT_PROTOCOL, LIVENESS_PROTOCOL } from "../../common/p2p/protocols.js";
import { handleProtocol, request } from "../../common/p2p/reqresp.js";
import { CpuRunner } from "../../node/attest/runner/index.js";
import { addrOf, DURATION, openActiveLease, PRICE, startAttestorDaemon, startProviderDaemon, TEST_MACHINE, type TestDaemon } from "../support/attest.js";
import { startTestDaemon } from "../support/daemons.js";
import { fund, registerProvider, send, startDevnet, type Devnet } from "../support/devnet.js";
import { waitFor } from "../support/wait.js";

const PROPOSER = 6;
const LIAR = 7;
const HONEST = 8;
/**
 * A short window, and a backup delay far beyond the test: before the fix the proposer dropped its
 * quorum on the provider's "seen alive" and the fault landed only through a co-signer's backup.
 */
const LIVENESS = { probeIntervalMs: 400, probeTimeoutMs: 2_000, qosWindowSeconds: 4, minFailedProbes: 2, backupSubmitDelayMs: 120_000 };

type Attestor = Awaited<ReturnType<typeof startAttestorDaemon>>;

/** Serves `FAULT_PROTOCOL` on `daemon` as an attacker would: records every proposal and answers `answer(proposal)`. */
async function recordProposals(daemon: TestDaemon, answer: (proposal: FaultProposal) => Promise<unknown>): Promise<FaultProposal[]> {
  const seen: FaultProposal[] = [];
  await handleProtocol(daemon.p2p.host, FAULT_PROTOCOL, {
    requestSchema: faultProposalSchema,
    responseSchema: faultAnswerSchema,
    maxMessageBytes: 256 * 1024,
    handler: async (proposal) => {
      seen.push(proposal);
      return (await answer(proposal)) as never;
    },
  });
  return seen;
}

/** Serves `identity` as this daemon's attestor binding (a copy of someone else's, or its own). */
async function serveIdentity(daemon: TestDaemon, identity: AttestorIdentity): Promise<void> {
  await handleProtocol(daemon.p2p.host, ATTESTOR_IDENTITY_PROTOCOL, {
    requestSchema: attestorIdentityRequestSchema,
    responseSchema: attestorIdentitySchema,
    handler: () => ({ ...identity, signature: identity.signature as Hex }),
  });
}

describe("attestor role: fault proposals go to staked attestors only, and only a signed receipt moves a fault (issue 35, item 6)", function () {
  this.timeout(180_000);
  let devnet: Devnet;
  const nodes: TestDaemon[] = [];
  const cpu = new CpuRunner({ workers: 1 });
  let proposer: Attestor;
  let honest: Attestor;

  before(async () => {
    devnet = await startDevnet({
      params: { faultQuorum: 2, attestorFaultWindow: LIVENESS.qosWindowSeconds },
      attestors: [PROPOSER, LIAR, HONEST].map((i) => devnetAccount(i).address),
      wallClockBlocks: true,
    });
    proposer = await startAttestorDaemon(devnet, PROPOSER, { attest: { liveness: LIVENESS } });
    nodes.push(proposer.daemon);
    honest = await startAttestorDaemon(devnet, HONEST, { p2p: { bootstrap: [addrOf(proposer.daemon)] }, attest: { liveness: LIVENESS } });
    nodes.push(honest.daemon);
  });
  after(async () => {
    for (const node of nodes.reverse()) await node.close().catch(() => undefined);
    await cpu.close();
    await devnet?.close();
  });

  /** A provider daemon (devnet account `index`) with one machine and an active lease of the renter's. */
  async function providerWithLease(index: number): Promise<{ provider: TestDaemon; leaseId: bigint }> {
    const market = devnet.deployment.contracts.market!;
    const { daemon } = await startProviderDaemon(devnet, index, { runner: cpu, machines: () => [] });
    nodes.push(daemon);
    const wallet = await devnet.wallet(index);
    const [machineId] = await registerProvider(devnet, wallet, { peerId: daemon.p2p.host.peerId.toString(), stake: 10_000_000n, machines: [TEST_MACHINE] });
    const renter = await devnet.wallet(5);
    await fund(devnet, renter, PRICE * BigInt(DURATION));
    await send(renter, { address: devnet.deployment.contracts.token, abi: testTokenAbi, functionName: "approve", args: [market, PRICE * BigInt(DURATION)] });
    const leaseId = await openActiveLease(devnet, renter, index, machineId!);
    for (const attestor of [proposer, honest]) await attestor.daemon.p2p.host.dial(multiaddr(addrOf(daemon)));
    await waitFor("both attestors hearing from the provider", () => [proposer, honest].every((a) => a.attestor.prober!.state(leaseId)?.lastSuccessAt !== undefined), {
      timeoutMs: 30_000,
      intervalMs: 50,
    });
    return { provider: daemon, leaseId };
  }

  /** A real attestor's binding, fetched over the protocol (what any peer can copy). */
  const bindingOf = (from: TestDaemon, of: TestDaemon) =>
    request(from.p2p.host, multiaddr(addrOf(of)), ATTESTOR_IDENTITY_PROTOCOL, { v: 1, chainId: devnet.deployment.chainId }, { responseSchema: attestorIdentitySchema });

  it("the provider, an outsider and a lying attestor answering 'seen alive' do not stop a fault two attestors watched; the provider and the outsider never see it", async () => {
    const market = devnet.deployment.contracts.market!;
    const { provider, leaseId } = await providerWithLease(1);
    const providerAccount = devnetAccount(1);
    const nowS = () => Math.floor(Date.now() / 1000);
    const seenAlive = async () => ({ v: 1, outcome: "declined", reason: "seen_alive", detail: "answered just now", lastSeenAt: nowS(), earliestObservedAt: null, signsAt: null });

    // The provider's node stays connected but stops answering probes, and answers fault
    // proposals itself, showing a copy of the proposer's real binding.
    await provider.p2p.host.unhandle(LIVENESS_PROTOCOL);
    const stoppedAt = nowS();
    const toProvider = await recordProposals(provider, seenAlive);
    await serveIdentity(provider, await bindingOf(provider, proposer.daemon));

    // An outsider: any node on the network, with a copy of the honest attestor's binding.
    const outsider = await startTestDaemon(devnet);
    nodes.push(outsider);
    const toOutsider = await recordProposals(outsider, seenAlive);
    await serveIdentity(outsider, await bindingOf(outsider, honest.daemon));

    // A staked attestor that lies for the provider: its real binding, and "seen alive" with a
    // receipt the provider signed (an attestor's receipt is what counts; a provider's is nothing).
    const liar = await startTestDaemon(devnet);
    nodes.push(liar);
    const liarAccount = devnetAccount(LIAR);
    const peerId = liar.p2p.host.peerId.toString();
    await serveIdentity(liar, {
      v: 1,
      attestor: liarAccount.address,
      peerId,
      signature: await signAttestorPeer(liarAccount, liar.domain, { attestor: liarAccount.address, peerId }),
    });
    const toLiar = await recordProposals(liar, async (proposal) => {
      const receivedAtMs = BigInt(Date.now());
      const challenge = bytesToHex(globalThis.crypto.getRandomValues(new Uint8Array(32)));
      const signature = await signProbeReceipt(providerAccount, liar.domain, { leaseId: proposal.fault.leaseId, challenge, receivedAtMs });
      return { ...(await seenAlive()), receipt: { challenge, receivedAtMs: receivedAtMs.toString(), signature } };
    });
    for (const node of [outsider, liar]) for (const attestor of [proposer, honest]) await node.p2p.host.dial(multiaddr(addrOf(attestor.daemon)));

    const ended = await waitFor(
      "the lease faulted on-chain",
      async () => {
        const lease = await readLease(devnet.admin.publicClient, market, leaseId);
        return lease.status !== "Active" ? lease : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 200 },
    );
    assert.equal(ended.endReason, "Faulted");
    const logs = await devnet.admin.publicClient.getLogs({ address: market, fromBlock: devnet.deployment.deploymentBlock });
    const submitted = parseEventLogs({ abi: leaseMarketAbi, logs }).find((e) => e.eventName === "FaultSubmitted" && e.args.leaseId === leaseId);
    assert.ok(submitted && submitted.eventName === "FaultSubmitted");
    // The outage's start, not a time the liars named: the renter pays nothing past it. (Moved past
    // a "seen alive" given after the window, it would be later than stoppedAt + the window.)
    assert.ok(
      submitted.args.observedAt >= stoppedAt - 1 && submitted.args.observedAt < stoppedAt + LIVENESS.qosWindowSeconds,
      `observedAt ${submitted.args.observedAt}, the provider stopped at ${stoppedAt}`,
    );
    // It landed through an attestor that proposed it, not a backup 120 s later.
    const records = [proposer, honest].map((a) => a.attestor.faults!.get(leaseId));
    assert.ok(
      records.some((record) => record?.status === "landed" && record.landedBy === "self" && record.fault.observedAt === submitted.args.observedAt),
      JSON.stringify(records.map((r) => r && { role: r.role, status: r.status, landedBy: r.landedBy, observedAt: r.fault.observedAt })),
    );
    // The liar, a staked attestor, was asked; the provider and the outsider never were.
    assert.ok(toLiar.length >= 1, "the staked attestor was asked to co-sign");
    assert.deepEqual(toProvider, [], "the provider received a proposal");
    assert.deepEqual(toOutsider, [], "an outsider received a proposal");
  });

  it("a real attestor's signed probe receipt after observedAt moves the fault past it", async () => {
    const market = devnet.deployment.contracts.market!;
    const { provider, leaseId } = await providerWithLease(2);
    const providerAccount = devnetAccount(2);
    const honestAddress = devnetAccount(HONEST).address;
    // The provider answers the honest attestor's probes only (a partition from the proposer).
    await provider.p2p.host.unhandle(LIVENESS_PROTOCOL);
    await handleProtocol(provider.p2p.host, LIVENESS_PROTOCOL, {
      requestSchema: livenessProbeSchema,
      responseSchema: signedHeartbeatSchema,
      handler: async (probe) => {
        if (probe.attestor !== honestAddress) throw new Error("not answering this attestor");
        const heartbeat = { leaseId: probe.leaseId, challenge: probe.challenge as Hex, respondedAt: Math.floor(Date.now() / 1000) };
        return { v: 1 as const, heartbeat: { ...heartbeat, leaseId: heartbeat.leaseId.toString() }, signature: await signHeartbeat(providerAccount, provider.domain, heartbeat) };
      },
    });

    // The proposer proposes at the start of its own outage (its first failed probe); it may have
    // asked the honest attestor and moved already by the time this test looks.
    await waitFor("the proposer's fault", () => proposer.attestor.faults!.get(leaseId), { timeoutMs: 30_000, intervalMs: 50 });
    const { activatedAt } = await readLease(devnet.admin.publicClient, market, leaseId);
    const originalObservedAt = Math.max(proposer.attestor.prober!.state(leaseId)!.firstFailureAt!, activatedAt);
    // What the honest attestor answers: seen_alive, with its own signed receipt of the heartbeat.
    const fault = { leaseId, kind: FaultKind.unresponsive, observedAt: originalObservedAt };
    const answer = await request(
      proposer.daemon.p2p.host,
      multiaddr(addrOf(honest.daemon)),
      FAULT_PROTOCOL,
      {
        v: 1,
        chainId: devnet.deployment.chainId,
        fault,
        signatures: [{ signer: devnetAccount(PROPOSER).address, signature: await signFault(devnetAccount(PROPOSER), proposer.daemon.domain, fault) }],
      },
      { responseSchema: faultAnswerSchema, timeoutMs: 15_000 },
    );
    assert.ok(answer.outcome === "declined" && answer.reason === "seen_alive" && answer.receipt, JSON.stringify(answer));
    const receipt = { leaseId, challenge: answer.receipt.challenge as Hex, receivedAtMs: BigInt(answer.receipt.receivedAtMs) };
    assert.equal(await recoverProbeReceiptSigner(proposer.daemon.domain, receipt, answer.receipt.signature), honestAddress);
    assert.ok(receipt.receivedAtMs >= BigInt(originalObservedAt + 1) * 1000n, "the receipt is inside the fault's window");

    // The proposer moves its fault past that receipt (the renter pays up to the later time) and
    // the lease is not faulted at the earlier observedAt.
    const moved = await waitFor(
      "the proposer moving its fault past the receipt",
      () => {
        const record = proposer.attestor.faults!.get(leaseId);
        return record && record.fault.observedAt > originalObservedAt ? record : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 50 },
    );
    assert.ok(moved.fault.observedAt * 1000 > Number(receipt.receivedAtMs) - 1_000, `moved to ${moved.fault.observedAt}, the receipt is at ${receipt.receivedAtMs} ms`);
    assert.equal((await readLease(devnet.admin.publicClient, market, leaseId)).status, "Active");
    const logs = await devnet.admin.publicClient.getLogs({ address: market, fromBlock: devnet.deployment.deploymentBlock });
    assert.ok(!parseEventLogs({ abi: leaseMarketAbi, logs }).some((e) => e.eventName === "FaultSubmitted" && e.args.leaseId === leaseId));
  });
});

/**
 * Issue 24, item 5: a provider proves a false liveness fault from the attestors' own signed
 * receipts. Real devnet (AttestorStaking with a 3 s fault window), real attestor and provider
 * daemons over libp2p: the attestors' probes carry their receipts, the provider keeps them, and
 * its node disputes a fault that a receipt contradicts (both liars slashed, the provider owed the
 * disputer's share); an honest fault of a provider that really stopped is not disputed, and a
 * dispute against it reverts.
 */
import assert from "node:assert/strict";
import { decodeFunctionData, type Address, type Hex } from "viem";
import { attestorStakingAbi, leaseMarketAbi, providerRegistryAbi, testTokenAbi } from "../../common/abi.js";
import { receiptContradictsFault } from "../../common/attest/liveness.js";
import { signFault } from "../../common/chain/sign.js";
import { readLease } from "../../common/chain/market.js";
import { revertName } from "../../common/chain/tx.js";
import { devnetAccount } from "../../common/devnet.js";
import { FaultKind, type Fault } from "../../common/eip712.js";
import { CpuRunner } from "../../node/attest/runner/index.js";
import { addrOf, DURATION, openActiveLease, PRICE, startAttestorDaemon, startProviderDaemon, TEST_MACHINE, ZERO32, type TestDaemon } from "../support/attest.js";
import { fund, registerProvider, send, startDevnet, type Devnet } from "../support/devnet.js";
import { waitFor } from "../support/wait.js";

const PROVIDER = 1;
const RENTER = 5;
/** The liars of the first test; the honest pair of the second (the liars' stake is gone by then). */
const LIARS = [6, 7] as const;
const HONEST = [8, 9] as const;
const FAULT_WINDOW = 3;
const LIVENESS = { probeIntervalMs: 300, probeTimeoutMs: 1_000, qosWindowSeconds: 3, minFailedProbes: 2, backupSubmitDelayMs: 2_000 };

describe("attestor staking: a provider disputes a liveness fault its attestors' own receipts contradict (issue 24, item 5)", function () {
  this.timeout(120_000);
  let devnet: Devnet;
  let provider: Awaited<ReturnType<typeof startProviderDaemon>>;
  let machines: number[];
  const nodes: TestDaemon[] = [];
  const cpu = new CpuRunner({ workers: 1 });

  before(async () => {
    devnet = await startDevnet({
      params: { faultQuorum: 2, attestorFaultWindow: FAULT_WINDOW },
      attestors: [...LIARS, ...HONEST].map((i) => devnetAccount(i).address),
      wallClockBlocks: true,
    });
    provider = await startProviderDaemon(devnet, PROVIDER, { runner: cpu, machines: () => [], falseFaultScanMs: 300 });
    machines = await registerProvider(devnet, await devnet.wallet(PROVIDER), {
      peerId: provider.daemon.p2p.host.peerId.toString(),
      stake: 10_000_000n,
      machines: [TEST_MACHINE, TEST_MACHINE],
    });
    const renter = await devnet.wallet(RENTER);
    await fund(devnet, renter, PRICE * BigInt(DURATION) * 2n);
    await send(renter, {
      address: devnet.deployment.contracts.token,
      abi: testTokenAbi,
      functionName: "approve",
      args: [devnet.deployment.contracts.market!, PRICE * BigInt(DURATION) * 2n],
    });
  });
  after(async () => {
    for (const node of nodes.splice(0)) await node.close().catch(() => undefined);
    await provider?.daemon.close().catch(() => undefined);
    await cpu.close();
    await devnet?.close();
  });

  const staking = async (): Promise<Address> =>
    devnet.admin.publicClient.readContract({ address: devnet.deployment.contracts.registry!, abi: providerRegistryAbi, functionName: "attestorStaking" });
  const stakeOf = async (index: number) =>
    (await devnet.admin.publicClient.readContract({ address: await staking(), abi: attestorStakingAbi, functionName: "stakeOf", args: [devnetAccount(index).address] })).active;
  const faultDisputes = async (leaseId: bigint) =>
    devnet.admin.publicClient.getContractEvents({ address: await staking(), abi: attestorStakingAbi, eventName: "FaultDisputed", args: { leaseId }, fromBlock: 0n, strict: true });
  /** Both attestors' signatures of `fault`, ordered by signer as submitFault wants them. */
  const signBoth = async (indices: readonly number[], fault: Fault): Promise<Hex[]> => {
    const signers = indices.map((i) => devnetAccount(i)).sort((a, b) => (BigInt(a.address) < BigInt(b.address) ? -1 : 1));
    return Promise.all(signers.map((account) => signFault(account, provider.daemon.domain, fault)));
  };

  it("a quorum that signs a liveness fault after its own receipts is slashed at once, and the provider is owed the disputer's share (≈3 s)", async () => {
    const market = devnet.deployment.contracts.market!;
    const renter = await devnet.wallet(RENTER);
    const leaseId = await openActiveLease(devnet, renter, PROVIDER, machines[0]!);
    for (const index of LIARS) {
      const started = await startAttestorDaemon(devnet, index, { p2p: { bootstrap: [addrOf(provider.daemon)] }, attest: { liveness: LIVENESS } });
      nodes.push(started.daemon);
    }
    const liars = LIARS.map((i) => devnetAccount(i).address);
    const receiptsOf = async (attestor: Address) => (await provider.mounted.receipts.get(leaseId, attestor))?.receipts ?? [];

    // Receipts flow: each attestor's answered probe comes back signed with its next probe.
    const firstMs = await waitFor(
      "both attestors' first receipts at the provider",
      async () => {
        const firsts = await Promise.all(liars.map(async (attestor) => (await receiptsOf(attestor))[0]?.receipt.receivedAtMs));
        return firsts.every((ms) => ms !== undefined) ? firsts.reduce((a, b) => (a! > b! ? a : b)) : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 50 },
    );
    // The lie: "unresponsive since observedAt", while both kept receiving heartbeats after it.
    const observedAt = Math.floor(Number(firstMs) / 1000);
    const fault: Fault = { leaseId, kind: FaultKind.unresponsive, observedAt };
    await waitFor(
      "a receipt of each attestor inside the fault window after observedAt",
      async () => {
        const held = await Promise.all(liars.map(async (attestor) => (await receiptsOf(attestor)).some((entry) => receiptContradictsFault(fault, entry.receipt, FAULT_WINDOW))));
        return held.every(Boolean) || undefined;
      },
      { timeoutMs: 15_000, intervalMs: 50 },
    );
    const stakesBefore = await Promise.all(LIARS.map(stakeOf));
    const params = await devnet.admin.publicClient.readContract({ address: await staking(), abi: attestorStakingAbi, functionName: "params" });
    const owedBefore = await devnet.admin.publicClient.readContract({
      address: await staking(),
      abi: attestorStakingAbi,
      functionName: "owed",
      args: [provider.daemon.account!.address],
    });
    await send(renter, { address: market, abi: leaseMarketAbi, functionName: "submitFault", args: [fault, await signBoth(LIARS, fault)] });
    assert.equal((await readLease(devnet.admin.publicClient, market, leaseId)).endReason, "Faulted");

    // The provider's node disputes both signers on its own.
    const disputes = await waitFor("both liars disputed", async () => ((await faultDisputes(leaseId)).length >= 2 ? faultDisputes(leaseId) : undefined), {
      timeoutMs: 30_000,
      intervalMs: 200,
    });
    assert.deepEqual(new Set(disputes.map((event) => event.args.attestor)), new Set(liars));
    for (const event of disputes) {
      assert.equal(event.args.disputer, provider.daemon.account!.address);
      assert.equal(event.args.observedAt, observedAt);
      assert.equal(event.args.slashed, params.slashAmount);
      assert.ok(receiptContradictsFault(fault, { leaseId, challenge: ZERO32, receivedAtMs: event.args.receivedAtMs }, FAULT_WINDOW));
    }
    assert.deepEqual(
      await Promise.all(LIARS.map(stakeOf)),
      stakesBefore.map((stake) => stake - params.slashAmount),
    );
    const owed = await devnet.admin.publicClient.readContract({
      address: await staking(),
      abi: attestorStakingAbi,
      functionName: "owed",
      args: [provider.daemon.account!.address],
    });
    assert.equal(owed - owedBefore, 2n * ((params.slashAmount * BigInt(params.disputerShareBps)) / 10_000n));
    // Sent once: another scan finds nothing more to dispute.
    assert.deepEqual(await provider.mounted.disputer!.scan(), []);
    assert.equal((await faultDisputes(leaseId)).length, 2);
    for (const node of nodes.splice(0)) await node.close();
  });

  it("an honest quorum that faults a provider that really stopped is not disputed, and a dispute with its last receipt reverts (≈7 s)", async () => {
    const market = devnet.deployment.contracts.market!;
    const renter = await devnet.wallet(RENTER);
    const leaseId = await openActiveLease(devnet, renter, PROVIDER, machines[1]!);
    const first = await startAttestorDaemon(devnet, HONEST[0], { p2p: { bootstrap: [addrOf(provider.daemon)] }, attest: { liveness: LIVENESS } });
    nodes.push(first.daemon);
    const second = await startAttestorDaemon(devnet, HONEST[1], {
      p2p: { bootstrap: [addrOf(provider.daemon)] },
      attest: { liveness: LIVENESS, attestor: { peers: [addrOf(first.daemon)] } },
    });
    nodes.push(second.daemon);
    const honest = HONEST.map((i) => devnetAccount(i).address);
    await waitFor(
      "both attestors' receipts at the provider",
      async () =>
        (await Promise.all(honest.map(async (attestor) => (await provider.mounted.receipts.get(leaseId, attestor))?.receipts.length ?? 0))).every((n) => n > 0) || undefined,
      { timeoutMs: 30_000, intervalMs: 50 },
    );

    // The provider stops; the attestors watch the outage over the window and fault it themselves.
    const dataDir = provider.daemon.config.dataDir;
    await provider.daemon.close({ keepData: true });
    await waitFor("the honest quorum's fault landing", async () => (await readLease(devnet.admin.publicClient, market, leaseId)).endReason === "Faulted" || undefined, {
      timeoutMs: 45_000,
      intervalMs: 200,
    });
    // It comes back with its receipts (kept in level) and scans the chain from the deployment.
    provider = await startProviderDaemon(devnet, PROVIDER, { runner: cpu, machines: () => [], falseFaultScanMs: 300, overrides: { dataDir } });
    await provider.mounted.disputer!.scan();
    assert.deepEqual(await faultDisputes(leaseId), [], "an honest fault is not disputed");

    // A dispute with the latest receipt the provider holds reverts: it was received before observedAt's second ended.
    const [submitted] = await devnet.admin.publicClient.getContractEvents({
      address: market,
      abi: leaseMarketAbi,
      eventName: "FaultSubmitted",
      args: { leaseId },
      fromBlock: 0n,
      strict: true,
    });
    const call = decodeFunctionData({ abi: leaseMarketAbi, data: (await devnet.admin.publicClient.getTransaction({ hash: submitted!.transactionHash })).input });
    assert.equal(call.functionName, "submitFault");
    const [fault, signatures] = call.args as readonly [Fault, readonly Hex[]];
    const [held] = (await provider.mounted.receipts.get(leaseId, honest[0]!))!.receipts.slice(-1);
    assert.ok(held && !receiptContradictsFault(fault, held.receipt, FAULT_WINDOW));
    const providerWallet = await devnet.wallet(PROVIDER);
    const faultSignature = (
      await Promise.all(signatures.map(async (signature) => ((await signFault(devnetAccount(HONEST[0]), provider.daemon.domain, fault)) === signature ? signature : undefined)))
    ).find(Boolean);
    assert.ok(faultSignature, "the first honest attestor signed the landed fault");
    const error = await providerWallet.publicClient
      .simulateContract({
        account: providerWallet.account,
        address: await staking(),
        abi: attestorStakingAbi,
        functionName: "disputeFault",
        args: [fault, faultSignature, held.receipt, held.signature],
      })
      .then(
        () => undefined,
        (caught: unknown) => caught,
      );
    assert.equal(revertName(error), "ReceiptOutsideWindow");
    for (const node of nodes.splice(0)) await node.close();
  });
});

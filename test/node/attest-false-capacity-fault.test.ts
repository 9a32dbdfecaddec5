/**
 * Issue #34, finding 3 (node side): the provider's node disputes a false capacity fault by itself. A capacity fault
 * (kind 2) says the leased machine failed a challenge started at observedAt; an attestation of that machine by the
 * same attestor, issued in (observedAt, observedAt + W], proves it false (AttestorStaking.disputeCapacityFault). The
 * provider keeps every pass of its machines of the last 20 minutes (passed-attestations.ts; the provider service
 * adds each pass it receives) and its false-fault scanner sends the dispute, as it sends disputeFault for a liveness
 * fault with a probe receipt. Real devnet and provider daemon; the passes are put in the store as the service does.
 */
import assert from "node:assert/strict";
import { type Address, type Hex } from "viem";
import { attestorStakingAbi, leaseMarketAbi, providerRegistryAbi, testTokenAbi } from "../../common/abi.js";
import { readLease } from "../../common/chain/market.js";
import { signAttestation, signFault } from "../../common/chain/sign.js";
import { revertName } from "../../common/chain/tx.js";
import { devnetAccount } from "../../common/devnet.js";
import { FaultKind, type Fault } from "../../common/eip712.js";
import { modelHash } from "../../common/gpu.js";
import { CpuRunner } from "../../node/attest/runner/index.js";
import { DURATION, openActiveLease, PRICE, startProviderDaemon, TEST_MACHINE, ZERO32 } from "../support/attest.js";
import { fund, registerProvider, send, startDevnet, type Devnet } from "../support/devnet.js";
import { waitFor } from "../support/wait.js";

const PROVIDER = 1;
const RENTER = 5;
/** 6 lies (it passed the machine inside the window); 7 signed too, but its only pass is after the window. */
const LIAR = 6;
const OTHER = 7;
const FAULT_WINDOW = 30;

describe("attestor staking: a provider disputes a capacity fault its signer's own pass contradicts (issue #34, finding 3)", function () {
  this.timeout(120_000);
  let devnet: Devnet;
  let provider: Awaited<ReturnType<typeof startProviderDaemon>>;
  let machineId: number;
  const cpu = new CpuRunner({ workers: 1 });

  before(async () => {
    devnet = await startDevnet({
      params: { faultQuorum: 2, attestorFaultWindow: FAULT_WINDOW },
      attestors: [LIAR, OTHER].map((i) => devnetAccount(i).address),
      wallClockBlocks: true,
    });
    provider = await startProviderDaemon(devnet, PROVIDER, { runner: cpu, machines: () => [], falseFaultScanMs: 300 });
    [machineId] = (await registerProvider(devnet, await devnet.wallet(PROVIDER), {
      peerId: provider.daemon.p2p.host.peerId.toString(),
      stake: 10_000_000n,
      machines: [TEST_MACHINE],
    })) as [number];
    const renter = await devnet.wallet(RENTER);
    await fund(devnet, renter, PRICE * BigInt(DURATION));
    await send(renter, {
      address: devnet.deployment.contracts.token,
      abi: testTokenAbi,
      functionName: "approve",
      args: [devnet.deployment.contracts.market!, PRICE * BigInt(DURATION)],
    });
  });
  after(async () => {
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
  const pass = (index: number, issuedAt: number) =>
    signAttestation(devnetAccount(index), provider.daemon.domain, {
      provider: devnetAccount(PROVIDER).address,
      machineId,
      model: modelHash(TEST_MACHINE.model),
      units: TEST_MACHINE.units,
      vramMiB: TEST_MACHINE.vramMiB,
      throughput: 1_000_000n,
      issuedAt,
      expiry: issuedAt + 3_600,
      challengeId: `0x${index.toString(16).padStart(64, "0")}` as Hex,
      root: ZERO32,
      gpus: ZERO32,
      cc: ZERO32,
      failures: 0,
      lastFailureAt: 0,
    });

  it("slashes the signer that passed the machine inside the window, at once, with the share owed to the provider; not the one whose pass came after it", async () => {
    const market = devnet.deployment.contracts.market!;
    const renter = await devnet.wallet(RENTER);
    const leaseId = await openActiveLease(devnet, renter, PROVIDER, machineId);
    const observedAt = Number((await devnet.admin.publicClient.getBlock()).timestamp);
    const fault: Fault = { leaseId, kind: FaultKind.capacity, observedAt };
    // What the provider service keeps when a machine passes: the liar's pass 5 s after observedAt, the other's after W.
    const liarPass = await pass(LIAR, observedAt + 5);
    await provider.mounted.passes.add(devnetAccount(LIAR).address, liarPass);
    const latePass = await pass(OTHER, observedAt + FAULT_WINDOW + 1);
    await provider.mounted.passes.add(devnetAccount(OTHER).address, latePass);

    const signers = [LIAR, OTHER].map((i) => devnetAccount(i)).sort((a, b) => (BigInt(a.address) < BigInt(b.address) ? -1 : 1));
    const signatures = await Promise.all(signers.map((account) => signFault(account, provider.daemon.domain, fault)));
    const [liarBefore, otherBefore] = [await stakeOf(LIAR), await stakeOf(OTHER)];
    const params = await devnet.admin.publicClient.readContract({ address: await staking(), abi: attestorStakingAbi, functionName: "params" });
    await send(renter, { address: market, abi: leaseMarketAbi, functionName: "submitFault", args: [fault, signatures] });
    assert.equal((await readLease(devnet.admin.publicClient, market, leaseId)).endReason, "Faulted");

    const [dispute] = await waitFor("the liar disputed", async () => ((await faultDisputes(leaseId)).length ? faultDisputes(leaseId) : undefined), {
      timeoutMs: 30_000,
      intervalMs: 200,
    });
    assert.equal(dispute!.args.attestor, devnetAccount(LIAR).address);
    assert.equal(dispute!.args.disputer, provider.daemon.account!.address);
    assert.equal(dispute!.args.observedAt, observedAt);
    assert.equal(dispute!.args.receivedAtMs, BigInt(observedAt + 5) * 1000n);
    assert.equal(await stakeOf(LIAR), liarBefore - params.slashAmount);
    const owed = await devnet.admin.publicClient.readContract({
      address: await staking(),
      abi: attestorStakingAbi,
      functionName: "owed",
      args: [provider.daemon.account!.address],
    });
    assert.equal(owed, (params.slashAmount * BigInt(params.disputerShareBps)) / 10_000n);

    // Sent once; the other signer's pass is outside the window: not sent, and the contract would refuse it.
    assert.deepEqual(await provider.mounted.disputer!.scan(), []);
    assert.equal((await faultDisputes(leaseId)).length, 1);
    assert.equal(await stakeOf(OTHER), otherBefore);
    const providerWallet = await devnet.wallet(PROVIDER);
    const otherSignature = signatures[signers.findIndex((account) => account.address === devnetAccount(OTHER).address)]!;
    const error = await providerWallet.publicClient
      .simulateContract({
        account: providerWallet.account,
        address: await staking(),
        abi: attestorStakingAbi,
        functionName: "disputeCapacityFault",
        args: [fault, otherSignature, latePass.attestation, latePass.signature],
      })
      .then(
        () => undefined,
        (caught: unknown) => caught,
      );
    assert.equal(revertName(error), "AttestationOutsideWindow");
  });
});

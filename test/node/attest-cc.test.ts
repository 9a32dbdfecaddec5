/**
 * Issue 24: confidential-computing evidence in the live protocol. An attestor that pins a device
 * root and requires evidence (`attest.cc`) challenges providers over libp2p on the devnet. Each
 * provider's runner is the CPU reference runner plus, per unit, the signed measurements of a
 * simulated CC-mode GPU for the challenge's nonce (test/support/cc-sim.ts: no CC GPU is available
 * here; the verifier's checks against a real H100 report are test/node/attest/cc-nvidia.test.ts's).
 *
 * - two distinct GH100s for a 2 × H100 claim pass, and the attestor records which GPUs they were;
 * - one GPU presented for both units, no evidence at all, NVIDIA's recorded H100 report replayed
 *   for a new challenge, GH100 evidence for an A100 claim, a host that reports CC off (the words a
 *   real H200 printed), evidence for the challenge id alone (the old binding) or for the other
 *   unit's nonce, a device whose certificate a CRL revokes: each fails `cc_evidence`, with no attestation;
 * - one GPU presented by two machine ids: the second machine fails (a GPU time-shared between
 *   machines), and a restarted attestor still knows (the registry is in level).
 */
import { multiaddr } from "@multiformats/multiaddr";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { X509Certificate } from "node:crypto";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { Hex } from "viem";
import { ccIdentitiesHash, type GpuEvidence } from "../../common/attest/cc.js";
import { devnetAccount } from "../../common/devnet.js";
import { engineAttestation, isCcVerified } from "../../common/offers/validate.js";
import { CpuRunner, type Runner, type RunnerChallenge, type RunnerCommitment } from "../../node/attest/runner/index.js";
import { addrOf, challengeVerdict, machineOffer, startAttestorDaemon, startProviderWithMachine, type TestDaemon } from "../support/attest.js";
import { CC_MODE_ON, makeSimDevices, simEvidence, simEvidenceForNonce, type SimDevice } from "../support/cc-sim.js";
import { startDevnet, type Devnet } from "../support/devnet.js";
import { waitFor } from "../support/wait.js";

const H100x2 = { model: "H100-80GB-SXM", units: 2, vramMiB: 81_559 };
const recorded = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "fixtures/cc/nvidia-hopper");

/** The CPU runner's answers, with per-unit CC evidence from `evidence(challengeId, unit, the unit's root)`. */
class CcRunner implements Runner {
  readonly name = "cc-sim";
  constructor(
    private readonly cpu: Runner,
    private readonly evidence: (challengeId: Hex, unit: number, root: Hex) => GpuEvidence,
  ) {}
  async computeCommit(challenge: RunnerChallenge, options?: { signal?: AbortSignal }): Promise<RunnerCommitment> {
    const commitment = await this.cpu.computeCommit(challenge, options);
    return { ...commitment, cc: challenge.units.map((_, unit) => this.evidence(challenge.id, unit, commitment.roots[unit]!)) };
  }
  async close(): Promise<void> {}
}

describe("confidential-computing evidence over libp2p (issue 24)", function () {
  this.timeout(240_000);
  let devnet: Devnet;
  let cpu: CpuRunner;
  let sim: ReturnType<typeof makeSimDevices>;
  const nodes: TestDaemon[] = [];
  before(async () => {
    sim = makeSimDevices(8);
    devnet = await startDevnet({ attestors: [devnetAccount(7).address] });
    cpu = new CpuRunner({ workers: 1 });
  });
  after(async () => {
    for (const node of nodes.reverse()) await node.close().catch(() => undefined);
    await cpu?.close();
    await devnet?.close();
    sim?.close();
  });

  const start = (index: number, runner: Runner, machine = H100x2) => startProviderWithMachine(devnet, index, { runner, machine }, nodes);
  const devicesRunner = (devices: readonly SimDevice[], mode?: string) =>
    new CcRunner(cpu, (id, unit, root) => simEvidence(devices[unit]!, id, unit, root, mode === undefined ? {} : { mode }));

  it("passes distinct GH100s for a 2 × H100 claim and refuses one GPU twice, no evidence, a replayed real report, an A100 claim, CC off, a nonce not bound to the unit and its root, and a revoked device", async () => {
    const nvidiaReport = readFileSync(path.join(recorded, "report.hex"), "utf8").trim();
    const replayed: GpuEvidence = {
      request: `0x${nvidiaReport.slice(0, 74)}`,
      response: `0x${nvidiaReport.slice(74)}`,
      certificates: readFileSync(path.join(recorded, "cert-chain.pem"), "utf8").match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g)!,
    };
    const honest = await start(1, devicesRunner([sim.devices[0]!, sim.devices[1]!]));
    const twice = await start(2, devicesRunner([sim.devices[2]!, sim.devices[2]!]));
    const none = await start(3, cpu);
    // With the host's CC-on report: what fails is the nonce (the recorded report has no mode report).
    const replay = await start(4, new CcRunner(cpu, () => ({ ...replayed, mode: CC_MODE_ON })));
    const a100 = await start(5, devicesRunner([sim.devices[3]!]), { model: "A100-80GB", units: 1, vramMiB: 81_920 });
    // `nvidia-smi conf-compute -f` and `-grs` as a real H200 printed them: CC off, not ready.
    const h200Off = readFileSync(path.resolve(path.dirname(fileURLToPath(import.meta.url)), "fixtures/nvidia-smi/h200/conf-compute.txt"), "utf8");
    const ccOff = await start(10, devicesRunner([sim.devices[4]!, sim.devices[5]!], h200Off));
    // The binding before this version: the GPU signed the challenge id itself, not the unit's nonce.
    const idOnly = await start(11, new CcRunner(cpu, (id, unit) => ({ ...simEvidenceForNonce(sim.devices[4 + unit]!, id), mode: CC_MODE_ON })));
    // Each unit's report made for the other unit's nonce (the same challenge, the same GPUs).
    const swapped = await start(12, new CcRunner(cpu, (id, unit, root) => simEvidence(sim.devices[5 - unit]!, id, 1 - unit, root)));
    // Device 7's attestation-key certificate is on its issuer's CRL.
    const revoked = await start(13, devicesRunner([sim.devices[6]!, sim.devices[7]!]));
    const crlDir = mkdtempSync(path.join(tmpdir(), "suanli-cc-crl-"));
    const crlFile = path.join(crlDir, "intermediate.crl");
    writeFileSync(crlFile, sim.crl("intermediate", [new X509Certificate(sim.devices[7]!.certificates[0]!).serialNumber]));
    const providers = [honest, twice, none, replay, a100, ccOff, idOnly, swapped, revoked];
    const { daemon, attestor } = await startAttestorDaemon(devnet, 7, {
      p2p: { bootstrap: providers.map(({ provider }) => addrOf(provider.daemon)) },
      attest: {
        liveness: { enabled: false },
        // One challenge at a time: the nine providers share this host's CPU runner, and two of their
        // challenges (each computing rows and signing simulated CC evidence) at once made the honest
        // machine's commit miss its deadline on a loaded host (slow_for_class, 13.5 s for 10 s).
        attestor: { scheduleIntervalMs: 3_600_000, maxConcurrentChallenges: 1 },
        // The simulated root, and NVIDIA's: the replayed report's chain is genuine.
        cc: { required: true, rootFiles: [sim.rootFile, path.join(recorded, "device-root.pem")], crl: { files: [crlFile] } },
      },
    });
    rmSync(crlDir, { recursive: true, force: true });
    nodes.push(daemon);
    for (const { machineId } of providers) {
      await waitFor(`machine ${machineId}'s offer in the attestor's book`, () => daemon.offers.book.byMachine(machineId).length > 0, { timeoutMs: 30_000 });
    }

    const pass = await challengeVerdict(attestor, honest.machineId);
    assert.equal(pass.outcome, "pass", `${pass.reason}: ${pass.detail}`);
    assert.deepEqual(
      pass.cc?.map((unit) => [unit.chip, unit.deviceId, unit.board]),
      [
        ["GH100", sim.devices[0]!.deviceId, "1010-0200-882"],
        ["GH100", sim.devices[1]!.deviceId, "1010-0200-882"],
      ],
    );
    // The signed attestation names the verified GPUs (cc), so every offer book and the staking contract see what was verified.
    assert.equal(
      pass.attestation?.attestation.cc,
      ccIdentitiesHash([
        { chip: "GH100", deviceId: sim.devices[0]!.deviceId },
        { chip: "GH100", deviceId: sim.devices[1]!.deviceId },
      ]),
    );
    await waitFor("the attestation at the honest provider", () => honest.received.includes(honest.machineId), { timeoutMs: 30_000 });
    // The provider republishes its offer with the attestation (as its agent does); another node's book counts the machine as
    // CC-verified under the attestor quorum, and its matching engine is told so (a renter's gpuIdentityVerified: true matches it).
    await honest.provider.daemon.offers.publisher!.set(machineOffer({ machineId: honest.machineId, ...H100x2 }, [pass.attestation!]));
    const verified = await waitFor(
      "the honest machine CC-verified in the attestor node's offer book",
      () => daemon.offers.book.byMachine(honest.machineId).find((entry) => isCcVerified(entry.attestation, Math.floor(Date.now() / 1000))),
      { timeoutMs: 30_000 },
    );
    assert.equal(engineAttestation(verified.attestation, Math.floor(Date.now() / 1000))?.ccExpiry, pass.attestation?.attestation.expiry);

    const expectations: [typeof honest, RegExp][] = [
      [twice, new RegExp(`two units present the same GPU GH100:${sim.devices[2]!.deviceId}`)],
      [none, /requires confidential-computing evidence for each of the 2 units/],
      [replay, /^unit 0: wrong_nonce: /],
      [a100, /^unit 0: not_cc_capable: A100-80GB has no confidential-computing evidence/],
      [ccOff, /^unit 0: cc_mode: CC status: OFF \(confidential computing must be ON/],
      [idOnly, /^unit 0: wrong_nonce: /],
      [swapped, /^unit 0: wrong_nonce: /],
      [revoked, new RegExp(`^unit 1: revoked: .*attestation key 7.* is revoked by .*intermediate\\.crl`)],
    ];
    for (const [provider, detail] of expectations) {
      const fail = await challengeVerdict(attestor, provider.machineId);
      assert.deepEqual([fail.outcome, fail.reason], ["fail", "cc_evidence"], `machine ${provider.machineId}: ${fail.detail}`);
      assert.match(fail.detail ?? "", detail);
      assert.equal(fail.attestation, null);
      assert.deepEqual(provider.received, []);
    }
    // The next test starts its own attestor (same key): this one may not challenge its machines.
    nodes.splice(nodes.indexOf(daemon), 1);
    await daemon.close();
  });

  it("refuses a GPU that another machine presented: one GPU is not time-shared between machine ids", async () => {
    const shared = sim.devices[0]!;
    // Devices 0 and 1 passed for the first test's honest machine; a new machine reuses device 0.
    const second = await start(6, devicesRunner([shared, sim.devices[3]!]));
    const { daemon, attestor } = await startAttestorDaemon(devnet, 7, {
      p2p: { bootstrap: [addrOf(second.provider.daemon)] },
      attest: { liveness: { enabled: false }, attestor: { scheduleIntervalMs: 3_600_000 }, cc: { required: true, rootFiles: [sim.rootFile] } },
    });
    nodes.push(daemon);
    await waitFor("the offer in the attestor's book", () => daemon.offers.book.byMachine(second.machineId).length > 0, { timeoutMs: 30_000 });
    // A fresh attestor has seen no GPU yet: the machine passes, and the GPU is now its.
    const first = await challengeVerdict(attestor, second.machineId);
    assert.equal(first.outcome, "pass", `${first.reason}: ${first.detail}`);
    // A third machine (another provider) presents the same GPU within the window.
    const third = await start(8, devicesRunner([sim.devices[1]!, shared]));
    await daemon.p2p.host.dial(multiaddr(addrOf(third.provider.daemon)));
    await waitFor("the third machine's offer", () => daemon.offers.book.byMachine(third.machineId).length > 0, { timeoutMs: 30_000 });
    const fail = await challengeVerdict(attestor, third.machineId);
    assert.deepEqual([fail.outcome, fail.reason], ["fail", "cc_evidence"], fail.detail ?? "");
    assert.match(fail.detail ?? "", new RegExp(`GPU GH100:${shared.deviceId} answered a challenge of machine 0x[0-9a-f]{40}/${second.machineId} \\d+ s ago`));
    assert.deepEqual(third.received, []);

    // The attestor restarts (same data dir): it still knows which machine the GPU backs.
    const dataDir = daemon.config.dataDir;
    nodes.splice(nodes.indexOf(daemon), 1);
    await daemon.close({ keepData: true });
    const fourth = await start(14, devicesRunner([sim.devices[2]!, shared]));
    const restarted = await startAttestorDaemon(devnet, 7, {
      dataDir,
      p2p: { bootstrap: [addrOf(fourth.provider.daemon)] },
      attest: { liveness: { enabled: false }, attestor: { scheduleIntervalMs: 3_600_000 }, cc: { required: true, rootFiles: [sim.rootFile] } },
    });
    nodes.push(restarted.daemon);
    await waitFor("the fourth machine's offer", () => restarted.daemon.offers.book.byMachine(fourth.machineId).length > 0, { timeoutMs: 30_000 });
    const afterRestart = await challengeVerdict(restarted.attestor, fourth.machineId);
    assert.deepEqual([afterRestart.outcome, afterRestart.reason], ["fail", "cc_evidence"], afterRestart.detail ?? "");
    assert.match(afterRestart.detail ?? "", new RegExp(`GPU GH100:${shared.deviceId} answered a challenge of machine 0x[0-9a-f]{40}/${second.machineId} \\d+ s ago`));
  });
});

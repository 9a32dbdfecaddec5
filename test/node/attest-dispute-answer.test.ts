import assert from "node:assert/strict";
import { keccak256, toBytes, type Address } from "viem";
import { attestorStakingAbi, providerRegistryAbi, testTokenAbi } from "../../common/abi.js";
import { commitSigner, gpusHash } from "../../common/attest/commit.js";
import { rootsHash } from "../../common/attest/units.js";
import { signAttestation } from "../../common/chain/sign.js";
import { devnetAccount } from "../../common/devnet.js";
import { suanliDomain } from "../../common/eip712.js";
import { modelHash } from "../../common/gpu.js";
import { offerKey } from "../../common/offers/message.js";
import { isAttested } from "../../common/offers/validate.js";
import type { ProviderMachine } from "../../node/attest/challenge/index.js";
import { CpuRunner } from "../../node/attest/runner/index.js";
import { addrOf, machineOffer, startAttestorDaemon, startProviderDaemon, type TestDaemon } from "../support/attest.js";
import { fund, registerProvider, send, startDevnet, type Devnet } from "../support/devnet.js";
import { waitFor } from "../support/wait.js";

const A100 = { model: "A100-80GB", units: 1, vramMiB: 81_920 };

describe("attestor answers disputes of its attestations from its records (AttestorStaking)", function () {
  this.timeout(120_000);
  let devnet: Devnet;
  let cpu: CpuRunner;
  const attestorIndex = 7;
  before(async () => {
    devnet = await startDevnet({ attestors: [devnetAccount(attestorIndex).address] });
    cpu = new CpuRunner({ workers: 1 });
  });
  after(async () => {
    await cpu?.close();
    await devnet?.close();
  });

  it("answers a dispute of a real pass with the provider's signed commit, and cannot answer one of a pass it never ran", async () => {
    const nodes: TestDaemon[] = [];
    try {
      const machines: ProviderMachine[] = [];
      const provider = await startProviderDaemon(devnet, 1, {
        runner: cpu,
        machines: () => machines,
        // What the provider agent does: put the new attestation in the machine's offer.
        onAttestation: async (_machineId, signed) => {
          await provider.daemon.offers.publisher!.set(machineOffer(machines[0]!, [signed]));
        },
      });
      nodes.push(provider.daemon);
      const providerWallet = await devnet.wallet(1);
      const [machineId] = await registerProvider(devnet, providerWallet, { peerId: provider.daemon.p2p.host.peerId.toString(), stake: 100_000_000n, machines: [A100] });
      machines.push({ machineId: machineId!, ...A100 });
      const { daemon: attestorNode, attestor } = await startAttestorDaemon(devnet, attestorIndex, {
        p2p: { bootstrap: [addrOf(provider.daemon)] },
        attest: { liveness: { enabled: false } },
      });
      nodes.push(attestorNode);
      await provider.daemon.offers.publisher!.set(machineOffer(machines[0]!));
      const pass = await waitFor(
        "the attestor's recorded pass",
        async () => {
          const record = await attestor.results.latest(machineId!);
          return record?.outcome === "pass" ? record : undefined;
        },
        { timeoutMs: 60_000, intervalMs: 200 },
      );
      // The pass keeps the provider's signed commit: its roots and GPUs are the attestation's.
      const signed = pass.attestation!;
      const domain = suanliDomain(devnet.deployment.chainId, devnet.deployment.contracts.market!);
      const { challengeId, root, gpus } = signed.attestation;
      const { rowsPerUnit, roots, devices, signature } = pass.commit!;
      assert.equal(rootsHash(roots), root);
      assert.equal(gpusHash(devices), gpus);
      const signer = await commitSigner(domain, { v: 2, type: "commit", challengeId, rowsPerUnit, roots, devices, signature });
      assert.equal(signer, devnetAccount(1).address);

      // The provider disputes the attestation it received, hoping the attestor cannot answer.
      const registry = devnet.deployment.contracts.registry!;
      const staking = (await providerWallet.publicClient.readContract({ address: registry, abi: providerRegistryAbi, functionName: "attestorStaking" })) as Address;
      await fund(devnet, providerWallet, 100_000_000n);
      await send(providerWallet, { address: devnet.deployment.contracts.token, abi: testTokenAbi, functionName: "approve", args: [staking, 100_000_000n] });
      await send(providerWallet, { address: staking, abi: attestorStakingAbi, functionName: "disputeAttestation", args: [signed.attestation, signed.signature] });
      // A forged attestation in the attestor's name (its key, a challenge it never ran), disputed too.
      const now = Math.floor(Date.now() / 1000);
      const forged = await signAttestation(devnetAccount(attestorIndex), domain, {
        ...signed.attestation,
        model: modelHash("A100-80GB"),
        issuedAt: now,
        expiry: now + 3_600,
        challengeId: keccak256(toBytes("never-run")),
        root: keccak256(toBytes("never-committed")),
      });
      await send(providerWallet, { address: staking, abi: attestorStakingAbi, functionName: "disputeAttestation", args: [forged.attestation, forged.signature] });
      const read = (attestation: typeof signed.attestation) =>
        providerWallet.publicClient.readContract({ address: staking, abi: attestorStakingAbi, functionName: "attestationDigest", args: [attestation] });
      const realId = await read(signed.attestation);
      const forgedId = await read(forged.attestation);

      const answers = await attestor.disputes.scan();
      assert.deepEqual(
        answers.map((a) => [a.id, a.outcome]),
        [
          [realId, "answered"],
          [forgedId, "no_record"],
        ],
      );
      const dispute = (id: `0x${string}`) => providerWallet.publicClient.readContract({ address: staking, abi: attestorStakingAbi, functionName: "getDispute", args: [id] });
      assert.equal((await dispute(realId)).state, 2); // Answered
      assert.equal((await dispute(forgedId)).state, 1); // still Open: slashable once the window closes
      const fee = (await providerWallet.publicClient.readContract({ address: staking, abi: attestorStakingAbi, functionName: "params" })).disputeFee;
      assert.equal(
        await providerWallet.publicClient.readContract({ address: staking, abi: attestorStakingAbi, functionName: "owed", args: [devnetAccount(attestorIndex).address] }),
        fee,
      );
      // A second scan finds nothing new.
      assert.deepEqual(await attestor.disputes.scan(), []);

      // An attestor that starts unbonding stops counting at once: offer books follow the staking's
      // events (well inside the chain view's 60 s cache), and a node for it refuses to start, saying why.
      const key = offerKey(devnetAccount(1).address, machineId!);
      const book = attestorNode.offers.book;
      const nowSec = () => Math.floor(Date.now() / 1000);
      await waitFor(
        "the offer attested in the attestor node's book",
        () => {
          const entry = book.get(key);
          return entry && isAttested(entry.attestation, nowSec()) ? true : undefined;
        },
        { timeoutMs: 30_000, intervalMs: 100 },
      );
      const attestorWallet = await devnet.wallet(attestorIndex);
      await send(attestorWallet, { address: staking, abi: attestorStakingAbi, functionName: "requestUnstake", args: [1n] });
      await waitFor(
        "the offer unattested once its only attestor unstaked",
        () => {
          const entry = book.get(key);
          return entry && !isAttested(entry.attestation, nowSec()) ? true : undefined;
        },
        {
          timeoutMs: 15_000,
          intervalMs: 100,
        },
      );
      assert.equal(
        await providerWallet.publicClient.readContract({ address: registry, abi: providerRegistryAbi, functionName: "isAttestor", args: [devnetAccount(attestorIndex).address] }),
        false,
      );
      await assert.rejects(startAttestorDaemon(devnet, attestorIndex), /holds ATTESTOR_ROLE but not the minimum stake/);
    } finally {
      for (const node of nodes.reverse()) await node.close();
    }
  });
});

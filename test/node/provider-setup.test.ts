import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { providerRegistryAbi } from "../../common/abi.js";
import { readMachine, readProvider } from "../../common/chain/market.js";
import { devnetAccount } from "../../common/devnet.js";
import { suanliDomain } from "../../common/eip712.js";
import { modelHash } from "../../common/gpu.js";
import { signAttestation } from "../../common/chain/sign.js";
import { startDevnet, type Devnet } from "../support/devnet.js";
import { startTestProvider } from "../support/provider.js";
import { waitFor } from "../support/wait.js";

const ATTESTOR = devnetAccount(7);

describe("provider agent: setup across restarts, attestations in offers", function () {
  this.timeout(60_000);
  let devnet: Devnet;
  let dir: string;

  before(async () => {
    devnet = await startDevnet({ attestors: [ATTESTOR.address], wallClockBlocks: true });
    dir = await mkdtemp(path.join(tmpdir(), "suanli-setup-"));
  });
  after(async () => {
    await devnet?.close();
    await rm(dir, { recursive: true, force: true });
  });

  const declared = (count: number) => ({ dataDir: dir, provider: { inventory: { source: "declared", declared: [{ model: "A100-80GB", count, region: "eu-west" }] } } });
  const transactions = async (provider: Awaited<ReturnType<typeof startTestProvider>>) =>
    (await provider.daemon.metrics.providerTransactions.get()).values.filter((v) => v.labels.outcome === "ok").map((v) => `${v.labels.function}:${v.value}`);

  it("declares a machine once, sends nothing on a plain restart, and updates the declaration when the inventory changed", async () => {
    let provider = await startTestProvider(devnet, 1, declared(2));
    const machineId = provider.agent.machines[0]!.machineId;
    assert.deepEqual((await transactions(provider)).sort(), ["addMachine:1", "approve:1", "register:1", "stake:1"]);
    await provider.close({ keepData: true });

    provider = await startTestProvider(devnet, 1, declared(2), { fundTokens: 0n });
    assert.equal(provider.agent.machines[0]!.machineId, machineId);
    assert.deepEqual(await transactions(provider), [], "a restart finds everything in place");
    await provider.close({ keepData: true });

    provider = await startTestProvider(devnet, 1, declared(3), { fundTokens: 0n });
    try {
      assert.equal(provider.agent.machines[0]!.machineId, machineId);
      assert.deepEqual(await transactions(provider), ["updateMachine:1"]);
      const onChain = await readMachine(devnet.admin.publicClient, devnet.deployment.contracts.registry!, machineId);
      assert.equal(onChain.units, 3);
      const last = await devnet.admin.publicClient.readContract({ address: devnet.deployment.contracts.registry!, abi: providerRegistryAbi, functionName: "lastMachineId" });
      assert.equal(Number(last), machineId, "no second machine was declared");
      await waitFor("the offer of 3 units", () => provider.daemon.offers.publisher!.current(machineId)?.machine.units === 3);
    } finally {
      await provider.close({ keepData: true });
    }
  });

  it("refuses to start where renter code would run without a verified sandbox, before anything reaches the chain", async () => {
    const noSandbox = { dataDir: path.join(dir, "no-sandbox"), provider: { runtime: { sandbox: "auto", bwrapPath: path.join(dir, "no-bwrap-here") } } };
    await assert.rejects(startTestProvider(devnet, 5, noSandbox), (error: Error) => {
      assert.equal(error.name, "RuntimeUnavailableError");
      assert.match(error.message, /bubblewrap/);
      assert.match(error.message, /sandbox "none"/, "the message names the explicit opt-out");
      return true;
    });
    const registered = await readProvider(devnet.admin.publicClient, devnet.deployment.contracts.registry!, devnetAccount(5).address);
    assert.equal(registered.stake, 0n, "no registration or stake was sent");
  });

  it('runs unsandboxed only with an explicit sandbox "none", and says so at every start', async () => {
    for (let start = 0; start < 2; start++) {
      const provider = await startTestProvider(
        devnet,
        6,
        { dataDir: path.join(dir, "unsandboxed"), provider: { runtime: { sandbox: "none" } } },
        { fundTokens: start === 0 ? undefined : 0n },
      );
      try {
        const { isolation } = provider.agent.summary();
        assert.equal(isolation.sandboxed, false);
        assert.match(isolation.warnings.join("\n"), /TASKS RUN UNSANDBOXED/);
      } finally {
        await provider.close({ keepData: true });
      }
    }
  });

  it("publishes the attestor's hardware attestations with the machine's offer, and drops ones the network would refuse", async () => {
    const provider = await startTestProvider(devnet, 1, declared(3), { fundTokens: 0n });
    try {
      const machine = provider.agent.machines[0]!;
      const now = Math.floor(Date.now() / 1000);
      const attestation = {
        provider: provider.peer.address,
        machineId: machine.machineId,
        model: modelHash(machine.model),
        units: machine.units,
        vramMiB: machine.vramMiB,
        throughput: 123_456n,
        challengeId: `0x${"00".repeat(32)}` as const,
        root: `0x${"00".repeat(32)}` as const,
        gpus: `0x${"00".repeat(32)}` as const,
        cc: `0x${"00".repeat(32)}` as const,
        failures: 0,
        lastFailureAt: 0,
        issuedAt: now,
        expiry: now + 3_600,
      };
      const market = devnet.deployment.contracts.market!;
      const { signature } = await signAttestation(ATTESTOR, suanliDomain(devnet.deployment.chainId, market), attestation);
      provider.agent.setAttestations(machine.machineId, [{ attestation, signature }]);
      const publisher = provider.daemon.offers.publisher!;
      const attested = await waitFor("the attested offer", () => {
        const current = publisher.current(machine.machineId);
        return current?.attestations.length === 1 ? current : undefined;
      });
      assert.equal(attested.attestations[0]!.attestation.throughput, 123_456n);
      // The operator's dashboard and the attestation alerts read its expiry.
      const expiry = await provider.daemon.metrics.providerAttestationExpiry.get();
      assert.deepEqual(expiry.values.find((sample) => sample.labels.machine === String(machine.machineId))?.value, now + 3_600);

      // Signed by someone without the attestor role: published, but it does not count.
      const { signature: forged } = await signAttestation(devnetAccount(8), suanliDomain(devnet.deployment.chainId, market), attestation);
      let seqBefore = publisher.current(machine.machineId)!.seq;
      provider.agent.setAttestations(machine.machineId, [{ attestation, signature: forged }]);
      await waitFor("the offer with the outsider's attestation", () => {
        const current = publisher.current(machine.machineId)!;
        return current.seq > seqBefore && current.attestations[0]?.signature === forged ? current : undefined;
      });

      // About another machine (a unit count it does not have): the network would refuse the whole
      // offer, so it goes out without it rather than not at all.
      const lie = { ...attestation, units: machine.units + 1 };
      const { signature: lying } = await signAttestation(ATTESTOR, suanliDomain(devnet.deployment.chainId, market), lie);
      seqBefore = publisher.current(machine.machineId)!.seq;
      provider.agent.setAttestations(machine.machineId, [{ attestation: lie, signature: lying }]);
      await waitFor("the offer without the refused attestation", () => {
        const current = publisher.current(machine.machineId)!;
        return current.seq > seqBefore && current.attestations.length === 0;
      });
    } finally {
      await provider.close();
    }
  });
});

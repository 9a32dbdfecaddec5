import assert from "node:assert/strict";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { leaseMarketAbi } from "../../common/abi.js";
import { startBundleServer, type BundleServer } from "../support/bundles.js";
import { send, startDevnet, type Devnet } from "../support/devnet.js";
import { startTestProvider, type TestProvider } from "../support/provider.js";
import { TestRenter } from "../support/renter.js";
import { waitFor } from "../support/wait.js";

/**
 * A renter releases units of a running lease early (`shrink`): it stops paying for them, so the
 * provider hands them to its idle workload and to the next renter at once, while the task goes on.
 */
describe("provider agent: a lease shrunk while its task runs", function () {
  this.timeout(90_000);
  let devnet: Devnet;
  let bundles: BundleServer;
  let provider: TestProvider;
  let alice: TestRenter;
  let bob: TestRenter;
  let dir: string;

  before(async () => {
    devnet = await startDevnet({ wallClockBlocks: true });
    bundles = await startBundleServer();
    dir = await mkdtemp(path.join(tmpdir(), "suanli-shrink-"));
    provider = await startTestProvider(devnet, 1, {
      provider: { idle: { command: "while :; do sleep 0.05; done", restartDelayMs: 100 } },
    });
    alice = await TestRenter.start(devnet, 2);
    bob = await TestRenter.start(devnet, 3);
  });
  after(async () => {
    await bob?.close();
    await alice?.close();
    await provider?.close();
    await bundles?.close();
    await devnet?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("gives the released unit back to idle work and to the next lease; the task keeps running", async () => {
    const machine = provider.agent.machines[0];
    const machineId = machine.machineId;
    const device = (unit: string) => provider.agent.inventory.units.find((u) => u.id === unit)!.device;
    const markA = path.join(dir, "a.log");
    const markB = path.join(dir, "b.log");
    const looping = await bundles.bundle({ "run.sh": `echo "$CUDA_VISIBLE_DEVICES" >> "$MARK"\nwhile :; do sleep 0.05; done\n` });
    const once = await bundles.bundle({ "run.sh": `echo "$CUDA_VISIBLE_DEVICES" >> "$MARK"\n` });

    const leaseA = await alice.rent(provider.peer, { machineId, units: 2, duration: 120 });
    await alice.sendTask(provider.peer, leaseA, { bundle: looping, command: "sh run.sh", env: { MARK: markA } });
    await alice.waitStatus(provider.peer, leaseA, (s) => s.state === "running", "alice's task to run");
    const modes = () => Object.values(provider.agent.capacity.modes());
    assert.deepEqual(modes().map((m) => m.mode), ["ai", "ai"]);
    assert.equal(provider.agent.capacity.idleProcesses().length, 0, "no idle work on leased units");
    const [kept, released] = provider.agent.lease(leaseA)!.unitIds;

    await send(alice.clients, { address: devnet.deployment.contracts.market!, abi: leaseMarketAbi, functionName: "shrink", args: [leaseA, 1] } as never);
    await waitFor("the released unit back in idle work", () => provider.agent.capacity.idleProcesses().some((p) => p.units.includes(released)), { timeoutMs: 15_000 });
    assert.deepEqual(provider.agent.lease(leaseA)!.unitIds, [kept]);
    assert.equal(provider.agent.capacity.modes()[kept].leaseId, `lease-${leaseA}`);
    assert.equal(provider.agent.capacity.modes()[released].mode, "idle");
    assert.equal((await alice.status(provider.peer, leaseA)).state, "running", "alice's task was not stopped");

    // Bob rents the released unit and his task gets exactly that GPU.
    const leaseB = await waitFor("a reservation of the released unit", () => bob.rent(provider.peer, { machineId, units: 1, duration: 30 }).catch(() => undefined), { timeoutMs: 15_000 });
    await bob.sendTask(provider.peer, leaseB, { bundle: once, command: "sh run.sh", env: { MARK: markB } });
    await bob.waitStatus(provider.peer, leaseB, (s) => s.state === "succeeded", "bob's task to finish");
    assert.equal((await readFile(markB, "utf8")).trim(), device(released));
    assert.equal((await readFile(markA, "utf8")).trim(), [device(kept), device(released)].join(","), "alice's task started with both");
    assert.equal((await alice.status(provider.peer, leaseA)).state, "running");

    await alice.cancel(provider.peer, leaseA);
    await alice.waitLease(leaseA, ["Settled"], 30_000);
    await bob.waitLease(leaseB, ["Settled"], 30_000);
    await waitFor("both units idle again", () => modes().every((m) => m.mode === "idle"), { timeoutMs: 15_000 });
  });
});

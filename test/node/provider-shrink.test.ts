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
 * A renter releases units of a lease early (`shrink`). Before its task starts, the released units
 * go back to the idle workload and the next renter at once. While a task runs they stay with it
 * (its GPUs cannot change under it, and no other tenant may share them), unsold, until it ends.
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

  const modes = () => provider.agent.capacity.modes();
  const device = (unit: string) => provider.agent.inventory.units.find((u) => u.id === unit)!.device;
  const shrink = (renter: TestRenter, leaseId: bigint, units: number) =>
    send(renter.clients, { address: devnet.deployment.contracts.market!, abi: leaseMarketAbi, functionName: "shrink", args: [leaseId, units] });

  it("while its task runs, the released unit stays with the task, unsold, until the task ends", async () => {
    const machineId = provider.agent.machines[0]!.machineId;
    const markA = path.join(dir, "a.log");
    const looping = await bundles.bundle({ "run.sh": `echo "$CUDA_VISIBLE_DEVICES" >> "$MARK"\nwhile :; do sleep 0.05; done\n` });

    const leaseA = await alice.rent(provider.peer, { machineId, units: 2, duration: 120 });
    await alice.sendTask(provider.peer, leaseA, { bundle: looping, command: "sh run.sh", env: { MARK: markA } });
    await alice.waitStatus(provider.peer, leaseA, (s) => s.state === "running", "alice's task to run");
    const [kept, released] = provider.agent.lease(leaseA)!.unitIds;
    assert.equal((await readFile(markA, "utf8")).trim(), [device(kept!), device(released!)].join(","));

    await shrink(alice, leaseA, 1);
    await waitFor("the shrink seen by the provider", () => provider.agent.lease(leaseA)?.units === 1, { timeoutMs: 15_000 });
    await provider.agent.leases.reconcile(leaseA);
    assert.equal(modes()[released!]!.leaseId, `lease-${leaseA}`, "the running task keeps the released GPU");
    assert.equal(provider.agent.capacity.idleProcesses().length, 0, "no idle work on it either");
    assert.equal((await alice.status(provider.peer, leaseA)).state, "running");
    const refused = await bob.reserve(provider.peer, { machineId, units: 1, duration: 30 });
    assert.equal(refused.accepted, false, "the released GPU is not sold while the task holds it");

    // The task ends: the unit is for sale again, and the next renter gets exactly it.
    await alice.cancel(provider.peer, leaseA);
    await alice.waitLease(leaseA, ["Ended", "Settled"], 30_000);
    await waitFor("both units idle", () => Object.values(modes()).every((m) => m.mode === "idle"), { timeoutMs: 15_000 });
    const leaseB = await waitFor("a reservation of a freed unit", () => bob.rent(provider.peer, { machineId, units: 2, duration: 30 }).catch(() => undefined), {
      timeoutMs: 15_000,
    });
    await bob.cancel(provider.peer, leaseB);
    await bob.waitLease(leaseB, ["Ended", "Settled"], 30_000);
    await waitFor("both units idle again", () => Object.values(modes()).every((m) => m.mode === "idle"), { timeoutMs: 15_000 });
  });

  it("before its task starts, the released unit goes back to idle work and the next renter at once", async () => {
    const machineId = provider.agent.machines[0]!.machineId;
    const markB = path.join(dir, "b.log");
    const once = await bundles.bundle({ "run.sh": `echo "$CUDA_VISIBLE_DEVICES" >> "$MARK"\n` });
    await waitFor("both units idle", () => Object.values(modes()).every((m) => m.mode === "idle"), { timeoutMs: 15_000 });

    const leaseA = await waitFor("alice's lease", () => alice.rent(provider.peer, { machineId, units: 2, duration: 120 }).catch(() => undefined), { timeoutMs: 15_000 });
    await shrink(alice, leaseA, 1);
    await waitFor("the shrink seen by the provider", () => provider.agent.lease(leaseA)?.units === 1, { timeoutMs: 15_000 });
    await provider.agent.leases.reconcile(leaseA);

    // Bob rents the released unit; his task runs on one GPU, and no other lease holds it.
    const leaseB = await waitFor("a reservation of the released unit", () => bob.rent(provider.peer, { machineId, units: 1, duration: 30 }).catch(() => undefined), {
      timeoutMs: 15_000,
    });
    await bob.sendTask(provider.peer, leaseB, { bundle: once, command: "sh run.sh", env: { MARK: markB } });
    await bob.waitStatus(provider.peer, leaseB, (s) => s.state === "succeeded", "bob's task to finish");
    const bobDevices = (await readFile(markB, "utf8")).trim().split(",");
    assert.equal(bobDevices.length, 1);
    const bobUnit = provider.agent.inventory.units.find((u) => u.device === bobDevices[0])!.id;
    assert.ok(!provider.agent.lease(leaseA)!.unitIds.includes(bobUnit), "alice's lease does not hold bob's GPU");

    await alice.cancel(provider.peer, leaseA);
    await alice.waitLease(leaseA, ["Ended", "Settled", "Cancelled"], 30_000);
  });
});

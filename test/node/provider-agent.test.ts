import assert from "node:assert/strict";
import { recoverTypedDataAddress } from "viem";
import { providerRegistryAbi } from "../../common/abi.js";
import { readMachine, readProvider } from "../../common/chain/market.js";
import { suanliTypes } from "../../common/eip712.js";
import { Bucket } from "../../node/store/buckets.js";
import { startBundleServer, type BundleServer } from "../support/bundles.js";
import { advanceChain, startDevnet, type Devnet } from "../support/devnet.js";
import { startTestProvider, type TestProvider } from "../support/provider.js";
import { leaseEvents, TestRenter } from "../support/renter.js";
import { isRunning } from "../support/processes.js";
import { waitFor } from "../support/wait.js";

const SECRET = "s3cr3t-value-that-must-not-leak";

describe("provider agent: a lease from reserve to payment", function () {
  this.timeout(60_000);
  let devnet: Devnet;
  let bundles: BundleServer;
  let provider: TestProvider;
  let renter: TestRenter;

  before(async () => {
    devnet = await startDevnet();
    bundles = await startBundleServer();
    // Claims every two minutes, its held-pay watch every second: the release after a completion's fault window must come
    // from the watch (issue #34), not from a claim pass that happens to run (the claim interval is longer than the test).
    // Outputs kept two hours: the offer must state it (issue #36, "a retention period its offer states").
    provider = await startTestProvider(devnet, 1, { provider: { claims: { intervalMs: 120_000, releaseWatchMs: 1_000 }, outputs: { retentionSeconds: 7_200 } } });
    renter = await TestRenter.start(devnet, 2);
  });
  after(async () => {
    await renter?.close();
    await provider?.close();
    await bundles?.close();
    await devnet?.close();
  });

  it("registers, stakes up to the target, declares the inventory's machine once and offers it stating how long outputs are kept", async () => {
    const registry = devnet.deployment.contracts.registry!;
    const view = await readProvider(devnet.admin.publicClient, registry, provider.peer.address);
    assert.equal(view.registered, true);
    assert.equal(view.peerId, provider.daemon.p2p.host.peerId.toString());
    assert.equal(BigInt(view.stake), 1_000_000_000n);
    assert.equal(provider.agent.machines.length, 1);
    const machine = await readMachine(devnet.admin.publicClient, registry, provider.agent.machines[0]!.machineId);
    assert.equal(machine.owner, provider.peer.address);
    assert.equal(machine.units, 2);
    assert.equal(machine.region, "eu-west");
    const declared = await devnet.admin.publicClient.readContract({ address: registry, abi: providerRegistryAbi, functionName: "lastMachineId" });
    assert.equal(Number(declared), provider.agent.machines[0]!.machineId);
    const offer = await waitFor("the machine's offer", () => provider.daemon.offers.publisher!.current(provider.agent.machines[0]!.machineId));
    assert.equal(offer.capacity.freeUnits, 2);
    assert.equal(offer.offer.pricePerUnitSecond, 100n);
    assert.deepEqual(offer.retention, { outputSeconds: 7_200 });
  });

  it("runs the task, streams its logs with secrets redacted, reports completion and is paid exactly what accrued", async () => {
    const machineId = provider.agent.machines[0]!.machineId;
    const bundle = await bundles.bundle({
      "run.sh": ["echo hello from the task", 'echo "token is $TOKEN"', "mkdir -p output", "echo 42 > output/answer.txt", "sleep 1", "echo done"].join("\n"),
    });
    const renterBefore = await renter.balance();
    const providerBefore = await renter.balance(provider.peer.address);

    const reply = await renter.reserve(provider.peer, { machineId, units: 1, duration: 60 });
    assert.equal(reply.accepted, true, reply.accepted ? "" : `${reply.reason}: ${reply.message}`);
    if (!reply.accepted) return;
    assert.equal(reply.offer.renter, renter.address);
    assert.deepEqual(reply.preempt, []);
    // The hold shows in the published offer at once.
    await waitFor("the offer to show one free unit", () => provider.daemon.offers.publisher!.current(machineId)?.capacity.freeUnits === 1);

    const leaseId = await renter.open(reply, { machineId, units: 1, duration: 60 });
    const answer = await renter.sendTask(provider.peer, leaseId, {
      bundle,
      command: ["sh", "run.sh"],
      env: { MODE: "test", TOKEN: { value: SECRET, secret: true } },
    });
    assert.equal(answer.state, "accepted");

    const lines = await renter.allLogs(provider.peer, leaseId);
    const texts = lines.map((line) => line.text);
    assert.ok(texts.includes("hello from the task"), texts.join("\n"));
    assert.ok(texts.includes("token is [secret:TOKEN]"), texts.join("\n"));
    assert.ok(texts.includes("done"));
    assert.ok(!texts.some((text) => text.includes(SECRET)));
    assert.deepEqual(
      lines.map((line) => line.seq),
      lines.map((_, i) => i),
    );

    const status = await renter.waitStatus(provider.peer, leaseId, (s) => s.state === "succeeded" && s.completion !== null, "task succeeded");
    assert.equal(status.exitCode, 0);
    assert.equal(status.error, null);
    const completion = status.completion!;
    const signer = await recoverTypedDataAddress({
      domain: renter.domain,
      types: suanliTypes,
      primaryType: "Completion",
      message: completion.report,
      signature: completion.signature,
    });
    assert.equal(signer, provider.peer.address);
    assert.ok(completion.report.unitSeconds >= 1n);

    const settled = await renter.waitLease(leaseId, ["Settled"]);
    assert.equal(settled.endReason, "Completed");
    const events = await leaseEvents(devnet, leaseId);
    const opened = events.find((e) => e.eventName === "LeaseOpened")!.args as { deposit: bigint };
    const activated = events.find((e) => e.eventName === "LeaseActivated")!.args as { activatedAt: number };
    const ended = events.find((e) => e.eventName === "LeaseEnded")!.args as { stopAt: number; providerTotal: bigint; refund: bigint };
    const reported = events.find((e) => e.eventName === "CompletionReported")!.args as { exitCode: number; outputDigest: string; unitSeconds: bigint };
    assert.equal(reported.exitCode, 0);
    assert.equal(reported.outputDigest, completion.report.outputDigest);
    // Paid exactly units x price x the seconds it ran; the renter got the rest back at once.
    assert.equal(ended.providerTotal, 1n * 100n * BigInt(ended.stopAt - activated.activatedAt));
    assert.equal(ended.refund, opened.deposit - ended.providerTotal);
    assert.equal(renterBefore - (await renter.balance()), ended.providerTotal);
    // An early completion holds the collateral and the last fault window's pay (issue #34 findings 1 and
    // overpaid-above-collateral): a lease shorter than the window has been paid nothing yet, and the record stays open
    // until the node's own claim releases it once the window is over on chain.
    assert.equal(settled.paid, 0n, "a lease shorter than the fault window is paid nothing before the window is over");
    assert.equal(settled.deposit, ended.providerTotal, "the held lease shows the provider's total as its deposit");
    assert.equal(provider.agent.lease(leaseId)?.closed, false, "the record stays open while the collateral is held");

    // The unit is free again and offered again.
    await waitFor("the offer to show both units free", () => provider.daemon.offers.publisher!.current(machineId)?.capacity.freeUnits === 2);
    // The node knows the hold before the window passes, so the one pass left to release it is the watch's.
    await waitFor("the node to know the hold", () => provider.agent.claimer.held().has(leaseId));
    await advanceChain(devnet, 601);
    await waitFor("the record to close after the fault window", () => provider.agent.lease(leaseId)?.closed === true, { timeoutMs: 20_000 });
    // The node's releasing claim, with nobody else acting, paid the provider the whole total.
    const claimed = (await leaseEvents(devnet, leaseId)).filter((e) => e.eventName === "LeaseClaimed").map((e) => (e.args as { amount: bigint }).amount);
    assert.equal(
      claimed.reduce((a, b) => a + b, 0n),
      ended.providerTotal,
    );
    assert.equal((await renter.balance(provider.peer.address)) - providerBefore, ended.providerTotal);
    const released = await renter.waitLease(leaseId, ["Settled"]);
    assert.deepEqual([released.paid, released.deposit, released.collateral], [ended.providerTotal, ended.providerTotal, 0n]);
  });

  it("keeps secret values out of the store and the metrics", async () => {
    const dump: string[] = [];
    for (let bucket = 0; bucket < 16; bucket++) {
      for await (const [key, value] of provider.daemon.store.repository<unknown>(bucket as Bucket).entries())
        dump.push(`${key}=${JSON.stringify(value, (_k, v: unknown) => (typeof v === "bigint" ? v.toString() : v))}`);
    }
    const text = dump.join("\n");
    assert.ok(text.includes("[secret]"), "the stored spec marks the secret");
    assert.ok(!text.includes(SECRET));
    // The claimed-earnings counter moves once the node has the receipt of its release claim, which
    // can come a moment after the chain shows the lease paid (the previous test waits on the chain).
    const metrics = await waitFor(
      "the node to count its claimed earnings",
      async () => {
        const text = await provider.daemon.metrics.registry.metrics();
        return /suanli_provider_earnings_claimed_total [1-9]/.test(text) ? text : undefined;
      },
      { timeoutMs: 15_000 },
    );
    assert.ok(!metrics.includes(SECRET));
    assert.match(metrics, /suanli_provider_tasks_total\{result="succeeded"\} 1/);
    assert.match(metrics, /suanli_provider_reservations_total\{outcome="accepted"\} 1/);
  });

  it("a node that stops while a task runs stops the task and terminates the lease (the renter gets the rest back and the penalty)", async () => {
    const machineId = provider.agent.machines[0]!.machineId;
    const bundle = await bundles.bundle({ "run.sh": 'echo "$$" > "$PIDFILE"\nsleep 60\n' });
    const pidFile = `${provider.daemon.config.dataDir}/../task-${Date.now()}.pid`;
    const leaseId = await renter.rent(provider.peer, { machineId, units: 2, duration: 60 });
    await renter.sendTask(provider.peer, leaseId, { bundle, command: "sh run.sh", env: { PIDFILE: pidFile } });
    await renter.waitStatus(provider.peer, leaseId, (s) => s.state === "running", "the task to run");
    const { readFile, rm } = await import("node:fs/promises");
    const pid = Number((await waitFor("the task's pid", () => readFile(pidFile, "utf8").catch(() => ""))).trim());
    await provider.close();
    const view = await renter.lease(leaseId);
    assert.equal(view.endReason, "Terminated");
    assert.ok(["Ended", "Settled"].includes(view.status));
    const ended = (await leaseEvents(devnet, leaseId)).find((e) => e.eventName === "LeaseEnded")!.args as { credit: bigint; refund: bigint };
    assert.ok(ended.credit > 0n && ended.refund > 0n);
    assert.equal(await isRunning(pid), false);
    await rm(pidFile, { force: true });
  });
});

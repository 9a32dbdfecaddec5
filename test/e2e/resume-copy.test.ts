/**
 * Resume from the renter's own copy (issue 36, docs/data.md "Where data lives"): two provider
 * nodes as real child processes (devnet chain, libp2p on 127.0.0.1, level, Helia with
 * data.enabled, bubblewrap), a renter's node with its HTTP API and data plane, two attestors
 * (fault quorum two) and the real SDK with `pinCheckpointsOn` set to the renter's node. A counting
 * job that saves its step every 50 steps (8.5 s) runs on the first provider; its checkpoints are copied to
 * the renter's node as they appear; the provider is SIGKILLed by its pid; the attestors fault the
 * lease, autoMigrate re-rents the task on the other provider, which fetches the checkpoint from
 * the renter's node (the only node left that holds it) and finishes the job.
 */
import assert from "node:assert/strict";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { devnetAccount } from "../../common/devnet.js";
import { stringifyTagged } from "../../common/json.js";
import { detectBubblewrap } from "../../node/provider/runtime/sandbox.js";
import { unmountWorkspaceDisk } from "../../node/provider/runtime/workspace-disk.js";
import { getData, type SuanliClient, type TaskRecord } from "../../sdk/index.js";
import { addrOf, startAttestorDaemon, type TestDaemon } from "../support/attest.js";
import { NO_OWN_CHECKS } from "../support/attest-lease.js";
import { countingJob } from "../support/counting-job.js";
import { startBundleServer, type BundleServer } from "../support/bundles.js";
import { startTestDaemon } from "../support/daemons.js";
import { fund, startDevnet, type Devnet } from "../support/devnet.js";
import { ProviderProcess, writeProviderConfig } from "../support/provider-process.js";
import { connectRenter } from "../support/renter-market.js";
import { waitFor } from "../support/wait.js";

const show = (value: unknown) => stringifyTagged(value);
/** Steps between two saves of the job's state. */
const EVERY = 50;
/**
 * Seconds a step of the first run: its first save (8.5 s) comes before the first snapshot (10 s, the period floor), and the
 * next save (17 s) seconds after that snapshot's copy is on the renter's node: a copy that holds the latest save, for seconds.
 */
const PACE = "0.17";
/** Far enough for the first run to still be running at a later snapshot, should the first copy come late. */
const TOTAL = 150;
/** Seconds a step of the resumed run, which only has to finish. */
const FAST = "0.02";
const ATTESTORS = [6, 7];
/** Probes twice a second, a provider silent for 3 s is faulted. */
const LIVENESS = { probeIntervalMs: 500, probeTimeoutMs: 1_000, qosWindowSeconds: 3, minFailedProbes: 2, backupSubmitDelayMs: 2_000 };

/** The job (test/support/counting-job.ts): one step per PACE (FAST once resumed), its step saved every EVERY steps; this run's $MARK in its checkpoints. */
const COUNTER = countingJob(EVERY);

const dataProvider = {
  data: { enabled: true, fetchTimeoutMs: 10_000 },
  provider: {
    inventory: { source: "declared", declared: [{ model: "A100-80GB", count: 1, region: "eu-west" }] },
    runtime: { sandbox: "bubblewrap", network: false },
  },
};

describe("resume from the renter's node: the first provider SIGKILLed, autoMigrate resumes from the checkpoint copied to the renter's node", function () {
  this.timeout(180_000);
  let dir: string;
  let devnet: Devnet;
  let bundles: BundleServer;
  const providers: ProviderProcess[] = [];
  const nodes: TestDaemon[] = [];
  let renterNode: Awaited<ReturnType<typeof startTestDaemon>>;
  let client: SuanliClient | undefined;
  /** Stops a wait the test left running when it failed. */
  const stopWaiting = new AbortController();

  before(async () => {
    assert.equal((await detectBubblewrap()).available, true, "CI installs bubblewrap (.ci/run)");
    dir = await mkdtemp(path.join(tmpdir(), "suanli-resume-copy-"));
    devnet = await startDevnet({
      params: { faultQuorum: 2, attestorFaultWindow: LIVENESS.qosWindowSeconds },
      attestors: ATTESTORS.map((i) => devnetAccount(i).address),
      wallClockBlocks: true,
    });
    bundles = await startBundleServer();
    const configs = [];
    for (const index of [1, 2]) configs.push((await writeProviderConfig(devnet, index, { dir, overrides: dataProvider })).configFile);
    const started = await Promise.allSettled(configs.map((configFile) => ProviderProcess.start(configFile)));
    for (const result of started) if (result.status === "fulfilled") providers.push(result.value);
    const failed = started.find((result) => result.status === "rejected");
    if (failed) throw failed.reason;
    const bootstrap = providers.map((provider) => provider.peer.addr);
    renterNode = await startTestDaemon(devnet, { p2p: { bootstrap }, api: { enabled: true, host: "127.0.0.1", port: 0 }, data: { enabled: true, fetchTimeoutMs: 10_000 } });
    nodes.push(renterNode);
    // Attestors: the second joins through the first, so they exchange faults; no challenges of their own during the test.
    const attest = { liveness: LIVENESS, leaseChecks: NO_OWN_CHECKS, attestor: { scheduleIntervalMs: 3_600_000 } };
    const second = await startAttestorDaemon(devnet, ATTESTORS[1]!, { p2p: { bootstrap }, attest });
    nodes.push(second.daemon);
    const first = await startAttestorDaemon(devnet, ATTESTORS[0]!, { p2p: { bootstrap: [...bootstrap, addrOf(second.daemon)] }, attest });
    nodes.push(first.daemon);
    await fund(devnet, await devnet.wallet(5), 1_000_000_000n);
    client = await connectRenter(devnet, {
      name: "the renter",
      account: devnetAccount(5),
      bootstrap,
      freeUnits: 1,
      offers: 2,
      client: { pinCheckpointsOn: renterNode.api!.url },
    });
  });
  after(async () => {
    stopWaiting.abort();
    await client?.close().catch(() => undefined);
    for (const node of nodes.reverse()) await node.close().catch(() => undefined);
    for (const provider of providers) await provider.kill("SIGKILL");
    // The killed provider's task workspace is still mounted (a SIGKILLed node unmounts nothing): unmounted as the node would.
    const mounts = await readFile("/proc/mounts", "utf8");
    for (const mountPoint of mounts.split("\n").map((line) => line.split(" ")[1] ?? "")) {
      if (dir && mountPoint.startsWith(`${dir}/`)) await unmountWorkspaceDisk(path.dirname(mountPoint), path.basename(mountPoint));
    }
    await bundles?.close();
    await devnet?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("copies each checkpoint to the renter's node; after the SIGKILL and the quorum's fault, the new lease resumes from that copy and finishes, redoing fewer than 50 steps", async () => {
    const renter = client!;
    const counter = await bundles.bundle({ "run.sh": COUNTER });
    const submitted = await renter.submitTask({
      gpuType: "A100",
      gpuCount: 1,
      duration: 120,
      maxPricePerGpuHour: "1",
      attestedOnly: false,
      bundleUrl: counter.url,
      sha256: counter.sha256,
      command: "sh run.sh",
      // Checkpoints of this run alone (no node holds their CIDs from elsewhere).
      env: { TOTAL: String(TOTAL), MARK: `copy-${Date.now()}`, PACE, FAST },
      checkpointPeriodSeconds: 10,
      autoMigrate: true,
    });
    const doomed = providers.find((provider) => provider.ready.address === submitted.provider)!;
    const survivor = providers.find((provider) => provider !== doomed)!;
    const waiting = renter.wait(submitted.taskId, { timeoutMs: 150_000, signal: stopWaiting.signal });
    waiting.catch(() => undefined);
    const attempts = async () => ((await renter.tasks()).find((task) => task.taskId === submitted.taskId) as TaskRecord).attempts;
    const steps = (lines: string[]) => Math.max(0, ...lines.filter((line) => line.startsWith("step=")).map((line) => Number(line.slice(5))));

    // The step saved in each copy, read back from the renter's node (its state file).
    const saved = new Map<string, number>();
    const stateIn = async (cid: string) => {
      if (!saved.has(cid)) {
        const target = path.join(dir, `copy-${cid}`);
        await getData(cid, target, { nodeUrl: renterNode.api!.url, timeoutMs: 5_000 });
        // The first snapshot may come before the first save: no state file yet.
        const text = await readFile(path.join(target, "state"), "utf8").catch(() => "0");
        saved.set(cid, Number(text.trim()));
      }
      return saved.get(cid)!;
    };
    // SIGKILL once the renter's node holds the job's latest save: the work lost is what the job did since.
    const atKill = await waitFor(
      "a copy on the renter's node holding the job's latest saved step",
      async () => {
        const copy = (await attempts())[0]!.checkpointCopy;
        if (!copy) return undefined;
        const state = await stateIn(copy.checkpoint.record.cid);
        const lines: string[] = [];
        for await (const line of renter.logs(submitted.taskId, { follow: false })) lines.push(line.text);
        const reached = steps(lines);
        return state > 0 && reached - state < EVERY - 1 ? { cid: copy.checkpoint.record.cid, seq: copy.checkpoint.record.seq, state, reached } : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 200 },
    );
    await doomed.kill("SIGKILL");
    assert.equal(doomed.child.signalCode, "SIGKILL", "the provider process was killed by its pid");

    const receipt = await waiting;
    assert.equal(receipt.state, "succeeded", show(receipt));
    assert.equal(receipt.leases.length, 2, show(receipt.leases));
    assert.equal(receipt.leases[0]!.endReason, "Faulted", "the attestors' quorum faulted the killed provider's lease");
    assert.equal(receipt.leases[1]!.provider, survivor.ready.address, "re-rented on the other provider");
    assert.equal(receipt.leases[1]!.resumedFrom, atKill.cid, "the new lease resumed from the copy on the renter's node");
    const [killed, resumed] = await attempts();
    assert.equal(killed!.checkpointCopy?.nodeUrl, renterNode.api!.url);
    assert.equal(killed!.checkpoint?.record.cid, atKill.cid, "the copy is the newest checkpoint the killed provider signed");
    assert.equal(resumed!.resumedFrom, atKill.cid);

    // The job on the second provider: $SUANLI_RESUMED_FROM is the copy's CID, it started from the copy's step and finished.
    const lines: string[] = [];
    for await (const line of renter.logs(submitted.taskId, { follow: false })) lines.push(line.text);
    assert.ok(lines.includes(`resumed=${atKill.cid}`), lines.join("\n"));
    assert.ok(lines.includes(`start=${atKill.state}`), `resumed at the copy's step ${atKill.state}:\n${lines.join("\n")}`);
    assert.equal(
      lines.find((line) => line.startsWith("step=")),
      `step=${atKill.state + 1}`,
      "the first step after the saved one; the job did not start over",
    );
    assert.ok(lines.includes(`done=${TOTAL}`), lines.join("\n"));
    // At most one step ran between the last log read and the kill: fewer than EVERY were redone.
    assert.ok(atKill.reached + 1 - atKill.state < EVERY, `redone: reached ${atKill.reached} (+1 at most before the kill), resumed at ${atKill.state}`);

    // The bytes came from the renter's node: it served blocks over bitswap (the killed provider is gone, the survivor never had them).
    const metrics = await (await fetch(new URL("/metrics", renterNode.api!.url))).text();
    const served = Number(/^suanli_data_served_bytes_total(?:\{[^}]*\})? (\d+)/m.exec(metrics)?.[1] ?? 0);
    assert.ok(
      served > 0,
      `the renter's node served the checkpoint's blocks:\n${metrics
        .split("\n")
        .filter((line) => line.startsWith("suanli_data_"))
        .join("\n")}`,
    );
  });
});

/**
 * Task inputs in leases (issue 36, "Use it in a task"): a real provider node (devnet chain,
 * libp2p on 127.0.0.1, level, Helia with data.enabled, bubblewrap) and a renter's data node
 * (Helia on its own host, data added with DataStore.add). docs/data.md cites these tests.
 */
import assert from "node:assert/strict";
import { chmod, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { multiaddr } from "@multiformats/multiaddr";
import { TASK_NOT_STARTED_EXIT_CODE } from "../../common/protocols/lease.js";
import { DataStore } from "../../node/data/store.js";
import { silentLogger } from "../../node/log/logger.js";
import { startNodeHost, type NodeHost } from "../../node/p2p/start.js";
import { detectBubblewrap } from "../../node/provider/runtime/sandbox.js";
import { startBundleServer, type BundleServer, type ServedBundle } from "../support/bundles.js";
import { startDevnet, type Devnet } from "../support/devnet.js";
import { loopbackP2pOptions } from "../support/nodes.js";
import { startTestProvider, type TestProvider } from "../support/provider.js";
import { leaseEvents, TestRenter } from "../support/renter.js";

type Ended = { reason: number; stopAt: number; providerTotal: bigint; refund: bigint };

describe("provider: task inputs mounted read-only from the data plane", function () {
  this.timeout(90_000);
  let root: string;
  let devnet: Devnet;
  let bundles: BundleServer;
  let provider: TestProvider;
  let renter: TestRenter;
  let machineId: number;
  let dataHost: NodeHost;
  let renterData: DataStore;
  let cid: string;
  let task: ServedBundle;

  before(async () => {
    assert.equal((await detectBubblewrap()).available, true, "CI installs bubblewrap (.ci/run)");
    root = await mkdtemp(path.join(tmpdir(), "suanli-provider-inputs-"));
    await chmod(root, 0o711);
    devnet = await startDevnet({ wallClockBlocks: true });
    bundles = await startBundleServer();
    provider = await startTestProvider(devnet, 1, {
      data: { enabled: true, fetchTimeoutMs: 1_500 },
      provider: { reserve: { holdSeconds: 5 }, runtime: { sandbox: "bubblewrap", network: false } },
    });
    renter = await TestRenter.start(devnet, 2);
    machineId = provider.agent.machines[0]!.machineId;
    // The renter's own node holds the dataset (what `suanli data add` will do) and is connected to the provider.
    dataHost = await startNodeHost({ dataDir: path.join(root, "renter-node"), options: loopbackP2pOptions(), logger: silentLogger() });
    renterData = await DataStore.open({ dataDir: path.join(root, "renter-node"), libp2p: dataHost.host });
    const dataset = path.join(root, "dataset");
    await mkdir(dataset);
    await writeFile(path.join(dataset, "hello.txt"), "hello from the renter's dataset\n");
    cid = (await renterData.add(dataset)).cid;
    await dataHost.host.dial(multiaddr(provider.peer.addr));
    task = await bundles.bundle({
      "run.sh": [
        "cat /data/set/hello.txt",
        "echo uid=$(id -u)",
        "if echo x > /data/set/new.txt; then echo WROTE-NEW; else echo NEW-REFUSED; fi",
        "if echo x >> /data/set/hello.txt; then echo WROTE-OLD; else echo OLD-REFUSED; fi",
        "if chmod 777 /data/set; then echo CHMOD-DONE; else echo CHMOD-REFUSED; fi",
        "",
      ].join("\n"),
    });
  });
  after(async () => {
    await renterData?.stop();
    await dataHost?.stop();
    await renter?.close();
    await provider?.close();
    await bundles?.close();
    await devnet?.close();
    if (root) await rm(root, { recursive: true, force: true });
  });

  async function run(spec: unknown) {
    const leaseId = await renter.rent(provider.peer, { machineId, units: 1, duration: 60 });
    assert.equal((await renter.sendTask(provider.peer, leaseId, spec)).state, "accepted");
    const status = await renter.waitStatus(provider.peer, leaseId, (s) => ["succeeded", "failed", "exceeded"].includes(s.state), "the task to end");
    const lines = (await renter.allLogs(provider.peer, leaseId)).map((line) => line.text);
    return { leaseId, status, lines };
  }

  it("a task reads its input at its mount, and writing to the mount fails even for the task's root", async () => {
    const data = provider.daemon.data!;
    const before = data.counters.fetchedBlocks;
    const { status, lines } = await run({ bundle: task, command: "sh run.sh", inputs: [{ cid, mount: "/data/set" }] });
    assert.equal(status.state, "succeeded", `${JSON.stringify(status.error)}\n${lines.join("\n")}`);
    assert.ok(lines.includes("hello from the renter's dataset"), lines.join("\n"));
    assert.ok(lines.includes("uid=0"), "the task runs as uid 0 of its namespace");
    for (const refused of ["NEW-REFUSED", "OLD-REFUSED", "CHMOD-REFUSED"]) assert.ok(lines.includes(refused), `${refused}\n${lines.join("\n")}`);
    assert.ok(data.counters.fetchedBlocks > before, "the provider fetched the input from the renter's node");
  });

  it("a second lease on the same CID starts without fetching it (the renter's node is gone); the mount, not the mode bits, keeps it read-only", async () => {
    const data = provider.daemon.data!;
    await renterData.stop();
    await dataHost.stop();
    const fetched = data.counters.fetchedBlocks;
    const hits = data.counters.cacheHits;
    // The cached copy made writable on the host: only the read-only mount stands between the task and it now.
    const cached = path.join(provider.daemon.config.dataDir, "data", "inputs", cid);
    await chmod(cached, 0o777);
    await chmod(path.join(cached, "hello.txt"), 0o666);
    const { status, lines } = await run({ bundle: task, command: "sh run.sh", inputs: [{ cid, mount: "/data/set" }] });
    assert.equal(status.state, "succeeded", JSON.stringify(status.error));
    assert.ok(lines.includes("hello from the renter's dataset"));
    for (const refused of ["NEW-REFUSED", "OLD-REFUSED", "CHMOD-REFUSED"]) assert.ok(lines.includes(refused), `${refused}\n${lines.join("\n")}`);
    assert.ok(
      lines.some((line) => /Read-only file system/.test(line)),
      lines.join("\n"),
    );
    assert.equal(data.counters.fetchedBlocks, fetched, "no block fetched for the second lease");
    assert.ok(data.counters.cacheHits > hits, "served from the cache");
  });

  it("an input nobody serves in time ends the lease as the renter's side: completed, not-started exit code, the rest of the deposit back", async () => {
    const nobody = "bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy";
    const leaseId = await renter.rent(provider.peer, { machineId, units: 1, duration: 60 });
    const deposit = (await renter.lease(leaseId)).deposit;
    assert.equal((await renter.sendTask(provider.peer, leaseId, { bundle: task, command: "sh run.sh", inputs: [{ cid: nobody, mount: "/data/set" }] })).state, "accepted");
    const status = await renter.waitStatus(provider.peer, leaseId, (s) => s.state === "failed", "the task to fail");
    assert.equal(status.error?.name, "DataNotFoundError");
    assert.equal(status.startedAt, null);
    const settled = await renter.waitLease(leaseId, ["Settled"]);
    assert.equal(settled.endReason, "Completed");
    const events = await leaseEvents(devnet, leaseId);
    const ended = events.find((e) => e.eventName === "LeaseEnded")!.args as unknown as Ended;
    const reported = events.find((e) => e.eventName === "CompletionReported")?.args as { exitCode: number } | undefined;
    assert.equal(reported?.exitCode, TASK_NOT_STARTED_EXIT_CODE);
    // Activation and completion are consecutive blocks: a second or two at 100 base units per second.
    assert.ok(ended.providerTotal <= 300n, `paid ${ended.providerTotal}`);
    assert.equal(ended.refund, deposit - ended.providerTotal, "no penalty credit: the rest of the deposit, no more");
  });

  it("refuses bad inputs at the boundary, naming the field", async () => {
    const leaseId = await renter.rent(provider.peer, { machineId, units: 1, duration: 60 });
    await assert.rejects(renter.sendTask(provider.peer, leaseId, { bundle: task, command: "true", inputs: [{ cid, mount: "/etc/passwd" }] }), (error: Error) => {
      // The zod issue's path names the field: spec.inputs[0].mount.
      assert.match(error.message, /"inputs",\s*0,\s*"mount"/);
      assert.match(error.message, /a mount is a path under \/data/);
      return true;
    });
  });
});

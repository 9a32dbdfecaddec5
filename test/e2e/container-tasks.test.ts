import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { devnetAccount } from "../../common/devnet.js";
import { digestOutputDir } from "../../common/output-digest.js";
import { ownerId } from "../../node/provider/runtime/container-engine.js";
import type { SuanliClient } from "../../sdk/index.js";
import { BUSYBOX_IMAGE, requireContainerSupport } from "../support/container-images.js";
import { fund, startDevnet, type Devnet } from "../support/devnet.js";
import { startTestProvider, type TestProvider } from "../support/provider.js";
import { ProviderProcess, writeProviderConfig } from "../support/provider-process.js";
import { leaseEvents } from "../support/renter.js";
import { connectRenter } from "../support/renter-market.js";
import { waitFor } from "../support/wait.js";

const exec = promisify(execFile);
const show = (value: unknown) => JSON.stringify(value, (_key, inner: unknown) => (typeof inner === "bigint" ? inner.toString() : inner));
/** The chain's preemption notice here, seconds. */
const NOTICE = 3;

/** The node's containers (any state), by the owner label of its workspace root. */
async function containersOf(workspaceRoot: string): Promise<{ name: string; state: string }[]> {
  const { stdout } = await exec("podman", ["ps", "--all", "--filter", `label=suanli.owner=${ownerId(path.resolve(workspaceRoot))}`, "--format", "{{.Names}} {{.Status}}"], {
    encoding: "utf8",
  });
  return stdout
    .split("\n")
    .filter((line) => line.trim() !== "")
    .map((line) => {
      const [name, state] = line.trim().split(/\s+/);
      return { name: name!, state: state! };
    });
}

describe("container tasks end to end: SDK, devnet, a provider node with the Podman runtime", function () {
  this.timeout(300_000);
  let devnet: Devnet;
  let dir: string;
  let configFile: string;
  let workspaces: string;
  let node: ProviderProcess | undefined;
  const clients: SuanliClient[] = [];

  const client = async (index: number): Promise<SuanliClient> => {
    await fund(devnet, await devnet.wallet(index), 100_000_000n);
    const created = await connectRenter(devnet, {
      name: `renter ${index}`,
      account: devnetAccount(index),
      bootstrap: [node!.ready.addrs[0]!],
      stateFile: path.join(dir, `renter-${index}.json`),
    });
    clients.push(created);
    return created;
  };

  before(async () => {
    await requireContainerSupport();
    dir = await mkdtemp(path.join(tmpdir(), "suanli-container-e2e-"));
    devnet = await startDevnet({ params: { preemptionNotice: NOTICE }, wallClockBlocks: true });
    const written = await writeProviderConfig(devnet, 1, {
      dir,
      // A fixed port: the renter's SDK finds the restarted node where it was.
      fixedPort: true,
      overrides: {
        provider: {
          inventory: { source: "declared", declared: [{ model: "A100-80GB", count: 1, region: "eu-west" }] },
          minBids: { "A100-80GB": { pricePerUnitSecond: "50" } },
          // The test host has no GPU: no device flags; tasks have no network.
          runtime: { kind: "container", containerEngine: "podman", containerGpus: "none", network: false },
          grace: { taskStopMs: 2_000, idleStopMs: 300, preemptionNoticeMs: 1_000 },
        },
      },
    });
    configFile = written.configFile;
    workspaces = path.join(written.dataDir, "workspaces");
    node = await ProviderProcess.start(configFile, { timeoutMs: 90_000 });
  });
  after(async () => {
    for (const c of clients) await c.close().catch(() => undefined);
    if (node) await node.kill("SIGKILL");
    for (const container of await containersOf(workspaces).catch(() => [])) await exec("podman", ["rm", "--force", "--time", "0", container.name]).catch(() => undefined);
    await devnet?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("runs a task from a local image: logs stream while it runs, output files settle with the right digest", async () => {
    const renter = await client(5);
    const submitted = await renter.submitTask({
      gpuType: "A100",
      gpuCount: 1,
      duration: 60,
      maxPricePerGpuHour: "1",
      attestedOnly: false,
      image: BUSYBOX_IMAGE,
      command:
        'echo "step 1"; sleep 1; mkdir -p "$SUANLI_OUTPUT_DIR/ckpt"; echo "loss 0.12" > "$SUANLI_OUTPUT_DIR/metrics.txt"; echo weights > "$SUANLI_OUTPUT_DIR/ckpt/model.bin"; echo "step 2"',
    });
    const lines: string[] = [];
    for await (const line of renter.logs(submitted.taskId, { follow: true })) lines.push(line.text);
    assert.ok(lines.includes("step 1") && lines.includes("step 2"), lines.join("\n"));
    const receipt = await renter.wait(submitted.taskId);
    assert.equal(receipt.state, "succeeded", `${receipt.state}: ${show(receipt)}\n${lines.join("\n")}`);
    assert.equal(receipt.completion?.verified, true);
    const out = path.join(dir, "out");
    const downloaded = await renter.downloadOutput(submitted.taskId, { dir: out });
    assert.equal(downloaded.verified, true);
    assert.deepEqual(
      downloaded.files.map((file) => file.path),
      ["ckpt/model.bin", "metrics.txt"],
    );
    assert.equal(await digestOutputDir(out), receipt.completion!.outputDigest, "the settled digest is the output folder's");
    const settled = await renter.settle(submitted.taskId).catch(() => renter.wait(submitted.taskId));
    assert.ok(["succeeded"].includes(settled.state));
    assert.deepEqual(await containersOf(workspaces), [], "the container was removed");
  });

  it("a preempted container gets its notice (SIGTERM) and the on-demand task runs after it", async () => {
    const low = await client(6);
    const high = await client(7);
    const interruptible = await low.submitTask({
      gpuType: "A100",
      gpuCount: 1,
      duration: 120,
      interruptible: true,
      bidPerGpuHour: "0.2",
      attestedOnly: false,
      image: BUSYBOX_IMAGE,
      command: 'trap "echo notice received; exit 0" TERM; echo running; while true; do sleep 0.2; done',
    });
    await waitFor("the interruptible container to run", async () => (await low.status(interruptible.taskId)).state === "running", { timeoutMs: 60_000 });
    const onDemand = await high.submitTask({
      gpuType: "A100",
      gpuCount: 1,
      duration: 30,
      maxPricePerGpuHour: "1",
      attestedOnly: false,
      image: BUSYBOX_IMAGE,
      command: "echo on-demand",
    });
    const preempted = await low.wait(interruptible.taskId);
    assert.equal(preempted.state, "preempted", `${preempted.state}: ${show(preempted)}`);
    const lines: string[] = [];
    for await (const line of low.logs(interruptible.taskId, { follow: false })) lines.push(line.text);
    assert.ok(lines.includes("notice received"), lines.join("\n"));
    const done = await high.wait(onDemand.taskId);
    assert.equal(done.state, "succeeded", `${done.state}: ${show(done)}`);
  });

  it("after SIGKILL of the provider node its container runs on; the restarted node stops it and terminates the lease, paid once", async () => {
    const renter = await client(8);
    const submitted = await renter.submitTask({
      gpuType: "A100",
      gpuCount: 1,
      duration: 120,
      maxPricePerGpuHour: "1",
      attestedOnly: false,
      image: BUSYBOX_IMAGE,
      command: "echo long; sleep 300",
    });
    await waitFor("the container to run", async () => (await renter.status(submitted.taskId)).state === "running", { timeoutMs: 60_000 });
    assert.equal(await node!.kill("SIGKILL"), null);
    const orphans = await containersOf(workspaces);
    assert.deepEqual(
      orphans.map((container) => container.state),
      ["Up"],
      "the container outlived its node",
    );

    node = await ProviderProcess.start(configFile, { timeoutMs: 90_000 });
    await waitFor("the orphaned container to be gone", async () => (await containersOf(workspaces)).length === 0, { timeoutMs: 30_000 });
    const status = await waitFor(
      "the task's status from the restarted node",
      async () => {
        const current = await renter.status(submitted.taskId).catch(() => undefined);
        return current?.state === "failed" ? current : undefined;
      },
      { timeoutMs: 60_000 },
    );
    assert.equal(status.error?.name, "TaskLostError");
    const events = await waitFor(
      "the lease to end on-chain",
      async () => {
        const all = await leaseEvents(devnet, submitted.leaseId);
        return all.some((event) => event.eventName === "LeaseEnded") ? all : undefined;
      },
      { timeoutMs: 60_000 },
    );
    const ended = events.find((event) => event.eventName === "LeaseEnded")!.args as { reason?: number; providerTotal: bigint; credit: bigint };
    assert.ok(ended.credit > 0n, "terminated by the provider: the renter got the early-end penalty");
    await waitFor(
      "the lease to be claimed",
      async () => {
        const claims = (await leaseEvents(devnet, submitted.leaseId))
          .filter((event) => event.eventName === "LeaseClaimed")
          .map((event) => (event.args as { amount: bigint }).amount);
        return claims.reduce((a, b) => a + b, 0n) === ended.providerTotal;
      },
      { timeoutMs: 30_000 },
    );
    // Nothing paid twice: one end, and the claims add up to what accrued, never more.
    const final = await leaseEvents(devnet, submitted.leaseId);
    assert.equal(final.filter((event) => event.eventName === "LeaseEnded").length, 1);
    assert.equal(
      final.filter((event) => event.eventName === "LeaseClaimed").reduce((sum, event) => sum + (event.args as { amount: bigint }).amount, 0n),
      ended.providerTotal,
    );
  });
});

describe("container tasks: whose fault when the engine fails", function () {
  this.timeout(240_000);
  let devnet: Devnet;
  let dir: string;
  let provider: TestProvider | undefined;
  let renter: SuanliClient | undefined;

  before(async () => {
    await requireContainerSupport();
    dir = await mkdtemp(path.join(tmpdir(), "suanli-container-fault-"));
    devnet = await startDevnet({ wallClockBlocks: true });
  });
  after(async () => {
    await renter?.close();
    await provider?.close();
    await devnet?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  const containerRuntime = (extra: Record<string, unknown> = {}) => ({
    provider: {
      inventory: { source: "declared", declared: [{ model: "A100-80GB", count: 1, region: "eu-west" }] },
      runtime: { kind: "container", containerEngine: "podman", containerGpus: "none", network: false, ...extra },
    },
  });

  it("a node whose engine cannot start the self-test container refuses to start and offers nothing, saying why", async () => {
    // An rlimit above what the host allows (an operator flag): the OCI runtime fails before any exec.
    await assert.rejects(startTestProvider(devnet, 2, containerRuntime({ containerArgs: ["--ulimit", "nproc=4000000000:4000000000"] })), (error: unknown) => {
      assert.equal((error as Error).name, "RuntimeUnavailableError");
      assert.match((error as Error).message, /rlimit/);
      return true;
    });
  });

  it("the OCI runtime failing at a task's start is the provider's fault: the lease is terminated, the renter refunded plus the penalty, nothing billed as a completion", async () => {
    // The runtime works at the node's start (self-test) and breaks afterwards (like crun's setrlimit
    // error after an upgrade): a wrapper around runc that fails `create` once the marker exists.
    const marker = path.join(dir, "broken");
    const wrapper = path.join(dir, "oci-runtime");
    await writeFile(
      wrapper,
      `#!/bin/sh\nfor arg in "$@"; do if [ "$arg" = create ] && [ -e ${JSON.stringify(marker)} ]; then echo "setrlimit RLIMIT_NOFILE: Operation not permitted" >&2; exit 1; fi; done\nexec runc "$@"\n`,
      { mode: 0o755 },
    );
    provider = await startTestProvider(devnet, 1, containerRuntime({ ociRuntime: wrapper }));
    await writeFile(marker, "");
    await fund(devnet, await devnet.wallet(5), 100_000_000n);
    renter = await connectRenter(devnet, { name: "the renter", account: devnetAccount(5), bootstrap: [provider.peer.addr], stateFile: path.join(dir, "renter.json") });
    const before = await renter.owed().catch(() => 0n);
    const submitted = await renter.submitTask({
      gpuType: "A100",
      gpuCount: 1,
      duration: 60,
      maxPricePerGpuHour: "1",
      attestedOnly: false,
      image: BUSYBOX_IMAGE,
      command: "echo never",
    });
    const status = await waitFor(
      "the task to fail",
      async () => {
        const current = await renter!.status(submitted.taskId).catch(() => undefined);
        return current?.state === "failed" ? current : undefined;
      },
      { timeoutMs: 60_000 },
    );
    assert.equal(status.error?.name, "ContainerEngineError", show(status));
    assert.match(status.error?.message ?? "", /setrlimit RLIMIT_NOFILE/);
    const receipt = await renter.wait(submitted.taskId);
    const [lease] = receipt.leases;
    assert.notEqual(lease!.endReason, "Completed", show(receipt));
    assert.equal(receipt.completion, null, "no completion report: the renter's command never ran");
    assert.equal(receipt.totalCost, 0n, "the renter paid nothing");
    assert.ok(receipt.totalCredit > 0n, `the provider paid the penalty: ${show(receipt)}`);
    assert.equal(await renter.owed().catch(() => 0n), before);
  });
});

import assert from "node:assert/strict";
import { devnetPrivateKey } from "../../common/devnet.js";
import { startTestDaemon } from "../support/daemons.js";
import { registerProvider, startDevnet, type Devnet } from "../support/devnet.js";
import { lastJson, runCli } from "../support/cli.js";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

const ZERO32 = `0x${"0".repeat(64)}` as const;

describe("suanli renter commands (CLI)", function () {
  this.timeout(120_000);
  let devnet: Devnet;
  let provider: Awaited<ReturnType<typeof startTestDaemon>>;
  let base: string[];
  let stateDir: string;

  before(async () => {
    devnet = await startDevnet();
    provider = await startTestDaemon(devnet, { chain: { privateKey: devnetPrivateKey(1) } }, { publishesOffers: true });
    const [machineId] = await registerProvider(devnet, await devnet.wallet(1), {
      peerId: provider.p2p.host.peerId.toString(),
      stake: 1_000_000_000n,
      machines: [{ model: "H100-80GB-SXM", units: 8, vramMiB: 81_559, region: "us-east" }],
    });
    await provider.offers.publisher!.set({
      machine: { machineId: machineId!, model: "H100-80GB-SXM", units: 8, vramMiB: 81_559, interconnect: "nvlink", region: "us-east", cluster: ZERO32 },
      terms: { pricePerUnitSecond: 900n, minDuration: 60, maxDuration: 86_400, collateralBps: 2_000, startWindow: 120 },
      capacity: { freeUnits: 8 },
      // 8 CPU cores, 64 GiB memory and 200 GiB disk per GPU.
      resources: { cpuCoresPerUnit: 8, memoryMiBPerUnit: 65_536, diskMiBPerUnit: 204_800 },
    });
    stateDir = await mkdtemp(path.join(tmpdir(), "suanli-cli-state-"));
    base = ["--rpc-url", devnet.rpcUrl, "--deployments", devnet.deploymentsDir, "--bootstrap", provider.p2p.host.getMultiaddrs()[0]!.toString(), "--state-dir", stateDir];
  });
  after(async () => {
    await provider?.close();
    await devnet?.close();
    await rm(stateDir, { recursive: true, force: true });
  });

  it("lists offers as JSON with model and price", async () => {
    const result = await runCli(["offers", "--gpu", "H100", "--json", ...base]);
    assert.equal(result.code, 0, result.stderr);
    const { offers } = lastJson<{ offers: { model: string; pricePerGpuHour: string; freeUnits: number; resources: unknown }[] }>(result.stdout);
    assert.equal(offers.length, 1);
    assert.equal(offers[0]!.model, "H100-80GB-SXM");
    assert.equal(offers[0]!.pricePerGpuHour, "3.24");
    assert.deepEqual(offers[0]!.resources, { cpuCoresPerUnit: 8, memoryMiBPerUnit: 65_536, diskMiBPerUnit: 204_800 });
  });

  it("offers show what each GPU comes with; submit --cpus/--memory/--disk filter and explain a miss, and are checked (issue 33 item 4)", async () => {
    const table = await runCli(["offers", "--gpu", "H100", ...base]);
    assert.equal(table.code, 0, table.stderr);
    assert.match(table.stdout, /PER GPU/);
    assert.match(table.stdout, /8c 64G 200G/);
    // 900 base units per second is 3.24 USD/h exactly: no note about rounding.
    assert.match(table.stdout, / 3\.24 /);
    assert.doesNotMatch(table.stdout, /whole base units/);

    const common = [
      "--devnet-account",
      "5",
      "--gpu",
      "H100",
      "--duration",
      "600",
      "--max-price",
      "5",
      "--allow-unattested",
      "--bundle",
      "http://127.0.0.1:9/x.tar.gz",
      "--sha256",
      "ab".repeat(32),
      ...base,
    ];
    const tooMuch = await runCli(["submit", "--count", "2", "--cpus", "32", "--memory", "100", ...common, "--", "true"]);
    assert.equal(tooMuch.code, 3, tooMuch.stderr);
    assert.match(tooMuch.stderr, /host resources of at least 16 CPU cores, 50 GiB memory per GPU: removed 1, 0 left/);
    assert.match(tooMuch.stderr, /comes with at most 8 CPU cores, 64 GiB memory per GPU; you asked for 32 CPU cores, 100 GiB memory for 2 GPUs/);

    const badNumbers = await runCli(["submit", "--count", "1", "--cpus", "1.5", "--disk", "0", ...common, "--", "true"]);
    assert.equal(badNumbers.code, 2, badNumbers.stderr);
    assert.match(badNumbers.stderr, /cpuCores: expected a whole number of CPU cores/);
    assert.match(badNumbers.stderr, /diskGiB: must be above 0 GiB/);
  });

  it("exits 2 naming the field for an unknown GPU type, 3 with the explanation when nothing fits", async () => {
    const common = ["--devnet-account", "5", "--count", "1", "--duration", "600", "--bundle", "http://127.0.0.1:9/x.tar.gz", "--sha256", "ab".repeat(32), ...base];
    const unknown = await runCli(["submit", "--gpu", "B9000", "--max-price", "5", ...common, "--", "true"]);
    assert.equal(unknown.code, 2, unknown.stderr);
    assert.match(unknown.stderr, /gpuType/);

    const tooCheap = await runCli(["submit", "--gpu", "H100", "--max-price", "1", "--allow-unattested", ...common, "--", "true"]);
    assert.equal(tooCheap.code, 3, tooCheap.stderr);
    assert.match(tooCheap.stderr, /above your cap/);
  });

  it("hints name the CLI's flags, never the SDK's options (issue #22 item 2)", async () => {
    const common = ["--devnet-account", "5", "--duration", "600", "--max-price", "5", "--bundle", "http://127.0.0.1:9/x.tar.gz", "--sha256", "ab".repeat(32), ...base];
    const unattested = await runCli(["submit", "--gpu", "H100", "--count", "1", ...common, "--", "true"]);
    assert.equal(unattested.code, 3, unattested.stderr);
    assert.match(unattested.stderr, /add --allow-unattested to accept unattested machines/);
    assert.doesNotMatch(unattested.stderr, /attestedOnly/);

    // No devnet machine's GPUs were verified by confidential-computing evidence.
    const notCc = await runCli(["submit", "--gpu", "H100", "--count", "1", "--allow-unattested", "--gpu-identity-verified", ...common, "--", "true"]);
    assert.equal(notCc.code, 3, notCc.stderr);
    assert.match(notCc.stderr, /GPU identities verified by NVIDIA-signed evidence: removed 1, 0 left/);
    assert.match(notCc.stderr, /leave out --gpu-identity-verified to accept GPUs attested without it/);
    assert.doesNotMatch(notCc.stderr, /gpuIdentityVerified: false/);

    const tooMany = await runCli(["submit", "--gpu", "H100", "--count", "9", "--allow-unattested", ...common, "--", "true"]);
    assert.equal(tooMany.code, 3, tooMany.stderr);
    assert.match(tooMany.stderr, /add --colocation cluster/);
    assert.doesNotMatch(tooMany.stderr, /colocation: "cluster"/);

    // The flag the hint names exists and is checked.
    const bad = await runCli(["submit", "--gpu", "H100", "--count", "9", "--allow-unattested", "--colocation", "rack", ...common, "--", "true"]);
    assert.equal(bad.code, 2, bad.stderr);
    assert.match(bad.stderr, /colocation/);
    const cluster = await runCli(["submit", "--gpu", "H100", "--count", "9", "--allow-unattested", "--colocation", "cluster", ...common, "--", "true"]);
    assert.equal(cluster.code, 3, cluster.stderr);
    assert.match(cluster.stderr, /one machine or a cluster/);
  });

  it("submit --image refuses a transport and --image-url needs --sha256, before anything is reserved or paid (exit 2)", async () => {
    const common = ["--devnet-account", "5", "--gpu", "H100", "--count", "1", "--duration", "600", "--max-price", "5", "--allow-unattested", ...base];
    const transport = await runCli(["submit", "--image", "docker-archive:/etc/passwd", ...common, "--", "true"]);
    assert.equal(transport.code, 2, transport.stderr);
    assert.match(transport.stderr, /docker-archive: is a transport, not a registry reference/);
    const noDigest = await runCli(["submit", "--image-url", "https://example.com/training_container.tar", ...common, "--", "true"]);
    assert.equal(noDigest.code, 2, noDigest.stderr);
    assert.match(noDigest.stderr, /sha256: is required with imageUrl/);
    const help = await runCli(["submit", "--help"]);
    assert.match(help.stdout, /--image <ref>/);
    assert.match(help.stdout, /--image-url <url>/);
  });

  it("submit --help says one argument is a shell string and several an argv (issue #22 item 4)", async () => {
    const help = await runCli(["submit", "--help"]);
    assert.equal(help.code, 0, help.stderr);
    const text = help.stdout.replace(/\s+/g, " ");
    assert.match(text, /one argument is a shell string run by \/bin\/sh -c/);
    assert.match(text, /several are an argv, its program looked up on the task's PATH inside the provider's sandbox/);
  });
});

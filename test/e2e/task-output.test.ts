import assert from "node:assert/strict";
import { copyFile, mkdtemp, readFile, rm, stat, truncate, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { devnetAccount } from "../../common/devnet.js";
import { digestOutputDir } from "../../common/output-digest.js";
import { createClient, OutputDigestMismatchError, type SuanliClient } from "../../sdk/index.js";
import { startBundleServer, type BundleServer } from "../support/bundles.js";
import { fund, startDevnet, type Devnet } from "../support/devnet.js";
import { startTestProvider, type TestProvider } from "../support/provider.js";
import { waitFor } from "../support/wait.js";

describe("task outputs: the renter downloads what the task wrote and verifies it against the signed report", function () {
  this.timeout(120_000);
  let devnet: Devnet;
  let bundles: BundleServer;
  let provider: TestProvider;
  let client: SuanliClient;
  let other: SuanliClient;
  let work: string;
  const renter = devnetAccount(5);

  before(async () => {
    work = await mkdtemp(path.join(tmpdir(), "suanli-output-"));
    devnet = await startDevnet({ wallClockBlocks: true });
    bundles = await startBundleServer();
    provider = await startTestProvider(devnet, 1);
    await fund(devnet, await devnet.wallet(5), 100_000_000n);
    client = await createClient({
      rpcUrl: devnet.rpcUrl,
      account: renter,
      bootstrap: [provider.peer.addr],
      deployment: devnet.deploymentsDir,
      stateFile: path.join(work, "renter.json"),
    });
    await waitFor("the provider's offer in the SDK", async () => (await client.queryOffers()).some((o) => o.freeUnits === 2), { timeoutMs: 20_000 });
  });
  after(async () => {
    await other?.close();
    await client?.close();
    await provider?.close();
    await bundles?.close();
    await devnet?.close();
    if (work) await rm(work, { recursive: true, force: true });
  });

  let taskId: string;
  let leaseId: bigint;
  const keptDir = () => path.join(provider.daemon.config.dataDir, "outputs", `lease-${leaseId}`, "files");

  it("downloads every file of output/ and verifies the digest against the completion report and the chain", async () => {
    const bundle = await bundles.bundle({
      "run.sh": [
        'mkdir -p "$SUANLI_OUTPUT_DIR/ckpt/epoch-1"',
        'echo "loss 0.12" > "$SUANLI_OUTPUT_DIR/metrics.txt"',
        'head -c 700000 /dev/urandom > "$SUANLI_OUTPUT_DIR/ckpt/epoch-1/model.bin"',
        ': > "$SUANLI_OUTPUT_DIR/empty"',
        "echo done",
      ].join("\n"),
    });
    const submitted = await client.submitTask({
      gpuType: "A100",
      gpuCount: 1,
      duration: 60,
      maxPricePerGpuHour: "1",
      attestedOnly: false,
      bundleUrl: bundle.url,
      sha256: bundle.sha256,
      command: "sh run.sh",
    });
    taskId = submitted.taskId;
    leaseId = submitted.leaseId;
    const receipt = await client.wait(taskId);
    assert.equal(receipt.state, "succeeded");
    assert.equal(receipt.completion?.verified, true);

    const dir = path.join(work, "out");
    const result = await client.downloadOutput(taskId, { dir });
    assert.equal(result.verified, true);
    assert.equal(result.snapshot, false);
    assert.equal(result.digest, receipt.completion!.outputDigest, "the recomputed digest is the one reported on-chain");
    assert.deepEqual(
      result.files.map((file) => file.path),
      ["ckpt/epoch-1/model.bin", "empty", "metrics.txt"],
    );
    assert.equal(result.bytes, 700_000 + 0 + "loss 0.12\n".length);
    assert.equal(result.transferred, result.bytes);
    assert.equal(await readFile(path.join(dir, "metrics.txt"), "utf8"), "loss 0.12\n");
    assert.deepEqual(await readFile(path.join(dir, "ckpt/epoch-1/model.bin")), await readFile(path.join(keptDir(), "ckpt/epoch-1/model.bin")));
    assert.equal(await digestOutputDir(dir), receipt.completion!.outputDigest, "the folder on disk digests the same by the provider's own rule");
  });

  it("resumes a download that stopped: only the missing bytes travel", async () => {
    const dir = path.join(work, "resumed");
    await client.downloadOutput(taskId, { dir });
    await truncate(path.join(dir, "ckpt/epoch-1/model.bin"), 200_000);
    await rm(path.join(dir, "metrics.txt"));
    const resumed = await client.downloadOutput(taskId, { dir });
    assert.equal(resumed.verified, true);
    assert.equal(resumed.transferred, 500_000 + "loss 0.12\n".length, "the first 200000 bytes of model.bin were not sent again");
    assert.equal((await stat(path.join(dir, "ckpt/epoch-1/model.bin"))).size, 700_000);
  });

  it("refuses a tampered output: the error names the signed digest and the recomputed one", async () => {
    const receipt = await client.wait(taskId);
    const original = path.join(work, "metrics.orig");
    await copyFile(path.join(keptDir(), "metrics.txt"), original);
    await writeFile(path.join(keptDir(), "metrics.txt"), "loss 0.01\n"); // same size, different bytes
    try {
      const dir = path.join(work, "tampered");
      await assert.rejects(client.downloadOutput(taskId, { dir }), (error: unknown) => {
        assert.ok(error instanceof OutputDigestMismatchError);
        assert.equal(error.expected, receipt.completion!.outputDigest);
        assert.notEqual(error.actual, error.expected);
        assert.match(error.message, new RegExp(error.expected));
        assert.match(error.message, new RegExp(error.actual));
        return true;
      });
    } finally {
      await copyFile(original, path.join(keptDir(), "metrics.txt"));
    }
  });

  it("refuses another wallet", async () => {
    // The other wallet knows the task (a copy of the renter's task file) but did not open the lease.
    await copyFile(path.join(work, "renter.json"), path.join(work, "other.json"));
    other = await createClient({
      rpcUrl: devnet.rpcUrl,
      account: devnetAccount(6),
      bootstrap: [provider.peer.addr],
      deployment: devnet.deploymentsDir,
      stateFile: path.join(work, "other.json"),
    });
    await assert.rejects(other.downloadOutput(taskId, { dir: path.join(work, "other") }), { name: "RenterAuthError" });
  });

  it("refuses an output over the caller's maxBytes before writing anything", async () => {
    const dir = path.join(work, "capped");
    await assert.rejects(client.downloadOutput(taskId, { dir, maxBytes: 1000 }), { name: "OutputDownloadError" });
    await assert.rejects(stat(dir), { code: "ENOENT" });
  });
});

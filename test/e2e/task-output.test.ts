import assert from "node:assert/strict";
import { copyFile, readdir, readFile, stat, writeFile } from "node:fs/promises";
import path from "node:path";
import { devnetAccount } from "../../common/devnet.js";
import { digestOutputDir } from "../../common/output-digest.js";
import { OUTPUT_PROTOCOL } from "../../common/p2p/protocols.js";
import { handleStreamProtocol, type StreamSession } from "../../common/p2p/streams.js";
import { outputRequestSchema } from "../../common/protocols/lease.js";
import { OUTPUT_FRAME_BYTES, TASK_IO_CONTROL_MAX_BYTES, type OutputParams } from "../../common/protocols/task-io.js";
import { createClient, OutputDigestMismatchError, type SuanliClient } from "../../sdk/index.js";
import type { BundleServer } from "../support/bundles.js";
import type { Devnet } from "../support/devnet.js";
import type { TestProvider } from "../support/provider.js";
import { startRenterMarket, type RenterMarket } from "../support/renter-market.js";
import { waitFor } from "../support/wait.js";

describe("task outputs: the renter downloads what the task wrote and verifies it against the signed report", function () {
  this.timeout(120_000);
  let devnet: Devnet;
  let bundles: BundleServer;
  let provider: TestProvider;
  let client: SuanliClient;
  let other: SuanliClient;
  let work: string;
  let market: RenterMarket;

  before(async () => {
    market = await startRenterMarket({ name: "output" });
    ({ work, devnet, bundles, provider, client } = market);
  });
  after(async () => {
    await other?.close();
    await market?.close();
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
    assert.equal(result.verifiedAgainst, "chain");
    assert.equal(result.snapshot, false);
    assert.equal(result.digest, receipt.completion!.outputDigest, "the recomputed digest is the one reported on-chain");
    assert.deepEqual((await readdir(dir)).sort(), ["ckpt", "empty", "metrics.txt"], "the staging folder is gone once the files are in place");
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
    // The first attempt stops (aborted) once 200,000 bytes are on disk.
    const stop = new AbortController();
    await assert.rejects(
      client.downloadOutput(taskId, { dir, signal: stop.signal, onProgress: ({ bytes }) => void (bytes >= 200_000 && stop.abort(new Error("stopped"))) }),
      (error: Error) => error.name === "OutputDownloadError" || error.message === "stopped",
    );
    const staging = path.join(dir, `.suanli-partial-${leaseId}`, "files");
    const staged = (await readdir(staging, { recursive: true, withFileTypes: true })).filter((entry) => entry.isFile());
    let stagedBytes = 0;
    for (const entry of staged) stagedBytes += (await stat(path.join(entry.parentPath, entry.name))).size;
    assert.ok(stagedBytes >= 200_000, `${stagedBytes} bytes staged`);
    assert.deepEqual(await readdir(dir), [`.suanli-partial-${leaseId}`], "nothing unverified is in the folder itself");

    const resumed = await client.downloadOutput(taskId, { dir });
    assert.equal(resumed.verified, true);
    assert.equal(resumed.transferred, 700_000 + "loss 0.12\n".length - stagedBytes, "the staged bytes were not sent again");
    assert.equal((await stat(path.join(dir, "ckpt/epoch-1/model.bin"))).size, 700_000);
    await assert.rejects(stat(path.join(dir, `.suanli-partial-${leaseId}`)), { code: "ENOENT" });
  });

  it("refuses a tampered output: the error names the signed digest and the recomputed one", async () => {
    const receipt = await client.wait(taskId);
    const original = path.join(work, "metrics.orig");
    await copyFile(path.join(keptDir(), "metrics.txt"), original);
    await writeFile(path.join(keptDir(), "metrics.txt"), "loss 0.01\n"); // same size, different bytes
    const dir = path.join(work, "tampered");
    try {
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
    assert.deepEqual(await readdir(dir), [], "no file that failed verification is left in the folder (nor staged)");
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

  it("a renter who cancels a running task downloads what it wrote, verified against the provider's signed report (the close puts none on-chain)", async () => {
    const bundle = await bundles.bundle({
      "run.sh": ['mkdir -p "$SUANLI_OUTPUT_DIR/ckpt"', 'echo "step 1" > "$SUANLI_OUTPUT_DIR/ckpt/step.txt"', "echo written", "sleep 60"].join("\n"),
    });
    const submitted = await client.submitTask({
      gpuType: "A100",
      gpuCount: 1,
      duration: 120,
      maxPricePerGpuHour: "1",
      attestedOnly: false,
      bundleUrl: bundle.url,
      sha256: bundle.sha256,
      command: "sh run.sh",
    });
    await waitFor(
      "the task's output written",
      async () => {
        for await (const line of client.logs(submitted.taskId, { follow: false })) if (line.text === "written") return true;
        return false;
      },
      { timeoutMs: 30_000 },
    );
    const receipt = await client.cancel(submitted.taskId);
    assert.equal(receipt.leases[0]?.endReason, "RenterClosed");
    const dir = path.join(work, "cancelled");
    const result = await client.downloadOutput(submitted.taskId, { dir });
    assert.equal(result.snapshot, false);
    assert.equal(result.verified, true);
    assert.equal(result.verifiedAgainst, "signed-report");
    assert.deepEqual(
      result.files.map((file) => file.path),
      ["ckpt/step.txt"],
    );
    assert.equal(await readFile(path.join(dir, "ckpt/step.txt"), "utf8"), "step 1\n");
    const status = await client.status(submitted.taskId);
    assert.equal(status.state, "stopped");
  });

  describe("against a provider that lies about the output (its output protocol replaced)", () => {
    /** Replaces the provider's output handler with `handler` (a provider running other code). */
    async function serveOutput(handler: (params: OutputParams, session: StreamSession) => Promise<void>): Promise<void> {
      const host = provider.daemon.p2p.host;
      await host.unhandle(OUTPUT_PROTOCOL);
      await handleStreamProtocol(host, OUTPUT_PROTOCOL, {
        requestSchema: outputRequestSchema,
        maxFrameBytes: TASK_IO_CONTROL_MAX_BYTES,
        handler: (request, session) => handler(request.params, session),
      });
    }
    /** Sends each file's bytes in frames (as the protocol does), ignoring the renter's acknowledgements (small outputs). */
    async function sendAll(session: StreamSession, files: Buffer[]): Promise<void> {
      for (const bytes of files) for (let at = 0; at < bytes.length; at += OUTPUT_FRAME_BYTES) await session.lp.write(bytes.subarray(at, at + OUTPUT_FRAME_BYTES));
      await session.stream.close();
    }

    it("calls the finished task's output a snapshot and alters a byte: the SDK verifies anyway (the task is over) and keeps nothing", async () => {
      const receipt = await client.wait(taskId);
      const files = ["ckpt/epoch-1/model.bin", "empty", "metrics.txt"];
      const contents = await Promise.all(files.map((rel) => readFile(path.join(keptDir(), rel))));
      const altered = contents.map((bytes) => Buffer.from(bytes));
      altered[2]![0]! ^= 0x01; // metrics.txt
      await serveOutput(async (params, session) => {
        await session.accept({
          leaseId: leaseId.toString(),
          kind: "snapshot",
          files: files.map((rel, i) => ({ path: rel, size: contents[i]!.length })),
          totalBytes: contents.reduce((sum, bytes) => sum + bytes.length, 0),
          expiresAt: null,
          policy: { retentionSeconds: 3600, maxBytes: 10 ** 9 },
        });
        if (params.op === "list") return session.stream.close();
        await sendAll(session, altered);
      });
      const dir = path.join(work, "mislabelled");
      await assert.rejects(client.downloadOutput(taskId, { dir }), (error: unknown) => {
        assert.ok(error instanceof OutputDigestMismatchError, String(error));
        assert.equal(error.expected, receipt.completion!.outputDigest);
        return true;
      });
      assert.deepEqual(await readdir(dir), [], "the altered files are not left in the folder");
    });

    it("lists sizes that do not add up to its totalBytes (a 5 MB file as 10 bytes): refused before a byte is written, whatever it would send", async () => {
      const big = Buffer.alloc(5_000_000, 7);
      await serveOutput(async (params, session) => {
        await session.accept({
          leaseId: leaseId.toString(),
          kind: "final",
          files: [{ path: "big.bin", size: big.length }],
          totalBytes: 10,
          expiresAt: null,
          policy: { retentionSeconds: 3600, maxBytes: 10 ** 9 },
        });
        if (params.op === "list") return session.stream.close();
        await sendAll(session, [big]);
      });
      const dir = path.join(work, "lying-size");
      await assert.rejects(client.downloadOutput(taskId, { dir, maxBytes: 1_000_000 }), { name: "OutputDownloadError", message: /files hold 5000000 bytes, it says 10/ });
      await assert.rejects(stat(dir), { code: "ENOENT" }, "nothing was written (before the fix: 5 MB past maxBytes)");
    });

    it("sends more bytes than the file it listed: the download stops at the listed size, within maxBytes, and keeps nothing in the folder", async () => {
      await serveOutput(async (params, session) => {
        await session.accept({
          leaseId: leaseId.toString(),
          kind: "final",
          files: [{ path: "a.bin", size: 300_000 }],
          totalBytes: 300_000,
          expiresAt: null,
          policy: { retentionSeconds: 3600, maxBytes: 10 ** 9 },
        });
        if (params.op === "list") return session.stream.close();
        await sendAll(session, [Buffer.alloc(2_000_000, 1)]);
      });
      const dir = path.join(work, "overflow");
      await assert.rejects(client.downloadOutput(taskId, { dir, maxBytes: 400_000 }), { name: "OutputDownloadError", message: /more bytes than a\.bin holds/ });
      const written = (await readdir(dir, { recursive: true, withFileTypes: true })).filter((entry) => entry.isFile() && entry.name === "a.bin");
      for (const entry of written) assert.ok((await stat(path.join(entry.parentPath, entry.name))).size <= 300_000);
      await assert.rejects(stat(path.join(dir, "a.bin")), { code: "ENOENT" }, "an unverified file is never in the folder itself");
    });
  });
});

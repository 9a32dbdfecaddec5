import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { digestOutputDir } from "../../common/output-digest.js";
import type { SuanliClient, TaskLogLine } from "../../sdk/index.js";
import { requireContainerSupport } from "../support/container-images.js";
import { buildMarkedImage, removeImages, startArchiveServer, startRegistry, type ArchiveServer, type TestRegistry } from "../support/registry.js";
import { startRenterMarket, type RenterMarket } from "../support/renter-market.js";

// Through the SDK against a devnet and a provider node whose runtime is "container": real Podman
// (runc), a real docker-registry on 127.0.0.1, an image archive served over HTTP on 127.0.0.1.
describe("container images end to end: tasks by registry reference and by archive URL through the SDK", function () {
  this.timeout(300_000);
  let market: RenterMarket;
  let registry: TestRegistry;
  let archives: ArchiveServer;
  let client: SuanliClient;
  let work: string;
  let reference: string;
  let firstDigest = "";
  let archive: { url: string; sha256: string };
  let engineLog: string;
  let savedPath: string | undefined;
  const suffix = randomBytes(4).toString("hex");
  const image = `localhost/suanli-e2e/trainer-${suffix}:1`;
  const made: string[] = [image];

  before(async function () {
    this.timeout(300_000);
    await requireContainerSupport();
    work = await mkdtemp(path.join(tmpdir(), "suanli-container-e2e-"));
    engineLog = path.join(work, "engine.log");
    // The node finds `podman` on PATH: first a wrapper that records what it was asked, so a pull
    // (or its absence) is observed, not assumed.
    const real = (await import("node:child_process")).execFileSync("sh", ["-c", "command -v podman"], { encoding: "utf8" }).trim();
    await mkdir(path.join(work, "bin"));
    // While the file slow-pull exists, a pull takes 5 s longer (a big image, a slow registry).
    const slow = path.join(work, "slow-pull");
    await writeFile(path.join(work, "bin", "podman"), `#!/bin/sh\necho "$*" >> '${engineLog}'\nif [ "$1" = pull ] && [ -e '${slow}' ]; then sleep 5; fi\nexec '${real}' "$@"\n`);
    await chmod(path.join(work, "bin", "podman"), 0o755);
    savedPath = process.env.PATH;
    process.env.PATH = `${path.join(work, "bin")}:${process.env.PATH}`;
    registry = await startRegistry();
    archives = await startArchiveServer();
    await buildMarkedImage(image, `trainer-${suffix}`);
    reference = (await registry.push(image, `team/trainer-${suffix}:v1`)).reference;
    made.push(reference);
    const saved = await archives.save(image, "docker-archive", { gzip: true });
    archive = { url: saved.url, sha256: saved.sha256 };
    made.push(`localhost/suanli/archive:${saved.sha256}`);
    await removeImages(reference);
    market = await startRenterMarket({
      name: "container-images",
      provider: {
        provider: {
          // No GPU on this machine: the declared A100s get no devices (containerGpus "none").
          runtime: { kind: "container", containerEngine: "podman", containerGpus: "none", network: false, insecureRegistries: [registry.host] },
          grace: { taskStopMs: 2_000 },
        },
      },
      offerTimeoutMs: 30_000,
    });
    client = market.client;
  });
  after(async () => {
    await market?.close();
    await archives?.close();
    await registry?.close();
    await removeImages(...made);
    if (savedPath !== undefined) process.env.PATH = savedPath;
    if (work) await rm(work, { recursive: true, force: true });
  });

  const command =
    'echo "training on $(cat /marker)"; mkdir -p "$SUANLI_OUTPUT_DIR" && cat /marker > "$SUANLI_OUTPUT_DIR/model.txt" && echo "loss 0.1" > "$SUANLI_OUTPUT_DIR/metrics.txt"';
  const submit = (work: { image: string } | { imageUrl: string; sha256: string }) =>
    client.submitTask({ gpuType: "A100", gpuCount: 1, duration: 120, maxPricePerGpuHour: "1", attestedOnly: false, command, ...work });
  const allLogs = async (taskId: string) => {
    const lines: TaskLogLine[] = [];
    for await (const line of client.logs(taskId, { follow: true, waitMs: 2_000 })) lines.push(line);
    return lines;
  };

  async function runAndCheck(work: Parameters<typeof submit>[0]) {
    const submitted = await submit(work);
    const lines = await allLogs(submitted.taskId);
    const receipt = await client.wait(submitted.taskId);
    assert.equal(receipt.state, "succeeded", lines.map((line) => line.text).join("\n"));
    assert.equal(receipt.completion?.verified, true);
    assert.ok(
      lines.some((line) => line.stream === "stdout" && line.text === `training on trainer-${suffix}`),
      lines.map((line) => line.text).join("\n"),
    );
    const dir = path.join(tmpdir(), `suanli-out-${suffix}-${submitted.taskId}`);
    const output = await client.downloadOutput(submitted.taskId, { dir });
    try {
      assert.equal(output.verified, true);
      assert.equal(output.digest, receipt.completion!.outputDigest, "the downloaded output digests to the signed, on-chain digest");
      assert.equal(await digestOutputDir(dir), receipt.completion!.outputDigest);
      assert.equal(await readFile(path.join(dir, "model.txt"), "utf8"), `trainer-${suffix}\n`);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
    const status = await client.status(submitted.taskId);
    return { submitted, lines, receipt, status };
  }

  it("runs a task by registry reference: pulled before the lease started, logs streamed, outputs settled with their digest", async () => {
    const { lines, receipt, status } = await runAndCheck({ image: reference });
    const imageLine = lines.find((line) => line.stream === "system" && line.text.startsWith("Image "));
    assert.match(imageLine?.text ?? "", /: pulled in [0-9.]+ s before the lease started/);
    assert.equal(receipt.leases[0]!.endReason, "Completed");
    assert.equal(status.image?.ref, reference);
    assert.match(status.image?.digest ?? "", /^sha256:[0-9a-f]{64}$/);
    assert.equal(status.image?.cached, false, "the first task pulled the image: its status says not cached");
    firstDigest = status.image!.digest;
  });

  it("runs the same reference again from the cache: no pull, and the logs say cached", async () => {
    const pullsBefore = await pulls();
    const { lines, status } = await runAndCheck({ image: reference });
    const imageLine = lines.find((line) => line.stream === "system" && line.text.startsWith("Image "));
    assert.match(imageLine?.text ?? "", /: cached \(sha256:[0-9a-f]{12}, [0-9.]+ MB\), not pulled again$/);
    assert.equal(await pulls(), pullsBefore);
    assert.deepEqual(status.image, { ref: reference, digest: firstDigest, cached: true }, "the second task's status says cached, same image");
  });

  it("runs a task by archive URL (gzipped docker-archive, sha256 checked) with the same output digest", async () => {
    const { lines, receipt, status } = await runAndCheck({ imageUrl: archive.url, sha256: archive.sha256 });
    const imageLine = lines.find((line) => line.stream === "system" && line.text.startsWith("Image "));
    assert.match(imageLine?.text ?? "", /: loaded in [0-9.]+ s before the lease started/);
    assert.equal(status.image?.cached, false, "a freshly loaded archive is not cached");
    const url = new URL(archive.url);
    assert.equal(status.image?.ref, `${url.protocol}//${url.host}${url.pathname}`, "the archive's URL without its query");
    assert.equal(receipt.leases[0]!.endReason, "Completed");
  });

  it("the renter never pays for the pull: a 5 s pull happens before activation, the lease meters only the run", async () => {
    const slowImage = `localhost/suanli-e2e/slow-${suffix}:1`;
    made.push(slowImage);
    await buildMarkedImage(slowImage, `slow-${suffix}`);
    const slowRef = (await registry.push(slowImage, `team/slow-${suffix}:v1`)).reference;
    made.push(slowRef);
    await writeFile(path.join(work, "slow-pull"), "");
    try {
      const submitted = await submit({ image: slowRef });
      const lines = await allLogs(submitted.taskId);
      const receipt = await client.wait(submitted.taskId);
      assert.equal(receipt.state, "succeeded");
      const pulled = /: pulled in ([0-9.]+) s before the lease started/.exec(lines.find((line) => line.text.startsWith("Image "))?.text ?? "");
      assert.ok(pulled && Number(pulled[1]) >= 5, `the pull took at least 5 s: ${lines[0]?.text}`);
      assert.ok(receipt.leases[0]!.seconds <= 3, `metered ${receipt.leases[0]!.seconds} s for a 0 s task after a 5 s pull`);
    } finally {
      await rm(path.join(work, "slow-pull"), { force: true });
    }
  });

  it("a missing tag or a wrong archive digest: nothing runs, the lease ends at once and the renter gets all but a second or two back", async () => {
    for (const work of [{ image: reference.replace(/:v1$/, ":v9") }, { imageUrl: archive.url, sha256: "ab".repeat(32) }]) {
      const submitted = await submit(work);
      const receipt = await client.wait(submitted.taskId);
      const status = await client.status(submitted.taskId);
      assert.equal(receipt.state, "failed", JSON.stringify(work));
      assert.equal(status.error?.name, "image" in work ? "ImageNotFoundError" : "BundleDigestMismatchError");
      assert.match(status.error!.message, "image" in work ? /was not found in its registry/ : /^Image archive .* does not have the sha256 the task requires/);
      assert.equal(status.startedAt, null, "never started");
      assert.equal(receipt.leases[0]!.endReason, "Completed", "ended by the provider's report (renter input), not a fault");
      assert.ok(receipt.leases[0]!.seconds <= 3, `metered ${receipt.leases[0]!.seconds} s`);
      assert.ok(receipt.totalRefunded >= receipt.leases[0]!.deposit - receipt.leases[0]!.cost);
      assert.ok(receipt.leases[0]!.cost * 20n < receipt.leases[0]!.deposit, `paid ${receipt.leases[0]!.cost} of ${receipt.leases[0]!.deposit}`);
    }
  });

  async function pulls(): Promise<number> {
    return (await readFile(engineLog, "utf8").catch(() => "")).split("\n").filter((line) => line.startsWith("pull ")).length;
  }
});

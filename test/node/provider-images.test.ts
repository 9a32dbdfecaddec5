import assert from "node:assert/strict";
import { chmod, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { randomBytes } from "node:crypto";
import { parseInput } from "../../common/validation.js";
import { ContainerRuntime } from "../../node/provider/runtime/container-runtime.js";
import { ImageStore, isPinnedReference, parseLoadOutput } from "../../node/provider/runtime/images.js";
import { taskSpecSchema, type TaskSpec } from "../../node/provider/runtime/task.js";
import { requireContainerSupport } from "../support/container-images.js";
import { buildMarkedImage, imageId, removeImages, startArchiveServer, startRegistry, type ArchiveServer, type TestRegistry } from "../support/registry.js";

// Real Podman (with runc), a real docker-registry on 127.0.0.1 and archives saved by podman and
// served over HTTP on 127.0.0.1. The engine is reached through a wrapper that records every
// command it was given, so "not pulled again" is observed, not assumed.
describe("container images: registry pulls, archive loads, the cache and its pruning (real Podman and registry)", function () {
  this.timeout(180_000);
  let dir: string;
  let registry: TestRegistry;
  let archives: ArchiveServer;
  let engineLog: string;
  let engine: string;
  const suffix = randomBytes(4).toString("hex");
  const local = (name: string) => `localhost/suanli-images-test/${name}-${suffix}:1`;
  const made: string[] = [];
  const spec = (input: unknown) => parseInput(taskSpecSchema, input, "task") as TaskSpec;
  const policy = { allowFileUrls: false, allowNetworks: ["127.0.0.1"] };

  before(async function () {
    this.timeout(300_000);
    await requireContainerSupport();
    dir = await mkdtemp(path.join(tmpdir(), "suanli-images-"));
    engineLog = path.join(dir, "engine.log");
    engine = path.join(dir, "podman");
    await writeFile(engine, `#!/bin/sh\necho "$*" >> '${engineLog}'\nexec podman "$@"\n`);
    await chmod(engine, 0o755);
    registry = await startRegistry();
    archives = await startArchiveServer();
  });
  after(async () => {
    await archives?.close();
    await registry?.close();
    await removeImages(...made);
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  const engineCalls = async (verb: string) => (await readFile(engineLog, "utf8").catch(() => "")).split("\n").filter((line) => line.split(" ")[0] === verb);

  function store(overrides: Partial<ConstructorParameters<typeof ImageStore>[0]> = {}): ImageStore {
    return new ImageStore({
      engine: async () => ({ kind: "podman", path: engine }),
      dir: path.join(dir, `store-${randomBytes(3).toString("hex")}`),
      cacheBytes: 10 * 1024 ** 3,
      fetchPolicy: policy,
      archive: { maxBytes: 256 * 1024 ** 2, fetchTimeoutMs: 60_000 },
      insecureRegistries: [registry.host],
      ...overrides,
    });
  }

  it("reads which references are pinned and what `load` printed", () => {
    assert.equal(isPinnedReference("127.0.0.1:5000/ci/bb:1"), true);
    assert.equal(isPinnedReference(`ci/bb@sha256:${"a".repeat(64)}`), true);
    assert.equal(isPinnedReference("127.0.0.1:5000/ci/bb"), false, "the port is no tag");
    assert.equal(isPinnedReference("busybox:latest"), false);
    assert.deepEqual(parseLoadOutput("Getting image source signatures\nLoaded image: localhost/a:1\n"), ["localhost/a:1"]);
    assert.deepEqual(parseLoadOutput("Loaded image(s): localhost/a:1,localhost/b:2\n"), ["localhost/a:1", "localhost/b:2"]);
    assert.deepEqual(parseLoadOutput(`Loaded image ID: sha256:${"c".repeat(64)}\n`), [`sha256:${"c".repeat(64)}`]);
  });

  it("pulls a reference from the registry once, then reuses it by id without a pull; a digest reference too", async () => {
    const image = await buildMarkedImage(local("pull"), `pull-${suffix}`);
    made.push(image);
    const pushed = await registry.push(image, `ci/pull-${suffix}:v1`);
    made.push(pushed.reference);
    const images = store();
    const first = await images.acquire({ kind: "registry", reference: pushed.reference });
    assert.equal(first.cached, false);
    assert.equal(first.id, (await imageId(image))!.replace(/^sha256:/, ""), "the pulled image is the pushed one");
    assert.ok(first.sizeBytes > 1_000_000, `busybox is about 2 MB, got ${first.sizeBytes}`);
    assert.equal((await engineCalls("pull")).length, 1);
    first.release();

    const second = await images.acquire({ kind: "registry", reference: pushed.reference });
    assert.equal(second.cached, true);
    assert.equal(second.id, first.id);
    assert.equal((await engineCalls("pull")).length, 1, "no second pull");
    second.release();

    // The index survives a restart of the node (a new store on the same folder).
    const again = new ImageStore({ ...(images as unknown as { options: ConstructorParameters<typeof ImageStore>[0] }).options });
    const third = await again.acquire({ kind: "registry", reference: pushed.reference });
    assert.equal(third.cached, true);
    third.release();

    // By digest: the image pulled under the tag carries that digest, so it is found without a pull.
    const byDigest = `${registry.host}/ci/pull-${suffix}@${pushed.digest}`;
    const pinned = await images.acquire({ kind: "registry", reference: byDigest });
    assert.equal(pinned.cached, true);
    assert.equal(pinned.id, first.id);
    pinned.release();
    assert.equal((await engineCalls("pull")).length, 1);

    // A digest this machine does not have is pulled.
    const other = await buildMarkedImage(local("pull-other"), `pull-other-${suffix}`);
    made.push(other);
    const otherPushed = await registry.push(other, `ci/pull-other-${suffix}:v1`);
    made.push(otherPushed.reference);
    await removeImages(other);
    const otherByDigest = `${registry.host}/ci/pull-other-${suffix}@${otherPushed.digest}`;
    const pulled = await images.acquire({ kind: "registry", reference: otherByDigest });
    assert.equal(pulled.cached, false);
    pulled.release();
    assert.equal((await engineCalls("pull")).length, 2);
    made.push(otherByDigest);
  });

  it("says what was wrong: a missing tag, a missing repository, an unreachable registry", async () => {
    const image = await buildMarkedImage(local("missing"), `missing-${suffix}`);
    made.push(image);
    const pushed = await registry.push(image, `ci/missing-${suffix}:v1`);
    made.push(pushed.reference);
    const images = store();
    await assert.rejects(images.acquire({ kind: "registry", reference: `${registry.host}/ci/missing-${suffix}:v2` }), (error: Error) => {
      assert.equal(error.name, "ImageNotFoundError");
      assert.match(error.message, /was not found in its registry/);
      assert.match(error.message, /ci\/missing-.*:v2/);
      return true;
    });
    await assert.rejects(images.acquire({ kind: "registry", reference: `${registry.host}/ci/never-pushed-${suffix}:v1` }), { name: "ImageNotFoundError" });
    await assert.rejects(images.acquire({ kind: "registry", reference: `${registry.host}/ci/missing-${suffix}@sha256:${"0".repeat(64)}` }), { name: "ImageNotFoundError" });
    // A port nothing listens on.
    const closed = await startRegistry();
    const unreachable = closed.host;
    await closed.close();
    await assert.rejects(images.acquire({ kind: "registry", reference: `${unreachable}/ci/x:v1` }), (error: Error) => {
      assert.equal(error.name, "ImagePullError");
      assert.match(error.message, /the registry cannot be reached/);
      return true;
    });
    assert.deepEqual(await images.list(), [], "nothing half-recorded");
  });

  it("loads docker-archive, oci-archive and gzipped archives by URL, under the image's own tag-free name, reused by sha256", async () => {
    // The archive carries a name a registry image could have: loading must not leave it pointing at the archive.
    const shadowName = `${registry.host}/ci/shadow-${suffix}:v1`;
    const image = await buildMarkedImage(shadowName, `archive-${suffix}`);
    const id = (await imageId(image))!.replace(/^sha256:/, "");
    const dockerArchive = await archives.save(image, "docker-archive");
    const ociArchive = await archives.save(image, "oci-archive");
    const gzipped = await archives.save(image, "oci-archive", { gzip: true });
    const gzippedDocker = await archives.save(image, "docker-archive", { gzip: true });
    await removeImages(image);
    assert.equal(await imageId(shadowName), undefined);

    const images = store();
    for (const archive of [dockerArchive, ociArchive, gzipped, gzippedDocker]) {
      const loaded = await images.acquire({ kind: "archive", url: archive.url, sha256: archive.sha256 });
      assert.equal(loaded.cached, false, archive.url);
      assert.equal(loaded.id, id, `${archive.url} is the saved image`);
      assert.equal(await imageId(`localhost/suanli/archive:${archive.sha256}`), `${id}`);
      assert.equal(await imageId(shadowName), undefined, "the archive's own name was removed");
      made.push(`localhost/suanli/archive:${archive.sha256}`);
      loaded.release();
    }
    const loads = (await engineCalls("load")).length;
    const again = await images.acquire({ kind: "archive", url: gzipped.url, sha256: gzipped.sha256 });
    assert.equal(again.cached, true);
    assert.equal((await engineCalls("load")).length, loads, "not loaded again");
    again.release();
    assert.deepEqual(await readdir(path.join((images as unknown as { options: { dir: string } }).options.dir)), ["images.json"], "no download left behind");
  });

  it("refuses an archive with the wrong digest, one that is no image, and one the fetch policy forbids", async () => {
    const image = await buildMarkedImage(local("bad"), `bad-${suffix}`);
    made.push(image);
    const archive = await archives.save(image, "docker-archive");
    const images = store();
    await assert.rejects(images.acquire({ kind: "archive", url: archive.url, sha256: "ab".repeat(32) }), (error: Error) => {
      assert.equal(error.name, "BundleDigestMismatchError");
      assert.match(error.message, new RegExp(`^Image archive ${archive.url.replace(/[.]/g, "\\.")} does not have the sha256 the task requires \\(${"ab".repeat(32)}\\)`));
      assert.ok(!error.message.includes(archive.sha256), "the served archive's digest is not told");
      return true;
    });
    const junk = await archives.serveBytes("junk.tar", Buffer.from("this is not a container image\n".repeat(100)));
    await assert.rejects(images.acquire({ kind: "archive", url: junk.url, sha256: junk.sha256 }), (error: Error) => {
      assert.equal(error.name, "ImageArchiveError");
      assert.match(error.message, /is not a docker-archive or oci-archive image/);
      return true;
    });
    const gzipped = await archives.save(image, "docker-archive", { gzip: true });
    const small = store({ archive: { maxBytes: 256 * 1024 ** 2, fetchTimeoutMs: 60_000, maxUnpackedBytes: 100_000 } });
    await assert.rejects(small.acquire({ kind: "archive", url: gzipped.url, sha256: gzipped.sha256 }), (error: Error) => {
      assert.equal(error.name, "BundleTooLargeError");
      assert.match(error.message, /once decompressed exceeds the provider's limit of 100000 bytes/);
      return true;
    });
    const badGzip = await archives.serveBytes("bad.tar.gz", Buffer.concat([Buffer.from([0x1f, 0x8b, 0x08, 0x00]), Buffer.from("not really gzip".repeat(20))]));
    await assert.rejects(images.acquire({ kind: "archive", url: badGzip.url, sha256: badGzip.sha256 }), { name: "ImageArchiveError" });
    const strict = store({ fetchPolicy: { allowFileUrls: false, allowNetworks: [] } });
    await assert.rejects(strict.acquire({ kind: "archive", url: archive.url, sha256: archive.sha256 }), { name: "FetchRefusedError" });
    await assert.rejects(strict.acquire({ kind: "archive", url: `file://${archive.file}`, sha256: archive.sha256 }), { name: "FetchRefusedError" });
    assert.deepEqual(await images.list(), []);
  });

  it("an engine that fails on its own side (storage, disk full) is the provider's failure, not the renter's", async () => {
    const broken = path.join(dir, "podman-broken");
    await writeFile(
      broken,
      `#!/bin/sh\ncase "$1" in\n  pull|load) echo "Error: writing blob: adding layer with blob sha256:abc: no space left on device" >&2; exit 125 ;;\n  *) exec podman "$@" ;;\nesac\n`,
    );
    await chmod(broken, 0o755);
    const image = await buildMarkedImage(local("broken"), `broken-${suffix}`);
    made.push(image);
    const pushed = await registry.push(image, `ci/broken-${suffix}:v1`);
    made.push(pushed.reference);
    const archive = await archives.save(image, "oci-archive");
    const images = store({ engine: async () => ({ kind: "podman", path: broken }) });
    for (const source of [{ kind: "registry", reference: pushed.reference } as const, { kind: "archive", url: archive.url, sha256: archive.sha256 } as const]) {
      await assert.rejects(images.acquire(source), (error: Error) => {
        assert.equal(error.name, "RuntimeUnavailableError", `${source.kind}: ${error.message}`);
        assert.match(error.message, /no space left on device/);
        return true;
      });
    }
    assert.deepEqual(await images.list(), []);
  });

  it("prunes least recently used images over imageCacheBytes, never one a task holds", async () => {
    const a = await buildMarkedImage(local("prune-a"), `prune-a-${suffix}`, 3_000_000);
    const b = await buildMarkedImage(local("prune-b"), `prune-b-${suffix}`, 3_000_000);
    made.push(a, b);
    const pa = await registry.push(a, `ci/prune-a-${suffix}:v1`);
    const pb = await registry.push(b, `ci/prune-b-${suffix}:v1`);
    made.push(pa.reference, pb.reference);
    await removeImages(pa.reference, pb.reference);
    const sizeA = 5_200_000; // busybox (about 2.1 MB) + 3 MB
    const images = store({ cacheBytes: Math.round(sizeA * 1.5) });
    const heldA = await images.acquire({ kind: "registry", reference: pa.reference });
    const heldB = await images.acquire({ kind: "registry", reference: pb.reference });
    assert.ok(heldA.sizeBytes + heldB.sizeBytes > sizeA * 1.5, "together over the cap");
    await images.prune();
    assert.ok(await imageId(pa.reference), "A is in use: kept although the cache is over its size");
    assert.ok(await imageId(pb.reference));

    heldA.release();
    await images.prune();
    assert.equal(await imageId(pa.reference), undefined, "A (least recently used, free) was removed");
    assert.ok(await imageId(pb.reference), "B is still held");
    assert.deepEqual(
      (await images.list()).map((entry) => [entry.name, entry.inUse]),
      [[pb.reference, true]],
    );
    heldB.release();
    await images.prune();
    assert.ok(await imageId(pb.reference), "B alone fits: kept for the next task");

    // A comes back with a pull.
    const pulls = (await engineCalls("pull")).length;
    const back = await images.acquire({ kind: "registry", reference: pa.reference });
    assert.equal(back.cached, false);
    assert.equal((await engineCalls("pull")).length, pulls + 1);
    back.release();
  });

  it("refuses transports in `image` at the schema and in the runtime: docker-archive:/path never loads a file of the provider", async () => {
    for (const image of ["docker-archive:/etc/passwd", "oci:/var/lib/x", "oci-archive:/tmp/x.tar", "containers-storage:localhost/x", "dir:/tmp/x"]) {
      assert.throws(
        () => spec({ image, command: "true" }),
        (error: Error) => {
          assert.equal(error.name, "InvalidInputError");
          assert.match(error.message, /is a transport, not a registry reference/);
          return true;
        },
      );
    }
    const runtime = new ContainerRuntime({ workspaceRoot: path.join(dir, "ws-transport"), engine: "podman", enginePaths: { podman: engine }, fetchPolicy: policy });
    const forged = { image: "docker-archive:/etc/passwd", command: "true", env: {} } as unknown as TaskSpec;
    const loadsBefore = (await engineCalls("load")).length + (await engineCalls("pull")).length;
    await assert.rejects(runtime.prepare({ taskId: "transport-1", spec: forged, devices: [], durationMs: 10_000 }), { name: "FetchRefusedError" });
    assert.equal((await engineCalls("load")).length + (await engineCalls("pull")).length, loadsBefore, "the engine was never asked");
  });

  it("runs tasks by registry reference and by archive in real containers; the second start says cached", async () => {
    const image = await buildMarkedImage(local("run"), `run-${suffix}`);
    made.push(image);
    const pushed = await registry.push(image, `ci/run-${suffix}:v1`);
    made.push(pushed.reference);
    const archive = await archives.save(image, "oci-archive", { gzip: true });
    made.push(`localhost/suanli/archive:${archive.sha256}`);
    const runtime = new ContainerRuntime({
      workspaceRoot: path.join(dir, "ws-run"),
      engine: "podman",
      enginePaths: { podman: engine },
      fetchPolicy: policy,
      network: false,
      images: { insecureRegistries: [registry.host] },
      stopGraceMs: 1_000,
    });
    const command = 'cat /marker; mkdir -p "$SUANLI_OUTPUT_DIR" && cat /marker > "$SUANLI_OUTPUT_DIR/marker.txt"';
    const runOnce = async (taskId: string, input: Record<string, unknown>) => {
      const task = await runtime.prepare({ taskId, spec: spec({ ...input, command }), devices: [], durationMs: 60_000 });
      await task.start();
      const result = await task.wait();
      const lines = task.readLogs().lines.map((line) => `${line.stream}: ${line.text}`);
      await task.cleanup();
      return { result, lines };
    };
    const first = await runOnce("run-ref-1", { image: pushed.reference });
    assert.equal(first.result.status, "succeeded", first.lines.join("\n"));
    assert.ok(first.lines.includes(`stdout: run-${suffix}`), first.lines.join("\n"));
    assert.match(first.lines[0]!, new RegExp(`^system: Image ${pushed.reference.replace(/[.]/g, "\\.")}: pulled in [0-9.]+ s before the lease started`));
    assert.equal(first.result.outputDigestSource, "output-dir");

    const second = await runOnce("run-ref-2", { image: pushed.reference });
    assert.equal(second.result.status, "succeeded");
    assert.match(second.lines[0]!, /: cached \(sha256:[0-9a-f]{12}, [0-9.]+ MB\), not pulled again$/);
    assert.equal(second.result.outputDigest, first.result.outputDigest, "same output, same digest");

    const fromArchive = await runOnce("run-archive-1", { imageArchive: { url: archive.url, sha256: archive.sha256 } });
    assert.equal(fromArchive.result.status, "succeeded", fromArchive.lines.join("\n"));
    assert.ok(fromArchive.lines.includes(`stdout: run-${suffix}`));
    assert.match(fromArchive.lines[0]!, /: loaded in [0-9.]+ s before the lease started/);
    assert.equal(fromArchive.result.outputDigest, first.result.outputDigest);
    assert.ok(
      (await runtime.images.list()).every((entry) => !entry.inUse),
      "every image released after its task",
    );
  });
});

import assert from "node:assert/strict";
import { parseSubmitParameters, type SubmitTaskParameters } from "../../sdk/index.js";

// The container image forms of submitTask: `image` (a registry reference) and `imageUrl` + sha256
// (an archive), as they reach the provider in the task spec.
describe("submitTask image parameters", () => {
  const base = { gpuType: "A100", gpuCount: 1, duration: 600, maxPricePerGpuHour: "2", command: "echo hi" } satisfies Partial<SubmitTaskParameters>;
  const sha = "AB".repeat(32);
  const fails = (parameters: SubmitTaskParameters, pattern: RegExp) =>
    assert.throws(
      () => parseSubmitParameters(parameters),
      (error: Error) => {
        assert.equal(error.name, "InvalidInputError");
        assert.match(error.message, pattern);
        return true;
      },
    );

  it("passes a registry reference as spec.image and an archive as spec.imageArchive with its sha256", () => {
    const byRef = parseSubmitParameters({ ...base, image: "registry.example.com:5000/team/model:v3" });
    assert.equal(byRef.spec.image, "registry.example.com:5000/team/model:v3");
    assert.equal(byRef.spec.imageArchive, undefined);
    const byDigest = parseSubmitParameters({ ...base, image: `team/model@sha256:${"c".repeat(64)}` });
    assert.equal(byDigest.spec.image, `team/model@sha256:${"c".repeat(64)}`);
    const byArchive = parseSubmitParameters({ ...base, imageUrl: "https://example.com/training_container.tar", sha256: sha });
    assert.deepEqual(byArchive.spec.imageArchive, { url: "https://example.com/training_container.tar", sha256: "ab".repeat(32) });
    assert.equal(byArchive.spec.image, undefined);
    const both = parseSubmitParameters({
      ...base,
      bundleUrl: "https://example.com/job.tar.gz",
      sha256: sha,
      imageUrl: "https://example.com/img.tar.gz",
      imageSha256: "cd".repeat(32),
    });
    assert.deepEqual(both.spec.bundle, { url: "https://example.com/job.tar.gz", sha256: "ab".repeat(32) });
    assert.deepEqual(both.spec.imageArchive, { url: "https://example.com/img.tar.gz", sha256: "cd".repeat(32) });
  });

  it("refuses transports, a registry reference in imageUrl, a missing sha256 and both forms at once, naming the field", () => {
    fails({ ...base, image: "docker-archive:/etc/passwd" }, /image: docker-archive: is a transport, not a registry reference/);
    fails({ ...base, image: "oci-archive:/tmp/x.tar" }, /is a transport/);
    fails({ ...base, image: "containers-storage:localhost/x" }, /is a transport/);
    fails({ ...base, image: "Not A Reference" }, /expected a registry reference/);
    fails(
      { ...base, imageUrl: "nvcr.io/nvidia/pytorch:24.03-py3", sha256: sha },
      /imageUrl: expected an http\(s\):\/\/ or file:\/\/ URL of an image archive .*a registry reference goes in `image`/,
    );
    fails({ ...base, imageUrl: "https://example.com/x.tar" }, /sha256: is required with imageUrl/);
    fails(
      { ...base, bundleUrl: "https://example.com/job.tar.gz", sha256: sha, imageUrl: "https://example.com/x.tar" },
      /imageSha256: is required with imageUrl and bundleUrl together/,
    );
    fails({ ...base, image: "busybox:1", imageUrl: "https://example.com/x.tar", sha256: sha }, /give either image .* or imageUrl/);
    fails({ ...base }, /a task needs bundleUrl \(\+ sha256\), image \(a registry reference\) or imageUrl \(\+ sha256\)/);
  });
});

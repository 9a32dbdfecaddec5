/**
 * Issue #33 item 10 (engine-resolved names): a short image name is never handed to the engine.
 * Podman resolves `name:tag` through `unqualified-search-registries` in registries.conf, which may
 * list a registry the fetch policy refuses (here one on the host's loopback). The attack is shown
 * to work against Podman directly, then to fail through the node, which writes the registry out
 * (docker.io) before the engine sees the name: the loopback registry gets no request at all.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { chmod, mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { parseInput } from "../../common/validation.js";
import { ContainerRuntime } from "../../node/provider/runtime/container-runtime.js";
import { compileFetchPolicy, qualifiedImageReference } from "../../node/provider/runtime/fetch-policy.js";
import { taskSpecSchema, type TaskSpec } from "../../node/provider/runtime/task.js";
import { requireContainerSupport } from "../support/container-images.js";

describe("provider image names: no short name reaches a registry the policy did not check (issue #33 item 10)", function () {
  this.timeout(120_000);

  it("qualifies Docker Hub paths and keeps qualified references; refused ones stay refused", () => {
    const policy = compileFetchPolicy({});
    assert.equal(qualifiedImageReference("busybox:1", policy), "docker.io/library/busybox:1");
    assert.equal(qualifiedImageReference("busybox", policy), "docker.io/library/busybox");
    assert.equal(qualifiedImageReference("org/app:2", policy), "docker.io/org/app:2");
    assert.equal(qualifiedImageReference("org/app@sha256:" + "a".repeat(64), policy), "docker.io/org/app@sha256:" + "a".repeat(64));
    assert.equal(qualifiedImageReference("ghcr.io/org/app:1", policy), "ghcr.io/org/app:1");
    assert.equal(qualifiedImageReference("registry.example:5000/app", policy), "registry.example:5000/app");
    assert.throws(() => qualifiedImageReference("localhost/app:1", policy), /loopback/);
    assert.throws(() => qualifiedImageReference("127.0.0.1:5000/app:1", policy), /refused/);
  });

  describe("with Podman and a search registry on the host's loopback", () => {
    let dir: string;
    let registry: Server;
    const hits: string[] = [];
    let wrapper: string;

    before(async () => {
      await requireContainerSupport();
      dir = await mkdtemp(path.join(tmpdir(), "suanli-image-names-"));
      // Stands for a private registry only the host reaches: it records every request.
      registry = createServer((req, res) => {
        hits.push(`${req.method} ${req.url}`);
        res.writeHead(404).end();
      });
      await new Promise<void>((resolve) => registry.listen(0, "127.0.0.1", resolve));
      const port = (registry.address() as AddressInfo).port;
      const conf = path.join(dir, "registries.conf");
      await writeFile(
        conf,
        [`unqualified-search-registries = ["127.0.0.1:${port}"]`, `short-name-mode = "permissive"`, "[[registry]]", `location = "127.0.0.1:${port}"`, "insecure = true", ""].join(
          "\n",
        ),
      );
      wrapper = path.join(dir, "podman");
      await writeFile(wrapper, `#!/bin/sh\nCONTAINERS_REGISTRIES_CONF=${conf} exec podman "$@"\n`);
      await chmod(wrapper, 0o755);
    });
    after(async () => {
      await new Promise<void>((resolve) => registry?.close(() => resolve()));
      if (dir) await rm(dir, { recursive: true, force: true });
    });

    it("Podman itself pulls a short name from the search registry; through the node it never asks it", async () => {
      hits.length = 0;
      await new Promise<void>((resolve) => execFile(wrapper, ["pull", "--quiet", "suanli-short-name:1"], { timeout: 60_000 }, () => resolve()));
      assert.ok(hits.length > 0, "the engine alone resolves the short name through the loopback registry (the attack)");

      hits.length = 0;
      const runtime = new ContainerRuntime({
        workspaceRoot: path.join(dir, "ws"),
        engine: "podman",
        enginePaths: { podman: wrapper },
        network: false,
        gpus: false,
        images: { pullTimeoutMs: 30_000 },
      });
      const spec = parseInput(taskSpecSchema, { image: "suanli-short-name:1", command: "true" }, "task") as TaskSpec;
      await assert.rejects(runtime.prepare({ taskId: "short1", spec, devices: [], durationMs: 10_000 }), (error: Error) => {
        assert.match(error.message, /docker\.io\/library\/suanli-short-name:1/, error.message);
        return true;
      });
      assert.deepEqual(hits, [], "the loopback registry got no request");
    });
  });
});

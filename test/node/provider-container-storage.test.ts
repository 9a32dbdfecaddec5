/**
 * Issue #33 item 3, its last limits: what a container task can write into the engine's own
 * storage, the disk every container and image of the host lives on. (1) The engine's log file of
 * the task's output: Podman's k8s-file `ctr.log` grew without bound (20 MB printed made 73 MB);
 * containers now run with `--log-driver none` (the node reads the output through `start
 * --attach`). (2) The writable layer: read-only already; a storage quota on top where the storage
 * can enforce one (overlay on XFS with project quotas), detected at start and named in the start
 * line. Real Podman: this host's answer is checked against its own `podman info`.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { parseInput } from "../../common/validation.js";
import { ownerId } from "../../node/provider/runtime/container-engine.js";
import { describeLayerQuota, layerQuotaArgs, layerQuotaUnsupported, storageOf, WRITABLE_LAYER_QUOTA_BYTES } from "../../node/provider/runtime/container-layer-quota.js";
import { containerName, ContainerRuntime } from "../../node/provider/runtime/container-runtime.js";
import { leaseBoundsSchema } from "../../node/provider/runtime/lease-bounds.js";
import { taskSpecSchema, type TaskSpec } from "../../node/provider/runtime/task.js";
import { BUSYBOX_IMAGE, requireContainerSupport } from "../support/container-images.js";

const exec = promisify(execFile);
const MiB = 1024 ** 2;

describe("container runtime: what a task can write into the engine's storage (issue #33 item 3)", function () {
  this.timeout(120_000);
  let dir: string;
  let root: string;
  let runtime: ContainerRuntime;

  before(async () => {
    await requireContainerSupport();
    dir = await mkdtemp(path.join(tmpdir(), "suanli-container-storage-"));
    root = path.join(dir, "workspaces");
    runtime = new ContainerRuntime({
      workspaceRoot: root,
      engine: "podman",
      network: false,
      gpus: false,
      fetchPolicy: { allowNetworks: ["127.0.0.0/8"] },
      stopGraceMs: 1_000,
      bounds: leaseBoundsSchema.parse({ cpusPerUnit: 1, memoryBytesPerUnit: 256 * MiB, pidsPerLease: 64, tmpBytes: 16 * MiB, diskBytesPerUnit: 16 * MiB }),
    });
  });
  after(async () => {
    const owned = await exec("podman", ["ps", "--all", "--filter", `label=suanli.owner=${ownerId(path.resolve(root))}`, "--format", "{{.Names}}"], { encoding: "utf8" }).catch(
      () => ({ stdout: "" }),
    );
    for (const name of owned.stdout.split("\n").filter(Boolean)) await exec("podman", ["rm", "--force", "--time", "0", name]).catch(() => undefined);
    await rm(dir, { recursive: true, force: true });
  });

  it("the start line says what bounds the writable layer, as this host's storage allows (here: podman info's driver and backing file system)", async () => {
    const isolation = await runtime.verify();
    const info = JSON.parse((await exec("podman", ["info", "--format", "{{json .}}"], { encoding: "utf8" })).stdout) as unknown;
    const storage = storageOf(info);
    assert.ok(storage.driver && storage.backing, `podman info names its storage: ${JSON.stringify(storage)}`);
    const unsupported = layerQuotaUnsupported(storage);
    if (unsupported) {
      // This project's CI hosts: overlay on ext4, and a kernel without XFS quota support anyway.
      assert.ok(isolation.description.includes(describeLayerQuota({ bytes: undefined, reason: unsupported })), isolation.description);
    } else {
      assert.match(isolation.description, /writable layer read-only(, no storage quota \(overlay on XFS refused the quota| and quota'd to 64 MiB)/, isolation.description);
    }
  });

  it("a task that prints 20 MB leaves no engine log file in the host's container storage, and its output still reaches the node", async () => {
    const spec = parseInput(taskSpecSchema, { image: BUSYBOX_IMAGE, command: "yes 0123456789abcdef | head -c 20000000; echo; echo printed-all; sleep 60" }, "task") as TaskSpec;
    const task = await runtime.prepare({ taskId: "cs1", spec, devices: [], durationMs: 60_000 });
    try {
      await task.start();
      const logText = () => task.readLogs().lines.map((line) => line.text);
      for (let i = 0; i < 300 && !logText().includes("printed-all"); i++) await new Promise((resolve) => setTimeout(resolve, 100));
      assert.ok(logText().includes("printed-all"), `the output came through start --attach: ${logText().slice(-3).join(" | ")}`);
      // While the container still exists (it is removed when its task ends).
      const format = "{{.HostConfig.LogConfig.Type}}|{{.HostConfig.LogConfig.Path}}|{{.StaticDir}}";
      const inspected = (await exec("podman", ["inspect", "--type", "container", "--format", format, containerName("cs1")], { encoding: "utf8" })).stdout.trim();
      const [type, logPath, staticDir = ""] = inspected.split("|");
      assert.equal(type, "none", inspected);
      assert.equal(logPath, "", "no log file configured");
      assert.ok(staticDir.startsWith("/") && existsSync(staticDir), `the container's directory in the engine's storage: ${staticDir}`);
      assert.ok(!existsSync(path.join(staticDir, "ctr.log")), `no ctr.log in ${staticDir}`);
      await task.stop();
    } finally {
      await task.cleanup();
    }
  });

  it("the layer quota: from either engine's info, overlay on XFS only; its flag; the start line's words", () => {
    const podman = { store: { graphDriverName: "overlay", graphStatus: { "Backing Filesystem": "extfs" } } };
    assert.deepEqual(storageOf(podman), { driver: "overlay", backing: "extfs" });
    assert.match(layerQuotaUnsupported(storageOf(podman))!, /backing file system is extfs, not XFS/);
    const docker = {
      Driver: "overlay2",
      DriverStatus: [
        ["Backing Filesystem", "xfs"],
        ["Supports d_type", "true"],
      ],
    };
    assert.deepEqual(storageOf(docker), { driver: "overlay2", backing: "xfs" });
    assert.equal(layerQuotaUnsupported(storageOf(docker)), undefined, "overlay on XFS: the self-test container decides");
    assert.match(layerQuotaUnsupported({ driver: "vfs", backing: "xfs" })!, /storage driver is vfs, not overlay/);
    assert.match(layerQuotaUnsupported(storageOf({}))!, /unknown/);
    assert.deepEqual(layerQuotaArgs({ bytes: WRITABLE_LAYER_QUOTA_BYTES }), ["--storage-opt", `size=${64 * MiB}`]);
    assert.deepEqual(layerQuotaArgs({ bytes: undefined, reason: "x" }), []);
    assert.equal(describeLayerQuota({ bytes: 64 * MiB }), "writable layer read-only and quota'd to 64 MiB (overlay on XFS, project quota)");
  });
});

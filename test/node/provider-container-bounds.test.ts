/**
 * Every container lease is bounded by default (issue 33, item 3): real Podman containers try to
 * take more memory, processes, /tmp and workspace disk than the lease bought (docs/provider.md,
 * "Threats and their bounds"). Lane 1 of scripts/test-lanes.sh: Podman tests share the container
 * storage and never run beside each other.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { parseInput } from "../../common/validation.js";
import { engineDir, ownerId } from "../../node/provider/runtime/container-engine.js";
import { containerName, ContainerRuntime } from "../../node/provider/runtime/container-runtime.js";
import { leaseBoundsSchema } from "../../node/provider/runtime/lease-bounds.js";
import { taskSpecSchema, type TaskSpec } from "../../node/provider/runtime/task.js";
import { BUSYBOX_IMAGE, requireContainerSupport } from "../support/container-images.js";

const exec = promisify(execFile);
const MiB = 1024 ** 2;
const spec = (input: unknown) => parseInput(taskSpecSchema, input, "task") as TaskSpec;

describe("container runtime: lease bounds on real containers (Podman)", function () {
  this.timeout(120_000);
  let dir: string;
  let root: string;
  let runtime: ContainerRuntime;
  let counter = 0;

  before(async () => {
    await requireContainerSupport();
    dir = await mkdtemp(path.join(tmpdir(), "suanli-container-bounds-"));
    root = path.join(dir, "workspaces");
    runtime = new ContainerRuntime({
      workspaceRoot: root,
      engine: "podman",
      network: false,
      gpus: false,
      fetchPolicy: { allowNetworks: ["127.0.0.0/8"] },
      stopGraceMs: 1_000,
      bounds: leaseBoundsSchema.parse({ cpusPerUnit: 1, memoryBytesPerUnit: 64 * MiB, pidsPerLease: 32, tmpBytes: MiB, diskBytesPerUnit: 16 * MiB }),
    });
    await runtime.verify();
  });
  after(async () => {
    const owned = await exec("podman", ["ps", "--all", "--filter", `label=suanli.owner=${ownerId(path.resolve(root))}`, "--format", "{{.Names}}"], { encoding: "utf8" }).catch(
      () => ({ stdout: "" }),
    );
    for (const name of owned.stdout.split("\n").filter(Boolean)) await exec("podman", ["rm", "--force", "--time", "0", name]).catch(() => undefined);
    await rm(dir, { recursive: true, force: true });
  });

  async function run(command: string, beforeCleanup?: (taskId: string) => Promise<void>) {
    const taskId = `cb${++counter}`;
    const task = await runtime.prepare({ taskId, spec: spec({ image: BUSYBOX_IMAGE, command }), devices: [], durationMs: 60_000 });
    await task.start();
    const result = await task.wait();
    const lines = task.readLogs().lines.map((line) => line.text);
    await beforeCleanup?.(taskId);
    await task.cleanup();
    return { result, lines };
  }

  it("a container that allocates past its memory is killed by the kernel, reported as the renter's side; conmon's oom marker lands in the task's engine directory, not the node's working directory", async () => {
    // conmon creates a file named `oom` in its working directory at an OOM kill (it inherits the
    // engine client's): run from a fresh directory, so a stray marker there is this test's.
    const nodeCwd = path.join(dir, "node-cwd");
    await mkdir(nodeCwd);
    const previous = process.cwd();
    process.chdir(nodeCwd);
    let markerInEngineDir = false;
    try {
      const { result, lines } = await run('x=a; while :; do x="$x$x"; done', async (taskId) => {
        markerInEngineDir = existsSync(path.join(engineDir(root, taskId), "oom"));
      });
      assert.equal(result.status, "error", lines.join("\n"));
      assert.equal(result.error?.name, "TaskOutOfMemoryError", JSON.stringify(result.error));
      assert.equal(result.error?.blame, "renter");
      assert.match(result.error?.message ?? "", new RegExp(String(64 * MiB)));
    } finally {
      process.chdir(previous);
    }
    assert.deepEqual(await readdir(nodeCwd), [], "nothing (no `oom` file) is created in the node's working directory");
    assert.ok(markerInEngineDir, "conmon wrote its oom marker in the task's engine directory");
  });

  it("a container killed by SIGKILL below its memory bound is its own failure, not an OOM kill", async () => {
    const { result, lines } = await run("kill -9 $$");
    assert.equal(result.status, "failed", lines.join("\n"));
    assert.equal(result.exitCode, 137);
    assert.equal(result.error, undefined);
  });

  it("writing past the workspace disk or /tmp gets ENOSPC in the task; the host keeps working and the next task runs", async () => {
    const { result, lines } = await run(
      'dd if=/dev/zero of=/workspace/big bs=1M count=40 2>/tmp/err; echo "ws=$? $(grep -c "No space left" /tmp/err)"; head -c 2000000 /dev/zero > /tmp/big 2>/dev/null; echo "tmp=$?"; echo "left=$(df -k /workspace | tail -1)"',
    );
    assert.equal(result.status, "succeeded", lines.join("\n"));
    const ws = lines.find((line) => line.startsWith("ws=")) ?? "";
    assert.equal(ws, "ws=1 1", lines.join("\n"));
    assert.ok(lines.includes("tmp=1"), lines.join("\n"));
    // The workspace file system is the lease's 16 MiB, not the host's disk.
    const size = Number(/^left=\S+\s+(\d+)/.exec(lines.find((line) => line.startsWith("left=")) ?? "")?.[1]);
    assert.ok(size > 8 * 1024 && size <= 16 * 1024, lines.join("\n"));
    // Cleanup unmounted the workspace and deleted its image; the next lease starts clean.
    assert.deepEqual(
      (await readdir(root)).filter((entry) => entry !== ".images"),
      [],
    );
    assert.ok(!(await readFile("/proc/mounts", "utf8")).includes(root), "no mount left under the workspace root");
    const next = await run("echo fine > /workspace/ok; cat /workspace/ok");
    assert.equal(next.result.status, "succeeded");
    assert.ok(next.lines.includes("fine"));
  });

  it("the image's own file system is read-only; /tmp, /var/tmp and /run are sized tmpfs; nothing lands in the engine's storage", async () => {
    const fill = (target: string) => {
      const err = target === "/tmp" ? "/var/tmp/err" : "/tmp/err";
      return `dd if=/dev/zero of=${target}/big bs=1M count=2 2>${err}; echo "${target}=$? $(grep -c "No space left" ${err})"; rm -f ${target}/big`;
    };
    const command = [
      'echo x > /etc/x 2>/dev/null; echo "etc=$?"',
      'mkdir /opt 2>/dev/null; echo "mkdir=$?"',
      'echo x >> /etc/passwd 2>/dev/null; echo "passwd=$?"',
      fill("/var/tmp"),
      fill("/run"),
      fill("/tmp"),
      'mkdir -p /workspace/output && echo kept > /workspace/output/kept; echo "output=$?"',
      // The test reads the container's writable layer now, while the container exists.
      "echo ready; sleep 30",
    ].join("; ");
    const taskId = `cb${++counter}`;
    const task = await runtime.prepare({ taskId, spec: spec({ image: BUSYBOX_IMAGE, command }), devices: [], durationMs: 60_000 });
    await task.start();
    const logText = () => task.readLogs().lines.map((line) => line.text);
    try {
      for (let i = 0; i < 300 && !logText().includes("ready"); i++) await new Promise((resolve) => setTimeout(resolve, 100));
      const lines = logText();
      assert.ok(lines.includes("ready"), lines.join("\n"));
      for (const line of ["etc=1", "mkdir=1", "passwd=1", "output=0"]) assert.ok(lines.includes(line), `${line} in:\n${lines.join("\n")}`);
      assert.ok(lines.includes("/bin/sh: can't create /etc/x: Read-only file system"), lines.join("\n"));
      // Past each tmpfs's size: ENOSPC ("No space left on device"), not a write to the disk.
      for (const target of ["/var/tmp", "/run", "/tmp"]) assert.ok(lines.includes(`${target}=1 1`), `${target} in:\n${lines.join("\n")}`);
      const upper = (
        await exec("podman", ["inspect", "--type", "container", "--format", "{{.GraphDriver.Data.UpperDir}}", containerName(taskId)], { encoding: "utf8" })
      ).stdout.trim();
      assert.ok(upper.startsWith("/"), `the container's writable layer: ${upper}`);
      // Only the empty mount points runc makes for /etc/hosts and /etc/hostname: not one byte of data.
      const files = (await exec("find", [upper, "-type", "f", "-size", "+0"], { encoding: "utf8" })).stdout.split("\n").filter(Boolean);
      assert.deepEqual(files, [], "no data in the container's writable layer (the host's container storage)");
    } finally {
      await task.stop(1_000);
      await task.cleanup();
    }
  });

  it("a fork bomb stops at the lease's pids bound; nproc shows the lease's cores", async () => {
    const { result, lines } = await run('echo "nproc=$(nproc)"; (for i in $(seq 200); do sleep 3 & done) 2>/dev/null; set -- /proc/[0-9]*; echo "procs=$#"');
    const procs = Number(lines.find((line) => line.startsWith("procs="))?.slice(6));
    assert.ok(procs > 1 && procs <= 32, `${procs} processes: ${lines.join("\n")}`);
    assert.ok(lines.includes("nproc=1"), lines.join("\n"));
    assert.notEqual(result.status, "error", JSON.stringify(result.error));
  });
});

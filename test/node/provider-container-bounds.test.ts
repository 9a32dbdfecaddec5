/**
 * Every container lease is bounded by default (issue 33, item 3): real Podman containers try to
 * take more memory, processes, /tmp and workspace disk than the lease bought (docs/provider.md,
 * "Threats and their bounds"). Lane 1 of scripts/test-lanes.sh: Podman tests share the container
 * storage and never run beside each other.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { parseInput } from "../../common/validation.js";
import { ownerId } from "../../node/provider/runtime/container-engine.js";
import { ContainerRuntime } from "../../node/provider/runtime/container-runtime.js";
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

  async function run(command: string) {
    const task = await runtime.prepare({ taskId: `cb${++counter}`, spec: spec({ image: BUSYBOX_IMAGE, command }), devices: [], durationMs: 60_000 });
    await task.start();
    const result = await task.wait();
    const lines = task.readLogs().lines.map((line) => line.text);
    await task.cleanup();
    return { result, lines };
  }

  it("a container that allocates past its memory is killed by the kernel, reported as the renter's side", async () => {
    const { result, lines } = await run('x=a; while :; do x="$x$x"; done');
    assert.equal(result.status, "error", lines.join("\n"));
    assert.equal(result.error?.name, "TaskOutOfMemoryError", JSON.stringify(result.error));
    assert.equal(result.error?.blame, "renter");
    assert.match(result.error?.message ?? "", new RegExp(String(64 * MiB)));
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

  it("a fork bomb stops at the lease's pids bound; nproc shows the lease's cores", async () => {
    const { result, lines } = await run('echo "nproc=$(nproc)"; (for i in $(seq 200); do sleep 3 & done) 2>/dev/null; set -- /proc/[0-9]*; echo "procs=$#"');
    const procs = Number(lines.find((line) => line.startsWith("procs="))?.slice(6));
    assert.ok(procs > 1 && procs <= 32, `${procs} processes: ${lines.join("\n")}`);
    assert.ok(lines.includes("nproc=1"), lines.join("\n"));
    assert.notEqual(result.status, "error", JSON.stringify(result.error));
  });
});

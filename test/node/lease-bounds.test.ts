/**
 * Every lease is bounded by default (issue 33, item 3): real bubblewrap tasks on this host's
 * cgroups try to take more memory, processes, CPUs and /tmp than the lease bought
 * (docs/provider.md, "Resource bounds").
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { createServer, type Server } from "node:http";
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import * as tar from "tar";
import { parseInput } from "../../common/validation.js";
import { providerOptionsSchema } from "../../node/provider/options.js";
import { createRuntime } from "../../node/provider/provider.js";
import { buildContainerCreateArgs, RUN_TMPFS_MAX_BYTES, scratchTmpfsArgs } from "../../node/provider/runtime/container-args.js";
import { leaseBounds, leaseBoundsSchema } from "../../node/provider/runtime/lease-bounds.js";
import type { ProcessRuntime } from "../../node/provider/runtime/process-runtime.js";
import { detectCgroups } from "../../node/provider/runtime/task-cgroup.js";
import { taskSpecSchema, type TaskSpec } from "../../node/provider/runtime/task.js";

const MiB = 1024 ** 2;

describe("lease bounds: a task gets what its lease bought and no more", function () {
  this.timeout(60_000);
  let dir: string;
  let server: Server;
  let baseUrl: string;
  const served = new Map<string, Buffer>();
  let counter = 0;

  before(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "suanli-bounds-"));
    server = createServer((req, res) => {
      const body = served.get(req.url ?? "");
      if (!body) return void res.writeHead(404).end();
      res.writeHead(200, { "content-length": body.length }).end(body);
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  /** Every runtime made here, closed at the end (their staging folders in /tmp). */
  const runtimes: ProcessRuntime[] = [];
  after(async () => {
    for (const each of runtimes) await each.close();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await rm(dir, { recursive: true, force: true });
  });

  async function run(runtime: ProcessRuntime, script: string) {
    const name = `b${++counter}`;
    const staging = path.join(dir, `${name}-src`);
    await mkdir(staging, { recursive: true });
    await writeFile(path.join(staging, "run.sh"), script);
    const file = path.join(dir, `${name}.tar.gz`);
    await tar.c({ gzip: true, file, cwd: staging, portable: true }, ["run.sh"]);
    const bytes = await readFile(file);
    served.set(`/${name}.tar.gz`, bytes);
    const bundle = { url: `${baseUrl}/${name}.tar.gz`, sha256: createHash("sha256").update(bytes).digest("hex") };
    const spec = parseInput(taskSpecSchema, { bundle, command: ["/bin/sh", "run.sh"], env: {} }, "task") as TaskSpec;
    const task = await runtime.prepare({ taskId: `bounds${counter}`, spec, devices: [], durationMs: 30_000 });
    await task.start();
    const result = await task.wait();
    const lines = task.readLogs().lines.map((line) => line.text);
    await task.cleanup();
    return { result, lines };
  }

  const runtime = (bounds: Record<string, unknown>) => {
    const made = createRuntime(providerOptionsSchema.parse({ runtime: { bounds }, fetch: { allowNetworks: ["127.0.0.1"] }, grace: { taskStopMs: 500 } }), {
      dataDir: path.join(dir, "data"),
    }) as ProcessRuntime;
    runtimes.push(made);
    return made;
  };

  it("config: bounds default on, are validated, and size by the units leased", () => {
    const defaults = leaseBoundsSchema.parse(undefined);
    assert.equal(defaults.enforce, "required");
    assert.throws(() => leaseBoundsSchema.parse({ memoryBytesPerUnit: -1 }));
    assert.throws(() => leaseBoundsSchema.parse({ pidsPerLease: 1.5 }));
    assert.throws(() => leaseBoundsSchema.parse({ extra: 1 }));
    const two = leaseBounds(leaseBoundsSchema.parse({ cpusPerUnit: 2, memoryBytesPerUnit: 100 }), 2, 64);
    assert.deepEqual(two, { cpus: 4, memoryBytes: 200, pids: 4096, tmpBytes: 1024 ** 3, workspaceBytes: 200 * 1024 ** 3 });
    assert.equal(leaseBounds(defaults, 8, 6).cpus, 6, "never more cores than the host has");
  });

  it("containers get --memory, --memory-swap, --pids-limit, --cpus, a cpuset and a bounded /tmp", () => {
    const args = buildContainerCreateArgs({
      engine: "podman",
      name: "n",
      taskId: "t",
      owner: "o",
      image: "i",
      command: ["true"],
      workspace: "/w",
      devices: [],
      units: 1,
      env: {},
      limits: {},
      bounds: { cpus: 2, memoryBytes: 256 * MiB, pids: 64, tmpBytes: MiB, workspaceBytes: 16 * MiB },
      network: false,
      stopGraceMs: 1000,
    });
    const flag = (name: string) => args[args.indexOf(name) + 1];
    assert.equal(flag("--memory"), String(256 * MiB));
    assert.equal(flag("--memory-swap"), String(256 * MiB));
    assert.equal(flag("--pids-limit"), "64");
    assert.equal(flag("--cpus"), "2");
    assert.equal(flag("--cpuset-cpus"), "0-1");
    // The image's own file system is read-only; the scratch places are sized tmpfs (Podman's unsized ones off).
    assert.ok(args.includes("--read-only"));
    assert.ok(args.includes("--read-only-tmpfs=false"));
    const tmpfs = args.flatMap((arg, i) => (args[i - 1] === "--tmpfs" ? [arg] : []));
    assert.deepEqual(tmpfs, [`/tmp:rw,nosuid,nodev,size=${MiB}`, `/var/tmp:rw,nosuid,nodev,size=${MiB}`, `/run:rw,nosuid,nodev,size=${MiB}`]);
    assert.ok(args.indexOf("--read-only") < args.indexOf("i"), "before the image");
  });

  it("sizes /run at most 64 MiB, and Docker gets no Podman-only flag", () => {
    assert.deepEqual(scratchTmpfsArgs("docker", 1024 * MiB), [
      "--read-only",
      "--tmpfs",
      `/tmp:rw,nosuid,nodev,size=${1024 * MiB}`,
      "--tmpfs",
      `/var/tmp:rw,nosuid,nodev,size=${1024 * MiB}`,
      "--tmpfs",
      `/run:rw,nosuid,nodev,size=${RUN_TMPFS_MAX_BYTES}`,
    ]);
    assert.equal(RUN_TMPFS_MAX_BYTES, 64 * MiB);
  });

  describe("process runtime (bubblewrap)", () => {
    before(async function () {
      const found = await detectCgroups();
      // This host path is the cgroup v1 one; elsewhere the refusal test below covers the node.
      if (found.kind !== "v1") assert.fail(`this suite needs a writable cgroup v1 host: ${"reason" in found ? found.reason : ""}`);
    });

    it("sees nproc equal to its cores, a /tmp of its size and a read-only root", async () => {
      const { result, lines } = await run(
        runtime({ cpusPerUnit: 1, tmpBytes: MiB }),
        'echo "nproc=$(nproc)"; head -c 2000000 /dev/zero > /tmp/big 2>/dev/null; echo "tmp=$?"; mkdir /x 2>/dev/null; echo "root=$?"',
      );
      assert.equal(result.status, "succeeded", lines.join("\n"));
      assert.ok(lines.includes("nproc=1"), lines.join("\n"));
      assert.ok(lines.includes("tmp=1"), "writing past /tmp's size fails");
      assert.ok(lines.includes("root=1"), "the sandbox root is read-only");
    });

    it("a task that allocates past its memory is killed, reported as the renter's side", async () => {
      const { result, lines } = await run(runtime({ memoryBytesPerUnit: 64 * MiB }), 'x=a; while :; do x="$x$x"; done');
      assert.equal(result.status, "error", lines.join("\n"));
      assert.equal(result.error?.name, "TaskOutOfMemoryError");
      assert.equal(result.error?.blame, "renter");
    });

    it("writing past the workspace disk gets ENOSPC in the task; the host keeps working, the next task runs, nothing is left mounted", async () => {
      const rt = runtime({ diskBytesPerUnit: 16 * MiB });
      const { result, lines } = await run(
        rt,
        'dd if=/dev/zero of=big bs=1M count=40 2>/tmp/err; echo "ws=$? $(grep -c "No space left" /tmp/err)"; echo "size=$(df -k --output=size . | tail -1 | tr -d " ")"',
      );
      assert.equal(result.status, "succeeded", lines.join("\n"));
      assert.ok(lines.includes("ws=1 1"), lines.join("\n"));
      const size = Number(lines.find((line) => line.startsWith("size="))?.slice(5));
      assert.ok(size > 8 * 1024 && size <= 16 * 1024, `the workspace is the lease's 16 MiB, not the host's disk: ${lines.join("\n")}`);
      const workspaces = path.join(dir, "data", "workspaces");
      assert.deepEqual(await readdir(workspaces), [], "workspace and its image removed at cleanup");
      assert.ok(!(await readFile("/proc/mounts", "utf8")).includes(workspaces), "no mount left under the workspace root");
      const next = await run(rt, "echo fine > ok; cat ok");
      assert.equal(next.result.status, "succeeded");
      assert.ok(next.lines.includes("fine"));
    });

    it("a fork bomb stops at the lease's pids bound", async () => {
      const { result, lines } = await run(runtime({ pidsPerLease: 32 }), '(for i in $(seq 200); do sleep 3 & done) 2>/dev/null; set -- /proc/[0-9]*; echo "procs=$#"');
      const procs = Number(lines.find((line) => line.startsWith("procs="))?.slice(6));
      assert.ok(procs > 1 && procs <= 32, `${procs} processes: ${lines.join("\n")}`);
      assert.notEqual(result.status, "error");
    });
  });
});

/**
 * A task gets the CPU cores and memory its lease bought, and no more (issue 33, item 4): the
 * node declares per unit what its runtime enforces (node/provider/runtime/host-resources.ts),
 * and a lease of N units is sized from N times that. Real bubblewrap tasks on this host's
 * cgroups (the same host path as lease-bounds.test.ts) count their cores and allocate memory.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { createServer, type Server } from "node:http";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import type { AddressInfo } from "node:net";
import { availableParallelism, tmpdir } from "node:os";
import path from "node:path";
import * as tar from "tar";
import { parseInput } from "../../common/validation.js";
import { inventoryFromDeclared, declaredMachineSchema } from "../../node/provider/inventory/inventory.js";
import { providerOptionsSchema } from "../../node/provider/options.js";
import { createRuntime } from "../../node/provider/provider.js";
import { announcedResources, declaredResources, hostUnits, leasedBoundsOptions, resourceWarnings } from "../../node/provider/runtime/host-resources.js";
import { leaseBounds, leaseBoundsSchema } from "../../node/provider/runtime/lease-bounds.js";
import type { ProcessRuntime } from "../../node/provider/runtime/process-runtime.js";
import { detectCgroups } from "../../node/provider/runtime/task-cgroup.js";
import { taskSpecSchema, type TaskSpec } from "../../node/provider/runtime/task.js";

const MiB = 1024 ** 2;
const GiB = 1024 ** 3;

describe("lease resources: what an offer declares per unit is what a task of N units gets", function () {
  this.timeout(90_000);

  it("declares CPU cores capped to the host's share per unit, memory and disk as configured, nothing when bounds are off", () => {
    const bounds = leaseBoundsSchema.parse({ cpusPerUnit: 4, memoryBytesPerUnit: 64 * GiB, diskBytesPerUnit: 200 * GiB });
    const host = { cpus: 16, memoryBytes: 256 * GiB };
    assert.deepEqual(declaredResources(bounds, 2, host), { cpuCoresPerUnit: 4, memoryMiBPerUnit: 64 * 1024, diskMiBPerUnit: 200 * 1024 });
    // Eight units share 16 cores: 2 each, declared and enforced alike.
    assert.equal(declaredResources(bounds, 8, host)?.cpuCoresPerUnit, 2);
    const sized = leasedBoundsOptions(bounds, 8, host)!;
    assert.equal(sized.cpusPerUnit, 2);
    assert.equal(leaseBounds(sized, 3, host.cpus).cpus, 6, "a 3-unit lease gets 3 × 2 cores, not 3 × 4");
    assert.equal(leaseBounds(sized, 3, host.cpus).memoryBytes, 3 * 64 * GiB);
    assert.equal(declaredResources(bounds, 64, host)?.cpuCoresPerUnit, 1, "never below one core");
    assert.equal(declaredResources(leaseBoundsSchema.parse({ enforce: "off" }), 1, host), undefined);
    assert.equal(declaredResources(undefined, 1, host), undefined);
    assert.equal(leasedBoundsOptions(leaseBoundsSchema.parse({ enforce: "off" }), 1, host)?.cpusPerUnit, 4, "bounds off: left as they were");

    const warnings = resourceWarnings(bounds, 8, host);
    assert.equal(warnings.length, 2, warnings.join("\n"));
    assert.match(warnings[0]!, /cpusPerUnit is 4 but 8 units share 16 CPU cores: offers declare, and leases get, 2 per unit/);
    assert.match(warnings[1]!, /8 units together 512 GiB, more than this host's 256 GiB/);
    assert.deepEqual(resourceWarnings(bounds, 2, host), []);
    assert.throws(() => leaseBoundsSchema.parse({ diskBytesPerUnit: 0 }));
  });

  it("the host's units are those of every machine it sells", () => {
    const inventory = inventoryFromDeclared([declaredMachineSchema.parse({ model: "A100", count: 3 }), declaredMachineSchema.parse({ model: "H100", count: 2 })]);
    assert.equal(hostUnits(inventory), 5);
    assert.equal(hostUnits(undefined), 1);
    const said: string[] = [];
    const declared = announcedResources(leaseBoundsSchema.parse({ cpusPerUnit: 1024 }), inventory, (line) => said.push(line));
    assert.equal(declared?.cpuCoresPerUnit, Math.max(1, Math.floor(availableParallelism() / 5)));
    assert.equal(said.length >= 1 && /cpusPerUnit is 1024/.test(said[0]!), true, said.join("\n"));
  });

  describe("process runtime (bubblewrap, cgroup v1)", () => {
    let dir: string;
    let server: Server;
    let baseUrl: string;
    const served = new Map<string, Buffer>();
    let counter = 0;
    // Two units on this host, each declared with 64 MiB and as many cores as the host has per unit.
    const inventory = inventoryFromDeclared([declaredMachineSchema.parse({ model: "A100", count: 2, devices: ["90", "91"] })]);
    const coresPerUnit = Math.max(1, Math.floor(availableParallelism() / 2));

    before(async function () {
      const found = await detectCgroups();
      if (found.kind !== "v1") assert.fail(`this suite needs a writable cgroup v1 host: ${"reason" in found ? found.reason : ""}`);
      dir = await mkdtemp(path.join(tmpdir(), "suanli-resources-"));
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

    const runtime = () => {
      const made = createRuntime(
        providerOptionsSchema.parse({
          // More cores per unit than the host has: declared and enforced at the host's share.
          runtime: { bounds: { cpusPerUnit: 64, memoryBytesPerUnit: 64 * MiB } },
          fetch: { allowNetworks: ["127.0.0.1"] },
          grace: { taskStopMs: 500 },
        }),
        { dataDir: path.join(dir, "data"), inventory },
      ) as ProcessRuntime;
      runtimes.push(made);
      return made;
    };

    async function run(devices: string[], script: string) {
      const name = `r${++counter}`;
      const staging = path.join(dir, `${name}-src`);
      await mkdir(staging, { recursive: true });
      await writeFile(path.join(staging, "run.sh"), script);
      const file = path.join(dir, `${name}.tar.gz`);
      await tar.c({ gzip: true, file, cwd: staging, portable: true }, ["run.sh"]);
      const bytes = await readFile(file);
      served.set(`/${name}.tar.gz`, bytes);
      const bundle = { url: `${baseUrl}/${name}.tar.gz`, sha256: createHash("sha256").update(bytes).digest("hex") };
      const spec = parseInput(taskSpecSchema, { bundle, command: ["/bin/sh", "run.sh"], env: {} }, "task") as TaskSpec;
      const task = await runtime().prepare({ taskId: `resources${counter}`, spec, devices, durationMs: 30_000 });
      await task.start();
      const result = await task.wait();
      const lines = task.readLogs().lines.map((line) => line.text);
      await task.cleanup();
      return { result, lines };
    }

    // Touches every page of `mib` MiB, then says so.
    const allocate = (mib: number) => `/usr/bin/python3 -c 'b = bytearray(b"x") * (${mib} << 20); print("allocated", len(b) >> 20)'`;

    it("one unit: nproc is one unit's cores, and 90 MiB (more than one unit's 64) is refused", async () => {
      const { result, lines } = await run(["90"], `echo "nproc=$(nproc)"; ${allocate(90)}`);
      assert.ok(lines.includes(`nproc=${coresPerUnit}`), lines.join("\n"));
      assert.ok(!lines.includes("allocated 90"), lines.join("\n"));
      assert.equal(result.status, "error", lines.join("\n"));
      assert.equal(result.error?.name, "TaskOutOfMemoryError");
      assert.match(result.error?.message ?? "", new RegExp(`its ${64 * MiB} bytes`));
    });

    it("two units: nproc is twice that, 90 MiB fits, and 200 MiB (more than two units' 128) is refused", async () => {
      const fits = await run(["90", "91"], `echo "nproc=$(nproc)"; ${allocate(90)}`);
      assert.equal(fits.result.status, "succeeded", fits.lines.join("\n"));
      assert.ok(fits.lines.includes(`nproc=${2 * coresPerUnit}`), fits.lines.join("\n"));
      assert.ok(fits.lines.includes("allocated 90"), fits.lines.join("\n"));

      const over = await run(["90", "91"], allocate(200));
      assert.equal(over.result.error?.name, "TaskOutOfMemoryError", over.lines.join("\n"));
      assert.match(over.result.error?.message ?? "", new RegExp(`its ${128 * MiB} bytes`));
    });
  });
});

import assert from "node:assert/strict";
import { chmod, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { z } from "zod";
import { parseInput } from "../../common/validation.js";
import {
  declaredMachineSchema,
  detectInventory,
  inventoryFromDeclared,
  inventoryFromNvidiaSmi,
  metricsForUnits,
  sampleGpuMetrics,
} from "../../node/provider/inventory/inventory.js";
import { GPU_QUERY_ARGS, parseGpuList, parseGpuQuery, parseMigTable } from "../../node/provider/inventory/nvidia-smi.js";

const fixtures = path.join(path.dirname(fileURLToPath(import.meta.url)), "fixtures", "nvidia-smi");

async function recorded(name: string): Promise<{ query: string; list?: string; table?: string }> {
  const read = (file: string) => readFile(path.join(fixtures, name, file), "utf8").catch(() => undefined);
  const [query, list, table] = await Promise.all([read("query.csv"), read("list.txt"), read("table.txt")]);
  assert.ok(query, `fixture ${name} has a query.csv`);
  return { query, list, table };
}

describe("provider inventory: nvidia-smi parsing on recorded outputs", () => {
  it("A100 80GB PCIe in MIG mode: seven 1g.10gb units with their own UUIDs and measured memory", async () => {
    const inventory = inventoryFromNvidiaSmi(await recorded("a100-80gb-pcie-mig"), { region: "eu-west", interconnect: "none" });
    assert.equal(inventory.source, "nvidia-smi");
    assert.deepEqual(inventory.problems, []);
    assert.equal(inventory.units.length, 7);
    for (const unit of inventory.units) {
      assert.equal(unit.kind, "mig");
      assert.equal(unit.model, "A100-80GB/1g.10gb");
      assert.equal(unit.vramMiB, 9728);
      assert.equal(unit.vramSource, "nvidia-smi");
      assert.match(unit.device, /^MIG-[0-9a-f-]{36}$/);
      assert.equal(unit.device, unit.id);
    }
    assert.equal(inventory.units[0]!.device, "MIG-c1d3d074-7dc1-5e89-8a5f-6d0b08327092");
    assert.deepEqual(
      inventory.units.map((unit) => unit.migDeviceIndex),
      [0, 1, 2, 3, 4, 5, 6],
    );
    assert.equal(inventory.machines.length, 1);
    assert.deepEqual(
      { model: inventory.machines[0]!.model, units: inventory.machines[0]!.units.length, vramMiB: inventory.machines[0]!.vramMiB, region: inventory.machines[0]!.region },
      { model: "A100-80GB/1g.10gb", units: 7, vramMiB: 9728, region: "eu-west" },
    );
    const [gpu] = inventory.gpus;
    assert.equal(gpu!.utilizationPct, null, "utilization is [N/A] in MIG mode");
    assert.equal(gpu!.temperatureC, 43);
    assert.equal(gpu!.powerDrawW, 66);
    assert.equal(gpu!.memoryUsedMiB, 8530);
  });

  it("A100-SXM4-80GB in MIG mode without the table: memory falls back to the profile name, labelled as such", async () => {
    const inventory = inventoryFromNvidiaSmi(await recorded("a100-sxm4-80gb-mig"));
    assert.equal(inventory.units.length, 4);
    for (const unit of inventory.units) {
      assert.equal(unit.model, "A100-80GB/1g.20gb");
      assert.equal(unit.vramSource, "profile");
      // 20 GB as 10^9 bytes in MiB, below the real 19968 MiB of the slice
      assert.equal(unit.vramMiB, 19073);
    }
    assert.equal(inventory.gpus[0]!.powerDrawW, 67.03);
    assert.equal(inventory.gpus[0]!.powerLimitW, 500);
  });

  it("two H100 SXM: two whole-GPU units on one machine", async () => {
    const inventory = inventoryFromNvidiaSmi(await recorded("h100-sxm-2gpu"), { interconnect: "nvlink" });
    assert.deepEqual(
      inventory.units.map((unit) => [unit.model, unit.kind, unit.vramMiB, unit.gpuIndex]),
      [
        ["H100-80GB-SXM", "gpu", 81559, 0],
        ["H100-80GB-SXM", "gpu", 81559, 1],
      ],
    );
    assert.equal(inventory.machines.length, 1);
    assert.equal(inventory.machines[0]!.interconnect, "nvlink");
    assert.deepEqual(
      inventory.gpus.map((gpu) => gpu.utilizationPct),
      [0, 4],
    );
    assert.deepEqual(
      inventory.gpus.map((gpu) => gpu.migMode),
      ["disabled", "disabled"],
    );
  });

  it("H200 recorded on the real card: one whole-GPU unit with nvidia-smi's own memory, UUID and power", async () => {
    const inventory = inventoryFromNvidiaSmi(await recorded("h200"));
    assert.equal(inventory.source, "nvidia-smi");
    assert.deepEqual(inventory.problems, []);
    assert.deepEqual(
      inventory.units.map((unit) => [unit.model, unit.kind, unit.vramMiB, unit.vramSource, unit.device]),
      [["H200-141GB", "gpu", 143771, "nvidia-smi", "GPU-63b497bb-588c-c24a-4d82-b80c9bd1ad55"]],
    );
    assert.equal(inventory.machines.length, 1);
    const [gpu] = inventory.gpus;
    assert.equal(gpu!.migMode, "disabled");
    assert.equal(gpu!.memoryUsedMiB, 0);
    assert.equal(gpu!.utilizationPct, 0);
    assert.equal(gpu!.temperatureC, 37);
    assert.equal(gpu!.powerDrawW, 81.69);
    assert.equal(gpu!.powerLimitW, 700);
  });

  it("RTX 4090 and T4: consumer and inference cards without MIG", async () => {
    const rtx = inventoryFromNvidiaSmi(await recorded("rtx4090"));
    assert.equal(rtx.units[0]!.model, "RTX4090-24GB");
    assert.equal(rtx.units[0]!.vramMiB, 24564);
    assert.equal(rtx.gpus[0]!.migMode, "unsupported");
    assert.equal(rtx.gpus[0]!.utilizationPct, 92);
    const t4 = inventoryFromNvidiaSmi(await recorded("t4"));
    assert.equal(t4.units[0]!.model, "T4-16GB");
    assert.equal(t4.units[0]!.device, "GPU-d37e67a5-91dd-3774-a5cb-99096249601a");
    assert.equal(t4.gpus[0]!.powerDrawW, 26.78);
  });

  it("reports a model Suanli does not know instead of guessing, and does not offer it", async () => {
    const inventory = inventoryFromNvidiaSmi(await recorded("quadro-rtx4000"));
    assert.equal(inventory.units.length, 1);
    assert.equal(inventory.units[0]!.model, null);
    assert.equal(inventory.units[0]!.reportedName, "Quadro RTX 4000");
    assert.deepEqual(inventory.machines, []);
    assert.equal(inventory.problems.length, 1);
    assert.match(inventory.problems[0]!, /Quadro RTX 4000/);
    assert.match(inventory.problems[0]!, /not a model Suanli knows/);
  });

  it("reads odd values as missing instead of crashing", () => {
    const gpus = parseGpuQuery(
      [
        "0, GPU-e1924eea-b9bb-d537-39f2-b345087fa145, NVIDIA GeForce RTX 3090, 24576, [N/A], [Not Supported], N/A, [Unknown Error], [N/A], [N/A]",
        "",
        "1, GPU-899c71bf-27be-b6a0-ae8f-d8afe5ba0f85, NVIDIA GeForce RTX 3090, 24576 MiB, 12 MiB, 7 %, 41, 31.50 W, 350.00 W, Disabled",
      ].join("\n"),
    );
    assert.equal(gpus.length, 2);
    assert.deepEqual([gpus[0]!.memoryUsedMiB, gpus[0]!.utilizationPct, gpus[0]!.temperatureC, gpus[0]!.powerDrawW, gpus[0]!.migMode], [null, null, null, null, "unsupported"]);
    assert.deepEqual([gpus[1]!.memoryTotalMiB, gpus[1]!.utilizationPct, gpus[1]!.powerDrawW, gpus[1]!.migMode], [24576, 7, 31.5, "disabled"]);
  });

  it("names the line of a malformed query output", () => {
    assert.throws(
      () => parseGpuQuery("0, GPU-295b72d2-e23d-baa4-1b87-88bc3b68fd08, NVIDIA A100 80GB PCIe, 81920, 8530, 0, 43, 66.00, 300.00, Disabled\n1, 2, 3"),
      (error: unknown) => {
        assert.equal((error as Error).name, "NvidiaSmiParseError");
        assert.equal((error as { lineNumber: number }).lineNumber, 2);
        return true;
      },
    );
    assert.throws(() => parseGpuQuery("x, GPU-1, A, 1, 1, 1, 1, 1, 1, Disabled"), { name: "NvidiaSmiParseError" });
  });

  it("parses -L with old MIG-GPU UUIDs, compute-instance profiles and noise lines", () => {
    const listed = parseGpuList(
      [
        "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-c08d91cb-e324-655c-71ba-7570956445bc)",
        "MIG 1c.3g.40gb Device 0: (UUID: MIG-c788539f-c1ea-5a36-8b4d-9b07d024b1bb)",
        "  MIG 3g.40gb     Device  1: (UUID: MIG-GPU-932bfb2c-849a-2a22-1e84-9eff6bc02b39/1/0)",
        "Warning: something the driver printed",
      ].join("\n"),
    );
    assert.equal(listed.length, 1);
    assert.deepEqual(
      listed[0]!.migDevices.map((mig) => [mig.deviceIndex, mig.profile, mig.uuid]),
      [
        [0, "1c.3g.40gb", "MIG-c788539f-c1ea-5a36-8b4d-9b07d024b1bb"],
        [1, "3g.40gb", "MIG-GPU-932bfb2c-849a-2a22-1e84-9eff6bc02b39/1/0"],
      ],
    );
    assert.throws(() => parseGpuList("  MIG 1g.10gb     Device  0: (UUID: MIG-x)"), { name: "NvidiaSmiParseError" });
  });

  it("reads MIG rows of the table and nothing from the processes section", async () => {
    const { table } = await recorded("a100-80gb-pcie-mig");
    const rows = parseMigTable(table!);
    assert.equal(rows.length, 7);
    assert.deepEqual(rows[2], { gpuIndex: 0, gpuInstanceId: 9, computeInstanceId: 0, deviceIndex: 2, memoryUsedMiB: 2296, memoryTotalMiB: 9728 });
    const { table: noMig } = await recorded("h100-sxm-2gpu");
    assert.deepEqual(parseMigTable(noMig!), []);
  });

  it("flags a GPU in MIG mode with no MIG devices", () => {
    const inventory = inventoryFromNvidiaSmi({
      query: "0, GPU-513536b6-7d19-9063-b049-1e69664bb298, NVIDIA A100-SXM4-80GB, 81920, 50, [N/A], 27, 67.03, 500.00, Enabled",
      list: "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-513536b6-7d19-9063-b049-1e69664bb298)",
    });
    assert.deepEqual(inventory.units, []);
    assert.match(inventory.problems[0]!, /MIG enabled but no MIG devices/);
  });
});

describe("provider inventory: running nvidia-smi", () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "suanli-smi-"));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  // A stand-in for the real binary: plays a recorded machine's outputs by argument, so the
  // child-process path (exec, exit codes, stdout) is exercised for real.
  async function fakeSmi(fixture: string): Promise<string> {
    const bin = path.join(dir, `nvidia-smi-${fixture}`);
    const base = path.join(fixtures, fixture);
    await writeFile(
      bin,
      [
        "#!/bin/sh",
        `case "$1" in`,
        `  --query-gpu=*) exec cat "${base}/query.csv" ;;`,
        `  -L) exec cat "${base}/list.txt" ;;`,
        `  "") exec cat "${base}/table.txt" ;;`,
        `  *) echo "unexpected arguments: $*" >&2; exit 2 ;;`,
        "esac",
        "",
      ].join("\n"),
    );
    await chmod(bin, 0o755);
    return bin;
  }

  it("detects the inventory and samples per-unit metrics through the real command path", async () => {
    const nvidiaSmiPath = await fakeSmi("a100-80gb-pcie-mig");
    const inventory = await detectInventory({ nvidiaSmiPath });
    assert.equal(inventory.units.length, 7);
    assert.equal(inventory.units[6]!.vramSource, "nvidia-smi");

    const sample = await sampleGpuMetrics({ nvidiaSmiPath });
    const metrics = metricsForUnits(sample, inventory.units);
    assert.equal(metrics.length, 7);
    assert.deepEqual(metrics[2], {
      unitId: "MIG-a0f16850-6590-5284-af50-75045a9924bf",
      memoryUsedMiB: 2296,
      memoryTotalMiB: 9728,
      utilizationPct: null,
      temperatureC: 43,
      powerDrawW: 66,
      powerLimitW: 300,
    });
  });

  it("says clearly when nvidia-smi is missing or fails", async () => {
    await assert.rejects(detectInventory({ nvidiaSmiPath: path.join(dir, "no-such-nvidia-smi") }), { name: "NvidiaSmiUnavailableError" });
    const broken = path.join(dir, "broken-smi");
    await writeFile(broken, '#!/bin/sh\necho "NVIDIA-SMI has failed because it couldn\'t communicate with the NVIDIA driver."\nexit 9\n');
    await chmod(broken, 0o755);
    await assert.rejects(detectInventory({ nvidiaSmiPath: broken }), (error: unknown) => {
      assert.equal((error as Error).name, "NvidiaSmiFailedError");
      assert.equal((error as { exitCode: number }).exitCode, 9);
      assert.match((error as { details: string }).details, /couldn't communicate with the NVIDIA driver/);
      return true;
    });
  });

  it("queries exactly the documented fields", () => {
    assert.deepEqual(GPU_QUERY_ARGS, [
      "--query-gpu=index,uuid,name,memory.total,memory.used,utilization.gpu,temperature.gpu,power.draw,power.limit,mig.mode.current",
      "--format=csv,noheader,nounits",
    ]);
  });
});

describe("provider inventory: declared machines", () => {
  const schema = z.strictObject({ machines: z.array(declaredMachineSchema).min(1) });

  it("builds declared units with model defaults, labelled as declared", () => {
    const { machines } = parseInput(
      schema,
      {
        machines: [
          { model: "A100", count: 2, interconnect: "nvlink", region: "us-east" },
          { model: "A100-80GB/1g.10gb", count: 3, vramMiB: 9728, devices: ["MIG-a", "MIG-b", "MIG-c"] },
        ],
      },
      "declared inventory",
    );
    const inventory = inventoryFromDeclared(machines);
    assert.equal(inventory.source, "declared");
    assert.equal(inventory.units.length, 5);
    assert.ok(inventory.units.every((unit) => unit.vramSource === "declared"));
    assert.deepEqual(
      inventory.machines.map((machine) => [machine.model, machine.units.length, machine.vramMiB, machine.interconnect, machine.region]),
      [
        ["A100-80GB", 2, 81920, "nvlink", "us-east"],
        ["A100-80GB/1g.10gb", 3, 9728, "none", "unknown"],
      ],
    );
    assert.deepEqual(
      inventory.units.slice(0, 2).map((unit) => unit.device),
      ["0", "1"],
    );
    assert.deepEqual(
      inventory.units.slice(2).map((unit) => unit.device),
      ["MIG-a", "MIG-b", "MIG-c"],
    );
  });

  it("rejects an unknown model, a MIG slice without memory and a wrong device count, naming the fields", () => {
    assert.throws(
      () =>
        parseInput(
          schema,
          {
            machines: [
              { model: "Voodoo2", count: 1 },
              { model: "A100-80GB/1g.10gb", count: 1 },
              { model: "T4", count: 2, devices: ["0"] },
            ],
          },
          "declared inventory",
        ),
      (error: unknown) => {
        assert.equal((error as Error).name, "InvalidInputError");
        assert.deepEqual((error as { fields: string[] }).fields, ["machines.0.model", "machines.1.vramMiB", "machines.2.devices"]);
        assert.match((error as Error).message, /unknown GPU model "Voodoo2"; known: H200-141GB/);
        return true;
      },
    );
  });
});

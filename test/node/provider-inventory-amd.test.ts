import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { INT8_DENSE_TOPS, challengeProfileSchema, deriveChallengeParams } from "../../common/attest/params.js";
import { GPU_MODELS, canonicalGpuName, gpuNamesOf } from "../../common/gpu.js";
import { resolveGpuName } from "../../common/matching/gpu-type.js";
import { nodeConfigSchema } from "../../node/config/schema.js";
import { inventoryFromAmd, renderNodeOf } from "../../node/provider/inventory/amd.js";
import { buildContainerCreateArgs } from "../../node/provider/runtime/container-args.js";
import {
  AMD_SMI_METRIC_ARGS,
  AMD_SMI_STATIC_ARGS,
  AmdSmiParseError,
  ROCM_SMI_ARGS,
  amdCanonicalName,
  amdValue,
  parseAmdSmi,
  parseRocmSmi,
  visibleAmdGpus,
} from "../../node/provider/inventory/amd-smi.js";
import { metricsForUnits, type CommandRunner } from "../../node/provider/inventory/inventory.js";
import { gpuSampler, loadInventory } from "../../node/provider/provider.js";

const fixtures = path.join(path.dirname(fileURLToPath(import.meta.url)), "fixtures", "amd-smi");
const fixture = (name: string) => readFile(path.join(fixtures, name), "utf8");

describe("AMD GPUs: amd-smi and rocm-smi inventory", () => {
  it("reads an MI300X node from amd-smi static + metric (ROCm 6.2 list shape)", async () => {
    const gpus = parseAmdSmi({ static: await fixture("mi300x-static.json"), metric: await fixture("mi300x-metric.json") });
    assert.equal(gpus.length, 8);
    assert.deepEqual(gpus[2], {
      index: 2,
      uuid: "amd-0000:46:00.0",
      name: "AMD Instinct MI300X",
      memoryTotalMiB: 196_592,
      memoryUsedMiB: 181_022,
      utilizationPct: 100,
      temperatureC: 78,
      powerDrawW: 612,
      powerLimitW: 750,
      migMode: "unsupported",
    });
    const inventory = inventoryFromAmd(gpus, "amd-smi", { region: "us-east", interconnect: "fabric" });
    assert.equal(inventory.source, "amd-smi");
    assert.deepEqual(inventory.problems, []);
    assert.equal(inventory.machines.length, 1);
    assert.deepEqual(
      { model: inventory.machines[0]!.model, units: inventory.machines[0]!.units.length, vramMiB: inventory.machines[0]!.vramMiB, region: inventory.machines[0]!.region },
      { model: "MI300X-192GB", units: 8, vramMiB: 196_592, region: "us-east" },
    );
    assert.deepEqual(
      inventory.units.map((unit) => unit.device),
      ["0", "1", "2", "3", "4", "5", "6", "7"],
      "tasks get ROCm indices",
    );
  });

  it("reads an MI250X node (ROCm 6.4 gpu_data shape, a warning before the JSON): one unit per GCD, power on one GCD per package", async () => {
    const gpus = parseAmdSmi({ static: await fixture("mi250-static.json"), metric: await fixture("mi250-metric.json") });
    assert.equal(gpus.length, 8);
    assert.deepEqual(
      gpus.map((gpu) => gpu.powerDrawW),
      [96, null, 489, null, 91, null, 90, null],
    );
    assert.deepEqual(
      gpus.slice(2, 4).map((gpu) => [gpu.utilizationPct, gpu.temperatureC, gpu.memoryUsedMiB]),
      [
        [99, 74, 61_244],
        [98, 72, 60_987],
      ],
    );
    const inventory = inventoryFromAmd(gpus, "amd-smi");
    assert.equal(inventory.machines[0]!.model, "MI250-64GB");
    assert.equal(inventory.machines[0]!.units.length, 8);
    assert.equal(inventory.machines[0]!.vramMiB, 65_520);
  });

  it("reads rocm-smi --showallinfo --json: an MI250X by its family name, and a Radeon RX 7900 XTX", async () => {
    const mi250 = parseRocmSmi(await fixture("mi250-rocm-smi.json"));
    assert.equal(mi250.length, 2, "the system entry is not a GPU");
    assert.deepEqual(mi250[0], {
      index: 0,
      uuid: "amd-0000:c1:00.0",
      name: "AMD INSTINCT MI200 (MCM) OAM LC MBA HPE C2",
      memoryTotalMiB: 65_520,
      memoryUsedMiB: 10,
      utilizationPct: 3,
      temperatureC: 38,
      powerDrawW: 96,
      powerLimitW: 560,
      migMode: "unsupported",
    });
    assert.equal(mi250[1]!.powerDrawW, null);
    assert.equal(inventoryFromAmd(mi250, "rocm-smi").machines[0]!.model, "MI250-64GB");

    const radeon = parseRocmSmi(await fixture("radeon-rx7900xtx-rocm-smi.json"));
    assert.deepEqual(
      [radeon[0]!.name, radeon[0]!.memoryTotalMiB, radeon[0]!.memoryUsedMiB, radeon[0]!.temperatureC, radeon[0]!.powerDrawW, radeon[0]!.utilizationPct],
      ["Radeon RX 7900 XTX", 24_560, 3_513, 52, 17, 1],
    );
    const inventory = inventoryFromAmd(radeon, "rocm-smi", { region: "home" });
    assert.equal(inventory.machines[0]!.model, "RX7900XTX-24GB");
    assert.equal(inventory.units[0]!.vramSource, "rocm-smi");
  });

  it("offers only the GPUs ROCR_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES leave visible, as ROCm applies them", async () => {
    const gpus = parseAmdSmi({ static: await fixture("mi300x-static.json") });
    const rocr = inventoryFromAmd(gpus, "amd-smi", { env: { ROCR_VISIBLE_DEVICES: "4,5,6,7" } });
    assert.deepEqual(
      rocr.units.map((unit) => unit.device),
      ["4", "5", "6", "7"],
    );
    // HIP indexes into what ROCR left.
    assert.deepEqual(visibleAmdGpus([0, 1, 2, 3, 4, 5, 6, 7], { ROCR_VISIBLE_DEVICES: "0,2,4,6", HIP_VISIBLE_DEVICES: "1,3" }), [2, 6]);
    assert.deepEqual(visibleAmdGpus([0, 1], {}), [0, 1]);
    assert.deepEqual(visibleAmdGpus([0, 1], { ROCR_VISIBLE_DEVICES: "" }), [], "an empty list hides every GPU, as in ROCm");
    for (const env of [{ ROCR_VISIBLE_DEVICES: "8" }, { HIP_VISIBLE_DEVICES: "GPU-2f3ab1c4d5e6f708" }, { ROCR_VISIBLE_DEVICES: "0,x" }]) {
      assert.throws(
        () => visibleAmdGpus([0, 1, 2, 3, 4, 5, 6, 7], env),
        (error: Error) => error.name === "AmdSmiParseError",
        JSON.stringify(env),
      );
    }
  });

  it("maps readings onto units for metrics (temperature, power, utilization)", async () => {
    const gpus = parseAmdSmi({ static: await fixture("mi300x-static.json"), metric: await fixture("mi300x-metric.json") });
    const inventory = inventoryFromAmd(gpus, "amd-smi");
    const metrics = metricsForUnits({ at: 0, gpus, mig: [] }, inventory.units.slice(6, 7));
    assert.deepEqual(metrics, [
      { unitId: "amd-0000:c2:00.0", memoryUsedMiB: 40_219, memoryTotalMiB: 196_592, utilizationPct: 37, temperatureC: 61, powerDrawW: 301, powerLimitW: 750 },
    ]);
  });

  it("runs the documented commands through the configured binary, for the inventory and for samples", async () => {
    const calls: string[] = [];
    const outputs = new Map([
      [AMD_SMI_STATIC_ARGS.join(" "), await fixture("mi250-static.json")],
      [AMD_SMI_METRIC_ARGS.join(" "), await fixture("mi250-metric.json")],
      [ROCM_SMI_ARGS.join(" "), await fixture("radeon-rx7900xtx-rocm-smi.json")],
    ]);
    const runner: CommandRunner = async (file, args) => {
      calls.push(`${file} ${args.join(" ")}`);
      const stdout = outputs.get(args.join(" "));
      return stdout === undefined ? { stdout: "", stderr: "unknown option", exitCode: 2 } : { stdout, stderr: "", exitCode: 0 };
    };
    const config = nodeConfigSchema.parse({ provider: { inventory: { source: "amd-smi", amdSmiPath: "/opt/rocm/bin/amd-smi", region: "eu" } } }).provider;
    const inventory = await loadInventory(config, runner);
    assert.equal(inventory.machines[0]!.model, "MI250-64GB");
    assert.deepEqual(calls, ["/opt/rocm/bin/amd-smi static --asic --bus --vram --board --limit --json"]);
    const sample = gpuSampler(config, inventory, runner)!;
    const used = await sample(["2", "3"]);
    assert.deepEqual(
      used.map((unit) => [unit.utilizationPct, unit.temperatureC]),
      [
        [99, 74],
        [98, 72],
      ],
    );
    assert.deepEqual(calls.slice(1), [
      "/opt/rocm/bin/amd-smi static --asic --bus --vram --board --limit --json",
      "/opt/rocm/bin/amd-smi metric --usage --power --temperature --mem-usage --json",
    ]);

    calls.length = 0;
    const rocm = nodeConfigSchema.parse({ provider: { inventory: { source: "rocm-smi" } } }).provider;
    assert.equal((await loadInventory(rocm, runner)).machines[0]!.model, "RX7900XTX-24GB");
    assert.deepEqual(calls, ["rocm-smi --showallinfo --json"]);

    const failing: CommandRunner = async () => ({ stdout: "", stderr: "amdgpu driver not loaded", exitCode: 1 });
    await assert.rejects(loadInventory(config, failing), (error: Error) => error.name === "AmdSmiFailedError" && /exit code 1/.test(error.message));
  });

  it("lists unknown AMD models as problems instead of offering them, and refuses outputs it cannot read", () => {
    const text = JSON.stringify([{ gpu: 0, asic: { market_name: "AMD Instinct MI100" }, vram: { size: { value: 32768, unit: "MB" } }, bus: { bdf: "0000:03:00.0" } }]);
    const inventory = inventoryFromAmd(parseAmdSmi({ static: text }), "amd-smi");
    assert.equal(inventory.machines.length, 0);
    assert.match(inventory.problems[0]!, /MI100.*not a model Suanli knows/);
    for (const bad of ["", "not json", "{}", '[{"asic": {}}]', '[{"gpu": 0, "asic": {"market_name": "AMD Instinct MI300X"}, "vram": {"size": "N/A"}}]']) {
      assert.throws(
        () => parseAmdSmi({ static: bad }),
        (error: Error) => error instanceof AmdSmiParseError,
        bad,
      );
    }
    assert.throws(() => parseRocmSmi('{"card0": {"Card Series": "Radeon RX 7900 XTX"}}'), AmdSmiParseError);
    assert.deepEqual([amdValue({ value: 42, unit: "C" }), amdValue("42 C"), amdValue("N/A"), amdValue(7), amdValue("[N/A]")], [42, 42, null, 7, null]);
  });

  it("knows the AMD classes: canonical names, aliases, proof-of-capacity rates, vendor-aware classes", () => {
    assert.deepEqual(gpuNamesOf("amd"), ["MI325X-256GB", "MI300X-192GB", "MI250-64GB", "MI210-64GB", "W7900-48GB", "RX7900XTX-24GB"]);
    assert.equal(canonicalGpuName("MI300X"), "MI300X-192GB");
    assert.equal(amdCanonicalName(["AMD Instinct MI250X / MI250"]), "MI250-64GB");
    assert.equal(amdCanonicalName(["AMD Radeon PRO W7900"]), "W7900-48GB");
    for (const model of GPU_MODELS.filter((entry) => entry.vendor === "amd")) {
      assert.ok(INT8_DENSE_TOPS[model.name]! > 0, model.name);
      const params = deriveChallengeParams(challengeProfileSchema.parse({}), { model: model.name, units: 1 });
      assert.ok(params.requiredOpsPerSecond > 0 && params.deadlineMs > 0, model.name);
    }
    // CUDA code asking "any" keeps getting NVIDIA parts; AMD ones are asked for by name or class.
    const any = resolveGpuName("any 80GB");
    assert.ok("models" in any && !any.models.includes("MI300X-192GB"));
    const amd = resolveGpuName("any amd 128GB");
    assert.ok("models" in amd);
    assert.deepEqual(amd.models, ["MI325X-256GB", "MI300X-192GB"]);
    assert.equal(amd.label, "any amd 128GB");
    const both = resolveGpuName("any gpu 150GB");
    assert.ok("models" in both && both.models.includes("MI300X-192GB") && !both.models.includes("H200-141GB"));
    assert.ok("error" in resolveGpuName("any amd 512GB"));
  });

  it("gives a container /dev/kfd and the render nodes of exactly its leased GPUs (argv)", async () => {
    const gpus = parseAmdSmi({ static: await fixture("mi300x-static.json") });
    // The kernel's by-path links name each GPU's render node by PCI address (here, with a BMC's card first).
    const links: Record<string, string> = { "/dev/dri/by-path/pci-0000:46:00.0-render": "/dev/dri/renderD131", "/dev/dri/by-path/pci-0000:5d:00.0-render": "/dev/dri/renderD132" };
    const inventory = inventoryFromAmd(gpus, "amd-smi", { resolve: (link) => links[link] });
    assert.deepEqual(
      inventory.units.slice(2, 4).map((unit) => unit.renderNode),
      ["/dev/dri/renderD131", "/dev/dri/renderD132"],
    );
    assert.equal(
      renderNodeOf(gpus[7]!, () => undefined),
      "/dev/dri/renderD135",
      "without the link: 128 + index",
    );
    for (const engine of ["docker", "podman"] as const) {
      const args = buildContainerCreateArgs({
        engine,
        name: "suanli-lease-4",
        taskId: "lease-4",
        owner: "0123456789abcdef",
        units: 2,
        image: "rocm/pytorch:latest",
        command: ["python3", "train.py"],
        workspace: "/var/lib/suanli/workspaces/lease-4",
        devices: ["2", "3"],
        amdRenderNodes: ["/dev/dri/renderD131", "/dev/dri/renderD132"],
        env: {},
        limits: {},
        network: false,
        stopGraceMs: 10_000,
      });
      const devices = args.flatMap((arg, i) => (arg === "--device" ? [args[i + 1]] : []));
      assert.deepEqual(devices, ["/dev/kfd", "/dev/dri/renderD131", "/dev/dri/renderD132"], engine);
      assert.ok(!args.includes("--gpus") && !args.some((arg) => arg.startsWith("nvidia.com/gpu")), "no NVIDIA flags on an AMD machine");
      assert.ok(args.includes("CUDA_VISIBLE_DEVICES=0,1"), "HIP numbers the container's GPUs from 0");
    }
  });
});

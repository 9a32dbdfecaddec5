import assert from "node:assert/strict";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { loadConfig } from "../../node/config/load.js";
import { nodeConfigSchema } from "../../node/config/schema.js";
import { priceForModel, pricePerUnitSecond } from "../../node/provider/options.js";
import { createCapacityManager, createRuntime, gpuSampler, loadInventory } from "../../node/provider/provider.js";
import { ContainerRuntime } from "../../node/provider/runtime/container-runtime.js";
import { ProcessRuntime } from "../../node/provider/runtime/process-runtime.js";
import type { CommandRunner } from "../../node/provider/inventory/inventory.js";

const fixtures = path.join(path.dirname(fileURLToPath(import.meta.url)), "fixtures", "nvidia-smi");

describe("provider options", () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "suanli-provider-options-"));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("has working defaults and reads the environment, prices keyed by canonical model", async () => {
    const config = await loadConfig(nodeConfigSchema, {
      env: {
        SUANLI_PROVIDER__RUNTIME__SANDBOX: "none",
        SUANLI_PROVIDER__PRICES: JSON.stringify({ A100: { usdPerGpuHour: 2 }, "A100-80GB/1g.10gb": { pricePerUnitSecond: "80" } }),
        SUANLI_PROVIDER__GRACE__TASK_STOP_MS: "2500",
      },
    });
    const provider = config.provider;
    assert.equal(provider.inventory.source, "nvidia-smi");
    assert.equal(provider.runtime.kind, "process");
    assert.equal(provider.runtime.sandbox, "none");
    assert.equal(provider.grace.taskStopMs, 2500);
    assert.equal(provider.grace.idleStopMs, 5000);
    assert.equal(provider.limits.bundleMaxBytes, 2 * 1024 ** 3);
    assert.deepEqual(Object.keys(provider.prices).sort(), ["A100-80GB", "A100-80GB/1g.10gb"]);
    // $2 per GPU-hour in a 6-decimal token: 2_000_000 / 3600 = 555.6 -> 556 base units per second.
    assert.equal(priceForModel(provider, "A100-80GB"), 556n);
    assert.equal(priceForModel(provider, "A100-80GB/1g.10gb"), 80n);
    assert.equal(priceForModel(provider, "T4-16GB"), undefined);
  });

  it("converts USD prices exactly and refuses one below a base unit per second", () => {
    assert.equal(pricePerUnitSecond({ usdPerGpuHour: 3.6 }), 1000n);
    assert.equal(pricePerUnitSecond({ usdPerGpuHour: 0.0036 }), 1n);
    assert.equal(pricePerUnitSecond({ usdPerGpuHour: 3.6 }, 18), 1_000_000_000_000_000n);
    assert.throws(() => pricePerUnitSecond({ usdPerGpuHour: 0.0001 }), RangeError);
  });

  it("names each wrong key and where it came from", async () => {
    const file = path.join(dir, "bad.json");
    await writeFile(
      file,
      JSON.stringify({
        provider: {
          runtime: { sandbox: "docker", sandboxx: true },
          inventory: { source: "declared" },
          prices: { Voodoo2: { usdPerGpuHour: 1 }, T4: { usdPerGpuHour: 1, pricePerUnitSecond: "5" } },
          idle: { command: [] },
        },
      }),
    );
    await assert.rejects(loadConfig(nodeConfigSchema, { file }), (error: unknown) => {
      assert.equal((error as Error).name, "ConfigError");
      const keys = (error as { keys: string[] }).keys;
      for (const key of [
        "provider.runtime.sandbox",
        "provider.runtime.sandboxx",
        "provider.inventory.declared",
        "provider.prices.Voodoo2",
        "provider.prices.T4",
        "provider.idle.command",
      ]) {
        assert.ok(keys.includes(key), `${key} in ${keys.join(", ")}`);
      }
      assert.match((error as Error).message, /bad\.json/);
      return true;
    });
  });

  it("validates the container runtime's settings: OCI runtime, operator flags, per-unit limits", async () => {
    const file = path.join(dir, "bad-container.json");
    await writeFile(
      file,
      JSON.stringify({
        provider: {
          runtime: {
            kind: "container",
            ociRuntime: "../crun",
            containerArgs: ["--shm-size", "8g", "--name", "mine", "bad\nline"],
            containerGpus: "some",
            containerPerUnit: { cpus: -1, memoryBytes: 1.5 },
          },
        },
      }),
    );
    await assert.rejects(loadConfig(nodeConfigSchema, { file }), (error: unknown) => {
      assert.equal((error as Error).name, "ConfigError");
      const keys = (error as { keys: string[] }).keys;
      for (const key of [
        "provider.runtime.ociRuntime",
        "provider.runtime.containerArgs.2",
        "provider.runtime.containerArgs.4",
        "provider.runtime.containerGpus",
        "provider.runtime.containerPerUnit.cpus",
        "provider.runtime.containerPerUnit.memoryBytes",
      ]) {
        assert.ok(keys.includes(key), `${key} in ${keys.join(", ")}`);
      }
      assert.ok(!keys.includes("provider.runtime.containerArgs.0"), "an ordinary flag is accepted");
      return true;
    });
    const good = await loadConfig(nodeConfigSchema, {
      base: { dataDir: dir },
      flags: { "provider.runtime.kind": "container", "provider.runtime.ociRuntime": "/usr/sbin/runc", "provider.runtime.containerArgs": JSON.stringify(["--shm-size", "8g"]) },
    });
    assert.equal(good.provider.runtime.ociRuntime, "/usr/sbin/runc");
    assert.deepEqual(good.provider.runtime.containerArgs, ["--shm-size", "8g"]);
    assert.equal(good.provider.runtime.containerGpus, "auto");
  });

  it("builds the inventory, runtime and capacity manager the config describes", async () => {
    const config = await loadConfig(nodeConfigSchema, {
      base: { dataDir: dir },
      flags: {
        "provider.inventory.source": "declared",
        "provider.inventory.declared": JSON.stringify([{ model: "RTX 4090", count: 2, region: "eu" }]),
        "provider.idle": JSON.stringify({ command: "sleep 60" }),
      },
    });
    const inventory = await loadInventory(config.provider);
    assert.equal(inventory.source, "declared");
    assert.equal(inventory.machines[0]!.model, "RTX4090-24GB");
    const runtime = createRuntime(config.provider, { dataDir: config.dataDir });
    assert.ok(runtime instanceof ProcessRuntime);
    assert.ok(createRuntime({ ...config.provider, runtime: { ...config.provider.runtime, kind: "container" } }, { dataDir: dir }) instanceof ContainerRuntime);
    const capacity = createCapacityManager(config.provider, inventory);
    assert.deepEqual(capacity.modes(), {
      "declared:0:0": { mode: "idle", leaseId: null },
      "declared:0:1": { mode: "idle", leaseId: null },
    });
    assert.equal(gpuSampler(config.provider, inventory), undefined, "declared machines have no nvidia-smi to sample");
  });

  it("samples the leased devices' metrics from nvidia-smi", async () => {
    const config = await loadConfig(nodeConfigSchema, { base: { dataDir: dir } });
    const runner: CommandRunner = async (_file, args) => {
      const name = args[0]?.startsWith("--query-gpu") ? "query.csv" : args[0] === "-L" ? "list.txt" : "table.txt";
      return { stdout: await readFile(path.join(fixtures, "h100-sxm-2gpu", name), "utf8"), stderr: "", exitCode: 0 };
    };
    const inventory = await loadInventory(config.provider, runner);
    const sample = gpuSampler(config.provider, inventory, runner)!;
    const metrics = await sample([inventory.units[1]!.device]);
    assert.deepEqual(
      metrics.map((metric) => [metric.unitId, metric.utilizationPct, metric.temperatureC]),
      [[inventory.units[1]!.id, 4, 32]],
    );
  });
});

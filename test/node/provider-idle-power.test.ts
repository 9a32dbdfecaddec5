import assert from "node:assert/strict";
import { chmod, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { silentLogger } from "../../node/log/logger.js";
import { createMetrics } from "../../node/metrics/metrics.js";
import { nodeConfigSchema } from "../../node/config/schema.js";
import { inventoryFromAmd } from "../../node/provider/inventory/amd.js";
import { parseRocmSmi } from "../../node/provider/inventory/amd-smi.js";
import type { CommandRunner } from "../../node/provider/inventory/inventory.js";
import { createIdlePower, idleLimitWatts, parseNvidiaPowerLimits, powerLimitArgs, NVIDIA_POWER_QUERY_ARGS } from "../../node/provider/power/idle-power.js";
import { startBundleServer, type BundleServer } from "../support/bundles.js";
import { startDevnet, type Devnet } from "../support/devnet.js";
import { startTestProvider, type TestProvider } from "../support/provider.js";
import { TestRenter } from "../support/renter.js";
import { waitFor } from "../support/wait.js";

const fixtures = path.join(path.dirname(fileURLToPath(import.meta.url)), "fixtures");

describe("idle power: lower idle GPUs' power limits, restore before a task", () => {
  it("builds the power commands of each tool (argv)", () => {
    assert.deepEqual(powerLimitArgs("nvidia-smi", 3, 280), ["-i", "3", "-pl", "280"]);
    assert.deepEqual(powerLimitArgs("amd-smi", 5, 300.4), ["set", "--gpu", "5", "--power-cap", "300"]);
    assert.deepEqual(powerLimitArgs("rocm-smi", 1, 224), ["-d", "1", "--setpoweroverdrive", "224", "--autorespond", "y"]);
    assert.deepEqual(NVIDIA_POWER_QUERY_ARGS, ["--query-gpu=index,power.limit,power.default_limit,power.min_limit", "--format=csv,noheader,nounits"]);
    assert.deepEqual(parseNvidiaPowerLimits("0, 700.00, 700.00, 200.00\n1, 650.00, 700.00, 200.00\n2, [N/A], [N/A], [N/A]\n"), [
      { index: 0, limitW: 700, defaultW: 700, minW: 200 },
      { index: 1, limitW: 650, defaultW: 700, minW: 200 },
      { index: 2, limitW: null, defaultW: null, minW: null },
    ]);
    assert.equal(idleLimitWatts(700, 200, { idleLimitPercent: 40 }), 280);
    assert.equal(idleLimitWatts(400, 200, { idleLimitPercent: 40 }), 200, "never under the GPU's minimum");
    assert.equal(idleLimitWatts(700, 200, { idleLimitPercent: 40, idleLimitWatts: 350 }), 350);
  });

  it("AMD: lowers a GPU only when all its units are idle, restores before a task, and reports the state", async () => {
    const calls: string[] = [];
    const runner: CommandRunner = async (file, args) => {
      calls.push(`${file} ${args.join(" ")}`);
      return { stdout: "", stderr: "", exitCode: 0 };
    };
    const inventory = inventoryFromAmd(parseRocmSmi(await readFile(path.join(fixtures, "amd-smi", "mi250-rocm-smi.json"), "utf8")), "rocm-smi");
    const options = nodeConfigSchema.parse({ provider: { inventory: { source: "rocm-smi" }, power: { idleLimitPercent: 50 } } }).provider;
    const metrics = createMetrics();
    const power = (await createIdlePower(options, inventory, { runner, metrics, logger: silentLogger() }))!;
    const [unit0, unit1] = inventory.units.map((unit) => unit.id);
    await power.apply({ [unit0!]: { mode: "idle" }, [unit1!]: { mode: "ai" } });
    assert.deepEqual(calls, ["rocm-smi -d 0 --setpoweroverdrive 280 --autorespond y"]);
    assert.equal(power.stateOf(0), "idle-limited");
    assert.equal(power.stateOf(1), "normal");
    await power.apply({ [unit0!]: { mode: "idle" }, [unit1!]: { mode: "ai" } });
    assert.equal(calls.length, 1, "nothing to do twice");
    await power.restore(["0"]);
    assert.deepEqual(calls.slice(1), ["rocm-smi -d 0 --setpoweroverdrive 560 --autorespond y"]);
    const state = await metrics.registry.getSingleMetricAsString("suanli_gpu_power_state");
    assert.match(state, /gpu="0",state="normal"} 1/);
    // With an idle workload the GPUs are busy with it: nothing is managed.
    const withIdle = nodeConfigSchema.parse({ provider: { inventory: { source: "rocm-smi" }, idle: { command: "true" } } }).provider;
    assert.equal(await createIdlePower(withIdle, inventory, { runner, logger: silentLogger() }), undefined);
  });

  describe("a provider node with an nvidia-smi inventory and no idle workload", function () {
    this.timeout(90_000);
    let devnet: Devnet;
    let bundles: BundleServer;
    let dir: string;
    let log: string;
    let provider: TestProvider;
    let renter: TestRenter;

    before(async () => {
      devnet = await startDevnet();
      bundles = await startBundleServer();
      dir = await mkdtemp(path.join(tmpdir(), "suanli-power-"));
      log = path.join(dir, "calls.log");
      // A stand-in nvidia-smi: the recorded 2 x H100 outputs, the power query, and every call logged.
      const smi = path.join(dir, "nvidia-smi");
      const recorded = path.join(fixtures, "nvidia-smi", "h100-sxm-2gpu");
      await writeFile(
        smi,
        [
          "#!/bin/sh",
          `echo "$*" >> "${log}"`,
          'case "$*" in',
          '  *power.default_limit*) printf "0, 700.00, 700.00, 200.00\\n1, 700.00, 700.00, 200.00\\n" ;;',
          `  *--query-gpu*) cat "${recorded}/query.csv" ;;`,
          "  *-pl*) exit 0 ;;",
          `  *) cat "${recorded}/table.txt" ;;`,
          "esac",
          "",
        ].join("\n"),
      );
      await chmod(smi, 0o755);
      provider = await startTestProvider(devnet, 1, {
        provider: { inventory: { source: "nvidia-smi", nvidiaSmiPath: smi }, prices: { H100: { pricePerUnitSecond: "100" } }, metricsSampleMs: 60_000 },
      });
      renter = await TestRenter.start(devnet, 2);
    });
    after(async () => {
      await renter?.close();
      await provider?.close();
      await bundles?.close();
      await devnet?.close();
      await rm(dir, { recursive: true, force: true });
    });

    const powerCalls = async () => (await readFile(log, "utf8")).split("\n").filter((line) => line.includes("-pl"));

    it("lowers both idle GPUs, restores the leased one before its task runs, and lowers it again after", async () => {
      await waitFor("both GPUs lowered", async () => ((await powerCalls()).length === 2 ? true : undefined));
      assert.deepEqual((await powerCalls()).sort(), ["-i 0 -pl 280", "-i 1 -pl 280"]);

      const machineId = provider.agent.machines[0]!.machineId;
      // The task prints the power calls made before it started (the sandbox is off in tests).
      const bundle = await bundles.bundle({ "run.sh": `grep -- -pl "${log}"\n` });
      const leaseId = await renter.rent(provider.peer, { machineId, units: 1, duration: 60 });
      await renter.sendTask(provider.peer, leaseId, { bundle, command: "sh run.sh" });
      const seenByTask = (await renter.allLogs(provider.peer, leaseId)).map((line) => line.text);
      const restored = seenByTask.slice(2).find((line) => line.endsWith("-pl 700"));
      assert.ok(restored, `the GPU's limit was restored before the task started: ${seenByTask.join(" | ")}`);
      const metrics = await provider.daemon.metrics.registry.getSingleMetricAsString("suanli_gpu_power_commands_total");
      assert.match(metrics, /action="restore",outcome="ok"} 1/);
      // The lease ends (the task exited): the GPU is idle again and goes back to the idle limit.
      await renter.waitLease(leaseId, ["Ended", "Settled"], 30_000);
      await waitFor("the GPU lowered again", async () => ((await powerCalls()).filter((line) => line === restored.replace("-pl 700", "-pl 280")).length === 2 ? true : undefined), {
        timeoutMs: 30_000,
      });
    });
  });
});

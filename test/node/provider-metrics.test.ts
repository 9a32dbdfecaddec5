import assert from "node:assert/strict";
import { chmod, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { readMachine } from "../../common/chain/market.js";
import { modelHash } from "../../common/gpu.js";
import { startMetricsServer, type MetricsServer } from "../../node/metrics/server.js";
import { silentLogger } from "../../node/log/logger.js";
import { startBundleServer, type BundleServer } from "../support/bundles.js";
import { startDevnet, type Devnet } from "../support/devnet.js";
import { startTestProvider, type TestProvider } from "../support/provider.js";
import { TestRenter } from "../support/renter.js";

const fixtures = path.join(path.dirname(fileURLToPath(import.meta.url)), "fixtures", "nvidia-smi");

/**
 * The metrics endpoint of a provider whose inventory comes from nvidia-smi. No GPU here: a
 * stand-in `nvidia-smi` script prints the outputs recorded on a 2 x H100 machine
 * (test/node/fixtures/nvidia-smi/h100-sxm-2gpu), through the real inventory and sampler code.
 */
describe("provider agent: nvidia-smi inventory and the metrics endpoint", function () {
  this.timeout(60_000);
  let devnet: Devnet;
  let bundles: BundleServer;
  let dir: string;
  let provider: TestProvider;
  let renter: TestRenter;
  let server: MetricsServer;

  before(async () => {
    devnet = await startDevnet();
    bundles = await startBundleServer();
    dir = await mkdtemp(path.join(tmpdir(), "suanli-smi-"));
    const smi = path.join(dir, "nvidia-smi");
    const recorded = path.join(fixtures, "h100-sxm-2gpu");
    await writeFile(smi, `#!/bin/sh\ncase "$*" in\n  *--query-gpu*) cat "${recorded}/query.csv" ;;\n  *) cat "${recorded}/table.txt" ;;\nesac\n`);
    await chmod(smi, 0o755);
    provider = await startTestProvider(devnet, 1, {
      provider: {
        inventory: { source: "nvidia-smi", nvidiaSmiPath: smi, region: "us-east", interconnect: "nvlink" },
        prices: { H100: { usdPerGpuHour: 3 } },
        metricsSampleMs: 200,
      },
    });
    renter = await TestRenter.start(devnet, 2);
    server = await startMetricsServer(provider.daemon.metrics.registry, { host: "127.0.0.1", port: 0 }, silentLogger());
  });
  after(async () => {
    await server?.close();
    await renter?.close();
    await provider?.close();
    await bundles?.close();
    await devnet?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("declares the probed GPUs as one machine at the configured price", async () => {
    const [machine] = provider.agent.machines;
    assert.equal(machine!.model, "H100-80GB-SXM");
    const onChain = await readMachine(devnet.admin.publicClient, devnet.deployment.contracts.registry!, machine!.machineId);
    assert.equal(onChain.model, modelHash("H100-80GB-SXM"));
    assert.equal(onChain.units, 2);
    assert.equal(onChain.region, "us-east");
    assert.equal(onChain.interconnectName, "nvlink");
    assert.equal(provider.agent.summary().machines[0]!.pricePerUnitSecond, 833n); // 3 USD/hour
  });

  it("serves GPU gauges, units by mode, leases and transactions at /metrics; a running task's status carries its GPU's metrics", async () => {
    const machineId = provider.agent.machines[0]!.machineId;
    // The task runs until the lease is cancelled below: with a 2 s task, a loaded CI host could
    // spend its whole run on the first status round trips, and the lease's "running" gauge raced it.
    const bundle = await bundles.bundle({ "run.sh": "exec sleep 60\n" });
    const leaseId = await renter.rent(provider.peer, { machineId, units: 1, duration: 60 });
    await renter.sendTask(provider.peer, leaseId, { bundle, command: "sh run.sh" });
    const status = await renter.waitStatus(provider.peer, leaseId, (s) => s.state === "running" && s.gpus.length > 0, "the running task's GPU metrics");
    assert.deepEqual(status.gpus[0], { device: "GPU-00000000-0000-0000-0000-000000000000", utilizationPct: 0, memoryUsedMiB: 72790, temperatureC: 39, powerW: 145 });

    const response = await fetch(`${server.url}/metrics`);
    assert.equal(response.status, 200);
    const text = await response.text();
    assert.match(text, /suanli_gpu_temperature_celsius\{unit="GPU-00000000-0000-0000-0000-000000000001",model="H100-80GB-SXM"\} 32/);
    assert.match(text, /suanli_gpu_utilization_percent\{unit="GPU-00000000-0000-0000-0000-000000000001",model="H100-80GB-SXM"\} 4/);
    assert.match(text, /suanli_gpu_power_watts\{unit="GPU-00000000-0000-0000-0000-000000000000",model="H100-80GB-SXM"\} 145/);
    assert.match(text, /suanli_provider_units\{mode="ai"\} 1/);
    assert.match(text, /suanli_provider_units\{mode="idle"\} 1/);
    assert.match(text, /suanli_provider_leases\{state="running"\} 1/);
    assert.match(text, /suanli_provider_transactions_total\{function="activate",outcome="ok"\} 1/);
    assert.match(text, /suanli_p2p_peers [1-9]/);
    // What the shipped alerts (ops/prometheus) need: power limit, attestation expiry (0: no
    // attestor on this devnet), chain polls, the data directory's disk.
    assert.match(text, /suanli_gpu_power_limit_watts\{unit="GPU-00000000-0000-0000-0000-000000000000",model="H100-80GB-SXM"\} 700/);
    assert.match(text, new RegExp(`suanli_provider_attestation_expiry_timestamp_seconds\\{machine="${machineId}"\\} 0`));
    assert.match(text, /suanli_chain_polls_total\{outcome="ok"\} [1-9]/);
    const lastPoll = Number(/^suanli_chain_last_poll_success_timestamp_seconds (\S+)$/m.exec(text)?.[1]);
    assert.ok(Math.abs(lastPoll - Date.now() / 1000) < 30, `last good chain poll at ${lastPoll}`);
    const head = Number(/^suanli_chain_head_block (\d+)$/m.exec(text)?.[1]);
    assert.ok(head > 0 && head <= Number(await devnet.admin.publicClient.getBlockNumber()), `chain head ${head}`);
    const free = Number(/^suanli_data_dir_free_bytes (\d+)$/m.exec(text)?.[1]);
    const size = Number(/^suanli_data_dir_size_bytes (\d+)$/m.exec(text)?.[1]);
    assert.ok(free > 0 && size >= free, `data dir free ${free} of ${size}`);
    assert.equal((await fetch(`${server.url}/other`)).status, 404);
    await renter.cancel(provider.peer, leaseId);
    await renter.waitLease(leaseId, ["Settled"]);
  });
});

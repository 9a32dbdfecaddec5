/**
 * A whole market on this machine: the embedded chain with the contracts deployed, provider nodes
 * with declared GPUs, and attestors — each node a real `suanli` process started from its own
 * config file. Used by the demo and the end-to-end benchmark.
 */
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { peerIdFromPrivateKey } from "@libp2p/peer-id";
import type { Address } from "viem";
import { testTokenAbi } from "../../common/abi.js";
import type { Deployment } from "../../common/deployment.js";
import { devnetAccount, devnetPrivateKey } from "../../common/devnet.js";
import { connectChain, type ChainClients } from "../chain/clients.js";
import { deployContracts, type DeployParams } from "../chain/deploy.js";
import { startEmbeddedChain, type EmbeddedChain } from "../chain/embedded.js";
import { writeDeployment } from "../chain/manifest.js";
import { loadOrCreatePeerKey } from "../p2p/identity.js";
import { freePort, startNodeProcess, type NodeProcess } from "./processes.js";
import { IDLE_WORKLOAD_SCRIPT } from "./workload.js";
import { detectBubblewrap, detectNetworkTools } from "../provider/runtime/sandbox.js";
import { probeTaskNetwork } from "../provider/runtime/network-probe.js";
import { runDetached } from "../../common/detached.js";

/**
 * The providers' task runtime for the demo: bubblewrap where it works here (with the task network
 * where pasta is installed), else an explicit, announced sandbox "none" so the demo still runs on
 * a fresh machine. Demo tasks run `node`, which lives in node_modules: bound read-only.
 */
async function demoTaskRuntime(): Promise<{ config: Record<string, unknown>; description: string }> {
  const bwrap = await detectBubblewrap();
  if (!bwrap.available) {
    return {
      config: { sandbox: "none" },
      description: `UNSANDBOXED (sandbox "none") because ${bwrap.reason}; install bubblewrap and passt to run the demo's tasks sandboxed`,
    };
  }
  const tools = await detectNetworkTools();
  const nodeBin = path.dirname(process.execPath);
  const readOnlyPaths = [...new Set([nodeBin, ...(process.env.PATH ?? "").split(":").filter((dir) => dir.endsWith(`node_modules${path.sep}.bin`))])];
  // The demo's tasks need no network: where the task network does not work here (no route out:
  // an offline VM, a container with only loopback), they run without it, and the start-up says so.
  const unusable = "tools" in tools ? await probeTaskNetwork(tools.tools) : tools.reason;
  const network = unusable === undefined;
  return {
    config: { sandbox: "bubblewrap", network, readOnlyPaths },
    description: `sandboxed in bubblewrap (${bwrap.version}), ${network ? "own network namespace through pasta (checked)" : `no network for tasks, loopback only (${unusable})`}`,
  };
}

export type ProviderSpec = {
  name: string;
  /** Devnet account of the provider's wallet. */
  account: number;
  model: string;
  count: number;
  region: string;
  /** USD per GPU-hour, and the interruptible floor if sold. */
  usd: string;
  minBid?: string | undefined;
  /** provider.runtime settings merged over the demo's (e.g. the container runtime for a bench). */
  runtime?: Record<string, unknown> | undefined;
};

export type DemoMarket = {
  chain: EmbeddedChain;
  deployment: Deployment;
  admin: ChainClients;
  /** libp2p multiaddrs of the providers (bootstrap for renters). */
  providerAddrs: string[];
  /** Each provider's Prometheus endpoint port. */
  metricsPorts: number[];
  processes: NodeProcess[];
  workDir: string;
  /** Mints devnet tokens (whole tokens). */
  mint(to: Address, tokens: bigint): Promise<void>;
  stop(options?: { keep?: boolean }): Promise<void>;
};

export async function startDemoMarket(options: {
  providers: readonly ProviderSpec[];
  attestors: readonly number[];
  params?: Partial<DeployParams>;
  say?: (line: string) => void;
  logLevel?: "info" | "warn";
}): Promise<DemoMarket> {
  const say = options.say ?? (() => {});
  const workDir = await mkdtemp(path.join(tmpdir(), "suanli-demo-"));
  const chain = await startEmbeddedChain({ wallClockBlocks: true });
  const processes: NodeProcess[] = [];
  const stop = async ({ keep = false }: { keep?: boolean } = {}) => {
    await Promise.all(processes.map((proc) => proc.stop()));
    await chain.close();
    if (!keep) await rm(workDir, { recursive: true, force: true });
  };
  try {
    say("1. Starting the chain and deploying the contracts (token, registry, lease market)...");
    const admin = await connectChain({ rpcUrl: chain.rpcUrl, account: devnetAccount(0), pollingIntervalMs: 100 });
    const deployment = await deployContracts({
      publicClient: admin.publicClient,
      walletClient: admin.walletClient!,
      params: options.params,
      attestors: options.attestors.map((i) => devnetAccount(i).address),
    });
    const deploymentsDir = path.join(workDir, "deployments");
    await writeDeployment(deploymentsDir, deployment);
    const mint = async (to: Address, tokens: bigint) => {
      const hash = await admin.walletClient!.writeContract({ address: deployment.contracts.token, abi: testTokenAbi, functionName: "faucet", args: [to, tokens * 10n ** 6n] });
      await admin.publicClient.waitForTransactionReceipt({ hash });
    };
    for (const p of options.providers) await mint(devnetAccount(p.account).address, 10_000n);
    say(
      `   chain ${deployment.chainId} at ${chain.rpcUrl}; market ${deployment.contracts.market}${options.attestors.length ? `; attestors: accounts ${options.attestors.join(", ")}` : ""}`,
    );

    // Node identities and ports are fixed up front so every node can bootstrap from the others.
    type NodeSpec = { name: string; dir: string; port: number; addr: string };
    const specs: NodeSpec[] = [];
    for (const name of [...options.providers.map((p) => p.name), ...options.attestors.map((i) => `attestor-${i}`)]) {
      const dir = path.join(workDir, name);
      await mkdir(dir, { recursive: true });
      const { key } = await loadOrCreatePeerKey(path.join(dir, "peer.key"));
      const port = await freePort();
      specs.push({ name, dir, port, addr: `/ip4/127.0.0.1/tcp/${port}/p2p/${peerIdFromPrivateKey(key).toString()}` });
    }
    const providerAddrs = specs.slice(0, options.providers.length).map((s) => s.addr);
    const attestorAddrs = specs.slice(options.providers.length).map((s) => s.addr);
    const common = (spec: NodeSpec, key: `0x${string}`) => ({
      dataDir: spec.dir,
      log: { level: options.logLevel ?? "info", format: "pretty" },
      chain: { rpcUrl: chain.rpcUrl, deploymentsDir, privateKey: key, pollingIntervalMs: 200 },
      p2p: {
        listen: [`/ip4/127.0.0.1/tcp/${spec.port}`],
        bootstrap: providerAddrs.filter((addr) => addr !== spec.addr),
        allowPrivateAddresses: true,
        dht: { enabled: false },
        gossip: { heartbeatIntervalMs: 300, ipColocationWhitelist: ["127.0.0.1"] },
        connections: { inboundPerSecondPerHost: 100 },
      },
    });
    const attest = { challenge: { preset: "cpu-devnet" }, runner: { kind: "cpu", workers: 1 } };

    const runtime = await demoTaskRuntime();
    say(`   tasks: ${runtime.description}`);
    say(
      `2. Starting ${options.providers.length} providers (declared GPUs, idle workload on free GPUs)${options.attestors.length ? ` and ${options.attestors.length} attestors` : ""}...`,
    );
    const metricsPorts: number[] = [];
    for (const [i, p] of options.providers.entries()) {
      const spec = specs[i]!;
      const idleScript = path.join(spec.dir, "idle.js");
      await writeFile(idleScript, IDLE_WORKLOAD_SCRIPT);
      const metricsPort = await freePort();
      metricsPorts.push(metricsPort);
      const config = {
        ...common(spec, devnetPrivateKey(p.account)),
        attest,
        metrics: { enabled: true, host: "127.0.0.1", port: metricsPort },
        provider: {
          inventory: { source: "declared", declared: [{ model: p.model, count: p.count, interconnect: "nvlink", region: p.region }] },
          prices: { [p.model]: { usdPerGpuHour: Number(p.usd) } },
          ...(p.minBid ? { minBids: { [p.model]: { usdPerGpuHour: Number(p.minBid) } } } : {}),
          idle: { command: ["node", idleScript], scope: "machine" },
          runtime: { ...runtime.config, ...p.runtime },
          // The demo's bundle server listens on 127.0.0.1, which a provider refuses by default.
          fetch: { allowNetworks: ["127.0.0.1"] },
          grace: { taskStopMs: 1_000, idleStopMs: 1_000 },
          chain: { stakeTarget: "2000" },
          terms: { collateralBps: 2000, startWindowSeconds: 120, minDurationSeconds: 10 },
          claims: { intervalMs: 5_000, minAmount: "1" },
          leases: { reconcileIntervalMs: 500 },
        },
      };
      const file = path.join(spec.dir, "config.json");
      await writeFile(file, JSON.stringify(config, null, 2));
      processes.push(startNodeProcess(p.name, ["provider", "start", "--config", file], path.join(spec.dir, "node.log")));
      say(
        `   ${p.name}: ${p.count}× ${p.model} in ${p.region} at ${p.usd} USD/GPU-h${p.minBid ? ` (interruptible from ${p.minBid})` : ""} — wallet ${devnetAccount(p.account).address}`,
      );
    }
    for (const [j, index] of options.attestors.entries()) {
      const spec = specs[options.providers.length + j]!;
      const config = {
        ...common(spec, devnetPrivateKey(index)),
        attest: { ...attest, attestor: { scheduleIntervalMs: 1_000, peers: attestorAddrs.filter((addr) => addr !== spec.addr) } },
      };
      const file = path.join(spec.dir, "config.json");
      await writeFile(file, JSON.stringify(config, null, 2));
      processes.push(startNodeProcess(spec.name, ["attestor", "start", "--config", file], path.join(spec.dir, "node.log")));
      say(`   ${spec.name}: wallet ${devnetAccount(index).address} (ATTESTOR_ROLE)`);
    }
    for (const proc of processes) {
      runDetached(
        proc.exited.then((code) => {
          if (code !== null && code !== 0) say(`   !! ${proc.name} exited with code ${code}; its log: ${proc.logFile}`);
        }),
        undefined,
        "Watching a demo process",
      );
    }
    return { chain, deployment, admin, providerAddrs, metricsPorts, processes, workDir, mint, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

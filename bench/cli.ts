/**
 * `npm run bench -- cli [--json] [--runs N]`: how long a `suanli` command takes, start to exit,
 * as a user runs it (bin/suanli.mjs, the prebuilt bundle when current; `npm run build:cli` first).
 * Offline commands (--version, --help, templates) and chain reads (wallet balance, wallet owed)
 * against an embedded devnet chain on 127.0.0.1 with the contracts deployed. Each command runs
 * `--runs` times (default 7) one after another; p50 and max of the wall time, and the child's CPU
 * time (user + system) at the p50. Target (issue #39): p50 ≤ 1 s.
 *
 * `--network` adds the renter's reads that reach the market: `suanli devnet --api-port
 * --demo-offers` runs as a child (its chain, an API node, three providers' offers), and `offers`
 * and `tasks` run twice each way: joining through libp2p (`--bootstrap`, the API node's
 * multiaddr) and through the node's HTTP API (`--node-url`).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { devnetAccount } from "../common/devnet.js";
import { connectChain } from "../node/chain/clients.js";
import { deployContracts } from "../node/chain/deploy.js";
import { startEmbeddedChain } from "../node/chain/embedded.js";
import { freePort } from "../node/demo/processes.js";
import { writeDeployment } from "../node/chain/manifest.js";
import type { MainFigure } from "./_calibration.js";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const BIN = path.join(root, "bin", "suanli.mjs");
/** Node 22, as the npm scripts run it (the system Node may be older: the bin would start twice). */
const NODE = path.join(root, "node_modules", "node", "bin", "node");

export const mainFigures: MainFigure[] = [];

type Sample = { wallMs: number; cpuMs: number };

/** Runs the CLI once; resolves with its wall time (ms), rejects when it exits non-zero. */
function runOnce(args: string[]): Promise<number> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn(NODE, [BIN, ...args], { stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    child.on("error", reject);
    child.on("exit", (code) => {
      const wallMs = performance.now() - started;
      if (code !== 0) reject(new Error(`suanli ${args.join(" ")} exited ${code}: ${stderr.slice(0, 500)}`));
      else resolve(wallMs);
    });
  });
}

/**
 * CPU time (user + system, ms) of this process's children that have exited and been waited for
 * (cutime + cstime of /proc/self/stat, in clock ticks of 10 ms): read around each run, the run's own.
 */
async function childrenCpuMs(): Promise<number> {
  const fields = (await readFile("/proc/self/stat", "utf8")).split(") ")[1]!.split(" ");
  // cutime and cstime are fields 16 and 17 (1-based) of /proc/<pid>/stat; after the ") " split they are at index 13 and 14.
  const ticks = Number(fields[13]) + Number(fields[14]);
  return (ticks * 1000) / 100;
}

async function measure(args: string[], runs: number): Promise<{ p50Ms: number; maxMs: number; cpuP50Ms: number }> {
  const samples: Sample[] = [];
  for (let i = 0; i < runs; i++) {
    const cpuBefore = await childrenCpuMs();
    const wallMs = await runOnce(args);
    samples.push({ wallMs, cpuMs: (await childrenCpuMs()) - cpuBefore });
  }
  const byWall = [...samples].sort((a, b) => a.wallMs - b.wallMs);
  const median = byWall[Math.floor((byWall.length - 1) / 2)]!;
  return { p50Ms: Math.round(median.wallMs), maxMs: Math.round(byWall.at(-1)!.wallMs), cpuP50Ms: Math.round(median.cpuMs) };
}

/** `suanli devnet` with an API node and demo offers, as a child; resolves once it prints its addresses. */
async function startNetworkDevnet(work: string): Promise<{ child: ChildProcess; flags: string[]; bootstrap: string; nodeUrl: string }> {
  const [rpcPort, apiPort] = [await freePort(), await freePort()];
  const deployments = path.join(work, "network-deployments");
  const child = spawn(NODE, [BIN, "devnet", "--port", String(rpcPort), "--api-port", String(apiPort), "--demo-offers", "--bundler-port", "0", "--deployments", deployments], {
    cwd: root,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  child.stdout!.on("data", (chunk: Buffer) => (out += chunk.toString()));
  child.stderr!.on("data", (chunk: Buffer) => (out += chunk.toString()));
  const deadline = Date.now() + 180_000;
  while (!out.includes("Press Ctrl-C to stop.")) {
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill("SIGTERM");
      throw new Error(`suanli devnet did not start: ${out.slice(-1_000)}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  const bootstrap = /bootstrap other nodes with (\S+)\)/.exec(out)?.[1];
  if (!bootstrap) throw new Error(`suanli devnet printed no API node multiaddr: ${out.slice(-1_000)}`);
  return { child, flags: ["--rpc-url", `http://127.0.0.1:${rpcPort}`, "--deployments", deployments], bootstrap, nodeUrl: `http://127.0.0.1:${apiPort}` };
}

export async function run(args: string[]): Promise<Record<string, unknown>> {
  const runsAt = args.indexOf("--runs");
  const runs = runsAt >= 0 ? Number(args[runsAt + 1]) : 7;
  if (!Number.isInteger(runs) || runs < 1 || runs > 100) throw new Error("--runs takes a whole number from 1 to 100");
  const work = await mkdtemp(path.join(tmpdir(), "suanli-bench-cli-"));
  const chain = await startEmbeddedChain({ wallClockBlocks: true });
  let network: Awaited<ReturnType<typeof startNetworkDevnet>> | undefined;
  try {
    const admin = await connectChain({ rpcUrl: chain.rpcUrl, account: devnetAccount(0), pollingIntervalMs: 100 });
    const deployment = await deployContracts({ publicClient: admin.publicClient, walletClient: admin.walletClient!, attestors: [] });
    const deployments = path.join(work, "deployments");
    await writeDeployment(deployments, deployment);
    const chainFlags = ["--rpc-url", chain.rpcUrl, "--deployments", deployments, "--devnet-account", "5", "--json"];
    const commands: [string, string[]][] = [
      ["--version", ["--version"]],
      ["--help", ["--help"]],
      ["templates", ["templates", "--json"]],
      ["wallet balance", ["wallet", "balance", ...chainFlags]],
      ["wallet owed", ["wallet", "owed", ...chainFlags]],
    ];
    if (args.includes("--network")) {
      network = await startNetworkDevnet(work);
      const renter = [...network.flags, "--devnet-account", "5", "--state-dir", path.join(work, "state"), "--json"];
      commands.push(
        ["offers (libp2p)", ["offers", ...network.flags, "--bootstrap", network.bootstrap, "--json"]],
        ["offers (HTTP)", ["offers", ...network.flags, "--node-url", network.nodeUrl, "--json"]],
        ["tasks (libp2p)", ["tasks", ...renter, "--bootstrap", network.bootstrap]],
        ["tasks (HTTP)", ["tasks", ...renter, "--node-url", network.nodeUrl]],
      );
    }
    const results: Record<string, { p50Ms: number; maxMs: number; cpuP50Ms: number }> = {};
    console.log(`command                p50 ms   max ms   CPU ms at p50   (${runs} runs each, Node ${process.versions.node})`);
    for (const [name, commandArgs] of commands) {
      const result = await measure(commandArgs, runs);
      results[name] = result;
      console.log(`${name.padEnd(21)} ${String(result.p50Ms).padStart(7)} ${String(result.maxMs).padStart(8)} ${String(result.cpuP50Ms).padStart(15)}`);
    }
    const worstP50Ms = Math.max(...Object.values(results).map((r) => r.p50Ms));
    console.log(`slowest p50 ${worstP50Ms} ms (target ≤ 1,000 ms)`);
    return { runs, commands: results, worstP50Ms, targetP50Ms: 1_000 };
  } finally {
    if (network) {
      const exited = new Promise((resolve) => network!.child.once("exit", resolve));
      network.child.kill("SIGTERM");
      await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 15_000))]);
      if (network.child.exitCode === null) network.child.kill("SIGKILL");
    }
    await chain.close();
    await rm(work, { recursive: true, force: true });
  }
}

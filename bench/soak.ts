/**
 * `npm run bench -- soak [--json] [--seconds N] [--providers P] [--renters R] [--seed S]`: the
 * market under faults over time. A devnet, P provider nodes (real child processes, their chain
 * RPC behind the chaos proxy) and R renters renting random leases (1 or 2 units, 5 to 40 s) with
 * random tasks (short, long, failing) for N seconds (default 300), while faults are injected at
 * random: the chain RPC away for a few seconds, the RPC slowed down, connections reset in flight,
 * a provider SIGKILLed and restarted on its data dir. Then every lease is drained and the chaos
 * ledger checks the money.
 *
 * Summary: leasesRun, tasksCompleted, tasksFailed, migrations, faultsInjected (by kind),
 * baseUnitsLost (must be 0), unitsDoubleLeased (0), leasesStuck (0), leasesOpenAfterDrain (0), violations, and each node's
 * heap and open handles at start and end (from its Prometheus endpoint). A CI test runs a short
 * version (test/e2e/chaos-soak.test.ts).
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { startBundleServer } from "../test/support/bundles.js";
import { checkLedger, RpcProxy, watchWallets } from "../test/support/chaos.js";
import { leaseMarketAbi } from "../common/abi.js";
import { fund, send, startDevnet } from "../test/support/devnet.js";
import { testProviderConfig } from "../test/support/provider.js";
import { ProviderProcess } from "../test/support/provider-process.js";
import { TestRenter } from "../test/support/renter.js";

function option(args: string[], name: string, fallback: number): number {
  const at = args.indexOf(`--${name}`);
  if (at < 0) return fallback;
  const n = Number(args[at + 1]);
  if (!Number.isSafeInteger(n) || n <= 0) throw new Error(`--${name} must be a positive integer, got ${args[at + 1]}`);
  return n;
}

/** A small seeded generator (mulberry32), so a run can be replayed with --seed. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

type NodeStats = { heapUsedBytes: number | null; activeHandles: number | null };

async function nodeStats(node: ProviderProcess): Promise<NodeStats> {
  const text = node.ready.metricsUrl ? await (await fetch(node.ready.metricsUrl)).text().catch(() => "") : "";
  const metric = (name: string) => {
    const match = new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, "m").exec(text);
    return match ? Number(match[1]) : null;
  };
  return { heapUsedBytes: metric("suanli_nodejs_heap_size_used_bytes"), activeHandles: metric("suanli_nodejs_active_handles_total") };
}

export async function run(args: string[]): Promise<Record<string, unknown>> {
  const seconds = option(args, "seconds", 300);
  const providerCount = option(args, "providers", 3);
  const renterCount = option(args, "renters", 4);
  const seed = option(args, "seed", 20);
  const rand = random(seed);
  const pick = <T>(items: T[]): T => items[Math.floor(rand() * items.length)]!;

  const devnet = await startDevnet();
  const bundles = await startBundleServer();
  const proxy = await RpcProxy.start(devnet.rpcUrl);
  const dir = await mkdtemp(path.join(tmpdir(), "suanli-soak-"));
  const nodes: { configFile: string; node: ProviderProcess; machineId: number; down: boolean }[] = [];
  const renters: TestRenter[] = [];
  const counts = { leasesRun: 0, rentRefused: 0, closedByRenter: 0, tasksCompleted: 0, tasksFailed: 0, migrations: 0 };
  const faults: Record<string, number> = { rpcOutage: 0, rpcDelay: 0, rpcReset: 0, providerKill: 0 };
  try {
    for (let i = 0; i < providerCount; i++) {
      const configFile = path.join(dir, `provider-${i}.json`);
      const config = testProviderConfig(1 + i, {
        dataDir: path.join(dir, `data-${i}`),
        log: { level: "warn", format: "json" },
        chain: { rpcUrl: proxy.url, deploymentsDir: devnet.deploymentsDir, pollingIntervalMs: 200 },
        p2p: { listen: ["/ip4/127.0.0.1/tcp/0"], allowPrivateAddresses: true, dht: { enabled: false }, gossip: { ipColocationWhitelist: ["127.0.0.1"] } },
        metrics: { enabled: true, port: 0 },
      });
      await writeFile(configFile, JSON.stringify(config, null, 2));
      await fund(devnet, await devnet.wallet(1 + i), 2_000_000_000n);
      const node = await ProviderProcess.start(configFile);
      nodes.push({ configFile, node, machineId: node.ready.machines[0]!.machineId, down: false });
    }
    for (let i = 0; i < renterCount; i++) renters.push(await TestRenter.start(devnet, 1 + providerCount + i));
    const wallets = await watchWallets(devnet, [
      ...renters.map((r) => ({ address: r.address, role: "renter" as const })),
      ...nodes.map((n) => ({ address: n.node.ready.address, role: "provider" as const })),
    ]);
    const statsAtStart = await Promise.all(nodes.map((n) => nodeStats(n.node)));
    const tasks = {
      short: await bundles.bundle({ "run.sh": "echo ok\n" }),
      long: await bundles.bundle({ "run.sh": "sleep 4\necho ok\n" }),
      failing: await bundles.bundle({ "run.sh": "echo bad >&2\nexit 3\n" }),
    };
    const deadline = Date.now() + seconds * 1000;

    // Renters: rent, send a task, follow it (status over libp2p) until it ends or the node goes away.
    const renterLoop = async (renter: TestRenter) => {
      while (Date.now() < deadline) {
        const target = pick(nodes);
        if (target.down) {
          await sleep(500);
          continue;
        }
        let leaseId: bigint | undefined;
        try {
          leaseId = await renter.rent(target.node.peer, { machineId: target.machineId, units: rand() < 0.5 ? 1 : 2, duration: 5 + Math.floor(rand() * 36) });
          counts.leasesRun++;
          const kind = pick(["short", "long", "failing"] as const);
          await renter.sendTask(target.node.peer, leaseId, { bundle: tasks[kind], command: "sh run.sh" });
          const status = await renter.waitStatus(target.node.peer, leaseId, (s) => ["succeeded", "failed", "exceeded", "cancelled"].includes(s.state), "the task to end", 30_000);
          if (status.state === "succeeded") counts.tasksCompleted++;
          else counts.tasksFailed++;
        } catch {
          // Refused (machine busy), or the node or the chain went away under the renter. A lease it
          // opened but could not use is closed, as the SDK does: refunded by the rules (the ledger checks how much).
          counts.rentRefused++;
          if (leaseId !== undefined) {
            const view = await renter.lease(leaseId);
            if (view.status === "Open" || view.status === "Active") {
              await send(renter.clients, { address: renter.market, abi: leaseMarketAbi, functionName: "close", args: [leaseId] } as never).catch(() => undefined);
              counts.closedByRenter++;
            }
          }
          await sleep(300);
        }
      }
    };

    // Faults: one every 2 to 5 s; every kind once first (in random order), then at random.
    const kinds = ["rpcOutage", "rpcDelay", "rpcReset", "providerKill"] as const;
    const firstRound = [...kinds].sort(() => rand() - 0.5);
    const faultLoop = async () => {
      while (Date.now() < deadline - 5_000) {
        await sleep(2_000 + rand() * 3_000);
        const fault = firstRound.shift() ?? pick([...kinds]);
        faults[fault]!++;
        if (fault === "rpcOutage") {
          proxy.down();
          await sleep(2_000 + rand() * 4_000);
          proxy.up();
        } else if (fault === "rpcDelay") {
          proxy.set({ kind: "delay", ms: 200 + Math.floor(rand() * 800) });
          await sleep(3_000);
          proxy.up();
        } else if (fault === "rpcReset") {
          proxy.cut();
        } else {
          const victim = pick(nodes);
          victim.down = true;
          await victim.node.kill("SIGKILL");
          await sleep(1_000);
          victim.node = await ProviderProcess.start(victim.configFile);
          victim.down = false;
        }
      }
    };
    await Promise.all([...renters.map(renterLoop), faultLoop()]);
    proxy.up();

    // Drain: every lease ends (the longest runs 40 s past its activation, plus the nodes' grace).
    const drainDeadline = Date.now() + 90_000;
    let report = await checkLedger(devnet, { wallets, capacity: new Map(nodes.map((n) => [n.machineId, 2])) });
    while (report.leases.some((l) => l.status === "Open" || l.status === "Active") && Date.now() < drainDeadline) {
      await sleep(1_000);
      report = await checkLedger(devnet, { wallets, capacity: new Map(nodes.map((n) => [n.machineId, 2])), stuckGraceSeconds: 30 });
    }
    const stillOpen = report.leases.filter((l) => l.status === "Open" || l.status === "Active").map((l) => l.leaseId);
    const statsAtEnd = await Promise.all(nodes.map((n) => nodeStats(n.node)));
    // The stated bound: a node's heap at most doubles plus 64 MiB, and holds at most 32 more handles, over the run.
    const withinBounds = statsAtEnd.every((end, i) => {
      const start = statsAtStart[i]!;
      if (start.heapUsedBytes === null || end.heapUsedBytes === null || start.activeHandles === null || end.activeHandles === null) return false;
      return end.heapUsedBytes <= 2 * start.heapUsedBytes + 64 * 1024 * 1024 && end.activeHandles <= start.activeHandles + 32;
    });
    const byReason: Record<string, number> = {};
    for (const lease of report.leases) byReason[`${lease.status}/${lease.endReason}`] = (byReason[`${lease.status}/${lease.endReason}`] ?? 0) + 1;
    const summary = {
      seconds,
      providers: providerCount,
      renters: renterCount,
      seed,
      ...counts,
      faultsInjected: Object.values(faults).reduce((a, b) => a + b, 0),
      faults,
      leasesByOutcome: byReason,
      baseUnitsLost: report.marketDrift < 0n ? -report.marketDrift : report.marketDrift,
      unitsDoubleLeased: report.doubleLeased.length,
      leasesStuck: report.stuck.length,
      leasesOpenAfterDrain: stillOpen.length,
      nodeResourcesWithinBounds: withinBounds,
      violations: report.violations,
      nodes: nodes.map((n, i) => ({ address: n.node.ready.address, start: statsAtStart[i], end: statsAtEnd[i] })),
    };
    console.log(`soak: ${seconds} s, ${providerCount} providers, ${renterCount} renters, seed ${seed}`);
    console.log(`  leases run ${counts.leasesRun}, tasks completed ${counts.tasksCompleted}, failed ${counts.tasksFailed}, refused/lost rents ${counts.rentRefused}`);
    console.log(`  faults ${JSON.stringify(faults)}`);
    console.log(`  base units lost ${summary.baseUnitsLost}, units double-leased ${summary.unitsDoubleLeased}, leases stuck ${summary.leasesStuck}`);
    for (const v of report.violations) console.log(`  VIOLATION ${v}`);
    return summary;
  } finally {
    for (const n of nodes) if (n.node.child.exitCode === null) await n.node.kill("SIGTERM").catch(() => undefined);
    for (const r of renters) await r.close();
    await proxy.close();
    await bundles.close();
    await devnet.close();
    await rm(dir, { recursive: true, force: true });
  }
}

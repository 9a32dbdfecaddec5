/**
 * Propagation over nodes spread across child processes (bench/_gossip-host.ts), for networks
 * larger than one event loop can host without measuring its own queue (the 50 nodes).
 * Same method as the in-process propagation of bench/gossip.ts: providers publish at a fixed
 * rate; for each message, the time from its publication (the provider's own book) until the last
 * other node's book holds it. Timestamps are taken in each process against the epoch
 * (performance.timeOrigin + now(), one clock: the processes share this machine).
 */
import { fork, type ChildProcess } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { Hex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import type { P2pOptions } from "../node/p2p/options.js";
import { machineSpec, type MachineSpec } from "../test/support/offer-fixtures.js";

type SpreadOptions = { nodes: number; providers: number; machines: number; rounds: number; roundGapMs: number; processes: number };
type Reply = { type: string; [key: string]: unknown };

const here = path.dirname(fileURLToPath(import.meta.url));

class Host {
  private readonly waiting = new Map<string, ((reply: Reply) => void)[]>();
  constructor(
    readonly child: ChildProcess,
    onArrival: (id: string, index: number, at: number) => void,
  ) {
    child.on("message", (reply: Reply) => {
      if (reply.type === "arrival") return onArrival(reply.id as string, reply.index as number, reply.at as number);
      if (reply.type === "error") console.error(`gossip host ${child.pid}: ${String(reply.message)}`);
      const queue = this.waiting.get(reply.type);
      queue?.shift()?.(reply);
    });
  }
  /** Sends a request and waits for the child's answer of `answer` type (bounded). */
  ask(message: Record<string, unknown>, answer: string, timeoutMs = 120_000): Promise<Reply> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`gossip host ${this.child.pid}: no "${answer}" within ${timeoutMs} ms`)), timeoutMs);
      const queue = this.waiting.get(answer) ?? [];
      queue.push((reply) => {
        clearTimeout(timer);
        resolve(reply);
      });
      this.waiting.set(answer, queue);
      this.child.send(message);
    });
  }
}

const percentile = (sorted: number[], p: number) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]! : NaN);
const round1 = (x: number) => Math.round(x * 10) / 10;

/**
 * From each message's arrival time on each of `nodes` nodes (its origin's included): the time
 * until the last other node held it, every single delivery, and the deliveries that never came.
 */
export function deliveryFigures(published: { id: string; origin: number }[], arrivals: Map<string, Map<number, number>>, nodes: number) {
  const toAll: number[] = [];
  const deliveries: number[] = [];
  let missing = 0;
  for (const { id, origin } of published) {
    const byNode = arrivals.get(id)!;
    const t0 = byNode.get(origin)!;
    let worst = 0;
    for (let index = 0; index < nodes; index++) {
      if (index === origin) continue;
      const at = byNode.get(index);
      if (at === undefined) {
        missing++;
        continue;
      }
      deliveries.push(at - t0);
      worst = Math.max(worst, at - t0);
    }
    toAll.push(worst);
  }
  toAll.sort((a, b) => a - b);
  deliveries.sort((a, b) => a - b);
  const figures = (sorted: number[]) => ({ p50: round1(percentile(sorted, 50)), p95: round1(percentile(sorted, 95)), max: round1(sorted[sorted.length - 1]!) });
  return { missingDeliveries: missing, toAllNodesMs: figures(toAll), perDeliveryMs: figures(deliveries) };
}

export async function propagationInProcesses(options: SpreadOptions, p2p: Partial<P2pOptions>) {
  const attestorKey = generatePrivateKey();
  // Node 0 is the seed (bootstrap); nodes 1..providers publish.
  const providerKeys = new Map<number, Hex>();
  for (let i = 1; i <= options.providers; i++) providerKeys.set(i, generatePrivateKey());
  const specs = new Map<number, MachineSpec[]>();
  [...providerKeys.keys()].forEach((index, p) =>
    specs.set(
      index,
      Array.from({ length: options.machines }, (_, m) => machineSpec(1 + p * options.machines + m)),
    ),
  );

  const arrivals = new Map<string, Map<number, number>>();
  const onArrival = (id: string, index: number, at: number) => {
    let byNode = arrivals.get(id);
    if (!byNode) arrivals.set(id, (byNode = new Map()));
    byNode.set(index, at);
  };
  // Nodes are dealt round-robin so providers land in different processes.
  const owner: number[] = Array.from({ length: options.nodes }, (_, i) => i % options.processes);
  const hosts = Array.from(
    { length: options.processes },
    () => new Host(fork(path.join(here, "_gossip-host.ts"), [], { stdio: ["ignore", "inherit", "inherit", "ipc"] }), onArrival),
  );
  const hostOf = (index: number) => hosts[owner[index]!];
  try {
    const peerIds = new Map<number, string>();
    // Each node bootstraps from the seed and two nodes already up (as a real node's config lists
    // a few known peers), so 50 nodes do not all queue on one seed's DHT.
    const known: string[] = [];
    const bootstrapFor = () => {
      if (known.length === 0) return [];
      const others = known
        .slice(1)
        .sort(() => Math.random() - 0.5)
        .slice(0, 2);
      return [known[0], ...others];
    };
    const startNodes = async (indexes: number[]) => {
      const byHost = new Map<Host, number[]>();
      for (const index of indexes) byHost.set(hostOf(index)!, [...(byHost.get(hostOf(index)!) ?? []), index]);
      // One start per node (a host starts its nodes in order; hosts in parallel).
      await Promise.all(
        [...byHost.entries()].map(async ([host, list]) => {
          for (const index of list) {
            const reply = await host.ask(
              { type: "start", first: index, count: 1, providerKeys: Object.fromEntries(providerKeys), bootstrap: bootstrapFor(), attestorKey, p2p },
              "started",
            );
            for (const node of reply.nodes as { index: number; addr: string; peerId: string }[]) {
              peerIds.set(node.index, node.peerId);
              if (node.index === 0) known.unshift(node.addr);
              else known.push(node.addr);
            }
          }
        }),
      );
    };
    await startNodes([0]);
    await startNodes(Array.from({ length: options.nodes - 1 }, (_, i) => i + 1));
    const providers = [...providerKeys.entries()].map(([index, key]) => ({ address: privateKeyToAccount(key).address, peerId: peerIds.get(index)!, machines: specs.get(index)! }));
    await Promise.all(hosts.map((host) => host.ask({ type: "register", providers }, "registered")));
    // Every node with at least min(3, n-1) mesh peers, within a bound.
    const meshDeadline = performance.now() + 120_000;
    const want = Math.min(3, options.nodes - 1);
    for (;;) {
      const least = Math.min(...(await Promise.all(hosts.map((host) => host.ask({ type: "mesh" }, "mesh")))).map((r) => r.minPeers as number));
      if (least >= want) break;
      if (performance.now() > meshDeadline) throw new Error(`gossip meshes did not form within 120 s (a node has ${least} mesh peers, want ${want})`);
      await new Promise((resolve) => setTimeout(resolve, 250));
    }

    const published: { id: string; origin: number }[] = [];
    const providerIndexes = [...providerKeys.keys()];
    const perRound = providerIndexes.length * options.machines;
    const spacingMs = options.roundGapMs / perRound;
    for (let round = 0; round < options.rounds; round++) {
      const roundStart = performance.now();
      const jobs: Promise<void>[] = [];
      for (let m = 0; m < options.machines; m++) {
        for (let p = 0; p < providerIndexes.length; p++) {
          const wait = roundStart + (m * providerIndexes.length + p) * spacingMs - performance.now();
          if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
          const index = providerIndexes[p]!;
          const provider = privateKeyToAccount(providerKeys.get(index)!).address;
          jobs.push(
            hostOf(index)!
              .ask({ type: "publish", index, provider, spec: specs.get(index)![m], round }, "published")
              .then((reply) => {
                if (reply.id) published.push({ id: reply.id as string, origin: index });
              }),
          );
        }
      }
      await Promise.all(jobs);
      const left = roundStart + options.roundGapMs - performance.now();
      if (left > 0) await new Promise((resolve) => setTimeout(resolve, left));
    }
    const settleDeadline = performance.now() + 20_000;
    while (performance.now() < settleDeadline && !published.every(({ id }) => (arrivals.get(id)?.size ?? 0) >= options.nodes)) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }

    const delivery = deliveryFigures(published, arrivals, options.nodes);
    return {
      nodes: options.nodes,
      processes: options.processes,
      providers: providerIndexes.length,
      messages: published.length,
      messagesPerSec: round1((perRound * 1_000) / options.roundGapMs),
      ...delivery,
    };
  } finally {
    await Promise.all(hosts.map((host) => host.ask({ type: "stop" }, "stopped", 30_000).catch(() => host.child.kill("SIGKILL"))));
  }
}

/**
 * `npm run bench -- gossip [--json] [--nodes 10] [--providers 4] [--machines 3] [--rounds 10] [--roundGapMs 500] [--ingest 4000]`
 *
 * 1. Propagation: starts `--nodes` real nodes on 127.0.0.1 (libp2p over TCP, Kademlia DHT,
 *    gossipsub, level books in temp dirs, one in-memory chain), makes `--providers` of them
 *    provider nodes with `--machines` machines each, and has every provider update every
 *    machine's offer `--rounds` times, one round per `--roundGapMs` (24 messages/s network-wide
 *    by default, far above the re-announcement traffic of 12 machines). For each message: the time from its publication (the
 *    provider's own book) until the last other node's book holds it. Reports p50, p95, max.
 * 2. Ingest: one node validates `--ingest` distinct offers (each with its own EIP-712 Offer
 *    signature and attestation, from 50 providers) through the node's ingest path (the one the
 *    gossip validator runs), one after another on one thread, after 2,000 untimed ones (JIT warm-up): offers per CPU-second of the
 *    process (the target's "on one core", unaffected by other work on a shared machine) and per
 *    wall-clock second. Then the same machines re-priced (new Offer signatures, attestations already
 *    verified: the steady state), and the first batch again over gossip from a peer in this process
 *    (both sides share the thread, so that figure is a lower bound).
 *
 * Targets (issue #4): p95 propagation <= 500 ms with 10 nodes; ingest >= 2,000 offers/s.
 */
import { availableParallelism, loadavg } from "node:os";
import { performance } from "node:perf_hooks";
import { encodeOfferMessage, offerKey, offersTopic } from "../common/offers/message.js";
import { createHost, type GossipSubInspect } from "../common/p2p/host.js";
import { offersTopics } from "../node/offers/service.js";
import type { P2pOptions } from "../node/p2p/options.js";
import { deliveryFigures, propagationInProcesses } from "./_gossip-spread.js";
import { MemoryChainView } from "../test/support/memory-chain-view.js";
import { loopbackP2pOptions, startTestNode, waitForMesh, type TestNode } from "../test/support/nodes.js";
import {
  TEST_CHAIN_ID,
  attest,
  buildOfferMessage,
  createProvider,
  createSigner,
  machineSpec,
  registerOnChain,
  type MachineSpec,
  type ProviderFixture,
} from "../test/support/offer-fixtures.js";
import { waitFor } from "../test/support/wait.js";
import type { MainFigure } from "./_calibration.js";

type Options = { nodes: number; providers: number; machines: number; rounds: number; ingest: number; roundGapMs: number; processes: number };

function parseArgs(args: string[]): Options {
  const options: Options = { nodes: 10, providers: 4, machines: 3, rounds: 10, ingest: 4_000, roundGapMs: 500, processes: 0 };
  for (let i = 0; i < args.length; i++) {
    const name = args[i]!.replace(/^--/, "");
    const value = Number(args[i + 1]);
    if (!(name in options) || !Number.isInteger(value) || value < 1) {
      throw new Error(`usage: gossip [--nodes N] [--providers N] [--machines N] [--rounds N] [--ingest N] [--roundGapMs N] [--processes N] (bad: ${args[i]})`);
    }
    (options as Record<string, number>)[name] = value;
    i++;
  }
  if (options.nodes < 2 || options.providers >= options.nodes) throw new Error("need at least 2 nodes and fewer providers than nodes");
  // Up to 10 nodes share this process (the first turn's method, kept for comparable figures);
  // more are spread over child processes of about 10 nodes each, as separate machines would be.
  if (options.processes === 0) options.processes = options.nodes <= 10 ? 1 : Math.ceil(options.nodes / 10);
  if (options.processes > options.nodes) throw new Error("--processes must not exceed --nodes");
  return options;
}

const round1 = (x: number) => Math.round(x * 10) / 10;

/** Issue #19: propagation p95 at 10 and at 50 nodes; validated ingest per CPU-second on one core. */
const TARGETS = { propagationP95Ms: 500, ingestPerCpuSec: 5_000 };

// The daemon's gossip settings (700 ms heartbeat), not the tests' fast ones; only the same-IP
// penalty is lifted, since every node here shares 127.0.0.1.
const GOSSIP_P2P: Partial<P2pOptions> = {
  connections: { inboundPerSecondPerHost: 10_000, min: 6, max: 300, dialTimeoutMs: 10_000 },
  gossip: { enabled: true, D: 6, Dlo: 4, Dhi: 12, heartbeatIntervalMs: 700, maxInboundFrameBytes: 1024 * 1024, ipColocationWhitelist: ["127.0.0.1"], peerMemorySeconds: 3_600 },
};

async function propagation(options: Options) {
  const chain = new MemoryChainView();
  const attestor = createSigner();
  chain.addAttestor(attestor.address);
  const nodes: TestNode[] = [];
  const p2p = GOSSIP_P2P;
  try {
    const seed = await startTestNode({ chain, dht: true, p2p });
    nodes.push(seed);
    const wallets: ProviderFixture[] = [];
    for (let i = 1; i < options.nodes; i++) {
      const wallet = i <= options.providers ? await createProvider() : undefined;
      const node = await startTestNode({ chain, dht: true, p2p, bootstrap: [seed.addr], provider: wallet?.account });
      nodes.push(node);
      if (wallet) wallets.push({ ...wallet, peerKey: node.peerKey, peerId: node.host.peerId.toString() });
    }
    const providerNodes = nodes.slice(1, options.providers + 1);
    const specs: MachineSpec[][] = wallets.map((wallet, p) => {
      const machines = Array.from({ length: options.machines }, (_, m) => machineSpec(1 + p * options.machines + m));
      registerOnChain(chain, wallet, machines);
      return machines;
    });
    await waitForMesh(nodes, Math.min(3, options.nodes - 1), 30_000);

    // arrival[messageId][nodeIndex] = ms; messageId = key#seq
    const arrivals = new Map<string, Map<number, number>>();
    nodes.forEach((node, index) => {
      node.offers.book.on("offer", (entry) => {
        const id = `${entry.key}#${entry.seq}`;
        let byNode = arrivals.get(id);
        if (!byNode) arrivals.set(id, (byNode = new Map()));
        byNode.set(index, performance.now());
      });
    });

    const published: { id: string; origin: number }[] = [];
    // Providers publish independently: each round spreads its updates evenly over the round
    // instead of firing them all in one burst (which would measure a self-made queue, since
    // all nodes share this process's one thread).
    const perRound = providerNodes.length * options.machines;
    const spacingMs = options.roundGapMs / perRound;
    for (let round = 0; round < options.rounds; round++) {
      const roundStart = performance.now();
      const jobs: Promise<void>[] = [];
      for (let m = 0; m < options.machines; m++) {
        for (let p = 0; p < providerNodes.length; p++) {
          const slot = m * providerNodes.length + p;
          const wait = roundStart + slot * spacingMs - performance.now();
          if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
          const node = providerNodes[p]!;
          const spec = specs[p]![m]!;
          jobs.push(
            node.offers
              .publisher!.set({
                machine: { ...spec },
                terms: { pricePerUnitSecond: BigInt(1_000 + round), minDuration: 60, maxDuration: 86_400, collateralBps: 1_000, startWindow: 300 },
                capacity: { freeUnits: spec.units - (round % spec.units) },
                attestations: [attest(attestor, wallets[p]!.address, spec)],
              })
              .then((message) => {
                if (message) published.push({ id: `${offerKey(message.offer.provider, message.offer.machineId)}#${message.seq}`, origin: nodes.indexOf(node) });
              }),
          );
        }
      }
      await Promise.all(jobs);
      const left = roundStart + options.roundGapMs - performance.now();
      if (left > 0) await new Promise((resolve) => setTimeout(resolve, left));
    }
    await waitFor("every message on every node", () => published.every(({ id }) => (arrivals.get(id)?.size ?? 0) >= nodes.length), {
      timeoutMs: 20_000,
    }).catch(() => undefined);

    const delivery = deliveryFigures(published, arrivals, nodes.length);
    return {
      nodes: nodes.length,
      providers: providerNodes.length,
      messages: published.length,
      messagesPerSec: round1((providerNodes.length * options.machines * 1_000) / options.roundGapMs),
      ...delivery,
    };
  } finally {
    await Promise.all(nodes.map((node) => node.stop({ removeDir: true })));
  }
}

async function ingest(options: Options) {
  const chain = new MemoryChainView();
  const attestor = createSigner();
  chain.addAttestor(attestor.address);
  // A first batch warms the JIT up and is not timed: the figure is the steady rate. 500 left
  // about a hundred optimisations (zod, the digest encoder, the book) inside the timed window.
  const warmup = 2_000;
  const total = options.ingest + warmup;
  const providerCount = Math.min(50, total);
  const perProvider = Math.ceil(total / providerCount);
  const all: Uint8Array[] = [];
  const updates: Uint8Array[] = [];
  for (let p = 0; p < providerCount && all.length < total; p++) {
    const provider = await createProvider();
    const specs = Array.from({ length: perProvider }, (_, m) => machineSpec(1 + p * perProvider + m));
    registerOnChain(chain, provider, specs);
    for (const spec of specs) {
      if (all.length >= total) break;
      const attestations = [attest(attestor, provider.address, spec)];
      all.push(encodeOfferMessage(await buildOfferMessage(provider, spec, { attestations })));
      // The steady state: the same machine re-priced (a new Offer signature, the same attestation).
      if (all.length > warmup) updates.push(encodeOfferMessage(await buildOfferMessage(provider, spec, { seq: 2, pricePerUnitSecond: 999n, attestations })));
    }
  }
  const warm = all.slice(0, warmup);
  const messages = all.slice(warmup);

  const receiver = await startTestNode({ chain, offers: { sync: { peers: 0 } } });
  // The gossip pair starts only after the CPU-time measurements: process.cpuUsage counts every
  // node in the process, and two idle ones (heartbeats, sweeps) would be billed to the receiver.
  let gossipReceiver: TestNode | undefined;
  let sender: Awaited<ReturnType<typeof createHost>> | undefined;
  try {
    // One node, its ingest path, one message after another: validation + book + level.
    for (const bytes of warm) await receiver.offers.gossip.ingest(bytes, "gossip");
    let accepted = 0;
    const started = performance.now();
    const cpuStarted = process.cpuUsage();
    for (const bytes of messages) {
      if ((await receiver.offers.gossip.ingest(bytes, "gossip")).ok) accepted++;
    }
    const seconds = (performance.now() - started) / 1_000;
    const cpu = process.cpuUsage(cpuStarted);
    // CPU time of the whole process (every thread: GC, level's I/O): the work one core does,
    // whatever else the machine runs at the same time.
    const cpuSeconds = (cpu.user + cpu.system) / 1e6;
    await receiver.offers.book.flush();
    if (accepted !== messages.length) throw new Error(`only ${accepted} of ${messages.length} offers were accepted`);

    const updatesCpu = process.cpuUsage();
    for (const bytes of updates) {
      if (!(await receiver.offers.gossip.ingest(bytes, "gossip")).ok) throw new Error("an update was refused");
    }
    const updatesUsage = process.cpuUsage(updatesCpu);
    const updatesPerCpuSec = Math.round(updates.length / ((updatesUsage.user + updatesUsage.system) / 1e6));

    // The same offers over gossip to a node with empty caches.
    gossipReceiver = await startTestNode({ chain, offers: { sync: { peers: 0 } } });
    const { identityFile: _file, ...hostOptions } = loopbackP2pOptions();
    sender = await createHost({ ...hostOptions, topics: offersTopics(TEST_CHAIN_ID) });
    const topic = offersTopic(TEST_CHAIN_ID);
    const pubsub = sender.services.pubsub as GossipSubInspect;
    pubsub.subscribe(topic);
    await sender.dial(gossipReceiver.host.getMultiaddrs()[0]!);
    await waitFor("the receiver's subscription", () => pubsub.getSubscribers(topic).length > 0);
    const book = gossipReceiver.offers.book;
    const gossipStart = performance.now();
    for (let i = 0; i < messages.length; i++) {
      // Keep a bounded window in flight: the receiver validates one message at a time per peer.
      if (i - book.size > 256) await waitFor("the receiver to catch up", () => i - book.size <= 128, { intervalMs: 1, timeoutMs: 30_000 });
      await pubsub.publish(topic, messages[i]);
    }
    await waitFor("every gossiped offer", () => book.size >= messages.length, { intervalMs: 1, timeoutMs: 60_000 });
    const gossipSeconds = (performance.now() - gossipStart) / 1_000;
    return {
      offers: messages.length,
      ingestPerSec: Math.round(messages.length / seconds),
      ingestPerCpuSec: Math.round(messages.length / cpuSeconds),
      updatesPerCpuSec,
      ingestOverGossipPerSec: Math.round(messages.length / gossipSeconds),
      validationCaches: receiver.offers.validator.cacheSizes(),
    };
  } finally {
    await sender?.stop();
    await Promise.all([receiver.stop({ removeDir: true }), gossipReceiver?.stop({ removeDir: true })]);
  }
}

/** The figures bench/run.ts divides by the same run's calibration figure (bench/_calibration.ts). */
export const mainFigures: MainFigure[] = [
  { field: "ingestPerCpuSec", per: "recoverPerCpuSec" },
  { field: "updatesPerCpuSec", per: "recoverPerCpuSec" },
];

export async function run(args: string[]): Promise<Record<string, unknown>> {
  const options = parseArgs(args);
  const prop = options.processes > 1 ? await propagationInProcesses(options, GOSSIP_P2P) : { processes: 1, ...(await propagation(options)) };
  const ing = await ingest(options);
  // Issue #19's targets (issue #4's were p95 <= 500 ms at 10 nodes and 2,000 offers/s).
  const pass = prop.toAllNodesMs.p95 <= TARGETS.propagationP95Ms && prop.missingDeliveries === 0 && ing.ingestPerCpuSec >= TARGETS.ingestPerCpuSec;
  const rows: [string, string][] = [
    ["nodes / processes / providers / messages", `${prop.nodes} / ${prop.processes} / ${prop.providers} / ${prop.messages} (${prop.messagesPerSec} messages/s network-wide)`],
    [
      "propagation to all nodes p50 / p95 / max",
      `${prop.toAllNodesMs.p50} / ${prop.toAllNodesMs.p95} / ${prop.toAllNodesMs.max} ms (target p95 <= ${TARGETS.propagationP95Ms}, at 10 and at 50 nodes)`,
    ],
    ["per delivery p50 / p95 / max", `${prop.perDeliveryMs.p50} / ${prop.perDeliveryMs.p95} / ${prop.perDeliveryMs.max} ms`],
    ["missing deliveries", String(prop.missingDeliveries)],
    ["validated ingest, one node, per CPU-second", `${ing.ingestPerCpuSec} offers/s (target >= ${TARGETS.ingestPerCpuSec} on one core)`],
    ["validated ingest, one node, wall clock", `${ing.ingestPerSec} offers/s`],
    ["re-priced offers (attestation already verified)", `${ing.updatesPerCpuSec} offers/s per CPU-second`],
    ["ingest over gossip (sender on the same core)", `${ing.ingestOverGossipPerSec} offers/s`],
  ];
  rows.push(["load average while running (1 min)", `${loadavg()[0]!.toFixed(2)} on ${availableParallelism()} cores`]);
  const width = Math.max(...rows.map(([label]) => label.length));
  console.log("gossip benchmark");
  for (const [label, value] of rows) console.log(`  ${label.padEnd(width)}  ${value}`);
  console.log(pass ? "  targets met" : "  TARGETS MISSED");
  return {
    ...prop,
    ...ing,
    targets: TARGETS,
    pass,
  };
}

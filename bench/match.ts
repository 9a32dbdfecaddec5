/**
 * `npm run bench -- match [--json] [--offers N] [--requests N] [--seed N]`
 *
 * Builds a book of 100,000 offers over 20 GPU models (the 12 canonical models and 8 MIG slices)
 * from offer messages the way a node does (offerEntryFromMessage + engine.upsert), then runs
 * 10,000 mixed requests through engine.match on this one thread: single models and classes,
 * regions, interruptible bids, clusters, reputation and VRAM floors, and requests that fit
 * nothing (which pay for their explanation). Reports matches per second, p50/p99 latency of one
 * match, and the heap the book added. Targets (issue #5): >= 20,000 matches/s, p99 <= 1 ms,
 * book heap <= 300 MB.
 */
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { type Address, getAddress } from "viem";
import { ANY_RENTER } from "../common/eip712.js";
import { modelHash } from "../common/gpu.js";
import { MatchingEngine, type MatchRequest, type OfferEntry, NO_CLUSTER, offerEntryFromMessage, parseMatchRequest } from "../common/matching/index.js";
import type { OfferMessage } from "../common/offers/message.js";
import type { MainFigure } from "./_calibration.js";

const TARGETS = { matchesPerSecond: 20_000, p99Ms: 1, bookHeapMB: 300 };

/** The 20 models of the book: base price per GPU-hour in USD and memory per unit. */
const MODELS: { name: string; usd: number; vramMiB: number; weight: number }[] = [
  { name: "H200-141GB", usd: 3.8, vramMiB: 143_771, weight: 4 },
  { name: "H100-80GB-SXM", usd: 2.9, vramMiB: 81_559, weight: 10 },
  { name: "H100-80GB-PCIE", usd: 2.4, vramMiB: 81_559, weight: 6 },
  { name: "A100-80GB", usd: 1.6, vramMiB: 81_920, weight: 10 },
  { name: "A100-40GB", usd: 1.2, vramMiB: 40_960, weight: 6 },
  { name: "L40S-48GB", usd: 1.0, vramMiB: 46_068, weight: 6 },
  { name: "L4-24GB", usd: 0.5, vramMiB: 23_034, weight: 6 },
  { name: "A10-24GB", usd: 0.6, vramMiB: 23_028, weight: 4 },
  { name: "RTX4090-24GB", usd: 0.45, vramMiB: 24_564, weight: 10 },
  { name: "RTX3090-24GB", usd: 0.25, vramMiB: 24_576, weight: 8 },
  { name: "T4-16GB", usd: 0.2, vramMiB: 15_360, weight: 4 },
  { name: "V100-32GB", usd: 0.4, vramMiB: 32_768, weight: 3 },
  { name: "A100-80GB/1g.10gb", usd: 0.25, vramMiB: 9_728, weight: 3 },
  { name: "A100-80GB/2g.20gb", usd: 0.5, vramMiB: 19_968, weight: 2 },
  { name: "A100-80GB/3g.40gb", usd: 0.8, vramMiB: 40_192, weight: 2 },
  { name: "A100-40GB/1g.5gb", usd: 0.15, vramMiB: 4_864, weight: 2 },
  { name: "A100-40GB/3g.20gb", usd: 0.5, vramMiB: 19_968, weight: 1 },
  { name: "H100-80GB-SXM/1g.10gb", usd: 0.45, vramMiB: 9_984, weight: 2 },
  { name: "H100-80GB-SXM/3g.40gb", usd: 1.3, vramMiB: 40_448, weight: 2 },
  { name: "H200-141GB/1g.18gb", usd: 0.6, vramMiB: 16_384, weight: 1 },
];
const REGIONS = ["us-east", "us-west", "us-central", "eu-west", "eu-central", "eu-north", "ap-south", "ap-east", "ap-northeast", "sa-east"];
const NOW = 1_800_000_000;

function arg(args: string[], name: string, fallback: number): number {
  const i = args.indexOf(`--${name}`);
  if (i < 0) return fallback;
  const value = Number(args[i + 1]);
  if (!Number.isInteger(value) || value <= 0) throw new Error(`--${name} expects a positive integer`);
  return value;
}

function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function gc(): void {
  setFlagsFromString("--expose-gc");
  const collect = runInNewContext("gc") as () => void;
  collect();
  collect();
}

const round3 = (ms: number) => Math.round(ms * 1000) / 1000;
const mb = (bytes: number) => Math.round((bytes / 1024 / 1024) * 10) / 10;

export type BenchRequest = { kind: string; request: MatchRequest };

/** Builds the book and the request generator (exported for profiling scripts). */
export function buildMarket(options: { offers: number; seed: number }) {
  const offerCount = options.offers;
  const random = rng(options.seed);
  // Always given a non-empty list: the index is in range.
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
  const totalWeight = MODELS.reduce((n, m) => n + m.weight, 0);
  const pickModel = () => {
    let r = random() * totalWeight;
    for (const model of MODELS) if ((r -= model.weight) < 0) return model;
    return MODELS[0]!; // a constant, non-empty list
  };
  // Flat strings, as JSON.parse makes them (concatenation would build ropes and inflate the heap).
  const hex = (bytes: number) => {
    const buffer = Buffer.alloc(bytes);
    for (let i = 0; i < bytes; i++) buffer[i] = Math.floor(random() * 256);
    return `0x${buffer.toString("hex")}` as `0x${string}`;
  };
  const hashes = new Map(MODELS.map((m) => [m.name, modelHash(m.name)]));

  // The book's heap is everything the engine retains: the entries (with the offer data they keep
  // from their messages) and the index. Baseline before the messages are made.
  gc();
  const heapBefore = process.memoryUsage().heapUsed;
  const providerCount = Math.max(1, Math.floor(offerCount / 5));
  const providers: { address: Address; peerId: string; addrs: string[] }[] = [];
  for (let i = 0; i < providerCount; i++) {
    providers.push({
      address: getAddress(hex(20)),
      peerId: `12D3KooW${hex(22).slice(2)}`,
      addrs: [`/ip4/10.${i % 250}.${(i >> 8) % 250}.${i % 200}/tcp/4001`, `/ip4/10.${i % 250}.${(i >> 8) % 250}.${i % 200}/udp/4001/quic-v1`],
    });
  }
  // Clusters: runs of 4-8 consecutive machines of one model and region on a fabric.
  let cluster = NO_CLUSTER;
  let clusterLeft = 0;
  let clusterModel = MODELS[0]!; // a constant, non-empty list
  let clusterRegion = REGIONS[0]!; // a constant, non-empty list
  const messages: { message: OfferMessage; knowledge: Parameters<typeof offerEntryFromMessage>[1] }[] = [];
  for (let i = 0; i < offerCount; i++) {
    const provider = providers[i % providerCount]!;
    if (clusterLeft === 0 && random() < 0.03) {
      cluster = hex(32);
      clusterLeft = 4 + Math.floor(random() * 5);
      clusterModel = pick(MODELS.filter((m) => !m.name.includes("/")));
      clusterRegion = pick(REGIONS);
    }
    const inCluster = clusterLeft > 0;
    if (inCluster) clusterLeft--;
    const model = inCluster ? clusterModel : pickModel();
    const slice = model.name.includes("/");
    const units = slice ? pick([7, 14, 28, 56]) : pick([1, 2, 4, 8, 8, 8]);
    const usdPerHour = model.usd * (0.6 + random() * 0.9);
    const pricePerUnitSecond = BigInt(Math.max(1, Math.round((usdPerHour * 1e6) / 3600)));
    const sellsInterruptible = random() < 0.5;
    const used = Math.floor(random() * (units + 1) * random());
    const interruptibleUnits = sellsInterruptible ? Math.floor(used * random()) : 0;
    const message: OfferMessage = {
      v: 1,
      offer: {
        provider: provider.address,
        machineId: i + 1,
        model: hashes.get(model.name)!,
        pricePerUnitSecond,
        minBidPerUnitSecond: sellsInterruptible ? (pricePerUnitSecond * BigInt(40 + Math.floor(random() * 30))) / 100n + 1n : 0n,
        minDuration: pick([60, 300, 3600]),
        maxDuration: pick([86_400, 7 * 86_400, 30 * 86_400]),
        collateralBps: 1000,
        startWindow: 600,
        nonce: BigInt(Math.floor(random() * 1e9)),
        expiry: NOW + (random() < 0.01 ? 30 : 3600 + Math.floor(random() * 86_400)),
        renter: ANY_RENTER,
      },
      signature: hex(65),
      machine: {
        model: model.name,
        units: units,
        vramMiB: model.vramMiB,
        interconnect: inCluster ? "fabric" : pick(["none", "nvlink"] as const),
        region: inCluster ? clusterRegion : pick(REGIONS),
        cluster: inCluster ? cluster : NO_CLUSTER,
      },
      capacity: {
        freeUnits: units - used,
        onDemandUnits: used - interruptibleUnits,
        interruptibleUnits,
        lowestInterruptibleBid: interruptibleUnits > 0 ? (pricePerUnitSecond * 6n) / 10n : null,
      },
      attestations: [],
      peerId: provider.peerId,
      addrs: [...provider.addrs],
      seq: 1 + Math.floor(random() * 100),
      publishedAt: NOW - Math.floor(random() * 600),
      // Synthetic book entries: the engine never verifies signatures (the offer book does).
      peerSignature: `0x${"00".repeat(64)}`,
    };
    const attested = random() < 0.9;
    messages.push({
      message,
      knowledge: {
        attestation: attested ? { attestedAt: NOW - Math.floor(random() * 172_800), expiry: NOW + (random() < 0.05 ? -60 : 86_400) } : null,
        reputation: { leasesCompleted: Math.floor(random() * 500), faults: Math.floor(random() * random() * 20), unitSecondsDelivered: BigInt(Math.floor(random() * 1e9)) },
        latencyMs: random() < 0.3 ? null : 5 + Math.floor(random() * 300),
      },
    });
  }

  const buildStart = performance.now();
  const engine = new MatchingEngine({}, { now: () => NOW });
  const entries: OfferEntry[] = new Array(offerCount);
  for (let i = 0; i < offerCount; i++) {
    entries[i] = offerEntryFromMessage(messages[i]!.message, messages[i]!.knowledge);
    engine.upsert(entries[i]!);
  }
  const buildMs = performance.now() - buildStart;
  messages.length = 0; // the book keeps what it needs through the entries
  gc();
  const bookHeap = process.memoryUsage().heapUsed - heapBefore;

  // Incremental updates: capacity changes in place, price changes move an entry.
  const updateCount = Math.min(20_000, offerCount);
  const updateStart = performance.now();
  for (let i = 0; i < updateCount; i++) {
    const at = Math.floor(random() * offerCount);
    const old = entries[at]!;
    const priceChange = i % 4 === 0;
    const free = Math.floor(random() * (old.machine.units + 1));
    const next: OfferEntry = {
      ...old,
      seq: old.seq + 1,
      offer: priceChange ? { ...old.offer, pricePerUnitSecond: old.offer.pricePerUnitSecond + 1n } : old.offer,
      capacity: {
        ...old.capacity,
        freeUnits: free,
        onDemandUnits: old.machine.units - free - old.capacity.interruptibleUnits > 0 ? old.machine.units - free - old.capacity.interruptibleUnits : 0,
        interruptibleUnits: Math.min(old.capacity.interruptibleUnits, old.machine.units - free),
      },
    };
    engine.upsert(next);
    entries[at] = next;
  }
  const updateUs = ((performance.now() - updateStart) / updateCount) * 1000;

  const makeRequest = (): BenchRequest => {
    const kind = random();
    const model = pickModel();
    const cap = (usd: number, factor: number) => (usd * factor).toFixed(4);
    const base = { duration: pick([600, 3600, 4 * 3600, 86_400]) };
    let input: Record<string, unknown>;
    if (kind < 0.3) input = { ...base, gpuType: model.name, gpuCount: pick([1, 1, 2, 4, 8]), maxPricePerGpuHour: cap(model.usd, 0.8 + random() * 0.8) };
    else if (kind < 0.45)
      input = {
        ...base,
        gpuType: model.name,
        gpuCount: pick([1, 2, 4]),
        maxPricePerGpuHour: cap(model.usd, 1 + random() * 0.5),
        region: random() < 0.5 ? pick(REGIONS) : [pick(REGIONS), pick(REGIONS)],
      };
    else if (kind < 0.55) input = { ...base, gpuType: pick(["any 80GB", "any 24GB", "any 40GB", "any"]), gpuCount: pick([1, 2, 4, 8]), maxPricePerGpuHour: cap(2, 0.5 + random()) };
    else if (kind < 0.7) input = { ...base, gpuType: model.name, gpuCount: pick([1, 2, 4]), mode: "interruptible", bidPerGpuHour: cap(model.usd, 0.4 + random() * 0.6) };
    else if (kind < 0.78)
      input = {
        ...base,
        gpuType: pick(["H100", "A100", "H200", "RTX 4090"]),
        gpuCount: pick([8, 16, 24, 32]),
        maxPricePerGpuHour: cap(3, 0.8 + random() * 0.6),
        colocation: "cluster",
      };
    else if (kind < 0.9)
      input = {
        ...base,
        gpuType: model.name,
        gpuCount: pick([1, 2, 4]),
        maxPricePerGpuHour: cap(model.usd, 1.2),
        minReputation: pick([0.8, 0.9, 0.95]),
        attestedOnly: random() < 0.8,
        minVramMiB: random() < 0.3 ? model.vramMiB : undefined,
      };
    else {
      // Requests that fit nothing, each for a different reason: they pay for the explanation.
      const why = Math.floor(random() * 4);
      if (why === 0) input = { ...base, gpuType: model.name, gpuCount: 64, maxPricePerGpuHour: cap(model.usd, 2) };
      else if (why === 1) input = { ...base, gpuType: model.name, gpuCount: 1, maxPricePerGpuHour: cap(model.usd, 0.1) };
      else if (why === 2) input = { ...base, gpuType: model.name, gpuCount: 2, maxPricePerGpuHour: cap(model.usd, 1.5), region: "antarctica" };
      else input = { ...base, gpuType: model.name, gpuCount: 8, maxPricePerGpuHour: cap(model.usd, 1.2), minReputation: 0.999 };
    }
    for (const key of Object.keys(input)) if (input[key] === undefined) delete input[key];
    const label =
      kind < 0.3 ? "model" : kind < 0.45 ? "model+region" : kind < 0.55 ? "class" : kind < 0.7 ? "interruptible" : kind < 0.78 ? "cluster" : kind < 0.9 ? "floors" : "fits nothing";
    return { kind: label, request: parseMatchRequest(input) };
  };

  return { engine, entries, makeRequest, bookHeap, buildMs, updateUs };
}

/** The figures bench/run.ts divides by the same run's calibration figure (bench/_calibration.ts). */
export const mainFigures: MainFigure[] = [{ field: "matchesPerCpuSecond", per: "keccakPerCpuSec" }];

export async function run(args: string[]): Promise<Record<string, unknown>> {
  const requestCount = arg(args, "requests", 10_000);
  const { engine, makeRequest, bookHeap, buildMs, updateUs } = buildMarket({ offers: arg(args, "offers", 100_000), seed: arg(args, "seed", 1) });
  const warmup = Array.from({ length: Math.min(2_000, requestCount) }, makeRequest);
  const parseStart = performance.now();
  const requests = Array.from({ length: requestCount }, makeRequest);
  const parseUs = ((performance.now() - parseStart) / requestCount) * 1000;
  for (const { request } of warmup) engine.match(request);

  const latencies = new Float64Array(requestCount);
  const noMatch = new Uint8Array(requestCount);
  let matched = 0;
  let candidates = 0;
  const start = performance.now();
  const cpuStart = process.threadCpuUsage();
  for (let i = 0; i < requestCount; i++) {
    const t0 = performance.now();
    const result = engine.match(requests[i]!.request);
    latencies[i] = performance.now() - t0;
    noMatch[i] = result.ok ? 0 : 1;
    if (result.ok) {
      matched++;
      candidates += result.candidates.length;
    }
  }
  const elapsedMs = performance.now() - start;
  const cpu = process.threadCpuUsage(cpuStart);
  const cpuMs = (cpu.user + cpu.system) / 1000;
  const byKind = new Map<string, number[]>();
  const noMatchByKind = new Map<string, number>();
  requests.forEach((r, i) => {
    const list = byKind.get(r.kind) ?? [];
    list.push(latencies[i]!);
    byKind.set(r.kind, list);
    noMatchByKind.set(r.kind, (noMatchByKind.get(r.kind) ?? 0) + noMatch[i]!);
  });
  // A second pass, kind by kind, for the mean CPU time of one match of each kind (thread CPU,
  // so other processes on the machine do not inflate it).
  const cpuUsByKind = new Map<string, number>();
  for (const kind of byKind.keys()) {
    const same = requests.filter((r) => r.kind === kind);
    const before = process.threadCpuUsage();
    for (const r of same) engine.match(r.request);
    const used = process.threadCpuUsage(before);
    cpuUsByKind.set(kind, Math.round(((used.user + used.system) / same.length) * 10) / 10);
  }
  const kinds = Object.fromEntries(
    [...byKind.entries()].map(([kind, list]) => {
      list.sort((a, b) => a - b);
      return [
        kind,
        {
          count: list.length,
          noMatch: noMatchByKind.get(kind) ?? 0,
          p50Ms: round3(list[Math.floor(list.length / 2)]!),
          p99Ms: round3(list[Math.min(list.length - 1, Math.floor(list.length * 0.99))]!),
          meanCpuUs: cpuUsByKind.get(kind),
        },
      ];
    }),
  );
  const sorted = [...latencies].sort((a, b) => a - b);
  const quantile = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];

  const summary = {
    offers: engine.size,
    models: MODELS.length,
    requests: requestCount,
    matched,
    noMatch: requestCount - matched,
    avgCandidates: Math.round((candidates / Math.max(1, matched)) * 10) / 10,
    matchesPerSecond: Math.round(requestCount / (elapsedMs / 1000)),
    /** Matches per second of this thread's CPU time: what one core does, whatever else the machine runs. */
    matchesPerCpuSecond: Math.round(requestCount / (cpuMs / 1000)),
    p50Ms: Math.round(quantile(0.5)! * 1000) / 1000,
    p99Ms: Math.round(quantile(0.99)! * 1000) / 1000,
    maxMs: Math.round(sorted[sorted.length - 1]! * 1000) / 1000,
    bookHeapMB: mb(bookHeap),
    heapUsedMB: mb(process.memoryUsage().heapUsed),
    buildMs: Math.round(buildMs),
    upsertUs: Math.round(updateUs * 100) / 100,
    parseRequestUs: Math.round(parseUs * 100) / 100,
    byKind: kinds,
    targets: TARGETS,
    met: {
      matchesPerSecond: requestCount / (elapsedMs / 1000) >= TARGETS.matchesPerSecond,
      p99Ms: quantile(0.99)! <= TARGETS.p99Ms,
      bookHeapMB: mb(bookHeap) <= TARGETS.bookHeapMB,
    },
  };
  const row = (label: string, value: unknown, target?: string) => console.log(`${label.padEnd(48)} ${String(value).padStart(12)}${target ? `   target ${target}` : ""}`);
  console.log(`match: ${summary.offers} offers over ${summary.models} models, ${requestCount} mixed requests (one thread)`);
  row("matches/s (wall clock)", summary.matchesPerSecond, `>= ${TARGETS.matchesPerSecond}`);
  row("matches/s (thread CPU time)", summary.matchesPerCpuSecond);
  row("latency p50 (ms)", summary.p50Ms);
  row("latency p99 (ms)", summary.p99Ms, `<= ${TARGETS.p99Ms}`);
  row("latency max (ms)", summary.maxMs);
  row("book heap (MB)", summary.bookHeapMB, `<= ${TARGETS.bookHeapMB}`);
  row("matched / no match", `${matched} / ${summary.noMatch}`);
  row("avg candidates per match", summary.avgCandidates);
  row("book build (ms)", summary.buildMs);
  row("upsert (µs)", summary.upsertUs);
  row("parse request (µs)", summary.parseRequestUs);
  console.log("by kind (count, fit nothing): p50 / p99 ms wall, mean µs CPU");
  for (const [kind, k] of Object.entries(kinds)) row(`  ${kind} (${k.count}, ${k.noMatch})`, `${k.p50Ms} / ${k.p99Ms} / ${k.meanCpuUs}`);
  return summary;
}

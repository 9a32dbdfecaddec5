/**
 * The data plane's per-peer serving limits and metrics (node/data/serving.ts, docs/data.md
 * "Serving limits" and "Metrics"): real Helia with bitswap on real libp2p hosts over TCP
 * 127.0.0.1, real level stores, metrics read from a real /metrics endpoint.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import type { Stream } from "@libp2p/interface";
import { multiaddr } from "@multiformats/multiaddr";
import { silentLogger } from "../../node/log/logger.js";
import { DataStore } from "../../node/data/store.js";
import { dataOptionsSchema } from "../../node/data/options.js";
import { createMetrics } from "../../node/metrics/metrics.js";
import { startMetricsServer, type MetricsServer } from "../../node/metrics/server.js";
import { startNodeHost, type NodeHost } from "../../node/p2p/start.js";
import { loopbackP2pOptions } from "../support/nodes.js";

type Peer = { dir: string; p2p: NodeHost; data: DataStore; addr: string; metrics: MetricsServer };

const KiB = 1024;
const MiB = 1024 * 1024;

async function startPeer(root: string, name: string, options: Parameters<typeof DataStore.open>[0]["options"] = {}): Promise<Peer> {
  const dir = path.join(root, name);
  const p2p = await startNodeHost({ dataDir: dir, options: loopbackP2pOptions(), logger: silentLogger() });
  const metrics = createMetrics();
  const data = await DataStore.open({ dataDir: dir, libp2p: p2p.host, options, metrics });
  const server = await startMetricsServer(metrics.registry, { host: "127.0.0.1", port: 0 }, silentLogger());
  return { dir, p2p, data, addr: p2p.host.getMultiaddrs()[0]!.toString(), metrics: server };
}

async function stopPeer(peer: Peer): Promise<void> {
  await peer.metrics.close();
  await peer.data.stop();
  await peer.p2p.stop();
}

/** What a user reads at /metrics: the sample of `name` whose labels include `labels` (0 when absent). */
async function scrape(peer: Peer, name: string, labels: Record<string, string> = {}): Promise<number> {
  const text = await (await fetch(`${peer.metrics.url}/metrics`)).text();
  for (const line of text.split("\n")) {
    const match = /^([a-z_]+)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const found = Object.fromEntries([...(match[2] ?? "").matchAll(/(\w+)="([^"]*)"/g)].map((pair) => [pair[1], pair[2]]));
    if (Object.entries(labels).every(([key, value]) => found[key] === value)) return Number(match[3]);
  }
  return 0;
}

async function addFile(peer: Peer, root: string, name: string, bytes: Buffer): Promise<string> {
  const file = path.join(root, `${name}.bin`);
  await writeFile(file, bytes);
  return (await peer.data.add(file)).cid;
}

describe("data plane: per-peer serving limits and metrics", function () {
  this.timeout(40_000);
  let root: string;
  const peers: Peer[] = [];

  before(async () => {
    root = await mkdtemp(path.join(tmpdir(), "suanli-data-serving-"));
  });
  after(async () => {
    await Promise.allSettled(peers.map(stopPeer));
    await rm(root, { recursive: true, force: true });
  });

  it("validates data.serving: defaults, and bad values refused naming the field", () => {
    const defaults = dataOptionsSchema.parse({}).serving;
    assert.deepEqual(defaults, { bytesPerSecondPerPeer: 32 * MiB, blocksPerSecondPerPeer: 512, maxStreamsPerPeer: 8, maxThrottleMs: 5_000 });
    for (const [field, value] of [
      ["bytesPerSecondPerPeer", 1000],
      ["blocksPerSecondPerPeer", 0],
      ["maxStreamsPerPeer", 33],
      ["maxThrottleMs", 60_000],
      ["unknownKey", 1],
    ] as const) {
      const result = dataOptionsSchema.safeParse({ serving: { [field]: value } });
      assert.equal(result.success, false, `${field}=${value} accepted`);
      assert.ok(
        result.error!.issues.some((issue) => issue.path.join(".").startsWith("serving") && (issue.path.includes(field) || JSON.stringify(issue).includes(field))),
        `${field}: ${JSON.stringify(result.error!.issues)}`,
      );
    }
  });

  it("holds a greedy peer to its bytes per second while a second peer gets its blocks at once, and the node's own fetch from the greedy peer is not held", async () => {
    const rate = 512 * KiB;
    const provider = await startPeer(root, "provider", { serving: { bytesPerSecondPerPeer: rate, maxThrottleMs: 10_000 } });
    const greedy = await startPeer(root, "greedy");
    const other = await startPeer(root, "other");
    peers.push(provider, greedy, other);
    const big = randomBytes(4 * MiB);
    const small = randomBytes(64 * KiB);
    const bigCid = await addFile(provider, root, "big", big);
    const smallCid = await addFile(provider, root, "small", small);
    const greedysOwn = randomBytes(256 * KiB);
    const greedysOwnCid = await addFile(greedy, root, "greedys-own", greedysOwn);

    const started = Date.now();
    const greedyDone = greedy.data.get(bigCid, path.join(root, "greedy-out"), { providers: [provider.addr], timeoutMs: 30_000 }).then(() => Date.now() - started);
    // Wait until the provider is holding the greedy peer (its budget spent), then ask as another peer.
    for (let i = 0; i < 100 && (await scrape(provider, "suanli_data_serve_limited_total", { action: "throttled", reason: "bytes_per_second" })) === 0; i++)
      await new Promise((resolve) => setTimeout(resolve, 50));
    assert.equal(await scrape(provider, "suanli_data_serve_limited_total", { action: "throttled", reason: "bytes_per_second" }), 1, "the greedy peer is throttled");

    const otherStarted = Date.now();
    await other.data.get(smallCid, path.join(root, "other-out"), { providers: [provider.addr], timeoutMs: 30_000 });
    const otherMs = Date.now() - otherStarted;
    assert.ok((await readFile(path.join(root, "other-out", "small.bin"))).equals(small));

    // The provider's own fetch from the greedy peer: its wants go out at once, though that peer is over its budget here.
    const ownStarted = Date.now();
    await provider.data.get(greedysOwnCid, path.join(root, "own-out"), { providers: [greedy.addr], timeoutMs: 30_000 });
    const ownMs = Date.now() - ownStarted;
    assert.ok((await readFile(path.join(root, "own-out", "greedys-own.bin"))).equals(greedysOwn));

    const greedyMs = await greedyDone;
    assert.ok((await readFile(path.join(root, "greedy-out", "big.bin"))).equals(big), "the greedy peer still gets every byte, verified");
    // A message is at most 2 MiB (bitswap's maxOutgoingMessageSize) and a fresh second admits one:
    // at 512 KiB/s, 4 MiB take at least (4 - 2) MiB / rate = 4 s (unlimited: well under a second here).
    assert.ok(greedyMs >= ((4 * MiB - 2 * MiB) / rate) * 1000 - 250, `the greedy peer got 4 MiB in ${greedyMs} ms`);
    assert.ok(otherMs < 2_000 && otherMs < greedyMs / 2, `the other peer waited ${otherMs} ms (greedy: ${greedyMs} ms)`);
    assert.ok(ownMs < 2_000, `the provider's own fetch took ${ownMs} ms`);
    assert.ok((await scrape(provider, "suanli_data_served_bytes_total")) >= big.length + small.length);
    assert.equal(await scrape(provider, "suanli_data_serve_limited_total", { action: "refused", reason: "bytes_per_second" }), 0, "held, not refused, within maxThrottleMs");
  });

  it("holds a peer to its blocks per second (many small blocks), and says which limit held it", async () => {
    const provider = await startPeer(root, "blocks-provider", { serving: { blocksPerSecondPerPeer: 1 } });
    const client = await startPeer(root, "blocks-client");
    peers.push(provider, client);
    const folder = path.join(root, "blocks-src");
    await mkdir(folder);
    for (let i = 0; i < 4; i++) await writeFile(path.join(folder, `part-${i}.txt`), `part ${i}\n`);
    const { cid } = await provider.data.add(folder);
    const started = Date.now();
    await client.data.get(cid, path.join(root, "blocks-out"), { providers: [provider.addr], timeoutMs: 20_000 });
    const elapsed = Date.now() - started;
    assert.equal(await readFile(path.join(root, "blocks-out", "part-3.txt"), "utf8"), "part 3\n");
    // 5 blocks at 1 block/s: the folder's block first, its files' after it; however bitswap batches
    // them, every message after the first waits for the window the previous one opened.
    assert.ok(elapsed >= 900, `5 blocks at 1 block/s came in ${elapsed} ms`);
    assert.ok((await scrape(provider, "suanli_data_serve_limited_total", { action: "throttled", reason: "blocks_per_second" })) >= 1);
    assert.equal(await scrape(provider, "suanli_data_serve_limited_total", { action: "throttled", reason: "bytes_per_second" }), 0);
  });

  it("refuses (drops the blocks of) a message that would wait past maxThrottleMs, counted; the node's own wants in it still go out", async () => {
    const provider = await startPeer(root, "refuse-provider", { serving: { bytesPerSecondPerPeer: 64 * KiB, maxThrottleMs: 0 } });
    const greedy = await startPeer(root, "refuse-greedy");
    peers.push(provider, greedy);
    const bigCid = await addFile(provider, root, "refuse-big", randomBytes(2 * MiB));
    const greedysOwn = randomBytes(128 * KiB);
    const greedysOwnCid = await addFile(greedy, root, "refuse-own", greedysOwn);

    const greedyFetch = greedy.data.get(bigCid, path.join(root, "refuse-greedy-out"), { providers: [provider.addr], timeoutMs: 3_000 });
    for (let i = 0; i < 100 && (await scrape(provider, "suanli_data_serve_limited_total", { action: "refused", reason: "bytes_per_second" })) === 0; i++)
      await new Promise((resolve) => setTimeout(resolve, 25));
    assert.ok((await scrape(provider, "suanli_data_serve_limited_total", { action: "refused", reason: "bytes_per_second" })) >= 1, "a refusal is counted");
    await provider.data.get(greedysOwnCid, path.join(root, "refuse-own-out"), { providers: [greedy.addr], timeoutMs: 5_000 });
    assert.ok((await readFile(path.join(root, "refuse-own-out", "refuse-own.bin"))).equals(greedysOwn), "the provider's own fetch from the refused peer works");
    await assert.rejects(greedyFetch, { name: "DataNotFoundError" }, "the greedy peer does not get 2 MiB at 64 KiB/s in 3 s");
    assert.ok((await scrape(provider, "suanli_data_served_bytes_total")) < 2 * MiB, "the refused blocks were not counted as served");
  });

  it("resets a peer's bitswap stream beyond maxStreamsPerPeer, counts it, and takes streams again once they close", async () => {
    const provider = await startPeer(root, "streams-provider", { serving: { maxStreamsPerPeer: 2 } });
    const client = await startPeer(root, "streams-client");
    peers.push(provider, client);
    await client.p2p.host.dial(multiaddr(provider.addr));
    const clientId = client.p2p.host.peerId.toString();
    const open: Stream[] = [];
    for (let i = 0; i < 2; i++) open.push(await client.p2p.host.dialProtocol(provider.p2p.host.peerId, "/ipfs/bitswap/1.2.0"));
    for (let i = 0; i < 40 && provider.data.serving.inboundOf(clientId) < 2; i++) await new Promise((resolve) => setTimeout(resolve, 25));
    assert.equal(provider.data.serving.inboundOf(clientId), 2);

    const third = await client.p2p.host.dialProtocol(provider.p2p.host.peerId, "/ipfs/bitswap/1.2.0");
    for (let i = 0; i < 40 && third.status === "open"; i++) await new Promise((resolve) => setTimeout(resolve, 25));
    assert.notEqual(third.status, "open", "the third stream is reset");
    assert.equal(await scrape(provider, "suanli_data_serve_limited_total", { action: "refused", reason: "streams_per_peer" }), 1);
    assert.equal(provider.data.serving.inboundOf(clientId), 2);

    for (const stream of open) await stream.close();
    for (let i = 0; i < 80 && provider.data.serving.inboundOf(clientId) > 0; i++) await new Promise((resolve) => setTimeout(resolve, 25));
    assert.equal(provider.data.serving.inboundOf(clientId), 0, "closed streams are no longer counted");
    // The peer is served again: a real fetch works.
    const bytes = randomBytes(32 * KiB);
    const cid = await addFile(provider, root, "after-streams", bytes);
    await client.data.get(cid, path.join(root, "after-streams-out"), { providers: [provider.addr], timeoutMs: 20_000 });
    assert.ok((await readFile(path.join(root, "after-streams-out", "after-streams.bin"))).equals(bytes));
  });

  it("moves the metrics a user reads at /metrics after an add and a fetch: bytes out and in, blocks, a cache miss then a hit, the fetch time", async () => {
    const provider = await startPeer(root, "metrics-provider");
    const fetcher = await startPeer(root, "metrics-fetcher");
    peers.push(provider, fetcher);
    const folder = path.join(root, "metrics-src");
    await mkdir(folder);
    const bytes = randomBytes(1 * MiB + 3);
    await writeFile(path.join(folder, "weights.bin"), bytes);
    const { cid } = await provider.data.add(folder);
    assert.equal(await scrape(provider, "suanli_data_served_bytes_total"), 0, "an add serves nothing");

    await fetcher.data.fetch(cid, { providers: [provider.addr], timeoutMs: 20_000 });
    const served = await scrape(provider, "suanli_data_served_bytes_total");
    const received = await scrape(fetcher, "suanli_data_received_bytes_total");
    assert.ok(served >= bytes.length, `served ${served}`);
    assert.ok(received >= bytes.length, `received ${received}`);
    assert.ok((await scrape(provider, "suanli_data_served_blocks_total")) >= 2, "a 1 MiB file and its folder are several blocks");
    assert.equal(await scrape(fetcher, "suanli_data_received_blocks_total"), await scrape(provider, "suanli_data_served_blocks_total"));
    assert.equal(await scrape(fetcher, "suanli_data_cache_lookups_total", { result: "miss" }), 1);
    assert.equal(await scrape(fetcher, "suanli_data_cache_lookups_total", { result: "hit" }), 0);
    assert.equal(await scrape(fetcher, "suanli_data_fetch_seconds_count", { outcome: "ok" }), 1);
    assert.ok((await scrape(fetcher, "suanli_data_fetch_seconds_sum", { outcome: "ok" })) > 0);

    // The same root again (a second lease on one dataset): a hit, nothing asked of the network.
    await fetcher.data.fetch(cid, { timeoutMs: 5_000 });
    assert.equal(await scrape(fetcher, "suanli_data_cache_lookups_total", { result: "hit" }), 1);
    assert.equal(await scrape(fetcher, "suanli_data_received_bytes_total"), received, "a hit receives nothing");
    assert.equal(await scrape(fetcher, "suanli_data_fetch_seconds_count", { outcome: "ok" }), 1, "a hit is not a fetch");
    assert.equal(await scrape(provider, "suanli_data_served_bytes_total"), served);

    // A root nobody serves: a miss whose fetch ends not_found.
    const missing = "bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy";
    await assert.rejects(fetcher.data.fetch(missing, { timeoutMs: 300 }), { name: "DataNotFoundError" });
    assert.equal(await scrape(fetcher, "suanli_data_fetch_seconds_count", { outcome: "not_found" }), 1);
    assert.equal(await scrape(fetcher, "suanli_data_cache_lookups_total", { result: "miss" }), 2);
  });
});

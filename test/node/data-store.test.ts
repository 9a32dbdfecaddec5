/**
 * The data plane's store (node/data/store.ts): real Helia with bitswap on real libp2p hosts over
 * TCP 127.0.0.1, real level stores. docs/data.md cites these tests.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { mkdir, mkdtemp, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import * as dagPb from "@ipld/dag-pb";
import { LevelBlockstore } from "blockstore-level";
import { UnixFS } from "ipfs-unixfs";
import { CID } from "multiformats/cid";
import * as raw from "multiformats/codecs/raw";
import { sha256 } from "multiformats/hashes/sha2";
import { silentLogger } from "../../node/log/logger.js";
import { DataStore } from "../../node/data/store.js";
import { safeEntryName } from "../../node/data/write.js";
import { startNodeHost, type NodeHost } from "../../node/p2p/start.js";
import { loopbackP2pOptions } from "../support/nodes.js";

type Peer = { dir: string; p2p: NodeHost; data: DataStore; addr: string };

async function startPeer(root: string, name: string, options: Parameters<typeof DataStore.open>[0]["options"] = {}): Promise<Peer> {
  const dir = path.join(root, name);
  const p2p = await startNodeHost({ dataDir: dir, options: loopbackP2pOptions(), logger: silentLogger() });
  const data = await DataStore.open({ dataDir: dir, libp2p: p2p.host, options });
  return { dir, p2p, data, addr: p2p.host.getMultiaddrs()[0]!.toString() };
}

async function stopPeer(peer: Peer): Promise<void> {
  await peer.data.stop();
  await peer.p2p.stop();
}

describe("data store (Helia on the node's libp2p host)", function () {
  this.timeout(60_000);
  let root: string;
  let a: Peer;
  let b: Peer;
  let folder: string;
  const big = randomBytes(3 * 1024 * 1024 + 17);

  before(async () => {
    root = await mkdtemp(path.join(tmpdir(), "suanli-data-"));
    a = await startPeer(root, "a");
    b = await startPeer(root, "b", { cacheBytes: 8 * 1024 * 1024 });
    folder = path.join(root, "src");
    await mkdir(path.join(folder, "nested", "deeper"), { recursive: true });
    await writeFile(path.join(folder, "big.bin"), big);
    await writeFile(path.join(folder, "nested", "a.txt"), "alpha\n");
    await writeFile(path.join(folder, "nested", "deeper", "b.txt"), "beta\n");
  });
  after(async () => {
    await Promise.allSettled([stopPeer(a), stopPeer(b)]);
    await rm(root, { recursive: true, force: true });
  });

  it("runs on the node's own host: Helia's libp2p is the node's (same peer id), bitswap on it", async () => {
    assert.equal((a.data.helia as unknown as { libp2p: typeof a.p2p.host }).libp2p.peerId.toString(), a.p2p.host.peerId.toString());
    assert.ok(a.p2p.host.getProtocols().some((protocol) => protocol.startsWith("/ipfs/bitswap/")));
  });

  it("adds a folder (pinned), another node gets it byte for byte, a second fetch asks nothing of the network", async () => {
    const progress: number[] = [];
    const entry = await a.data.add(folder, { onProgress: (bytes) => progress.push(bytes) });
    assert.equal(entry.pinned, true);
    assert.ok(entry.bytes >= big.length);
    assert.ok(progress.length > 1 && progress.at(-1) === big.length + 11, "progress reports bytes read");
    assert.deepEqual(
      (await a.data.list()).map((item) => item.cid),
      [entry.cid],
    );

    const out = path.join(root, "out");
    const got = await b.data.get(entry.cid, out, { providers: [a.addr], timeoutMs: 20_000 });
    assert.equal(got.bytes, big.length + 11);
    assert.ok((await readFile(path.join(out, "big.bin"))).equals(big));
    assert.equal(await readFile(path.join(out, "nested", "deeper", "b.txt"), "utf8"), "beta\n");

    const first = await b.data.fetch(entry.cid, { providers: [a.addr], timeoutMs: 20_000 });
    assert.equal(first.fetched, true, "get does not cache; fetch records the root");
    const fetchedBefore = b.data.counters.fetchedBlocks;
    const second = await b.data.fetch(entry.cid, { timeoutMs: 2_000 });
    assert.equal(second.fetched, false);
    assert.equal(b.data.counters.fetchedBlocks, fetchedBefore);
    assert.equal(await b.data.has(entry.cid), true);
  });

  it("sizes an add from the import's own blocks (each once, as a walk counts them), pins every block once, raw leaves and a chunk met twice included; unpin releases and deletes them", async () => {
    const dir = path.join(root, "dupes");
    await mkdir(path.join(dir, "inner"), { recursive: true });
    const content = randomBytes(1024 * 1024 + 5);
    await writeFile(path.join(dir, "one.bin"), content);
    await writeFile(path.join(dir, "inner", "two.bin"), content);
    await writeFile(path.join(dir, "empty"), "");
    const entry = await a.data.add(dir);
    const walked = await a.data.fetch(entry.cid, { timeoutMs: 5_000 });
    assert.equal(walked.fetched, false);
    assert.equal(entry.bytes, walked.bytes, "the size recorded at import is the walked DAG's");
    const leaf = CID.createV1(raw.code, await sha256.digest(content.subarray(0, 1024 * 1024)));
    assert.equal(await a.data.helia.pins.isPinned(leaf), true, "a raw leaf is pinned though the pin did not read it");
    // Files are written a few at a time: all of them land whole, and a cap the second file passes stops the get.
    const out = path.join(root, "dupes-out");
    assert.equal((await a.data.get(entry.cid, out)).bytes, 2 * content.length);
    assert.ok((await readFile(path.join(out, "inner", "two.bin"))).equals(content) && (await readFile(path.join(out, "one.bin"))).equals(content));
    await assert.rejects(a.data.get(entry.cid, path.join(root, "dupes-capped"), { maxBytes: content.length + 1 }), { name: "DataQuotaError" });
    assert.equal(await a.data.unpin(entry.cid), true);
    assert.equal(await a.data.helia.pins.isPinned(leaf), false);
    assert.equal(await a.data.has(entry.cid), false, "unpin deletes the blocks");
  });

  it("refuses a node serving wrong bytes for a CID: bitswap hashes what arrives, the want stays open, nothing is stored", async () => {
    const evil = await startPeer(root, "evil");
    try {
      const honest = randomBytes(4096);
      const cid = CID.createV1(raw.code, await sha256.digest(honest));
      // The evil node's level store holds garbage under that CID (level does not check).
      const store = (evil.data as unknown as { blocks: LevelBlockstore }).blocks;
      await store.put(cid, randomBytes(4096));
      assert.equal(await evil.data.has(cid.toString()), false, "its own read-back verification refuses the block too");
      await assert.rejects(b.data.fetch(cid.toString(), { providers: [evil.addr], timeoutMs: 1_500 }), { name: "DataNotFoundError" });
      assert.equal(await b.data.has(cid.toString()), false);
      assert.ok(b.p2p.host.getConnections(evil.p2p.host.peerId).length > 0, "the evil node was reached and asked");
    } finally {
      await stopPeer(evil);
    }
  });

  it("answers bad CID strings and unknown CIDs with typed errors", async () => {
    await assert.rejects(b.data.fetch("not-a-cid"), { name: "InvalidCidError" });
    await assert.rejects(b.data.get("bafy!!", path.join(root, "x")), { name: "InvalidCidError" });
    const missing = CID.createV1(raw.code, await sha256.digest(randomBytes(32))).toString();
    await assert.rejects(b.data.fetch(missing, { timeoutMs: 500 }), { name: "DataNotFoundError" });
  });

  it("bounds the cache: least recently used unpinned roots go first, pinned data stays", async () => {
    for (const entry of await b.data.list()) if (!entry.pinned) await b.data.dropCached(entry.cid);
    const cids: string[] = [];
    for (let index = 0; index < 4; index += 1) {
      const file = path.join(root, `chunk-${index}.bin`);
      await writeFile(file, randomBytes(3 * 1024 * 1024));
      cids.push((await a.data.add(file)).cid);
    }
    await b.data.fetch(cids[0]!, { providers: [a.addr], timeoutMs: 20_000 });
    await b.data.fetch(cids[1]!, { providers: [a.addr], timeoutMs: 20_000 });
    await b.data.fetch(cids[0]!, { timeoutMs: 2_000 }); // touch: 1 is now the oldest besides the folder
    const pinned = await b.data.pin(cids[2]!, { providers: [a.addr], timeoutMs: 20_000 });
    assert.equal(pinned.pinned, true);
    await b.data.fetch(cids[3]!, { providers: [a.addr], timeoutMs: 20_000 });
    const cached = (await b.data.list()).filter((entry) => !entry.pinned);
    assert.ok(cached.reduce((sum, entry) => sum + entry.bytes, 0) <= 8 * 1024 * 1024);
    assert.equal(await b.data.has(cids[1]!), false, "the least recently used root was evicted");
    assert.equal(await b.data.has(cids[0]!), true);
    assert.equal(await b.data.has(cids[2]!), true, "pinned data is never evicted");
    assert.equal(await b.data.unpin(cids[2]!), true);
    assert.equal(await b.data.has(cids[2]!), false, "unpin deletes blocks nothing else holds");
    assert.equal(await b.data.unpin(cids[2]!), false);
  });

  it("refuses data over the caps with DataQuotaError, and symlinks on import", async () => {
    const small = await startPeer(root, "small", { pinnedBytes: 1024 * 1024, cacheBytes: 1024 * 1024 });
    try {
      const file = path.join(root, "two-mib.bin");
      await writeFile(file, randomBytes(2 * 1024 * 1024));
      await assert.rejects(small.data.add(file), { name: "DataQuotaError" });
      assert.deepEqual(await small.data.list(), []);
      const entry = await a.data.add(file);
      await assert.rejects(small.data.fetch(entry.cid, { providers: [a.addr], timeoutMs: 20_000 }), { name: "DataQuotaError" });
      assert.equal(await small.data.has(entry.cid), false, "the over-cap blocks were dropped");
      await assert.rejects(b.data.get(entry.cid, path.join(root, "capped"), { providers: [a.addr], maxBytes: 1024 }), { name: "DataQuotaError" });
      const linked = path.join(root, "linked");
      await mkdir(linked);
      await symlink("/etc/passwd", path.join(linked, "passwd"));
      await assert.rejects(small.data.add(linked), { name: "DataSourceError" });
    } finally {
      await stopPeer(small);
    }
  });

  it("refuses a DAG whose entry name would leave the target folder, writing nothing outside it", async () => {
    const payload = new TextEncoder().encode("owned\n");
    const leaf = CID.createV1(raw.code, await sha256.digest(payload));
    const node = dagPb.encode(dagPb.prepare({ Data: new UnixFS({ type: "directory" }).marshal(), Links: [{ Name: "../escaped.txt", Hash: leaf, Tsize: payload.length }] }));
    const dir = CID.createV1(dagPb.code, await sha256.digest(node));
    const store = (a.data as unknown as { blocks: LevelBlockstore }).blocks;
    await store.put(leaf, payload);
    await store.put(dir, node);
    const target = path.join(root, "traversal", "inside");
    await mkdir(path.dirname(target), { recursive: true });
    await assert.rejects(b.data.get(dir.toString(), target, { providers: [a.addr], timeoutMs: 10_000 }), { name: "UnsafeDataError" });
    await assert.rejects(readFile(path.join(root, "traversal", "escaped.txt")), { code: "ENOENT" });
  });

  it("accepts only single path segments as entry names", () => {
    for (const name of ["a.txt", "x y", "..a"]) assert.equal(safeEntryName(name), true, name);
    for (const name of ["", ".", "..", "../x", "a/b", "a\\b", "a\0b"]) assert.equal(safeEntryName(name), false, JSON.stringify(name));
  });
});

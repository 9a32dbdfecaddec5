/**
 * The data routes of the HTTP API (node/api/routes-data.ts), the SDK's data actions and the
 * `suanli data` commands, over real nodes: real Helia with bitswap on real libp2p hosts over TCP
 * 127.0.0.1, real level stores, real HTTP servers. docs/data.md cites these tests.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Readable } from "node:stream";
import { CID } from "multiformats/cid";
import * as raw from "multiformats/codecs/raw";
import { sha256 } from "multiformats/hashes/sha2";
import { create as createTar } from "tar";
import { createApiServer, type ApiServer } from "../../node/api/server.js";
import { DataStore } from "../../node/data/store.js";
import { silentLogger } from "../../node/log/logger.js";
import { startNodeHost, type NodeHost } from "../../node/p2p/start.js";
import { addData, DataRequestError, getData, listData, pinData, removeData } from "../../sdk/index.js";
import { testDeployment } from "../support/api-fixture.js";
import { lastJson, runCli } from "../support/cli.js";
import { InMemoryMarketSource } from "../support/memory-source.js";
import { loopbackP2pOptions } from "../support/nodes.js";

type Peer = { p2p: NodeHost; data: DataStore | undefined; api: ApiServer; url: string; addr: string };

async function startPeer(root: string, name: string, data: Parameters<typeof DataStore.open>[0]["options"] | false = {}): Promise<Peer> {
  const dir = path.join(root, name);
  const p2p = await startNodeHost({ dataDir: dir, options: loopbackP2pOptions(), logger: silentLogger() });
  const store = data === false ? undefined : await DataStore.open({ dataDir: dir, libp2p: p2p.host, options: data });
  const api = await createApiServer({
    source: new InMemoryMarketSource(),
    deployment: testDeployment(),
    options: { enabled: true, port: 0, explorer: false, console: { enabled: false } },
    data: store ? { store, staging: path.join(dir, "data", "staging") } : undefined,
  });
  return { p2p, data: store, api, url: await api.listen(), addr: p2p.host.getMultiaddrs()[0]!.toString() };
}

async function stopPeer(peer: Peer): Promise<void> {
  await peer.api.close();
  await peer.data?.stop();
  await peer.p2p.stop();
}

/** Every file under `dir` (relative path → bytes). */
async function tree(dir: string, prefix = ""): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) Object.assign(out, await tree(full, `${prefix}${entry.name}/`));
    else out[`${prefix}${entry.name}`] = (await readFile(full)).toString("base64");
  }
  return out;
}

describe("data API, SDK and CLI (suanli data add|pin|ls|rm|get)", function () {
  this.timeout(120_000);
  let root: string;
  let a: Peer;
  let b: Peer;
  let off: Peer;
  let folder: string;
  const big = randomBytes(2 * 1024 * 1024 + 5);

  before(async () => {
    root = await mkdtemp(path.join(tmpdir(), "suanli-data-api-"));
    a = await startPeer(root, "a");
    b = await startPeer(root, "b", { pinnedBytes: 1024 * 1024 });
    off = await startPeer(root, "off", false);
    folder = path.join(root, "dataset");
    await mkdir(path.join(folder, "nested", "empty"), { recursive: true });
    await writeFile(path.join(folder, "big.bin"), big);
    await writeFile(path.join(folder, "nested", "a.txt"), "alpha\n");
  });
  after(async () => {
    await Promise.allSettled([stopPeer(a), stopPeer(b), stopPeer(off)]);
    await rm(root, { recursive: true, force: true });
  });

  it("adds a folder through node A's API (its list names A's peer id and addresses); node B's API gets it over bitswap byte for byte, re-hashed to the CID", async () => {
    const sent: number[] = [];
    const added = await addData(folder, { nodeUrl: a.url, onProgress: ({ bytes }) => sent.push(bytes) });
    assert.equal(added.verified, true);
    assert.equal(added.pinned, true);
    assert.equal(added.name, "dataset");
    assert.ok(sent.length > 1 && sent.at(-1)! > big.length, "progress reports the bytes sent");
    const listed = await listData({ nodeUrl: a.url });
    assert.deepEqual(
      listed.items.map((item) => [item.cid, item.pinned]),
      [[added.cid, true]],
    );
    // The list names the node itself: where another node fetches what it holds (the SDK's checkpoint copies use it as a hint).
    assert.equal(listed.node?.peerId, a.p2p.host.peerId.toString());
    assert.ok(listed.node?.addrs.includes(a.addr), `${a.addr} in ${listed.node?.addrs.join(", ")}`);

    const received: number[] = [];
    const out = path.join(root, "from-b");
    const got = await getData(added.cid, out, { nodeUrl: b.url, providers: [a.addr], timeoutMs: 20_000, onProgress: ({ bytes }) => received.push(bytes) });
    assert.deepEqual({ kind: got.kind, bytes: got.bytes, verified: got.verified }, { kind: "folder", bytes: big.length + 6, verified: true });
    assert.ok(received.length > 1);
    assert.deepEqual(await tree(out), await tree(folder));
    assert.deepEqual(await readdir(path.join(out, "nested", "empty")), [], "empty folders come back too");
    assert.ok(b.data!.counters.fetchedBlocks > 0, "B fetched the blocks over bitswap");
    const onB = (await listData({ nodeUrl: b.url })).items.find((item) => item.cid === added.cid);
    assert.equal(onB?.pinned, false, "what B fetched for a download is cached, not pinned");
  });

  it("adds a single file (wrapped under its name, as DataStore.add does) and gets it back", async () => {
    const file = path.join(root, "notes.txt");
    await writeFile(file, "one file\n");
    const added = await addData(file, { nodeUrl: a.url });
    assert.equal(added.cid, (await a.data!.add(file)).cid, "the API pins the CID the store gives the same file");
    const out = path.join(root, "notes-back");
    const got = await getData(added.cid, out, { nodeUrl: a.url });
    assert.equal(got.verified, true);
    assert.equal(await readFile(path.join(out, "notes.txt"), "utf8"), "one file\n");
    await assert.rejects(getData(added.cid, out, { nodeUrl: a.url }), { name: "DataRequestError", message: /already exists/ });
  });

  it("removes: a pin on A, a cached copy on B; a CID neither holds is DataNotHeldError", async () => {
    const added = await addData(folder, { nodeUrl: a.url });
    const cachedOnB = (await listData({ nodeUrl: b.url })).items.find((item) => item.cid === added.cid);
    assert.ok(cachedOnB, "cached by the first test");
    assert.deepEqual(await removeData(added.cid, { nodeUrl: b.url }), { cid: added.cid, removed: "cached" });
    assert.deepEqual(await removeData(added.cid, { nodeUrl: a.url }), { cid: added.cid, removed: "pinned" });
    assert.equal(await a.data!.has(added.cid), false, "unpinned blocks are deleted");
    assert.equal(
      (await listData({ nodeUrl: a.url })).items.some((item) => item.cid === added.cid),
      false,
    );
    await assert.rejects(removeData(added.cid, { nodeUrl: a.url }), (error: unknown) => {
      assert.ok(error instanceof DataRequestError);
      assert.equal(error.name, "DataNotHeldError");
      assert.equal(error.status, 404);
      return true;
    });
  });

  it("answers bad and unknown CIDs, data over data.pinnedBytes and a disabled data plane with typed errors", async () => {
    const missing = CID.createV1(raw.code, await sha256.digest(randomBytes(32))).toString();
    await assert.rejects(getData(missing, path.join(root, "missing"), { nodeUrl: a.url, timeoutMs: 300 }), { name: "DataNotFoundError", status: 404 });
    const bad = await fetch(`${a.url}/v1/data/abc123`);
    assert.equal(bad.status, 400);
    assert.equal(((await bad.json()) as { error: { name: string } }).error.name, "InvalidCidError");
    await assert.rejects(getData("not a cid", path.join(root, "x"), { nodeUrl: a.url }), { name: "InvalidInputError" });

    // B accepts 1 MiB pinned: a 2 MiB file is refused while it streams in, and nothing is pinned.
    const large = path.join(root, "large.bin");
    await writeFile(large, big);
    await assert.rejects(addData(large, { nodeUrl: b.url }), { name: "DataQuotaError", status: 413 });
    assert.equal((await listData({ nodeUrl: b.url })).items.filter((item) => item.pinned).length, 0);
    assert.deepEqual(await readdir(path.join(root, "b", "data", "staging")), [], "the staging copy is removed");

    for (const request of [listData({ nodeUrl: off.url }), addData(folder, { nodeUrl: off.url })]) {
      await assert.rejects(request, (error: unknown) => {
        assert.ok(error instanceof DataRequestError);
        assert.equal(error.name, "DataDisabledError");
        assert.equal(error.status, 503);
        assert.match(error.message, /data\.enabled/);
        return true;
      });
    }
  });

  it("refuses browsers, other Host names, other media types, and tar entries that are not files or folders", async () => {
    const fromPage = await fetch(`${a.url}/v1/data`, { headers: { origin: "https://evil.example" } });
    assert.equal(fromPage.status, 403);
    assert.equal(((await fromPage.json()) as { error: { name: string } }).error.name, "DataAccessRefusedError");
    const rebound = await a.api.app.inject({ method: "GET", url: "/v1/data", headers: { host: "evil.example:8080" }, remoteAddress: "127.0.0.1" });
    assert.equal(rebound.statusCode, 403);
    const remote = await a.api.app.inject({ method: "GET", url: "/v1/data", headers: { host: "127.0.0.1" }, remoteAddress: "192.0.2.7" });
    assert.equal(remote.statusCode, 403);
    assert.equal(remote.json().error.name, "DataAccessRefusedError");

    const json = await fetch(`${a.url}/v1/data`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
    assert.equal(json.status, 415);
    const elsewhere = await fetch(`${a.url}/v1/match`, { method: "POST", headers: { "content-type": "application/x-tar" }, body: "x" });
    assert.equal(elsewhere.status, 415, "only the data route takes a streamed body");

    const linked = path.join(root, "linked");
    await mkdir(linked);
    await writeFile(path.join(linked, "real.txt"), "real\n");
    await symlink("/etc/passwd", path.join(linked, "link"));
    const body = Readable.toWeb(Readable.from(createTar({ cwd: linked, portable: true }, ["real.txt", "link"]))) as ReadableStream<Uint8Array>;
    const refused = await fetch(`${a.url}/v1/data?name=linked`, { method: "POST", headers: { "content-type": "application/x-tar" }, body, duplex: "half" } as RequestInit);
    assert.equal(refused.status, 400);
    const answer = (await refused.json()) as { error: { name: string; message: string } };
    assert.equal(answer.error.name, "DataSourceError");
    assert.match(answer.error.message, /SymbolicLink/);
    await assert.rejects(addData(linked, { nodeUrl: a.url }), { name: "DataRequestError", message: /symlink/ });
  });

  it("suanli data add --pin-on, ls, get (from another node, verified) and rm as child processes, --json", async () => {
    const cliFolder = path.join(root, "cli-dataset");
    await mkdir(path.join(cliFolder, "sub"), { recursive: true });
    await writeFile(path.join(cliFolder, "sub", "c.bin"), randomBytes(300_000));
    const added = await runCli(["data", "add", cliFolder, "--pin-on", a.url, "--json"]);
    assert.equal(added.code, 0, added.stderr);
    const { cid } = lastJson<{ cid: string; verified: boolean }>(added.stdout);
    assert.equal(lastJson(added.stdout).verified, true);

    const listed = await runCli(["data", "ls", "--node-url", a.url, "--json"]);
    assert.equal(listed.code, 0, listed.stderr);
    assert.ok(lastJson<{ items: { cid: string }[] }>(listed.stdout).items.some((item) => item.cid === cid));

    const out = path.join(root, "cli-out");
    const got = await runCli(["data", "get", cid, out, "--node-url", b.url, "--provider", a.addr, "--timeout-ms", "20000"]);
    assert.equal(got.code, 0, got.stderr);
    assert.match(got.stdout, /verified against/);
    assert.match(got.stderr, /Received/, "progress on stderr");
    assert.deepEqual(await tree(out), await tree(cliFolder));

    const removed = await runCli(["data", "rm", cid, "--node-url", a.url, "--json"]);
    assert.equal(removed.code, 0, removed.stderr);
    assert.equal(lastJson(removed.stdout).removed, "pinned");
    const again = await runCli(["data", "rm", cid, "--node-url", a.url]);
    assert.equal(again.code, 1);
    assert.match(again.stderr, /neither pins nor caches/);
  });

  it("pins a CID another node holds (POST /v1/data/pins, SDK pinData, suanli data pin): fetched, verified, kept; over the quota, unknown or with a bad hint it is refused by name", async () => {
    const file = path.join(root, "checkpoint.bin");
    await writeFile(file, randomBytes(200_000));
    const added = await addData(file, { nodeUrl: a.url });
    const pinned = await pinData(added.cid, { nodeUrl: b.url, providers: [a.addr], timeoutMs: 20_000, name: "kept" });
    assert.deepEqual([pinned.cid, pinned.pinned, pinned.name], [added.cid, true, "kept"]);
    // A's copy can go: B keeps its own, pinned, byte for byte.
    await removeData(added.cid, { nodeUrl: a.url });
    assert.equal((await listData({ nodeUrl: b.url })).items.find((item) => item.cid === added.cid)?.pinned, true);
    const back = path.join(root, "kept-back");
    assert.equal((await getData(added.cid, back, { nodeUrl: b.url, timeoutMs: 2_000 })).verified, true);
    assert.deepEqual(await readFile(path.join(back, "checkpoint.bin")), await readFile(file));
    assert.equal((await pinData(added.cid, { nodeUrl: b.url })).cid, added.cid, "pinning it again answers the pin");

    // B pins at most 1 MiB: a 2 MiB folder is fetched, refused, and not pinned. Fresh data, not the
    // `folder` removed earlier in this file: adding a removed CID again and fetching it through B is
    // docs/data.md's open finding "re-add after remove" (DataNotFoundError after the timeout), which
    // a clean-clone CI met here.
    const largeFolder = path.join(root, "large-for-pin");
    await mkdir(largeFolder);
    await writeFile(path.join(largeFolder, "big.bin"), randomBytes(2 * 1024 * 1024 + 5));
    const large = await addData(largeFolder, { nodeUrl: a.url });
    // (A failure says what came instead and when: CI once saw DataNotFoundError here and no more.)
    const pinStarted = Date.now();
    await assert.rejects(pinData(large.cid, { nodeUrl: b.url, providers: [a.addr], timeoutMs: 20_000 }), (error: Error & { status?: number }) => {
      assert.deepEqual({ name: error.name, status: error.status }, { name: "DataQuotaError", status: 413 }, `${error.message} (after ${Date.now() - pinStarted} ms)`);
      return true;
    });
    assert.notEqual((await listData({ nodeUrl: b.url })).items.find((item) => item.cid === large.cid)?.pinned, true);
    const missing = CID.createV1(raw.code, await sha256.digest(randomBytes(32))).toString();
    await assert.rejects(pinData(missing, { nodeUrl: b.url, timeoutMs: 300 }), { name: "DataNotFoundError", status: 404 });
    const badHint = await fetch(`${b.url}/v1/data/pins`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ cid: added.cid, providers: ["127.0.0.1:4001"] }),
    });
    assert.equal(badHint.status, 400);
    assert.match(((await badHint.json()) as { error: { message: string } }).error.message, /providers.*\/p2p\//s);
    const fromPage = await fetch(`${b.url}/v1/data/pins`, {
      method: "POST",
      headers: { "content-type": "application/json", origin: "https://evil.example" },
      body: JSON.stringify({ cid: added.cid }),
    });
    assert.equal(fromPage.status, 403);
    await assert.rejects(pinData(added.cid, { nodeUrl: off.url }), { name: "DataDisabledError", status: 503 });

    // The CLI, as a child process.
    const cliFile = path.join(root, "cli-checkpoint.bin");
    await writeFile(cliFile, randomBytes(50_000));
    const cliAdded = await addData(cliFile, { nodeUrl: a.url });
    const cli = await runCli(["data", "pin", cliAdded.cid, "--node-url", b.url, "--provider", a.addr, "--timeout-ms", "20000", "--json"]);
    assert.equal(cli.code, 0, cli.stderr);
    assert.deepEqual([lastJson<{ cid: string; pinned: boolean }>(cli.stdout).cid, lastJson<{ pinned: boolean }>(cli.stdout).pinned], [cliAdded.cid, true]);
  });
});

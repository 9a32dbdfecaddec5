/**
 * Task inputs on the provider side (node/data/inputs.ts): two real nodes over TCP 127.0.0.1 with
 * real Helia and level stores. docs/data.md cites these tests.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { silentLogger } from "../../node/log/logger.js";
import { InputCache, parseTaskInputs } from "../../node/data/inputs.js";
import { DataStore } from "../../node/data/store.js";
import { blameOf } from "../../node/provider/errors.js";
import { startNodeHost, type NodeHost } from "../../node/p2p/start.js";
import { loopbackP2pOptions } from "../support/nodes.js";

type Peer = { dir: string; p2p: NodeHost; data: DataStore; addr: string };

async function startPeer(dir: string, options: Parameters<typeof DataStore.open>[0]["options"] = {}): Promise<Peer> {
  const p2p = await startNodeHost({ dataDir: dir, options: loopbackP2pOptions(), logger: silentLogger() });
  const data = await DataStore.open({ dataDir: dir, libp2p: p2p.host, options });
  return { dir, p2p, data, addr: p2p.host.getMultiaddrs()[0]!.toString() };
}

describe("task inputs through the data plane", function () {
  this.timeout(60_000);
  let root: string;
  let renter: Peer;
  let provider: Peer;
  let inputs: InputCache;
  let stopped = false;

  before(async () => {
    root = await mkdtemp(path.join(tmpdir(), "suanli-inputs-"));
    renter = await startPeer(path.join(root, "renter"));
    provider = await startPeer(path.join(root, "provider"), { cacheBytes: 6 * 1024 * 1024 });
    inputs = new InputCache(provider.data, provider.dir);
  });
  after(async () => {
    await provider.data.stop();
    await provider.p2p.stop();
    if (!stopped) {
      await renter.data.stop();
      await renter.p2p.stop();
    }
    await rm(root, { recursive: true, force: true });
  });

  it("validates inputs: CIDs, mounts under /data, no shared or nested mounts", () => {
    const cid = "bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy";
    assert.equal(parseTaskInputs([{ cid, mount: "/data/set" }]).length, 1);
    assert.throws(() => parseTaskInputs([{ cid: "nope-not-a-cid", mount: "/data/set" }]), { name: "InvalidInputError", message: /0\.cid/ });
    for (const mount of ["/etc", "/data", "/data/../etc", "/data//x", "data/x"]) assert.throws(() => parseTaskInputs([{ cid, mount }]), { name: "InvalidInputError" }, mount);
    assert.throws(
      () =>
        parseTaskInputs([
          { cid, mount: "/data/a" },
          { cid, mount: "/data/a/b" },
        ]),
      { name: "InvalidInputError" },
    );
  });

  it("fetches an input from the renter's node once, writes it read-only, and a second lease reuses it without the network", async () => {
    const dataset = path.join(root, "dataset");
    await mkdir(dataset);
    const payload = randomBytes(2 * 1024 * 1024);
    await writeFile(path.join(dataset, "train.bin"), payload);
    const { cid } = await renter.data.add(dataset);

    const first = await inputs.prepare(cid, { providers: [renter.addr], timeoutMs: 20_000 });
    assert.equal(first.fetched, true);
    assert.ok((await readFile(path.join(first.path, "train.bin"))).equals(payload));
    assert.equal((await stat(first.path)).mode & 0o777, 0o555);
    assert.equal((await stat(path.join(first.path, "train.bin"))).mode & 0o777, 0o444);

    // The renter's node goes away: the second lease still starts, from the cache.
    await renter.data.stop();
    await renter.p2p.stop();
    stopped = true;
    const fetchedBlocks = provider.data.counters.fetchedBlocks;
    const second = await inputs.prepare(cid, { timeoutMs: 2_000 });
    assert.equal(second.fetched, false);
    assert.equal(second.path, first.path);
    assert.equal(provider.data.counters.fetchedBlocks, fetchedBlocks, "no block was fetched for the second lease");
  });

  it("ends with DataNotFoundError, blamed on the renter, when no one serves the input in time", async () => {
    const cid = "bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy";
    const error = await inputs.prepare(cid, { timeoutMs: 500 }).then(
      () => assert.fail("fetched a CID nobody has"),
      (failure: unknown) => failure,
    );
    assert.equal((error as Error).name, "DataNotFoundError");
    assert.equal(blameOf(error), "renter");
  });

  it("removes an input's folder when the cache evicts its root", async () => {
    const cached = (await provider.data.list()).filter((entry) => !entry.pinned);
    assert.equal(cached.length, 1);
    const folder = path.join(provider.dir, "data", "inputs", cached[0]!.cid);
    await stat(folder);
    await provider.data.dropCached(cached[0]!.cid);
    await assert.rejects(stat(folder), { code: "ENOENT" });
    assert.equal(await provider.data.has(cached[0]!.cid), false);
  });
});

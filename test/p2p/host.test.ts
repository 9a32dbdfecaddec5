import assert from "node:assert/strict";
import { chmod, mkdtemp, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { multiaddr } from "@multiformats/multiaddr";
import { announceProtocols, createHost, type SuanliHost } from "../../common/p2p/host.js";
import { KAD_PROTOCOL } from "../../common/p2p/protocols.js";
import { silentLogger } from "../../node/log/logger.js";
import { loadOrCreatePeerKey } from "../../node/p2p/identity.js";
import { startNodeHost } from "../../node/p2p/start.js";
import { loopbackP2pOptions } from "../support/nodes.js";
import { waitFor } from "../support/wait.js";

describe("libp2p host", function () {
  this.timeout(30_000);
  let dir: string;
  before(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "suanli-host-"));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  describe("persistent identity", () => {
    it("creates an Ed25519 key readable only by its owner, and loads the same one next time", async () => {
      const file = path.join(dir, "identity", "peer.key");
      const first = await loadOrCreatePeerKey(file);
      assert.equal(first.created, true);
      assert.equal(first.key.type, "Ed25519");
      assert.equal((await stat(file)).mode & 0o777, 0o600);
      const second = await loadOrCreatePeerKey(file);
      assert.equal(second.created, false);
      assert.ok(second.key.publicKey.equals(first.key.publicKey));
    });

    it("refuses a key file other users can read, and one that is not a key", async () => {
      const open = path.join(dir, "open.key");
      await loadOrCreatePeerKey(open);
      await chmod(open, 0o644);
      await assert.rejects(loadOrCreatePeerKey(open), { name: "IdentityError" });
      const junk = path.join(dir, "junk.key");
      await writeFile(junk, "not a key", { mode: 0o600 });
      await assert.rejects(loadOrCreatePeerKey(junk), { name: "IdentityError" });
    });

    it("keeps a node's peer id across restarts of the node host", async () => {
      const dataDir = path.join(dir, "node");
      const options = loopbackP2pOptions();
      const a = await startNodeHost({ dataDir, options, logger: silentLogger() });
      const id = a.host.peerId.toString();
      await a.stop();
      const b = await startNodeHost({ dataDir, options, logger: silentLogger() });
      assert.equal(b.host.peerId.toString(), id);
      await b.stop();
    });
  });

  it("rejects bad options naming the field", async () => {
    await assert.rejects(createHost({ bootstrap: ["/ip4/127.0.0.1/tcp/4001"] }), (error: unknown) => {
      assert.equal((error as Error).name, "InvalidInputError");
      assert.deepEqual((error as { fields: string[] }).fields, ["bootstrap.0"]);
      return true;
    });
    await assert.rejects(createHost({ listen: ["not-a-multiaddr"] }), { name: "InvalidInputError" });
    await assert.rejects(createHost({ gossip: { D: 2, Dlo: 4 } }), { name: "HostStartError" });
  });

  it("tells connected peers of a protocol it starts serving later (identify push): a data plane started after the host is known to peers that met it before", async () => {
    const options = { listen: ["/ip4/127.0.0.1/tcp/0"], allowPrivateAddresses: true, gossip: { enabled: false }, dht: { enabled: false } };
    const early = await createHost(options);
    const identified = new Promise<void>((resolve) =>
      early.addEventListener("peer:identify", (event) => {
        if (!event.detail.peerId.equals(early.peerId)) resolve();
      }),
    );
    const late = await createHost({ ...options, bootstrap: [early.getMultiaddrs()[0]!.toString()] });
    try {
      await identified;
      const connections = early.getConnections(late.peerId).map((connection) => connection.id);
      assert.ok(!(await early.peerStore.get(late.peerId)).protocols.includes("/ipfs/bitswap/1.2.0"), "identified before it served bitswap");
      // What the data plane does when it starts (node/data/store.ts: Helia's bitswap on the running host).
      await late.handle("/ipfs/bitswap/1.2.0", () => undefined);
      await announceProtocols(late);
      await waitFor("the early peer to learn of it", async () => (await early.peerStore.get(late.peerId)).protocols.includes("/ipfs/bitswap/1.2.0"), { timeoutMs: 5_000 });
      assert.deepEqual(
        early.getConnections(late.peerId).map((connection) => connection.id),
        connections,
        "on the same connection: no new one was identified",
      );
    } finally {
      await Promise.all([early.stop(), late.stop()]);
    }
  });

  it("finds peers beyond the bootstrap list through the DHT, and stops cleanly", async () => {
    const options = {
      listen: ["/ip4/127.0.0.1/tcp/0"],
      allowPrivateAddresses: true,
      connections: { inboundPerSecondPerHost: 1_000, min: 4 },
      gossip: { enabled: false },
    };
    const seed = await createHost(options);
    const bootstrap = [seed.getMultiaddrs()[0]!.toString()];
    const b = await createHost({ ...options, bootstrap });
    const c = await createHost({ ...options, bootstrap });
    const hosts: SuanliHost[] = [seed, b, c];
    try {
      // b and c only know the seed; the DHT tells them about each other and they connect.
      await waitFor("b and c to connect directly", () => b.getConnections(c.peerId).length > 0 || c.getConnections(b.peerId).length > 0, {
        timeoutMs: 20_000,
      });
      // Identify tells b what c speaks: Suanli's own DHT namespace, not the public IPFS one.
      await waitFor("identify of c", async () => (await b.peerStore.get(c.peerId)).protocols.includes(KAD_PROTOCOL));
      assert.ok(!(await b.peerStore.get(c.peerId)).protocols.includes("/ipfs/kad/1.0.0"));
    } finally {
      await Promise.all(hosts.map((host) => host.stop()));
    }
    assert.equal(seed.status, "stopped");
    const probe = await createHost({ ...options, connections: { ...options.connections, min: 0 }, dht: { enabled: false } });
    await assert.rejects(probe.dial(seed.getMultiaddrs()[0] ?? multiaddr(bootstrap[0]!), { signal: AbortSignal.timeout(3_000) }));
    await probe.stop();
  });
});

import assert from "node:assert/strict";
import { loadConfig } from "../../node/config/load.js";
import { nodeConfigSchema } from "../../node/config/schema.js";

describe("p2p and offers configuration", () => {
  it("has daemon defaults", async () => {
    const config = await loadConfig(nodeConfigSchema, {});
    assert.deepEqual(config.p2p.listen, ["/ip4/0.0.0.0/tcp/4001"]);
    assert.deepEqual(config.p2p.bootstrap, []);
    assert.equal(config.p2p.identityFile, "peer.key");
    assert.equal(config.p2p.dht.enabled, true);
    assert.equal(config.p2p.gossip.D, 6);
    assert.equal(config.offers.reannounceIntervalMs, 30_000);
    assert.equal(config.offers.minFreeStake, 1n);
    assert.equal(config.offers.sync.peers, 3);
  });

  it("reads listen addresses, bootstrap peers and limits from the environment and flags", async () => {
    const peer = "/ip4/127.0.0.1/tcp/4001/p2p/12D3KooWJWkcXmhwWL1CPJ9ayTiDMK1ra6uzFH7igDkAu1Q6v3M7";
    const config = await loadConfig(nodeConfigSchema, {
      env: {
        SUANLI_P2P__LISTEN: "/ip4/127.0.0.1/tcp/4101,/ip4/127.0.0.1/tcp/4102",
        SUANLI_P2P__BOOTSTRAP: peer,
        SUANLI_P2P__ALLOW_PRIVATE_ADDRESSES: "true",
        SUANLI_OFFERS__MIN_FREE_STAKE: "1000000",
      },
      flags: { "p2p.gossip.ipColocationWhitelist": "127.0.0.1", "offers.sync.peers": "0" },
    });
    assert.deepEqual(config.p2p.listen, ["/ip4/127.0.0.1/tcp/4101", "/ip4/127.0.0.1/tcp/4102"]);
    assert.deepEqual(config.p2p.bootstrap, [peer]);
    assert.equal(config.p2p.allowPrivateAddresses, true);
    assert.deepEqual(config.p2p.gossip.ipColocationWhitelist, ["127.0.0.1"]);
    assert.equal(config.offers.minFreeStake, 1_000_000n);
    assert.equal(config.offers.sync.peers, 0);
  });

  it("names a bad bootstrap entry and a bad listen address", async () => {
    await assert.rejects(loadConfig(nodeConfigSchema, { env: { SUANLI_P2P__BOOTSTRAP: "/ip4/127.0.0.1/tcp/4001" } }), (error: unknown) => {
      assert.deepEqual((error as { keys: string[] }).keys, ["p2p.bootstrap.0"]);
      assert.match((error as Error).message, /\/p2p\/<peer id>/);
      return true;
    });
    await assert.rejects(loadConfig(nodeConfigSchema, { flags: { "p2p.listen": "tcp://0.0.0.0:4001" } }), {
      name: "ConfigError",
    });
  });
});

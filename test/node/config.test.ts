import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { z } from "zod";
import { ConfigError, envNameFor, loadConfig } from "../../node/config/load.js";

const schema = z.strictObject({
  dataDir: z.string().default(".suanli"),
  log: z.strictObject({ level: z.enum(["debug", "info"]).default("info") }).prefault({}),
  chain: z.strictObject({ rpcUrl: z.string().url().default("http://127.0.0.1:8545"), chainId: z.number().int().optional() }).prefault({}),
  p2p: z.strictObject({ listen: z.array(z.string()).default([]), maxPeers: z.number().int().positive().default(50) }).prefault({}),
});

describe("config loading", () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "suanli-config-"));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("applies defaults, then file, then environment, then flags", async () => {
    const file = path.join(dir, "ok.json");
    await writeFile(file, JSON.stringify({ dataDir: "/var/suanli", p2p: { maxPeers: 10 } }));
    const config = await loadConfig(schema, {
      file,
      env: { SUANLI_P2P__MAX_PEERS: "20", SUANLI_CHAIN__CHAIN_ID: "31337", UNRELATED: "x" },
      flags: { "p2p.listen": "/ip4/127.0.0.1/tcp/0,/ip4/127.0.0.1/tcp/1" },
    });
    assert.equal(config.dataDir, "/var/suanli");
    assert.equal(config.p2p.maxPeers, 20);
    assert.equal(config.chain.chainId, 31337);
    assert.equal(config.chain.rpcUrl, "http://127.0.0.1:8545");
    assert.deepEqual(config.p2p.listen, ["/ip4/127.0.0.1/tcp/0", "/ip4/127.0.0.1/tcp/1"]);
  });

  it("names a key of the wrong type and the file it came from", async () => {
    const file = path.join(dir, "bad-type.json");
    await writeFile(file, JSON.stringify({ p2p: { maxPeers: "many" } }));
    await assert.rejects(loadConfig(schema, { file }), (error: unknown) => {
      assert.ok(error instanceof ConfigError);
      assert.equal(error.name, "ConfigError");
      assert.deepEqual(error.keys, ["p2p.maxPeers"]);
      assert.match(error.message, /p2p\.maxPeers/);
      assert.match(error.message, /expected number/);
      assert.match(error.message, /bad-type\.json/);
      return true;
    });
  });

  it("names an unknown key and lists the accepted ones", async () => {
    const file = path.join(dir, "unknown.json");
    await writeFile(file, JSON.stringify({ chain: { rpcURL: "http://x" } }));
    await assert.rejects(loadConfig(schema, { file }), (error: unknown) => {
      assert.ok(error instanceof ConfigError);
      assert.deepEqual(error.keys, ["chain.rpcURL"]);
      assert.match(error.message, /unknown key/);
      assert.match(error.message, /rpcUrl, chainId/);
      return true;
    });
  });

  it("rejects an unknown flag and a bad enum value from the environment", async () => {
    await assert.rejects(loadConfig(schema, { flags: { "p2p.peers": "3" } }), (error: unknown) => {
      assert.ok(error instanceof ConfigError);
      assert.deepEqual(error.keys, ["p2p.peers"]);
      assert.match(error.message, /--p2p\.maxPeers/);
      return true;
    });
    await assert.rejects(loadConfig(schema, { env: { SUANLI_LOG__LEVEL: "loud" } }), (error: unknown) => {
      assert.ok(error instanceof ConfigError);
      assert.deepEqual(error.keys, ["log.level"]);
      assert.match(error.message, /environment SUANLI_LOG__LEVEL/);
      return true;
    });
  });

  it("reports a missing file and a file that is not JSON", async () => {
    await assert.rejects(loadConfig(schema, { file: path.join(dir, "absent.json") }), { name: "ConfigError" });
    const file = path.join(dir, "broken.json");
    await writeFile(file, "{ not json");
    await assert.rejects(loadConfig(schema, { file }), /not valid JSON/);
  });

  it("derives environment names from key paths", () => {
    assert.equal(envNameFor(["chain", "rpcUrl"]), "SUANLI_CHAIN__RPC_URL");
    assert.equal(envNameFor(["dataDir"]), "SUANLI_DATA_DIR");
  });
});

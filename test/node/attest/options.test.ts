import assert from "node:assert/strict";
import { loadConfig } from "../../../node/config/load.js";
import { nodeConfigSchema } from "../../../node/config/schema.js";
import { createRunner, maxChallengeOps } from "../../../node/attest/create.js";
import { CpuRunner, ExternalRunner } from "../../../node/attest/runner/index.js";
import { faultPeeringWarning } from "../../../node/attest/faults/index.js";

describe("attest options", () => {
  it("defaults to the gpu preset and the CPU runner", async () => {
    const config = await loadConfig(nodeConfigSchema, {});
    assert.equal(config.attest.challenge.preset, "gpu");
    assert.equal(config.attest.challenge.cols, 4096);
    // No single efficiency: each class is held to its calibrated one (common/attest/calibration.ts).
    assert.equal(config.attest.challenge.efficiency, undefined);
    assert.equal(config.attest.runner.kind, "cpu");
    assert.equal(maxChallengeOps(config.attest), 10n ** 18n);
    const runner = createRunner(config.attest.runner);
    assert.ok(runner instanceof CpuRunner);
    await runner.close();
  });

  it("takes the devnet preset and overrides from the environment and flags", async () => {
    const config = await loadConfig(nodeConfigSchema, {
      env: { SUANLI_ATTEST__CHALLENGE__PRESET: "cpu-devnet", SUANLI_ATTEST__RUNNER__WORKERS: "3" },
      flags: { "attest.challenge.latencyAllowanceMs": "500", "attest.challenge.classes": '{"T4-16GB":{"efficiency":0.35}}' },
    });
    assert.equal(config.attest.challenge.cols, 64);
    assert.equal(config.attest.challenge.rowsPerUnit, 1024);
    assert.equal(config.attest.challenge.latencyAllowanceMs, 500);
    assert.deepEqual(config.attest.challenge.classes, { "T4-16GB": { efficiency: 0.35 } });
    assert.equal(config.attest.runner.workers, 3);
  });

  it("names the key when an external runner has no command or a class is misspelt", async () => {
    await assert.rejects(loadConfig(nodeConfigSchema, { flags: { "attest.runner.kind": "external" } }), (error: Error & { keys?: string[] }) => {
      assert.equal(error.name, "ConfigError");
      assert.deepEqual(error.keys, ["attest.runner.command"]);
      return true;
    });
    await assert.rejects(loadConfig(nodeConfigSchema, { flags: { "attest.challenge.classes": '{"H100":{"rounds":4}}' } }), (error: Error & { keys?: string[] }) => {
      assert.deepEqual(error.keys, ["attest.challenge.classes.H100"]);
      return true;
    });
    const config = await loadConfig(nodeConfigSchema, {
      flags: { "attest.runner.kind": "external", "attest.runner.command": "/opt/runner", "attest.runner.args": '["--device","0"]' },
    });
    const runner = createRunner(config.attest.runner);
    assert.ok(runner instanceof ExternalRunner);
    assert.equal(runner.name, "external:runner");
    await runner.close();
  });

  it("reads the attestor role's schedule, peers and liveness window, and names a bad key", async () => {
    const defaults = await loadConfig(nodeConfigSchema, {});
    assert.equal(defaults.attest.liveness.enabled, true);
    assert.equal(defaults.attest.liveness.qosWindowSeconds, 30);
    assert.equal(defaults.attest.liveness.probeIntervalMs, 2_000);
    assert.deepEqual(defaults.attest.attestor.peers, []);
    const peer = "/ip4/10.0.0.7/tcp/4001/p2p/12D3KooWDpJ7As7BWAwRMfu1VU2WCqNjvq387JEYKDBj4kx6nXTN";
    const config = await loadConfig(nodeConfigSchema, {
      env: { SUANLI_ATTEST__LIVENESS__QOS_WINDOW_SECONDS: "120", SUANLI_ATTEST__ATTESTOR__PEERS: peer },
      flags: { "attest.liveness.probeIntervalMs": "10000", "attest.attestor.refreshBeforeExpirySeconds": "3600" },
    });
    assert.equal(config.attest.liveness.qosWindowSeconds, 120);
    assert.equal(config.attest.liveness.probeIntervalMs, 10_000);
    assert.equal(config.attest.attestor.refreshBeforeExpirySeconds, 3_600);
    assert.deepEqual(config.attest.attestor.peers, [peer]);
    // A peer address must name its peer: the fault exchange dials it by id.
    await assert.rejects(loadConfig(nodeConfigSchema, { flags: { "attest.attestor.peers": "/ip4/10.0.0.7/tcp/4001" } }), (error: Error & { keys?: string[] }) => {
      assert.equal(error.name, "ConfigError");
      assert.deepEqual(error.keys, ["attest.attestor.peers.0"]);
      return true;
    });
    await assert.rejects(loadConfig(nodeConfigSchema, { flags: { "attest.liveness.qosWindowSeconds": "0" } }), (error: Error & { keys?: string[] }) => {
      assert.deepEqual(error.keys, ["attest.liveness.qosWindowSeconds"]);
      return true;
    });
    // A longer window, or backup delay, would leave no time to land a fault within the market's 600 s.
    for (const [key, value] of [
      ["attest.liveness.qosWindowSeconds", "301"],
      ["attest.liveness.backupSubmitDelayMs", "120001"],
    ]) {
      await assert.rejects(loadConfig(nodeConfigSchema, { flags: { [key!]: value } }), (error: Error & { keys?: string[] }) => {
        assert.deepEqual(error.keys, [key]);
        return true;
      });
    }
  });

  it("warns of an attestor that cannot meet another: no attest.attestor.peers with the DHT off and a quorum above one", async () => {
    const config = await loadConfig(nodeConfigSchema, { flags: { "p2p.dht.enabled": "false" } });
    const of = (overrides: Partial<Parameters<typeof faultPeeringWarning>[0]> = {}) =>
      faultPeeringWarning({ peers: config.attest.attestor.peers, dhtEnabled: config.p2p.dht.enabled, quorum: 2, livenessEnabled: config.attest.liveness.enabled, ...overrides });
    // The soak's first configuration: every fault this attestor proposes stays at its own signature.
    assert.match(of() ?? "", /faults need 2 attestor signatures, but attest\.attestor\.peers is empty and the DHT is off/);
    assert.match(of() ?? "", /List the other attestors in attest\.attestor\.peers/);
    // Any of these, and it can reach the others (or needs none).
    assert.equal(of({ peers: ["/ip4/127.0.0.1/tcp/4001/p2p/12D3KooWDpJ7As7BWAwRMfu1VU2WCqNjvq387JEYKDBj4kx6nXTN"] }), undefined);
    assert.equal(of({ dhtEnabled: true }), undefined);
    assert.equal(of({ quorum: 1 }), undefined);
    assert.equal(of({ livenessEnabled: false }), undefined);
  });
});

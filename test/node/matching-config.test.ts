import assert from "node:assert/strict";
import { ConfigError, loadConfig } from "../../node/config/load.js";
import { nodeConfigSchema } from "../../node/config/schema.js";
import { MatchingEngine } from "../../common/matching/index.js";

describe("config: matching", () => {
  it("defaults the matching options and takes weights from the environment and flags", async () => {
    const defaults = await loadConfig(nodeConfigSchema, { env: {} });
    assert.deepEqual(defaults.matching.weights, { price: 1, reputation: 0.3, freshness: 0.1, latency: 0.1 });
    assert.equal(defaults.matching.maxCandidates, 8);
    const config = await loadConfig(nodeConfigSchema, {
      env: { SUANLI_MATCHING__WEIGHTS__REPUTATION: "0.5" },
      flags: { "matching.maxCandidates": "4" },
    });
    assert.equal(config.matching.weights.reputation, 0.5);
    assert.equal(config.matching.maxCandidates, 4);
    // The node hands the section to the engine as it is.
    assert.equal(new MatchingEngine(config.matching).options.weights.reputation, 0.5);
  });

  it("names a bad matching key", async () => {
    await assert.rejects(loadConfig(nodeConfigSchema, { env: { SUANLI_MATCHING__WEIGHTS__PRICE: "-1" } }), (error: unknown) => {
      assert.ok(error instanceof ConfigError);
      assert.deepEqual(error.keys, ["matching.weights.price"]);
      return true;
    });
  });
});

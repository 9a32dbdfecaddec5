/**
 * `attest.cc` at start-up (node/attest/cc-policy.ts loadCcPolicy): a root file that cannot be read
 * or holds no usable certificate stops the node with the key and the file named, instead of
 * refusing every provider's evidence later.
 */
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { CcDeviceRegistry, loadCcPolicy } from "../../../node/attest/cc-policy.js";
import { ccOptionsSchema } from "../../../node/attest/options.js";

const root = readFileSync(path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../fixtures/cc/root.pem"), "utf8");

describe("attest.cc root files", () => {
  let dir: string;
  before(() => {
    dir = mkdtempSync(path.join(tmpdir(), "suanli-cc-policy-"));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it("loads the pinned roots, and names the key and the file when one is missing or does not parse", async () => {
    const good = path.join(dir, "root.pem");
    writeFileSync(good, root);
    const policy = await loadCcPolicy(ccOptionsSchema.parse({ rootFiles: [good], required: true }));
    assert.equal(policy?.roots.length, 1);
    assert.equal(policy?.required, true);

    const missing = path.join(dir, "no-such-root.pem");
    await assert.rejects(loadCcPolicy(ccOptionsSchema.parse({ rootFiles: [good, missing] })), (error: Error) => {
      assert.match(error.message, /^attest\.cc\.rootFiles: cannot read .*no-such-root\.pem: ENOENT/);
      return true;
    });

    // PEM armour around something that is not a certificate: refused at start-up, not at every commit.
    const broken = path.join(dir, "broken.pem");
    writeFileSync(broken, `${root}\n-----BEGIN CERTIFICATE-----\nTm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n`);
    await assert.rejects(loadCcPolicy(ccOptionsSchema.parse({ rootFiles: [broken] })), (error: Error) => {
      assert.match(error.message, /^attest\.cc\.rootFiles: certificate 2 in .*broken\.pem is not a valid X\.509 certificate/);
      return true;
    });

    const empty = path.join(dir, "empty.pem");
    writeFileSync(empty, "no certificate here\n");
    await assert.rejects(loadCcPolicy(ccOptionsSchema.parse({ rootFiles: [empty] })), /attest\.cc\.rootFiles: .*empty\.pem holds no PEM certificate/);
  });
  it("remembers which machine presented a GPU within the window, bounded, forgetting the longest-ago first", () => {
    const day = 86_400_000;
    const registry = new CcDeviceRegistry(2);
    assert.equal(registry.claim(["GH100:a", "GH100:b"], "p/1", 0, day), undefined);
    // Another machine within the window: refused, and nothing of its claim recorded.
    assert.deepEqual(registry.claim(["GH100:c", "GH100:a"], "p/2", 1_000, day), { device: "GH100:a", machine: "p/1", agoMs: 1_000 });
    // The same machine again refreshes; past the window another machine may present it; a window of 0 never refuses.
    assert.equal(registry.claim(["GH100:a"], "p/1", 2_000, day), undefined);
    assert.equal(registry.claim(["GH100:b"], "p/2", 2_000, 0), undefined);
    assert.equal(registry.claim(["GH100:b"], "p/3", 3_000 + day, day), undefined);
    // Cap 2: a, b held; c pushes out a, the one presented longest ago.
    assert.equal(registry.claim(["GH100:c"], "p/4", 4_000 + day, day), undefined);
    assert.equal(registry.claim(["GH100:a"], "p/5", 5_000 + day, day), undefined);
    assert.deepEqual(registry.claim(["GH100:c"], "p/6", 6_000 + day, day), { device: "GH100:c", machine: "p/4", agoMs: 2_000 });
  });
  it("refuses a boards entry naming an unknown class, listing the classes it accepts", () => {
    const parsed = ccOptionsSchema.safeParse({ boards: { "1010-0200-882": "H900" } });
    assert.equal(parsed.success, false);
    const issue = parsed.error?.issues[0];
    assert.deepEqual(issue?.path, ["boards", "1010-0200-882"]);
    assert.match(issue?.message ?? "", /^expected a known GPU class name: .*H100-80GB-SXM/);
  });
});

import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Bucket } from "../../node/store/buckets.js";
import { Store } from "../../node/store/store.js";

describe("level store", () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "suanli-store-"));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("keeps buckets apart, preserves bigints and survives a reopen", async () => {
    let store = await Store.open(dir);
    const scratch = store.repository<{ amount: bigint; note: string }>(Bucket.scratch);
    const meta = store.repository<unknown>(Bucket.meta);
    await scratch.put("a", { amount: 2n ** 200n, note: "big" });
    await scratch.put("b", { amount: 1n, note: "small" });
    assert.equal(await scratch.count(), 2);
    // meta holds only the schema record, never the scratch entries
    assert.deepEqual((await meta.values()).length, 1);
    await store.close();

    store = await Store.open(dir);
    const reopened = store.repository<{ amount: bigint; note: string }>(Bucket.scratch);
    assert.deepEqual(await reopened.get("a"), { amount: 2n ** 200n, note: "big" });
    assert.equal(await reopened.get("missing"), undefined);
    assert.deepEqual(
      (await reopened.values({ gte: "b" })).map((v) => v.note),
      ["small"],
    );
    await store.close();
  });

  it("applies a batch across buckets atomically", async () => {
    const store = await Store.open(dir);
    const scratch = store.repository<number>(Bucket.scratch);
    await scratch.put("old", 1);
    await store.batch([scratch.putOp("x", 1), scratch.putOp("y", 2), scratch.delOp("old")]);
    assert.deepEqual((await scratch.values()).sort(), [1, 2]);
    await scratch.clear();
    assert.equal(await scratch.count(), 0);
    await store.close();
  });

  it("refuses to open a database another handle holds", async () => {
    const store = await Store.open(dir);
    await assert.rejects(Store.open(dir), { name: "StoreError" });
    await store.close();
  });

  it("binds to the deployment it was first used with and refuses another (issue #22)", async () => {
    const first = { chainId: 31337, market: "0x5FbDB2315678afecb367f032d93F642f64180aa3", deploymentBlock: 1n, deploymentBlockHash: `0x${"aa".repeat(32)}` } as const;
    let store = await Store.open(dir);
    await store.bindDeployment(first, dir);
    await store.repository<number>(Bucket.scratch).put("x", 1);
    await store.close();

    store = await Store.open(dir);
    await store.bindDeployment({ ...first, market: first.market.toLowerCase() as `0x${string}` }, dir); // same deployment
    await assert.rejects(store.bindDeployment({ ...first, deploymentBlockHash: `0x${"bb".repeat(32)}` }, dir), (error: Error & { metaMessages?: string[] }) => {
      assert.equal(error.name, "DeploymentMismatchError");
      assert.ok(error.metaMessages?.some((line) => line.startsWith("Fix:")));
      return true;
    });
    await assert.rejects(store.bindDeployment({ ...first, chainId: 1 }, dir), { name: "DeploymentMismatchError" });
    // Nothing was changed by the refusals.
    assert.equal(await store.repository<number>(Bucket.scratch).get("x"), 1);
    await store.close();
  });
});

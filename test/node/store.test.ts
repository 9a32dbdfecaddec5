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
    assert.deepEqual(
      (await meta.values()).length,
      1,
    );
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
    assert.deepEqual(
      (await scratch.values()).sort(),
      [1, 2],
    );
    await scratch.clear();
    assert.equal(await scratch.count(), 0);
    await store.close();
  });

  it("refuses to open a database another handle holds", async () => {
    const store = await Store.open(dir);
    await assert.rejects(Store.open(dir), { name: "StoreError" });
    await store.close();
  });
});

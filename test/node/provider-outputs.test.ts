import assert from "node:assert/strict";
import { mkdir, mkdtemp, readFile, rm, stat, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { digestOutputDir } from "../../common/output-digest.js";
import { silentLogger } from "../../node/log/logger.js";
import { openOutputFile, OutputStore } from "../../node/provider/agent/outputs.js";
import { providerOptionsSchema } from "../../node/provider/options.js";

describe("provider output store: retention, per-lease cap, quota", () => {
  let root: string;
  let now: number;
  beforeEach(async () => {
    root = await mkdtemp(path.join(tmpdir(), "suanli-outputs-"));
    now = 1_000_000;
  });
  afterEach(async () => {
    await rm(root, { recursive: true, force: true });
  });

  async function taskOutput(name: string, files: Record<string, string>): Promise<string> {
    const dir = path.join(root, "workspaces", name, "output");
    for (const [rel, content] of Object.entries(files)) {
      await mkdir(path.dirname(path.join(dir, rel)), { recursive: true });
      await writeFile(path.join(dir, rel), content);
    }
    return dir;
  }

  const store = (options: Partial<{ retentionSeconds: number; maxBytes: number; quotaBytes: number }> = {}) =>
    new OutputStore({ dir: path.join(root, "outputs"), retentionSeconds: 3600, maxBytes: 1000, quotaBytes: 2500, logger: silentLogger(), now: () => now, ...options });

  it("defaults: 24 h retention, 10 GiB per lease, 100 GiB in all", () => {
    const options = providerOptionsSchema.parse({ inventory: { source: "declared", declared: [{ model: "A100", count: 1 }] } });
    assert.equal(options.outputs.retentionSeconds, 86_400);
    assert.equal(options.outputs.maxBytes, 10 * 1024 ** 3);
    assert.equal(options.outputs.quotaBytes, 100 * 1024 ** 3);
  });

  it("keeps the files the digest covered, byte for byte, until the retention runs out (also across a restart)", async () => {
    const outputs = store();
    await outputs.start();
    const dir = await taskOutput("lease-1", { "a.txt": "alpha", "sub/b.bin": "beta" });
    const digest = await digestOutputDir(dir);
    await outputs.keep(1n, dir);
    outputs.stop();

    const restarted = store();
    await restarted.start();
    const kept = await restarted.get(1n);
    assert.ok(kept && "snapshot" in kept);
    assert.equal(kept.expiresAt, 1_000_000 + 3_600_000);
    assert.deepEqual(
      kept.snapshot.files.map((file) => file.rel),
      ["a.txt", "sub/b.bin"],
    );
    assert.equal(await digestOutputDir(kept.snapshot.root), digest);

    now += 3_600_000;
    assert.equal(await restarted.get(1n), undefined, "gone after retentionSeconds");
    await assert.rejects(stat(path.join(root, "outputs", "lease-1")), { code: "ENOENT" });
    restarted.stop();
  });

  it("releases (unpins) an output's CID when the output goes: at retention's end, also across a restart before the hook is set, and for a refused output", async () => {
    const outputs = store();
    await outputs.start();
    const released: string[] = [];
    await outputs.onRelease(async (cid) => released.push(cid));
    await outputs.keep(7n, await taskOutput("lease-7", { "a.txt": "alpha" }), "bafy-seven");
    await outputs.keep(8n, await taskOutput("lease-8", { "big.bin": "x".repeat(1001) }), "bafy-eight");
    assert.deepEqual(released, [], "kept, or refused with its record, until the retention runs out");
    now += 3_600_000;
    await outputs.sweep();
    assert.deepEqual(released.sort(), ["bafy-eight", "bafy-seven"]);
    outputs.stop();

    // Expired while the node was down: swept at start, before the data plane sets the hook.
    await outputs.keep(9n, await taskOutput("lease-9", { "c.txt": "gamma" }), "bafy-nine");
    now += 3_600_000;
    const restarted = store();
    await restarted.start();
    const late: string[] = [];
    await restarted.onRelease(async (cid) => late.push(cid));
    assert.deepEqual(late, ["bafy-nine"]);
    restarted.stop();
  });

  it("removes staging folders left over by a crash at start", async () => {
    const outputs = store();
    await mkdir(outputs.stagingDir(5n), { recursive: true });
    await writeFile(path.join(outputs.stagingDir(5n), "x"), "x");
    await outputs.start();
    await assert.rejects(stat(outputs.stagingDir(5n)), { code: "ENOENT" });
    outputs.stop();
  });

  it("refuses an output over maxBytes, with the reason, and keeps nothing of it", async () => {
    const outputs = store();
    await outputs.start();
    await outputs.keep(2n, await taskOutput("lease-2", { "big.bin": "x".repeat(1001) }));
    const kept = await outputs.get(2n);
    assert.ok(kept && "refused" in kept);
    assert.match(kept.refused, /1001 bytes, over this provider's outputs.maxBytes \(1000\)/);
    await assert.rejects(stat(path.join(root, "outputs", "lease-2", "files")), { code: "ENOENT" });
    outputs.stop();
  });

  it("evicts the oldest outputs when the quota would be exceeded", async () => {
    const outputs = store();
    await outputs.start();
    for (const id of [1, 2, 3]) {
      now += 1000;
      await outputs.keep(BigInt(id), await taskOutput(`lease-${id}`, { "f.bin": "y".repeat(1000) }));
    }
    assert.equal(await outputs.get(1n), undefined, "the oldest went to make room (3000 > 2500)");
    assert.ok(await outputs.get(2n));
    assert.ok(await outputs.get(3n));
    outputs.stop();
  });

  it("never serves a file through a link the task planted", async () => {
    const outputs = store();
    await outputs.start();
    const dir = await taskOutput("lease-4", { "ok.txt": "fine" });
    await symlink("/etc", path.join(dir, "etc-link"));
    await symlink("/etc/hostname", path.join(dir, "host-file"));
    await outputs.keep(4n, dir);
    const kept = await outputs.get(4n);
    assert.ok(kept && "snapshot" in kept);
    assert.deepEqual(
      kept.snapshot.files.map((file) => file.rel),
      ["ok.txt"],
      "links are not listed",
    );
    await assert.rejects(openOutputFile(kept.snapshot.root, "host-file"), { name: "OutputLimitError" });
    await assert.rejects(openOutputFile(kept.snapshot.root, "etc-link/hostname"), { name: "OutputLimitError" });
    const handle = await openOutputFile(kept.snapshot.root, "ok.txt");
    assert.equal((await handle.readFile()).toString(), "fine");
    await handle.close();
    assert.equal(await readFile(path.join(kept.snapshot.root, "ok.txt"), "utf8"), "fine");
    outputs.stop();
  });
});

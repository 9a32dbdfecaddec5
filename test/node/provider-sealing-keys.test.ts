/**
 * Issue #33 item 9: the provider's sealing key rotates, an old key lives only as long as a lease
 * that may have been sealed to it, and then its file is gone and its ciphertexts no longer open.
 * Real key files in a data dir, real HPKE, the SDK's own sealing (sealSpec) and the node's opening
 * (openSealedSpec); a clock the test moves.
 */
import assert from "node:assert/strict";
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { devnetAccount } from "../../common/devnet.js";
import { taskSpecSchema, type TaskSpec } from "../../common/protocols/task-spec.js";
import { sealingKeyPairFromSeed, sealingKeyProblem, verifySealingKey, type SealingKey } from "../../common/sealed.js";
import { silentLogger } from "../../node/log/logger.js";
import { openSealedSpec, SealingKeyRing } from "../../node/provider/agent/sealing.js";
import { sealSpec } from "../../sdk/actions/submitTask.js";
import { waitFor } from "../support/wait.js";

const provider = devnetAccount(1);
const chainId = 31337;
const HOUR = 3600;
const GRACE = 720;

describe("provider sealing keys: rotation and deletion (issue #33 item 9)", () => {
  let dataDir: string;
  const clock = { ms: Date.UTC(2026, 11, 1) };
  const now = () => clock.ms;
  const seconds = () => Math.floor(clock.ms / 1000);
  const load = () => SealingKeyRing.load(dataDir, provider, chainId, { rotateSeconds: HOUR, graceSeconds: GRACE, now });
  const keyFiles = async () => (await readdir(path.join(dataDir, "sealing-keys"))).sort();

  beforeEach(async () => {
    dataDir = await mkdtemp(path.join(tmpdir(), "suanli-sealing-"));
    clock.ms = Date.UTC(2026, 11, 1);
  });
  afterEach(async () => {
    await rm(dataDir, { recursive: true, force: true });
  });

  /** What a renter does: the SDK seals the secret to the key it was given, for its lease. */
  async function sealedTask(key: SealingKey, leaseId: bigint, value: string): Promise<TaskSpec> {
    const spec = taskSpecSchema.parse({ image: "x", command: "true", env: { TOKEN: { value, secret: true } } });
    return sealSpec(spec, key, provider.address, chainId, leaseId, seconds());
  }
  const opened = (spec: TaskSpec) => (spec.env.TOKEN as { value: string }).value;

  it("an old key is kept while a lease sealed to it is live; after the lease ends its file is gone and the node cannot open the old ciphertext", async () => {
    const ring = await load();
    const first = ring.current();
    assert.equal(await verifySealingKey(first, provider.address, chainId), true);
    assert.equal(first.expiresAt, seconds() + HOUR + GRACE, "expires at the end of its epoch plus the grace");
    assert.deepEqual(await keyFiles(), ["1.json"]);
    assert.equal(((await stat(path.join(dataDir, "sealing-keys", "1.json"))).mode & 0o777).toString(8), "600");

    // Lease A opens in the first epoch; its renter seals to the first key.
    const leaseA = { openedAtMs: now() };
    const specA = await sealedTask(first, 1n, "secret-of-A");
    assert.equal(opened(await openSealedSpec({ ring, chainId }, 1n, specA, leaseA)), "secret-of-A");

    // The epoch ends: a new key, the old one kept (A is live and may send its spec again).
    clock.ms += HOUR * 1000;
    assert.deepEqual(await ring.maintain([leaseA]), { rotated: true, deleted: [], unshredded: [] });
    const second = ring.current();
    assert.notEqual(second.publicKey, first.publicKey);
    assert.equal(await sealingKeyProblem(second, provider.address, chainId, seconds()), undefined);
    assert.deepEqual(await keyFiles(), ["1.json", "2.json"]);

    // Past the first key's expiry: renters may no longer seal to it; A still holds it.
    clock.ms += (GRACE + 600) * 1000;
    assert.equal(await sealingKeyProblem(first, provider.address, chainId, seconds()), "expired");
    const leaseB = { openedAtMs: now() };
    const specB = await sealedTask(second, 2n, "secret-of-B");
    assert.deepEqual(await ring.maintain([leaseA, leaseB]), { rotated: false, deleted: [], unshredded: [] });
    assert.equal(opened(await openSealedSpec({ ring, chainId }, 1n, specA, leaseA)), "secret-of-A", "A's spec, sent again, still opens");

    // A ends: the first key goes, file and all.
    assert.deepEqual(await ring.maintain([leaseB]), { rotated: false, deleted: [1], unshredded: [] });
    assert.deepEqual(await keyFiles(), ["2.json"]);
    assert.deepEqual(ring.heldIds(), [2]);
    await assert.rejects(openSealedSpec({ ring, chainId }, 1n, specA, leaseA), (error: Error & { fields?: string[] }) => {
      assert.equal(error.name, "InvalidInputError");
      assert.deepEqual(error.fields, ["env.TOKEN"]);
      return true;
    });
    // Not after a restart either: the key is not on disk.
    const restarted = await load();
    assert.deepEqual(restarted.heldIds(), [2]);
    await assert.rejects(openSealedSpec({ ring: restarted, chainId }, 1n, specA, leaseA), { name: "InvalidInputError" });
    assert.equal(opened(await openSealedSpec({ ring: restarted, chainId }, 2n, specB, leaseB)), "secret-of-B");
  });

  it("a key serves only leases opened before it expired, and a lease the node learned of late keeps every key until it ends", async () => {
    const ring = await load();
    const first = ring.current();
    const early = { openedAtMs: now() };
    const spec = await sealedTask(first, 7n, "v");
    clock.ms += (HOUR + GRACE + 600) * 1000;
    // A lease opened after the first key's expiry (and the clock allowance) does not open with it.
    const late = { openedAtMs: now() };
    await assert.rejects(openSealedSpec({ ring, chainId }, 7n, spec, late), { name: "InvalidInputError" });
    assert.equal(opened(await openSealedSpec({ ring, chainId }, 7n, spec, early)), "v");
    // Backfilled after downtime: when it opened is unknown, so every key stays while it lives.
    const backfilled = { openedAtMs: null };
    assert.deepEqual((await ring.maintain([backfilled])).deleted, []);
    assert.equal(opened(await openSealedSpec({ ring, chainId }, 7n, spec, backfilled)), "v");
    assert.deepEqual((await ring.maintain([])).deleted, [1], "gone once that lease is");
  });

  it("once a lease's spec is accepted it keeps only the keys its secrets opened with: a lease without secrets keeps none", async () => {
    const ring = await load();
    const first = ring.current();
    const opened = { openedAtMs: now() };
    const spec = await sealedTask(first, 9n, "w");
    clock.ms += (HOUR + GRACE + 301) * 1000;
    // Still waiting for its spec: it may have been sealed to the first key, which stays.
    assert.deepEqual((await ring.maintain([opened])).deleted, []);
    // Accepted without secrets, or with secrets on another key: the first key goes although the lease lives.
    assert.deepEqual(
      (
        await ring.maintain([
          { ...opened, sealingKeyIds: [] },
          { openedAtMs: now(), sealingKeyIds: [2] },
        ])
      ).deleted,
      [1],
    );
    await assert.rejects(openSealedSpec({ ring, chainId }, 9n, spec, { ...opened, sealingKeyIds: [1] }), { name: "InvalidInputError" });
  });

  it("a key file from before rotation is adopted as an expired key, overwritten and removed once no lease needs it", async () => {
    const seed = "ab".repeat(32);
    await writeFile(path.join(dataDir, "sealing.key"), `${seed}\n`, { mode: 0o600 });
    const legacy = (await sealingKeyPairFromSeed(Buffer.from(seed, "hex"))).publicKey;
    const ring = await load();
    await assert.rejects(stat(path.join(dataDir, "sealing.key")), { code: "ENOENT" });
    assert.notEqual(ring.current().publicKey, legacy, "renters get a new key at once");
    assert.deepEqual(ring.heldIds(), [1, 2]);
    const stored = JSON.parse(await readFile(path.join(dataDir, "sealing-keys", "1.json"), "utf8")) as { seed: string };
    assert.equal(stored.seed, seed);
    // A lease opened before the upgrade (when is unknown) keeps it; without one it goes.
    assert.deepEqual((await ring.maintain([{ openedAtMs: undefined }])).deleted, []);
    clock.ms += 301 * 1000;
    assert.deepEqual((await ring.maintain([])).deleted, [1]);
    assert.deepEqual(await keyFiles(), ["2.json"]);
  });

  it("a key file that cannot be removed is forgotten all the same and removed at a later pass", async () => {
    const ring = await load();
    clock.ms += HOUR * 1000;
    assert.equal((await ring.maintain([])).rotated, true);
    // The first key's file made something unlink cannot remove (a folder with a file in it): the shred fails.
    const file = path.join(dataDir, "sealing-keys", "1.json");
    await rm(file);
    await mkdir(path.join(file, "stuck"), { recursive: true });
    clock.ms += (GRACE + 301) * 1000;
    const first = await ring.maintain([]);
    assert.deepEqual([first.deleted, first.unshredded], [[1], [file]], "forgotten at once, its file kept for the next pass");
    assert.deepEqual(ring.heldIds(), [2]);
    await rm(file, { recursive: true });
    await writeFile(file, "{}");
    const next = await ring.maintain([]);
    assert.deepEqual(next.unshredded, []);
    assert.deepEqual(await keyFiles(), ["2.json"]);
  });

  it("the maintenance loop rotates on its own and hands the new key to the offers and acceptances", async () => {
    const ring = await load();
    const first = ring.current();
    const rotated: SealingKey[] = [];
    const stop = ring.startMaintenance({ liveLeases: () => [], onRotated: (key) => rotated.push(key), logger: silentLogger(), intervalMs: 20 });
    try {
      clock.ms += HOUR * 1000;
      await waitFor("the key to rotate", () => rotated.length === 1, { timeoutMs: 10_000 });
      assert.deepEqual(rotated[0], ring.current());
      assert.notEqual(ring.current().publicKey, first.publicKey);
      clock.ms += (GRACE + 301) * 1000;
      await waitFor("the old key to be deleted", async () => (await keyFiles()).length === 1, { timeoutMs: 10_000 });
      assert.deepEqual(ring.heldIds(), [2], "the ring forgets a key before its file goes");
      assert.deepEqual(await keyFiles(), ["2.json"]);
    } finally {
      stop();
    }
  });
});

/**
 * Issue #33, a limit left by item 5: two provider nodes on one host that share a base task user
 * had no shared claim on task user slots, so both could pick the same free slot user at once and
 * run two leases as one host uid. Slots are now claimed host-wide with a lock file per slot user
 * (host-lock.ts, task-user-slots.ts). Here real separate processes, each with its own slot pool
 * (test/node/fixtures/task-slot-claimer.ts), claim slots at the same moment over one lock
 * directory: no slot is ever handed to both; a full host says so; a killed node's slots are
 * reclaimed, by two claimers at once without overlap, and a live node's never are.
 */
import assert from "node:assert/strict";
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { mkdtemp, readFile, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { createInterface } from "node:readline";
import { HostLock, ownerAlive } from "../../node/provider/runtime/host-lock.js";
import { TaskUserPool } from "../../node/provider/runtime/task-user-slots.js";

const CLAIMER = path.resolve("test/node/fixtures/task-slot-claimer.ts");
const BASE = "t";
const MAX = 40;

type Claimer = { child: ChildProcessWithoutNullStreams; next: () => Promise<string> };

describe("provider task user slots are claimed host-wide: two nodes never share a slot (issue #33)", function () {
  this.timeout(90_000);
  let dir: string;
  let lockDir: string;
  let passwdFile: string;
  const children: ChildProcessWithoutNullStreams[] = [];

  before(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "suanli-slot-locks-"));
    lockDir = path.join(dir, "task-slots");
    passwdFile = path.join(dir, "passwd");
    const users = Array.from({ length: MAX }, (_, index) => `${BASE}-${index}:x:${31_000 + index}:${31_000 + index}::/nonexistent:/usr/sbin/nologin`);
    await writeFile(passwdFile, `${users.join("\n")}\n`);
  });
  after(async () => {
    for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    await rm(dir, { recursive: true, force: true });
  });

  async function claimer(count: number): Promise<Claimer> {
    const child = spawn(process.execPath, ["--import", "tsx", CLAIMER, lockDir, passwdFile, BASE, String(MAX), String(count)], { stdio: ["pipe", "pipe", "pipe"] });
    children.push(child);
    let stderr = "";
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
    const next = async () => {
      const line = await lines.next();
      assert.ok(!line.done, `the claimer ${child.pid} ended: ${stderr}`);
      return line.value;
    };
    assert.equal(await next(), "ready");
    return { child, next };
  }

  /** Starts every claimer's claims at the same moment; their answers. */
  async function race(claimers: Claimer[]): Promise<{ slots: number[]; error?: string }[]> {
    for (const { child } of claimers) child.stdin.write("go\n");
    return Promise.all(claimers.map(async ({ next }) => JSON.parse(await next()) as { slots: number[]; error?: string }));
  }

  const killed = (child: ChildProcessWithoutNullStreams) =>
    new Promise<void>((resolve) => (child.exitCode !== null || child.signalCode !== null ? resolve() : child.once("exit", () => resolve())));

  it("two node processes claiming 20 slots each at once get disjoint slots; a third finds the host full; a killed node's slots are reclaimed by two claimers without overlap, a live node's never", async () => {
    for (let round = 0; round < 2; round++) {
      await rm(lockDir, { recursive: true, force: true });
      const [a, b] = await Promise.all([claimer(20), claimer(20)]);
      const [fromA, fromB] = await race([a!, b!]);
      assert.equal(fromA!.error, undefined, fromA!.error);
      assert.equal(fromB!.error, undefined, fromB!.error);
      assert.equal(fromA!.slots.length, 20);
      assert.equal(fromB!.slots.length, 20);
      const shared = fromA!.slots.filter((slot) => fromB!.slots.includes(slot));
      assert.deepEqual(shared, [], `round ${round}: slots handed to both nodes`);
      assert.equal((await readdir(lockDir)).filter((name) => name.endsWith(".lock") && name !== "ids.lock").length, MAX, "one lock per held slot");

      // Every slot of the host is held by a live node: a third is refused, and says why.
      const c = await claimer(1);
      const [full] = await race([c]);
      assert.deepEqual(full!.slots, []);
      assert.match(full!.error ?? "", /40 claimed by another node of this host/);

      // Node A is killed (no release runs): its 20 slots are reclaimed, split between two claimers
      // racing for them; B's slots stay B's.
      a!.child.kill("SIGKILL");
      await killed(a!.child);
      const [d, e] = await Promise.all([claimer(10), claimer(10)]);
      const [fromD, fromE] = await race([d!, e!]);
      assert.equal(fromD!.error, undefined, fromD!.error);
      assert.equal(fromE!.error, undefined, fromE!.error);
      assert.deepEqual(
        [...fromD!.slots, ...fromE!.slots].sort((x, y) => x - y),
        [...fromA!.slots].sort((x, y) => x - y),
        "exactly the killed node's slots, each to one claimer",
      );
      for (const child of [b, c, d, e]) child!.child.kill("SIGKILL");
      await Promise.all([b, c, d, e].map((claimed) => killed(claimed!.child)));
    }
  });

  it("a lock: a reused PID (another start time), a zombie-free dead PID, and a foreign file are stale; a live owner's is not; release removes only its own", async () => {
    const file = path.join(dir, "one.lock");
    // Our own PID with a start time that is not ours: the PID was reused, the owner is gone.
    await writeFile(file, JSON.stringify({ pid: process.pid, startTicks: 1, nonce: "x", holder: "old" }));
    assert.equal(await ownerAlive({ pid: process.pid, startTicks: 1, nonce: "x", holder: "old" }), false);
    const first = new HostLock(file, "task-1");
    assert.equal(await first.take(), true, "a reused PID's lock is reclaimed");
    const owner = JSON.parse(await readFile(file, "utf8")) as { pid: number; holder: string };
    assert.deepEqual([owner.pid, owner.holder], [process.pid, "task-1"]);
    // The live owner (this process, its real start time) keeps it against another claimer.
    assert.equal(await new HostLock(file, "task-2").take(), false);
    // Many claimers of one stale lock at once: exactly one wins.
    await writeFile(file, "not a lock of ours");
    const claimers = Array.from({ length: 8 }, (_, index) => new HostLock(file, `racer-${index}`));
    const won = await Promise.all(claimers.map((lock) => lock.take()));
    assert.equal(won.filter(Boolean).length, 1, `winners: ${won.join(",")}`);
    // The first lock no longer owns the file (it was reclaimed from under it): its release leaves the winner's.
    first.release();
    const winner = claimers[won.indexOf(true)]!;
    assert.match(await readFile(file, "utf8"), /racer-/);
    winner.release();
    winner.release();
    await assert.rejects(readFile(file), { code: "ENOENT" });
    // A reclaimer that died holding the guard: the guard is removed, the lock is taken on the next call.
    await writeFile(file, JSON.stringify({ pid: 2 ** 22 + 1, startTicks: null, nonce: "d", holder: "dead" }));
    await writeFile(`${file}.reclaim`, JSON.stringify({ pid: 2 ** 22 + 2, startTicks: null, nonce: "g", holder: "dead reclaimer" }));
    const late = new HostLock(file, "late");
    assert.equal(await late.take(), false);
    assert.equal(await late.take(), true);
    late.release();
  });

  it("the pool gives back the lock of a slot it skips or fails on, and of a released slot", async () => {
    const locks = path.join(dir, "pool-locks");
    let inUse = new Set([31_000]);
    const pool = new TaskUserPool({ base: BASE, maxSlots: 2, passwdFile, lockDir: locks, uidsInUse: async () => inUse });
    const slot = await pool.acquire("x");
    assert.equal(slot.index, 1, "slot 0's uid runs a process");
    assert.deepEqual((await readdir(locks)).sort(), [`${BASE}-1.lock`], "the skipped slot 0 is not left locked");
    inUse = new Set();
    const other = new TaskUserPool({ base: BASE, maxSlots: 2, passwdFile, lockDir: locks, uidsInUse: async () => inUse });
    assert.equal((await other.acquire("y")).index, 0, "another pool (node) gets slot 0, not this pool's slot 1");
    await assert.rejects(other.acquire("z"), /1 claimed by another node/);
    slot.release();
    assert.equal((await other.acquire("z")).index, 1, "a released slot is free for the other node");
  });
});

/**
 * Issue #33 item 5, its last limit: two leases on one host ran as the one task user, so one
 * task's host uid could signal the other's processes and open what the other wrote. A root node
 * now runs each task as its own slot user (task-user-slots.ts). Here two real bubblewrap tasks run
 * at once on one ProcessRuntime (the node runs as root, as in CI): the test reads their host uids
 * from /proc, then acts with task A's host credentials (what A would be with its namespaces
 * gone) against task B: B's file and B's process refuse it, while B's own uid reaches both (so the
 * paths are open to the owner, and the refusal is the uid's). A fresh runtime (a restart) skips
 * the slot whose user still runs a process, and a removed task's slot is used again.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { chmod, mkdir, mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import * as tar from "tar";
import { parseInput } from "../../common/validation.js";
import { findWorkspaceProcesses } from "../../node/provider/runtime/orphans.js";
import { ProcessRuntime } from "../../node/provider/runtime/process-runtime.js";
import type { TaskHandle } from "../../node/provider/runtime/runtime.js";
import { lookupUser, nodeIsRoot, TASK_USER_PATTERN, type TaskUser } from "../../node/provider/runtime/task-user.js";
import { MAX_TASK_USER_SLOTS, TaskUserPool, slotUserName } from "../../node/provider/runtime/task-user-slots.js";
import { taskSpecSchema, type TaskSpec } from "../../node/provider/runtime/task.js";

/** Runs `argv` as `user` (no groups, no new privileges); resolves its exit code and output. */
function runAs(user: TaskUser, argv: string[]): Promise<{ code: number; output: string }> {
  const args = [`--reuid=${user.uid}`, `--regid=${user.gid}`, "--clear-groups", "--no-new-privs", "--", ...argv];
  return new Promise((resolve) =>
    execFile("setpriv", args, { timeout: 10_000 }, (error, stdout, stderr) =>
      resolve({ code: error ? Number((error as { code?: unknown }).code ?? 1) || 1 : 0, output: `${stdout}${stderr}`.trim() }),
    ),
  );
}

/** The host uids of every live process of a task (found by its workspace). */
async function hostUids(workspace: string): Promise<Set<number>> {
  const uids = new Set<number>();
  for (const pid of await findWorkspaceProcesses(workspace)) {
    const status = await readFile(`/proc/${pid}/status`, "utf8").catch(() => "");
    const real = /^Uid:\s+(\d+)/m.exec(status)?.[1];
    if (real !== undefined) uids.add(Number(real));
  }
  return uids;
}

async function waitFor<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 20_000): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

/** Its own base user, so that no other test's or node's task holds one of its slots. */
const BASE = "suanli-tslots";

describe("provider task user slots: two leases on one host never share a host uid (issue #33 item 5)", function () {
  this.timeout(90_000);
  let dir: string;
  const open: TaskHandle[] = [];

  before(async function () {
    assert.ok(nodeIsRoot(), "CI runs the tests as root: per-task users apply to a root node");
    dir = await mkdtemp(path.join(tmpdir(), "suanli-task-slots-"));
    await chmod(dir, 0o711);
  });
  /** Every runtime made here, closed at the end (their staging folders in /tmp). */
  const runtimes: ProcessRuntime[] = [];
  after(async () => {
    for (const task of open) await task.cleanup().catch(() => undefined);
    for (const each of runtimes) await each.close();
    await rm(dir, { recursive: true, force: true });
  });

  async function bundle(): Promise<{ url: string; sha256: string }> {
    const staging = path.join(dir, "src");
    await mkdir(staging, { recursive: true });
    await writeFile(path.join(staging, "README"), "slots");
    const file = path.join(dir, "b.tar.gz");
    await tar.c({ gzip: true, file, cwd: staging, portable: true }, ["README"]);
    return {
      url: `file://${file}`,
      sha256: createHash("sha256")
        .update(await readFile(file))
        .digest("hex"),
    };
  }

  /**
   * A runtime of this test's node. `locks`: its host-wide slot lock directory; a restarted node
   * gets a fresh one, standing for the predecessor's locks, which name a dead PID (stale) on a real
   * restart but this live test process here.
   */
  function runtime(locks = "locks"): ProcessRuntime {
    const made = new ProcessRuntime({
      taskSlotLockDir: path.join(dir, locks),
      workspaceRoot: path.join(dir, "workspaces"),
      sandbox: "bubblewrap",
      network: false,
      taskUser: BASE,
      fetchPolicy: { allowFileUrls: true },
      stopGraceMs: 500,
    });
    runtimes.push(made);
    return made;
  }

  async function start(on: ProcessRuntime, taskId: string, command: string): Promise<{ task: TaskHandle; workspace: string; user: TaskUser }> {
    const spec = parseInput(taskSpecSchema, { bundle: await bundle(), command }, "task") as TaskSpec;
    const task = await on.prepare({ taskId, spec, devices: [], durationMs: 60_000 });
    open.push(task);
    const workspace = path.join(dir, "workspaces", taskId);
    // The workspace root is root's 0700: let every user search it, so only the task's own uid guards its files.
    await chmod(path.join(dir, "workspaces"), 0o711);
    await task.start();
    const uids = await waitFor(`${taskId}'s processes`, async () => {
      const found = await hostUids(workspace);
      // Until the start has dropped to the task's user (the first steps run as root).
      return found.size > 0 && !found.has(0) ? found : undefined;
    });
    assert.equal(uids.size, 1, `every process of ${taskId} is one host uid: ${[...uids].join(", ")}`);
    const [uid] = [...uids];
    assert.notEqual(uid, 0);
    const owner = await stat(workspace);
    assert.equal(owner.uid, uid, "the workspace is the task's own user's");
    return { task, workspace, user: { name: taskId, uid: uid!, gid: owner.gid } };
  }

  it("two concurrent tasks run as different host users: A's uid can neither read B's file nor signal B's process; B's own uid can", async () => {
    const on = runtime();
    await on.verify();
    const b = await start(on, "slotb", "umask 077; mkdir -p output; echo B-PRIVATE > output/secret.txt; sleep 60");
    const a = await start(on, "slota", "sleep 60");
    assert.notEqual(a.user.uid, b.user.uid, "the two leases' tasks are different host uids");
    const names = [await lookupUser(slotUserName(BASE, 0)), await lookupUser(slotUserName(BASE, 1))].map((user) => user?.uid);
    assert.deepEqual([b.user.uid, a.user.uid], names, "slots 0 and 1, in the order the tasks were prepared");

    const secret = path.join(b.workspace, "output", "secret.txt");
    await waitFor("B's file", () =>
      stat(secret).then(
        () => true,
        () => undefined,
      ),
    );
    const bPid = (await findWorkspaceProcesses(b.workspace)).at(-1)!;
    // Task A's host credentials against task B:
    const read = await runAs(a.user, ["cat", secret]);
    assert.notEqual(read.code, 0, `A read B's file: ${read.output}`);
    assert.ok(!read.output.includes("B-PRIVATE"));
    const signal = await runAs(a.user, ["/bin/sh", "-c", `kill -0 ${bPid}`]);
    assert.notEqual(signal.code, 0, `A could signal B's process ${bPid}: ${signal.output}`);
    assert.match(signal.output, /not permitted/i);
    // The same acts with B's uid succeed: the paths and the process are there, only the uid differs.
    assert.equal((await runAs(b.user, ["cat", secret])).output, "B-PRIVATE");
    assert.equal((await runAs(b.user, ["/bin/sh", "-c", `kill -0 ${bPid}`])).code, 0);

    // A removed task frees its slot: the next task gets slot 1 again (A's), not a new user.
    await a.task.stop();
    await a.task.cleanup();
    const c = await start(on, "slotc", "sleep 60");
    assert.equal(c.user.uid, a.user.uid, "a freed slot is used again");
    await c.task.stop();
    await c.task.cleanup();

    // A restarted node (a fresh runtime, an empty pool) skips slot 0 while B's processes still run as it.
    const restarted = runtime("locks-after-restart");
    await restarted.verify();
    const d = await start(restarted, "slotd", "sleep 60");
    assert.notEqual(d.user.uid, b.user.uid, "a slot an earlier run's task still runs in is not handed out");
    await d.task.stop();
    await d.task.cleanup();
    // Once the restarted node reaps B (as it does for a task lost in a restart), slot 0 is free again.
    assert.ok((await restarted.reap("slotb")) > 0);
    const e = await start(restarted, "slote", "sleep 60");
    assert.equal(e.user.uid, b.user.uid);
    await e.task.stop();
    await e.task.cleanup();
    await b.task.cleanup();
  });

  it("the pool: lowest free slot, busy ids skipped, release once, a full pool says what to do", async () => {
    const passwdFile = path.join(dir, "passwd");
    await writeFile(passwdFile, ["t-0:x:901:901::/:/bin/false", "t-1:x:902:902::/:/bin/false", "t-2:x:903:903::/:/bin/false", ""].join("\n"));
    let inUse = new Set<number>([901]);
    const pool = new TaskUserPool({ base: "t", maxSlots: 3, passwdFile, lockDir: path.join(dir, "pool-locks"), uidsInUse: async () => inUse });
    const first = await pool.acquire("x");
    assert.equal(first.user.name, "t-1", "slot 0's uid runs a process: skipped");
    const second = await pool.acquire("y");
    assert.equal(second.user.name, "t-2");
    await assert.rejects(pool.acquire("z"), { name: "RuntimeUnavailableError" });
    inUse = new Set();
    first.release();
    first.release();
    assert.equal((await pool.acquire("z")).user.name, "t-0");
    assert.equal((await pool.acquire("w")).user.name, "t-1");
    assert.deepEqual([...pool.holders().values()].sort(), ["w", "y", "z"]);
    // The longest base the config accepts still makes slot names useradd takes (at most 32 characters).
    assert.ok(TASK_USER_PATTERN.test("a".repeat(28)) && !TASK_USER_PATTERN.test("a".repeat(29)));
    assert.equal(slotUserName("a".repeat(28), MAX_TASK_USER_SLOTS - 1).length, 32);
  });
});

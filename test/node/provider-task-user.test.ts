/**
 * Issue #33 item 5: root on the host is not root in the task. The node runs as root here (CI
 * does), so a process-runtime task runs as the unprivileged task user (task-user.ts): a real
 * bubblewrap sandbox tries to read a root-only host file bound into it, writes into its workspace,
 * and the test reads, from the host, which host uid the task was and owns what it wrote.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { chmod, mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import * as tar from "tar";
import { parseInput } from "../../common/validation.js";
import { ContainerRuntime } from "../../node/provider/runtime/container-runtime.js";
import { ProcessRuntime } from "../../node/provider/runtime/process-runtime.js";
import { readTaskFile } from "../../node/provider/runtime/task-files.js";
import { DEFAULT_TASK_USER, blockingFolder, chownTree, lookupUser, nodeIsRoot, freeSubordinateStart, subordinateRangeOf } from "../../node/provider/runtime/task-user.js";
import { taskSpecSchema, type TaskSpec } from "../../node/provider/runtime/task.js";
import { BUSYBOX_IMAGE, requireContainerSupport } from "../support/container-images.js";

const NODE = process.execPath;

/** The slot user (`suanli-task-<n>`) with this uid, from /etc/passwd. */
async function slotUserOf(uid: number): Promise<{ name: string; uid: number; gid: number } | undefined> {
  const line = (await readFile("/etc/passwd", "utf8")).split("\n").find((row) => row.split(":")[2] === String(uid));
  const name = line?.split(":")[0] ?? "";
  return new RegExp(`^${DEFAULT_TASK_USER}-\\d+$`).test(name) ? lookupUser(name) : undefined;
}

describe("provider task user: root on the host is not root in the task (issue #33 item 5)", function () {
  this.timeout(60_000);
  let dir: string;

  before(async function () {
    assert.ok(nodeIsRoot(), "CI runs the tests as root: the mapping under test applies to a root node");
    dir = await mkdtemp(path.join(tmpdir(), "suanli-task-user-"));
    await chmod(dir, 0o711);
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  async function bundle(files: Record<string, string>): Promise<{ url: string; sha256: string }> {
    const staging = path.join(dir, `src-${Date.now()}`);
    await mkdir(staging);
    for (const [rel, content] of Object.entries(files)) await writeFile(path.join(staging, rel), content);
    const file = path.join(dir, `b-${Date.now()}.tar.gz`);
    await tar.c({ gzip: true, file, cwd: staging, portable: true }, Object.keys(files));
    return {
      url: `file://${file}`,
      sha256: createHash("sha256")
        .update(await readFile(file))
        .digest("hex"),
    };
  }

  it("a sandboxed task of a root node is its own slot user (suanli-task-<n>): it cannot read a root-only host file, and what it writes is that user's, read back by the node", async () => {
    // A folder the operator binds read-only, holding a file only root may read (like /etc/shadow).
    const shared = path.join(dir, "shared");
    await mkdir(shared, { mode: 0o755 });
    const secret = path.join(shared, "root-only.key");
    await writeFile(secret, "ROOT-ONLY-SECRET", { mode: 0o600 });
    await writeFile(path.join(shared, "public.txt"), "public", { mode: 0o644 });
    const runtime = new ProcessRuntime({
      workspaceRoot: path.join(dir, "data", "workspaces"),
      sandbox: "bubblewrap",
      network: false,
      readOnlyPaths: [path.dirname(NODE), shared],
      fetchPolicy: { allowFileUrls: true },
      stopGraceMs: 500,
    });
    // The workspace root lies below a folder only root may search (a data dir of mode 0700).
    await mkdir(path.join(dir, "data"), { mode: 0o700 });
    // The staging folders go to TMPDIR (os.tmpdir()): this test's own, to see them made and removed.
    const stageParent = path.join(dir, "tmp");
    await mkdir(stageParent, { mode: 0o755 });
    const tmpBefore = process.env.TMPDIR;
    process.env.TMPDIR = stageParent;
    const isolation = await runtime.verify().finally(() => (tmpBefore === undefined ? delete process.env.TMPDIR : (process.env.TMPDIR = tmpBefore)));
    assert.ok(await lookupUser(DEFAULT_TASK_USER), "the node created the task user (of its start checks)");
    assert.match(isolation.description, new RegExp(`each task as its own host user \\(${DEFAULT_TASK_USER}-0, -1, …\\), never root`));

    const probe = [
      "import { readFileSync, writeFileSync, mkdirSync } from 'node:fs';",
      "const tryRead = (p) => { try { return 'read:' + readFileSync(p, 'utf8'); } catch (e) { return 'error:' + e.code; } };",
      "console.log('uid=' + process.getuid());",
      "console.log('secret=' + tryRead(process.env.SECRET));",
      "console.log('public=' + tryRead(process.env.PUBLIC));",
      "console.log('shadow=' + tryRead('/etc/shadow'));",
      "const status = readFileSync('/proc/self/status', 'utf8');",
      "console.log('groups=' + /^Groups:(.*)$/m.exec(status)[1].trim());",
      "mkdirSync('output', { recursive: true });",
      "writeFileSync('output/result.txt', 'written by the task');",
    ].join("\n");
    const spec = parseInput(
      taskSpecSchema,
      { bundle: await bundle({ "probe.mjs": probe }), command: [NODE, "probe.mjs"], env: { SECRET: secret, PUBLIC: path.join(shared, "public.txt") } },
      "task",
    ) as TaskSpec;
    const task = await runtime.prepare({ taskId: "uid1", spec, devices: [], durationMs: 30_000 });
    const workspace = path.join(dir, "data", "workspaces", "uid1");
    // The task's own slot user (task-user-slots.ts): another test's task may hold slot 0 meanwhile.
    const user = await slotUserOf((await stat(workspace)).uid);
    assert.ok(user && user.uid !== 0, "the workspace is handed to the task's own slot user before the start");
    await task.start();
    const result = await task.wait();
    const lines = task.readLogs().lines.map((line) => line.text);
    const value = (key: string) => lines.find((line) => line.startsWith(`${key}=`))?.slice(key.length + 1);
    assert.equal(result.status, "succeeded", lines.join("\n"));
    // uid 0 of its own namespace, which is the task user on the host: no root file opens to it.
    assert.equal(value("uid"), "0");
    assert.equal(value("secret"), "error:EACCES", "a root-only host file bound into the sandbox is not readable");
    assert.equal(value("public"), "read:public", "what every user may read still is");
    assert.match(value("shadow") ?? "", /^error:(ENOENT|EACCES)$/);
    assert.ok(!/(^|\s)0(\s|$)/.test(value("groups") ?? ""), `no root group: ${value("groups")}`);
    // On the host, what it wrote belongs to the task user; the node (root) reads it as ever.
    const written = path.join(workspace, "output", "result.txt");
    assert.equal((await stat(written)).uid, user.uid);
    assert.equal((await stat(written)).gid, user.gid);
    assert.equal((await readTaskFile(path.join(workspace, "output"), "result.txt", 1024))?.toString(), "written by the task");
    assert.ok(!lines.some((line) => line.includes("ROOT-ONLY-SECRET")));
    await task.cleanup();
    // The runtime's close (the agent's, as the node stops) removes its staging folders: every node left two in /tmp.
    assert.deepEqual((await readdir(stageParent)).map((name) => name.replace(/-[A-Za-z0-9]{6}/, "-X")).sort(), ["suanli-stage-X", "suanli-stage-X-inputs"]);
    await runtime.close();
    assert.deepEqual(await readdir(stageParent), [], "no staging folder left after close");
  });

  it("a rootful Podman task's root is host uid <start> of its slot user's subordinate range: a root-only host file mounted in is unreadable, its outputs are that id's", async () => {
    await requireContainerSupport();
    const runtime = new ContainerRuntime({ workspaceRoot: path.join(dir, "data", "containers"), engine: "podman", network: false, gpus: false, stopGraceMs: 2_000 });
    const isolation = await runtime.verify();
    assert.match(isolation.description, new RegExp(`each task's container root its own host id range \\(of ${DEFAULT_TASK_USER}-0, -1, …\\)`));
    const secret = path.join(dir, "podman-root-only.key");
    await writeFile(secret, "ROOT-ONLY-SECRET", { mode: 0o600 });
    const script = [
      "cat /proc/self/uid_map",
      "echo uid=$(id -u)",
      "cat /secret.key >/dev/null 2>&1 && echo secret=read || echo secret=denied",
      "mkdir -p output && echo from-container > output/result.txt && echo wrote",
    ].join("; ");
    // The operator's own flag mounts the file: the container's root still cannot read it.
    const spec = parseInput(taskSpecSchema, { image: BUSYBOX_IMAGE, command: script }, "task") as TaskSpec;
    const withMount = new ContainerRuntime({
      workspaceRoot: path.join(dir, "data", "containers"),
      engine: "podman",
      network: false,
      gpus: false,
      stopGraceMs: 2_000,
      extraArgs: ["--volume", `${secret}:/secret.key:ro`],
      fetchPolicy: { allowNetworks: ["127.0.0.0/8"] },
    });
    const task = await withMount.prepare({ taskId: "uidc1", spec, devices: [], durationMs: 60_000 });
    // The task's own slot user's range (task-user-slots.ts), the same in both files.
    const owner = (await stat(path.join(dir, "data", "containers", "uidc1"))).uid;
    const subuids = await readFile("/etc/subuid", "utf8");
    const slotName =
      subuids
        .split("\n")
        .find((line) => line.split(":")[1] === String(owner))
        ?.split(":")[0] ?? "";
    assert.match(slotName, new RegExp(`^${DEFAULT_TASK_USER}-\\d+$`), "the workspace belongs to the first id of a slot user's range");
    const slotUser = (await lookupUser(slotName))!;
    const range = subordinateRangeOf(subuids, slotUser)!;
    assert.ok(range.start >= 100_000);
    assert.deepEqual(subordinateRangeOf(await readFile("/etc/subgid", "utf8"), slotUser), range);
    await task.start();
    const result = await task.wait();
    const lines = task.readLogs().lines.map((line) => line.text);
    assert.equal(result.status, "succeeded", lines.join("\n"));
    assert.ok(
      lines.some((line) => new RegExp(`^\\s*0\\s+${range.start}\\s+65536$`).test(line)),
      `uid_map: ${lines.join(" | ")}`,
    );
    assert.ok(lines.includes("uid=0"));
    assert.ok(lines.includes("secret=denied"), lines.join("\n"));
    const written = path.join(dir, "data", "containers", "uidc1", "output", "result.txt");
    assert.equal((await stat(written)).uid, range.start);
    assert.equal((await readTaskFile(path.dirname(written), "result.txt", 1024))?.toString(), "from-container\n");
    await task.cleanup();
  });

  it("two rootful Podman tasks at once get different subordinate ranges: A's host root can neither read B's file nor signal B's process; B's can", async () => {
    await requireContainerSupport();
    const containers = path.join(dir, "slots");
    const runtime = new ContainerRuntime({
      workspaceRoot: containers,
      engine: "podman",
      network: false,
      gpus: false,
      stopGraceMs: 1_000,
      fetchPolicy: { allowNetworks: ["127.0.0.0/8"] },
    });
    await runtime.verify();
    const start = async (taskId: string, command: string) => {
      const spec = parseInput(taskSpecSchema, { image: BUSYBOX_IMAGE, command }, "task") as TaskSpec;
      const task = await runtime.prepare({ taskId, spec, devices: [], durationMs: 60_000 });
      // The workspace root is root's 0700: let every id search it, so only each task's own ids guard its files.
      await chmod(containers, 0o711);
      await task.start();
      return { task, hostRoot: (await stat(path.join(containers, taskId))).uid };
    };
    const b = await start("slotcb", "umask 077; mkdir -p output; echo B-PRIVATE > output/secret.txt; sleep 60");
    const a = await start("slotca", "sleep 60");
    try {
      assert.notEqual(a.hostRoot, b.hostRoot, "the two containers' roots are different host ids");
      assert.ok(Math.abs(a.hostRoot - b.hostRoot) >= 65_536, "and their ranges do not overlap");
      const secret = path.join(containers, "slotcb", "output", "secret.txt");
      let bPid: number | undefined;
      for (let tries = 0; tries < 200 && bPid === undefined; tries++) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        const written = await stat(secret).catch(() => undefined);
        // B's sleep: a host process whose real uid is B's container root.
        const { readdir } = await import("node:fs/promises");
        for (const entry of written ? await readdir("/proc") : []) {
          const status = await readFile(`/proc/${entry}/status`, "utf8").catch(() => "");
          if (/^Name:\s+sleep$/m.test(status) && new RegExp(`^Uid:\\s+${b.hostRoot}\\s`, "m").test(status)) bPid = Number(entry);
        }
      }
      assert.ok(bPid, "B's process runs as B's container root on the host");
      const as = (uid: number, argv: string[]) =>
        new Promise<{ code: number; output: string }>((resolve) =>
          execFile("setpriv", [`--reuid=${uid}`, `--regid=${uid}`, "--clear-groups", "--", ...argv], { timeout: 10_000 }, (error, stdout, stderr) =>
            resolve({ code: error ? 1 : 0, output: `${stdout}${stderr}`.trim() }),
          ),
        );
      const read = await as(a.hostRoot, ["cat", secret]);
      assert.notEqual(read.code, 0, `A's host root read B's file: ${read.output}`);
      const signal = await as(a.hostRoot, ["/bin/sh", "-c", `kill -0 ${bPid}`]);
      assert.notEqual(signal.code, 0, `A's host root could signal B's process: ${signal.output}`);
      // With B's own id both work: the refusals are the ids'.
      assert.equal((await as(b.hostRoot, ["cat", secret])).output, "B-PRIVATE");
      assert.equal((await as(b.hostRoot, ["/bin/sh", "-c", `kill -0 ${bPid}`])).code, 0);
    } finally {
      await a.task.cleanup();
      await b.task.cleanup();
    }
  });

  it("chownTree never follows a link; blockingFolder names the first folder a user cannot search", async () => {
    const tree = path.join(dir, "tree");
    await mkdir(path.join(tree, "sub"), { recursive: true });
    const outside = path.join(dir, "outside.txt");
    await writeFile(outside, "x");
    const { symlink } = await import("node:fs/promises");
    await symlink(outside, path.join(tree, "sub", "link"));
    await chownTree(tree, 12345, 12346);
    assert.equal((await stat(path.join(tree, "sub"))).uid, 12345);
    assert.equal((await stat(outside)).uid, 0, "the link's target is untouched");
    const user = { name: "x", uid: 12345, gid: 12346 };
    const closed = path.join(dir, "closed");
    await mkdir(path.join(closed, "inner"), { recursive: true, mode: 0o700 });
    assert.equal(await blockingFolder(path.join(closed, "inner", "file"), user), closed);
    assert.equal(await blockingFolder(path.join(tree, "sub"), user), undefined);
  });

  it("subordinate ranges: an existing one is read, a new one starts above every range in use", () => {
    const user = { name: "suanli-task", uid: 999, gid: 995 };
    assert.deepEqual(subordinateRangeOf("alice:100000:65536\nsuanli-task:231072:65536\n", user), { start: 231072, count: 65536 });
    assert.equal(subordinateRangeOf("alice:100000:65536\n", user), undefined);
    assert.equal(freeSubordinateStart(["alice:100000:65536\n", "bob:165536:65536\n"]), 262144);
    assert.equal(freeSubordinateStart([""]), 131072);
  });
});

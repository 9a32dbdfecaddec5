/**
 * Reading what a task wrote without following links (node/provider/runtime/task-files.ts), under
 * the real race: a process swaps a folder of the output with a link to a canary folder outside it
 * (renameat2 RENAME_EXCHANGE in a tight loop) while the node lists and reads. A path-based read
 * (what the node did before) is shown to leak the canary under the same race, so the race is live;
 * the fd-relative reads never return a byte of it.
 */
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { mkdir, mkdtemp, readFile, rename, rm, symlink, utimes, writeFile } from "node:fs/promises";
import { execFileSync } from "node:child_process";
import { tmpdir } from "node:os";
import path from "node:path";
import { digestOutputDir } from "../../common/output-digest.js";
import { copyTaskFiles, digestTaskFolder, listTaskFiles, openTaskFile, readTaskFile } from "../../node/provider/runtime/task-files.js";
import { echoesNonce, livenessHeartbeatAt } from "../../node/provider/runtime/task.js";
import { waitFor } from "../support/wait.js";

/** Swaps `<out>/d` and `<out>/x` with renameat2(RENAME_EXCHANGE) until killed; prints "swapping" once started. */
const SWAPPER = `
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
a, b = sys.argv[1].encode(), sys.argv[2].encode()
print("swapping", flush=True)
for _ in range(50_000_000):
    if libc.renameat2(-100, a, -100, b, 2) != 0:
        raise OSError(ctypes.get_errno(), "renameat2")
`;

describe("task files: read without following links, even while the task swaps folders", function () {
  this.timeout(60_000);
  let root: string;
  let out: string;
  let canaryDir: string;
  const CANARY = `canary-${process.pid}-${Date.now()}-secret-key-material`;

  beforeEach(async () => {
    root = await mkdtemp(path.join(tmpdir(), "suanli-task-files-"));
    out = path.join(root, "workspace", "output");
    canaryDir = path.join(root, "data");
    await mkdir(path.join(out, "d"), { recursive: true });
    await mkdir(canaryDir);
    // The canary has the same name as the task's file: a read through the link finds it at once.
    await writeFile(path.join(canaryDir, "f"), CANARY);
    await writeFile(path.join(canaryDir, "sealing.key"), CANARY);
    await writeFile(path.join(out, "d", "f"), "task data\n");
    await writeFile(path.join(out, "plain.txt"), "plain\n");
  });
  afterEach(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it("lists and opens regular files only: links (to files and folders), FIFOs and a linked root are refused", async () => {
    await symlink(path.join(canaryDir, "f"), path.join(out, "file-link"));
    await symlink(canaryDir, path.join(out, "dir-link"));
    execFileSync("mkfifo", [path.join(out, "fifo")]);
    assert.deepEqual(
      (await listTaskFiles(out))?.map((file) => [file.rel, file.size]),
      [
        ["d/f", 10],
        ["plain.txt", 6],
      ],
    );
    await assert.rejects(openTaskFile(out, "file-link"), { name: "TaskFileError" });
    await assert.rejects(openTaskFile(out, "dir-link/f"), { name: "TaskFileError" });
    await assert.rejects(openTaskFile(out, "dir-link/sealing.key"), { name: "TaskFileError" });
    // A FIFO is never opened for reading (that would block the node until a writer comes).
    await assert.rejects(openTaskFile(out, "fifo"), { name: "TaskFileError" });
    await assert.rejects(openTaskFile(out, "../output/plain.txt"), { name: "TaskFileError" });
    const handle = await openTaskFile(out, "d/f");
    assert.equal((await handle.readFile()).toString(), "task data\n");
    await handle.close();

    // The output folder itself swapped for a link: there is no folder to read.
    const linked = path.join(root, "workspace", "linked-output");
    await symlink(canaryDir, linked);
    assert.equal(await listTaskFiles(linked), undefined);
    assert.equal(await digestTaskFolder(linked), undefined);
    await assert.rejects(openTaskFile(linked, "f"), { name: "TaskFileError" });

    // The digest is the common rule's, over the regular files only.
    await rm(path.join(out, "fifo"));
    assert.equal(await digestTaskFolder(out), await digestOutputDir(out));

    // A copy takes the regular files and leaves the links behind.
    const copy = path.join(root, "copy");
    await mkdir(copy);
    assert.equal(await copyTaskFiles(out, copy), 16);
    assert.deepEqual(
      (await listTaskFiles(copy))?.map((file) => file.rel),
      ["d/f", "plain.txt"],
    );
  });

  it("the liveness file is read only as a regular file, at most 4 KiB: a link to a host file, /dev/zero or a FIFO does not hold the nonce", async () => {
    const workspace = path.join(root, "workspace");
    const file = path.join(workspace, ".suanli-liveness");
    await writeFile(file, "nonce-123\n");
    assert.equal(await echoesNonce(workspace, "nonce-123"), true);
    await rm(file);
    await writeFile(path.join(canaryDir, "nonce"), "nonce-123\n");
    await symlink(path.join(canaryDir, "nonce"), file);
    assert.equal(await echoesNonce(workspace, "nonce-123"), false, "a link is not followed, even to the right content");
    await rm(file);
    await symlink("/dev/zero", file);
    assert.equal(await echoesNonce(workspace, "nonce-123"), false);
    await rm(file);
    execFileSync("mkfifo", [file]);
    assert.equal(await echoesNonce(workspace, "nonce-123"), false, "a FIFO without a writer does not block the node");
    await rm(file);
    await writeFile(file, `nonce-123${" ".repeat(5000)}`);
    assert.equal(await readTaskFile(workspace, ".suanli-liveness", 4096).then((bytes) => bytes?.length), 4096);
  });

  it("the heartbeat is the liveness file's own time: never a link target's (a host file, /dev/zero), and a FIFO does not block", async () => {
    const workspace = path.join(root, "workspace");
    const file = path.join(workspace, ".suanli-liveness");
    const ownAt = Date.parse("2026-01-02T03:04:05Z");
    const hostAt = Date.parse("2026-06-07T08:09:10Z");
    // Within 2 s or the read blocked (a FIFO opened for reading waits for a writer).
    const heartbeat = async () => {
      let timer: NodeJS.Timeout | undefined;
      const blocked = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error("livenessHeartbeatAt blocked for 2 s")), 2_000)));
      try {
        return await Promise.race([livenessHeartbeatAt(workspace, "nonce-123"), blocked]);
      } finally {
        clearTimeout(timer);
      }
    };

    // The task's own file: the heartbeat is its modification time, while it holds the nonce.
    await writeFile(file, "nonce-123\n");
    await utimes(file, ownAt / 1000, ownAt / 1000);
    assert.equal(await heartbeat(), ownAt);
    await writeFile(file, "another-nonce\n");
    assert.equal(await heartbeat(), undefined, "a file without the nonce is no heartbeat");
    await rm(file);
    assert.equal(await heartbeat(), undefined, "no file, no heartbeat");

    // The file replaced (atomically, as a task would) by a link to a host file that holds the nonce
    // and a newer time: a reader following the link would take the host file's time as a heartbeat.
    const host = path.join(canaryDir, "heartbeat");
    await writeFile(host, "nonce-123\n");
    await utimes(host, hostAt / 1000, hostAt / 1000);
    await writeFile(file, "nonce-123\n");
    await utimes(file, ownAt / 1000, ownAt / 1000);
    assert.equal(await heartbeat(), ownAt);
    await symlink(host, path.join(workspace, "link"));
    await rename(path.join(workspace, "link"), file);
    const throughLink = await heartbeat();
    assert.notEqual(throughLink, hostAt, "the heartbeat was taken from the link's target");
    assert.equal(throughLink, undefined, "a link is no heartbeat, even to a file holding the nonce");

    await rm(file);
    await symlink("/dev/zero", file);
    assert.equal(await heartbeat(), undefined, "a link to /dev/zero is no heartbeat");

    await rm(file);
    execFileSync("mkfifo", [file]);
    const started = Date.now();
    assert.equal(await heartbeat(), undefined, "a FIFO is no heartbeat");
    assert.ok(Date.now() - started < 1_000, `reading a FIFO's heartbeat took ${Date.now() - started} ms`);

    // The task writes a regular file again: its heartbeat counts again.
    await rm(file);
    await writeFile(file, "nonce-123\n");
    await utimes(file, ownAt / 1000, ownAt / 1000);
    assert.equal(await heartbeat(), ownAt);
  });

  describe("under a live swap race (renameat2 RENAME_EXCHANGE in a loop)", () => {
    let swapper: ChildProcess | undefined;
    beforeEach(async () => {
      await symlink(canaryDir, path.join(out, "x"));
      swapper = spawn("python3", ["-c", SWAPPER, path.join(out, "d"), path.join(out, "x")], { stdio: ["ignore", "pipe", "inherit"] });
      let started = false;
      swapper.stdout!.on("data", (chunk: Buffer) => (started ||= chunk.toString().includes("swapping")));
      await waitFor("the swapper started", async () => started, { timeoutMs: 10_000 });
    });
    afterEach(async () => {
      if (swapper && swapper.exitCode === null) {
        const exited = new Promise((resolve) => swapper!.once("exit", resolve));
        swapper.kill("SIGKILL");
        await exited;
      }
    });

    it("a path-based read of the same files leaks the canary (the race is real)", async () => {
      let leaked = 0;
      for (let i = 0; i < 2000 && leaked === 0; i++) {
        const text = await readFile(path.join(out, "d", "f"), "utf8").catch(() => "");
        if (text.includes(CANARY)) leaked++;
      }
      assert.ok(leaked > 0, "a plain readFile through output/d/f never met the link: the race did not run");
    });

    it("listing, opening and digesting never return a byte of the canary, and still read the task's own file", async () => {
      // What an honest walk can see while d and x trade places: the task's folder under either
      // name, both, or neither (swapped between the readdir and the open), and plain.txt.
      const legit = new Set<string>();
      for (const names of [[], ["d"], ["x"], ["d", "x"]]) {
        const dir = await mkdtemp(path.join(root, "legit-"));
        await writeFile(path.join(dir, "plain.txt"), "plain\n");
        for (const name of names) {
          await mkdir(path.join(dir, name));
          await writeFile(path.join(dir, name, "f"), "task data\n");
        }
        legit.add((await digestOutputDir(dir))!);
      }
      let readOwn = 0;
      let refused = 0;
      for (let round = 0; round < 400; round++) {
        const files = (await listTaskFiles(out)) ?? [];
        for (const file of files) assert.ok(["d/f", "x/f", "plain.txt"].includes(file.rel), `listed ${file.rel} (through the link)`);
        for (const rel of ["d/f", "d/sealing.key", "x/f", "x/sealing.key"]) {
          const bytes = await readTaskFile(out, rel, 4096);
          if (bytes === undefined) {
            refused++;
            continue;
          }
          assert.equal(bytes.toString(), "task data\n", `read something else than the task's file as ${rel}`);
          readOwn++;
        }
        if (round % 8 === 0) {
          const digest = await digestTaskFolder(out).catch((error: Error) => error.name);
          // A file swapped away between the listing and its open is refused (TaskFileError): never read through the link.
          assert.ok(digest === "TaskFileError" || legit.has(digest!), `digest ${digest} covers something that is not the task's`);
        }
      }
      assert.ok(readOwn > 0, "the task's own file was never read: the test proves nothing");
      assert.ok(refused > 0, "no read met the link: the race did not run");
    });
  });
});

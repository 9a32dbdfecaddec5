/**
 * The cgroup v2 delegated path of the process runtime's bounds (issue 33, item 3;
 * node/provider/runtime/task-cgroup-v2.ts).
 *
 * What runs for real: the kernel's cgroup v2 tree operations on this host's own cgroup2 mount
 * (a task's shell joins its new cgroup before exec, everything it starts is in it, `cgroup.kill`
 * ends them all, the cgroup is removed). CI hosts are hybrid (memory, pids and cpu are bound to
 * their v1 hierarchies, so the v2 mount has none of them): there the detection's refusal is real
 * too, and the limit files are checked on a directory tree with cgroup v2's layout (what the
 * node writes to `memory.max`, `memory.swap.max`, `pids.max`, `cpu.max`, `cgroup.subtree_control`),
 * not against a kernel enforcing them. docs/provider.md says the same.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { delegateV2, ownCgroupV2, TaskCgroupV2, V2_CONTROLLERS, writeV2Limits } from "../../node/provider/runtime/task-cgroup-v2.js";
import { waitFor } from "../support/wait.js";

const MiB = 1024 ** 2;
const bounds = { cpus: 2, memoryBytes: 64 * MiB, pids: 32, tmpBytes: MiB, workspaceBytes: 16 * MiB };

/** The host's cgroup2 mount point (pure v2: /sys/fs/cgroup; hybrid: /sys/fs/cgroup/unified). */
async function cgroup2Mount(): Promise<string | undefined> {
  const mounts = await readFile("/proc/mounts", "utf8");
  return mounts
    .split("\n")
    .map((line) => line.split(" "))
    .find((fields) => fields[2] === "cgroup2")?.[1];
}

describe("cgroup v2 delegated bounds (process runtime)", function () {
  this.timeout(30_000);

  describe("on this host's real cgroup2 hierarchy", () => {
    let mount: string;
    before(async function () {
      const found = await cgroup2Mount();
      if (!found) assert.fail("no cgroup2 mount on this host (Linux mounts one at /sys/fs/cgroup or /sys/fs/cgroup/unified)");
      mount = found;
    });

    it("detection: delegated only when memory, pids and cpu can be handed to the node's children, with the reason otherwise", async () => {
      const self = await readFile("/proc/self/cgroup", "utf8");
      const own = ownCgroupV2(self);
      assert.ok(own, self);
      const controllers = (await readFile(path.join(mount, own, "cgroup.controllers"), "utf8")).trim().split(/\s+/);
      const result = await delegateV2(mount, self);
      if (V2_CONTROLLERS.every((c) => controllers.includes(c))) {
        assert.deepEqual(result, { ok: true, parent: path.join(mount, own) });
        const enabled = (await readFile(path.join(mount, own, "cgroup.subtree_control"), "utf8")).trim().split(/\s+/);
        for (const c of V2_CONTROLLERS) assert.ok(enabled.includes(c), `${c} enabled for the task cgroups: ${enabled.join(" ")}`);
      } else {
        assert.equal(result.ok, false);
        assert.match(result.ok ? "" : result.reason, /not available in/);
      }
    });

    it("a task's shell joins its own cgroup before exec; everything it starts is inside; cgroup.kill ends them all and the cgroup is removed", async () => {
      const self = await readFile("/proc/self/cgroup", "utf8");
      const parent = path.join(mount, ownCgroupV2(self)!);
      const controllers = (await readFile(path.join(parent, "cgroup.controllers"), "utf8")).trim().split(/\s+/);
      // Where the kernel has the controllers, the real limits are written too; on a hybrid host it has none to write.
      const full = V2_CONTROLLERS.every((c) => controllers.includes(c)) && (await delegateV2(mount, self)).ok;
      const group = await TaskCgroupV2.create(parent, "v2real", bounds, full ? writeV2Limits : async () => undefined);
      const child = spawn(group.prefix()[0]!, [...group.prefix().slice(1), "/bin/sh", "-c", "cat /proc/self/cgroup; sleep 30 & sleep 30 & wait"], {
        stdio: ["ignore", "pipe", "inherit"],
      });
      let out = "";
      child.stdout.on("data", (chunk: Buffer) => (out += chunk.toString()));
      const exited = new Promise<string | null>((resolve) => child.once("exit", (_code, signal) => resolve(signal)));
      const procsFile = path.join(group.dir, "cgroup.procs");
      try {
        await waitFor("the shell and its two sleeps in the task's cgroup", async () => (await readFile(procsFile, "utf8")).trim().split("\n").length >= 3, { timeoutMs: 10_000 });
      } catch (error) {
        await group.remove();
        throw error;
      }
      assert.match(out, new RegExp(`^0::/${path.relative(mount, group.dir).replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}$`, "m"), out);
      try {
        if (full) assert.equal((await readFile(path.join(group.dir, "memory.max"), "utf8")).trim(), String(64 * MiB));
      } finally {
        await group.remove();
      }
      assert.equal(await exited, "SIGKILL", "cgroup.kill ended the task's shell");
      assert.equal(existsSync(group.dir), false, "the task's cgroup is removed");
    });
  });

  describe("on a directory tree with cgroup v2's layout (a delegated systemd unit)", () => {
    let root: string;
    const unit = "/system.slice/suanli-node.service";
    beforeEach(async () => {
      root = await mkdtemp(path.join(tmpdir(), "suanli-cgroup2-"));
      await mkdir(path.join(root, unit), { recursive: true });
      await writeFile(path.join(root, unit, "cgroup.controllers"), "cpuset cpu io memory hugetlb pids rdma misc\n");
      await writeFile(path.join(root, unit, "cgroup.subtree_control"), "\n");
      await writeFile(path.join(root, unit, "cgroup.procs"), `${process.pid}\n`);
    });
    afterEach(() => rm(root, { recursive: true, force: true }));

    it("enables memory, pids and cpu for the children of the node's own cgroup", async () => {
      const result = await delegateV2(root, `0::${unit}\n`);
      assert.deepEqual(result, { ok: true, parent: path.join(root, unit) });
      assert.equal(await readFile(path.join(root, unit, "cgroup.subtree_control"), "utf8"), "+memory +pids +cpu");
    });

    it("refuses, saying which, when a controller is not delegated, and without a v2 entry in /proc/self/cgroup", async () => {
      await writeFile(path.join(root, unit, "cgroup.controllers"), "cpu io\n");
      const missing = await delegateV2(root, `0::${unit}\n`);
      assert.equal(missing.ok, false);
      assert.match(missing.ok ? "" : missing.reason, /memory, pids not available/);
      const v1Only = await delegateV2(root, "4:memory:/x\n");
      assert.equal(v1Only.ok, false);
    });

    it("writes the lease's bounds: memory.max, no swap, pids.max, cpu.max over 100 ms; reads OOM kills from memory.events", async () => {
      const group = await TaskCgroupV2.create(path.join(root, unit), "t1", bounds);
      const read = (file: string) => readFile(path.join(group.dir, file), "utf8");
      assert.equal(await read("memory.max"), String(64 * MiB));
      assert.equal(await read("memory.swap.max"), "0");
      assert.equal(await read("pids.max"), "32");
      assert.equal(await read("cpu.max"), "200000 100000");
      assert.equal(group.oomKilled(), false, "no memory.events: no kill");
      await writeFile(path.join(group.dir, "memory.events"), "low 0\nhigh 0\nmax 12\noom 1\noom_kill 0\n");
      assert.equal(group.oomKilled(), false, "hitting the limit is not a kill");
      await writeFile(path.join(group.dir, "memory.events"), "low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\n");
      assert.equal(group.oomKilled(), true);
      const [shell, flag, script, , procs] = group.prefix();
      assert.deepEqual([shell, flag, procs], ["/bin/sh", "-c", path.join(group.dir, "cgroup.procs")]);
      assert.match(script!, /echo \$\$ > "\$1" \|\| exit 125; shift; exec "\$@"/);
    });
  });
});

import assert from "node:assert/strict";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { mock } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { CapacityManager, type ModeChange } from "../../node/provider/capacity/capacity-manager.js";
import { ManagedProcess } from "../../node/provider/runtime/process-group.js";

const NODE = process.execPath;

async function isAlive(pid: number): Promise<boolean> {
  const stat = await readFile(`/proc/${pid}/stat`, "utf8").catch(() => undefined);
  return stat !== undefined && stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z";
}

async function until<T>(what: string, probe: () => Promise<T | undefined> | T | undefined, timeoutMs = 5_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

describe("capacity manager", () => {
  let dir: string;
  let idleScript: string;
  let manager: CapacityManager | undefined;
  const tasks: ManagedProcess[] = [];

  before(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "suanli-capacity-"));
    // The idle workload: records which devices it got and its pid, notes SIGTERM, runs until stopped.
    idleScript = path.join(dir, "idle.mjs");
    await writeFile(
      idleScript,
      [
        "import { appendFileSync } from 'node:fs';",
        "const log = process.argv[2];",
        "appendFileSync(log, `start ${process.pid} ${process.env.SUANLI_IDLE_UNITS} ${process.env.CUDA_VISIBLE_DEVICES}\\n`);",
        "process.on('SIGTERM', () => { appendFileSync(log, `term ${process.pid}\\n`); process.exit(0); });",
        "setInterval(() => {}, 1000);",
      ].join("\n"),
    );
  });

  afterEach(async () => {
    await manager?.close();
    manager = undefined;
    await Promise.all(tasks.splice(0).map((task) => task.terminate(0)));
  });

  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  async function idleLog(name: string): Promise<{ starts: { pid: number; units: string; devices: string }[]; terms: number[] }> {
    const text = await readFile(path.join(dir, name), "utf8").catch(() => "");
    const starts = [];
    const terms = [];
    for (const line of text.split("\n")) {
      const [kind, pid, units, devices] = line.split(" ");
      if (kind === "start") starts.push({ pid: Number(pid), units: units!, devices: devices! });
      if (kind === "term") terms.push(Number(pid));
    }
    return { starts: starts!, terms };
  }

  function newManager(logName: string, idleScope: "unit" | "machine" = "unit"): { manager: CapacityManager; changes: ModeChange[] } {
    const m = new CapacityManager({
      units: [
        { id: "u0", device: "GPU-0000" },
        { id: "u1", device: "GPU-1111" },
      ],
      idle: { command: [NODE, idleScript, path.join(dir, logName)], scope: idleScope, stopGraceMs: 1_000, restartDelayMs: 50 },
      taskStopGraceMs: 1_000,
    });
    const changes: ModeChange[] = [];
    m.on("mode", (change) => changes.push(change));
    manager = m;
    return { manager: m, changes };
  }

  /** A stand-in task: a real process that notes SIGTERM and exits. */
  function startTask(): ManagedProcess {
    const task = ManagedProcess.spawn({
      argv: [NODE, "-e", "process.on('SIGTERM', () => process.exit(0)); setInterval(() => {}, 1000);"],
      cwd: dir,
      env: {},
    });
    tasks.push(task);
    return task;
  }

  it("idle work runs on free units; assign stops it before resolving; release brings it back", async () => {
    const { manager: m, changes } = newManager("idle-1.log");
    await m.start();
    const first = await until("two idle processes", async () => {
      const log = await idleLog("idle-1.log");
      return log.starts.length === 2 ? log.starts : undefined;
    });
    const onU0 = first.find((start) => start.units === "u0")!;
    const onU1 = first.find((start) => start.units === "u1")!;
    assert.equal(onU0.devices, "GPU-0000", "an idle process sees only its unit's device");
    assert.equal(await isAlive(onU0.pid), true);

    await m.assign("lease-1", ["u0"], "ai");
    // Resolved only after the idle process on u0 is gone; u1's keeps running.
    assert.equal(await isAlive(onU0.pid), false);
    assert.deepEqual((await idleLog("idle-1.log")).terms, [onU0.pid], "it got SIGTERM and could exit cleanly");
    assert.equal(await isAlive(onU1.pid), true);
    assert.deepEqual(m.modes(), { u0: { mode: "ai", leaseId: "lease-1" }, u1: { mode: "idle", leaseId: null } });

    const task = startTask();
    m.attachTask("lease-1", { stop: (grace) => task.terminate(grace ?? 1_000) });
    await m.release("lease-1");
    assert.equal(task.hasExited, true, "release stops the lease's task if it still runs");
    const back = await until("idle back on u0", async () => (await idleLog("idle-1.log")).starts.find((start) => start.units === "u0" && start.pid !== onU0.pid));
    assert.equal(await isAlive(back.pid), true);
    assert.deepEqual(
      changes.map((change) => [change.unitId, change.from, change.to, change.leaseId]),
      [
        ["u0", "idle", "ai", "lease-1"],
        ["u0", "ai", "idle", null],
      ],
    );
  });

  it("preemption honours the notice, then stops the interruptible task and returns the units", async () => {
    const { manager: m, changes } = newManager("idle-2.log");
    await m.start();
    await m.assign("spot-1", ["u1"], "interruptible");
    const task = startTask();
    let stopsAsked = 0;
    m.attachTask("spot-1", {
      stop: (grace) => {
        stopsAsked++;
        return task.terminate(grace ?? 1_000);
      },
    });
    // The notice runs on a mocked clock: no stop is asked for until the whole notice has passed
    // (the manager's own call to the task, not a wall-clock reading).
    mock.timers.enable({ apis: ["setTimeout"] });
    let preemption: Promise<void>;
    try {
      preemption = m.preempt("spot-1", 400);
      mock.timers.tick(399);
      await new Promise<void>((resolve) => setImmediate(resolve));
      assert.equal(stopsAsked, 0, "not stopped before the notice was over");
      assert.equal(m.modes().u1!.mode, "interruptible", "the units stay the lease's during the notice");
      mock.timers.tick(1);
    } finally {
      mock.timers.reset();
    }
    await preemption;
    assert.equal(stopsAsked, 1, "stopped once the notice was over");
    assert.equal(task.hasExited, true);
    assert.equal(m.modes().u1!.mode, "idle");
    assert.deepEqual(
      changes.map((change) => [change.unitId, change.from, change.to]),
      [
        ["u1", "idle", "interruptible"],
        ["u1", "interruptible", "idle"],
      ],
    );
  });

  /**
   * A stand-in task that notes each SIGTERM in `log` ("term <ms>"); `exitOnTerm` 1: exits at the
   * first, 2: runs on after the first and exits at the second. Resolves once its handler is set.
   */
  async function startTrappingTask(log: string, exitOnTerm: 1 | 2): Promise<ManagedProcess> {
    const task = ManagedProcess.spawn({
      argv: [
        NODE,
        "-e",
        [
          "const { appendFileSync } = require('node:fs'); let terms = 0;",
          `process.on('SIGTERM', () => { appendFileSync(process.argv[1], 'term ' + Date.now() + '\\n'); if (++terms >= ${exitOnTerm}) process.exit(0); });`,
          "appendFileSync(process.argv[1], 'ready\\n'); setInterval(() => {}, 1000);",
        ].join(" "),
        log,
      ],
      cwd: dir,
      env: {},
    });
    tasks.push(task);
    await until("the task's SIGTERM handler", async () => ((await readFile(log, "utf8").catch(() => "")).includes("ready") ? true : undefined));
    return task;
  }

  it("preemption: the task gets SIGTERM as the notice begins and runs on; what still runs at its end gets SIGTERM, grace, SIGKILL", async () => {
    const { manager: m } = newManager("idle-term.log");
    await m.start();
    await m.assign("spot-t", ["u1"], "interruptible");
    const log = path.join(dir, "task-term.log");
    const task = await startTrappingTask(log, 2);
    const calls: string[] = [];
    m.attachTask("spot-t", {
      sendTerm: () => {
        calls.push("sendTerm");
        return task.sendTerm();
      },
      stop: (grace) => {
        calls.push("stop");
        return task.terminate(grace ?? 1_000);
      },
    });
    mock.timers.enable({ apis: ["setTimeout"] });
    let preemption: Promise<void>;
    try {
      preemption = m.preempt("spot-t", 400);
      assert.deepEqual(calls, ["sendTerm"], "SIGTERM at once, as the notice begins");
      assert.equal(m.preempt("spot-t", 400), preemption, "a second call is the same preemption");
      // The task notes the signal (on the real clock: setImmediate and file reads are not mocked).
      while (!(await readFile(log, "utf8")).includes("term ")) await new Promise<void>((resolve) => setImmediate(resolve));
      mock.timers.tick(399);
      await new Promise<void>((resolve) => setImmediate(resolve));
      assert.deepEqual(calls, ["sendTerm"], "no stop, and no second notice SIGTERM, before the notice is over");
      assert.equal(m.modes().u1!.mode, "interruptible");
      mock.timers.tick(1);
    } finally {
      mock.timers.reset();
    }
    await preemption;
    assert.deepEqual(calls, ["sendTerm", "stop"], "stopped once the notice was over");
    assert.equal(task.hasExited, true);
    const terms = (await readFile(log, "utf8")).split("\n").filter((line) => line.startsWith("term "));
    assert.equal(terms.length, 2, "one SIGTERM at the notice's start (the task ran on), one at its end");
    assert.equal(m.modes().u1!.mode, "idle");
  });

  it("a task that exits at the notice's SIGTERM: release() then leaves the units the lease's until the notice ends", async () => {
    const { manager: m, changes } = newManager("idle-early.log");
    await m.start();
    await m.assign("spot-e", ["u1"], "interruptible");
    const log = path.join(dir, "task-early.log");
    const task = await startTrappingTask(log, 1);
    let stops = 0;
    m.attachTask("spot-e", {
      sendTerm: () => task.sendTerm(),
      stop: (grace) => {
        stops++;
        return task.terminate(grace ?? 1_000);
      },
    });
    const noticeMs = 3_000;
    const begun = Date.now();
    const preemption = m.preempt("spot-e", noticeMs);
    await task.exited;
    // What the provider's pipeline does when the task exits: it releases the lease's units.
    await m.release("spot-e");
    assert.ok(Date.now() - begun < noticeMs, "the task exited and was released within the notice");
    assert.equal(stops, 1, "release() stopped the (exited) task");
    assert.deepEqual(m.modes().u1, { mode: "interruptible", leaseId: "spot-e" }, "the units stay the lease's until the notice ends");
    await preemption;
    assert.ok(Date.now() - begun >= noticeMs - 50, `released at the notice's end (${Date.now() - begun} ms)`);
    assert.deepEqual(m.modes().u1, { mode: "idle", leaseId: null });
    assert.deepEqual(
      changes.map((change) => [change.unitId, change.from, change.to]),
      [
        ["u1", "idle", "interruptible"],
        ["u1", "interruptible", "idle"],
      ],
    );
  });

  it("an on-demand lease preempts an interruptible one on its units and starts only after it stopped; on-demand units are refused", async () => {
    const { manager: m, changes } = newManager("idle-3.log");
    await m.start();
    await m.assign("spot-2", ["u0", "u1"], "interruptible");
    const task = startTask();
    m.attachTask("spot-2", { stop: (grace) => task.terminate(grace ?? 1_000) });
    await m.assign("demand-1", ["u0"], "ai", { preemptNoticeMs: 150 });
    assert.equal(task.hasExited, true, "the interruptible task was stopped first");
    assert.deepEqual(m.modes(), { u0: { mode: "ai", leaseId: "demand-1" }, u1: { mode: "idle", leaseId: null } });
    await assert.rejects(m.assign("demand-2", ["u0"], "ai"), { name: "UnitsBusyError" });
    await assert.rejects(m.assign("demand-3", ["u9"], "ai"), { name: "UnitsBusyError" });
    await assert.rejects(m.preempt("demand-1", 0), { name: "UnitsBusyError" });
    await assert.rejects(m.release("nope"), { name: "UnknownLeaseError" });
    const u0 = changes.filter((change) => change.unitId === "u0").map((change) => `${change.from}>${change.to}`);
    assert.deepEqual(u0, ["idle>interruptible", "interruptible>idle", "idle>ai"]);
    // The idle workload is back on u1 only.
    const log = await until("idle on u1 after the preemption", async () => {
      const current = await idleLog("idle-3.log");
      return current.starts.some((start) => start.units === "u1") ? current : undefined;
    });
    const live = [];
    for (const start of log.starts) if (await isAlive(start.pid)) live.push(start.units);
    assert.deepEqual(live, ["u1"]);
  });

  it("listeners that read modes() during a change see a consistent state (a lease of two units preempted)", async () => {
    const { manager: m } = newManager("idle-listener.log");
    const seen: string[] = [];
    // The provider agent's metrics listener does exactly this on every mode event.
    m.on("mode", () => {
      const modes = m.modes();
      seen.push(
        Object.values(modes)
          .map((unit) => unit.mode)
          .join(","),
      );
    });
    await m.start();
    await m.assign("spot", ["u0", "u1"], "interruptible");
    const task = startTask();
    m.attachTask("spot", { stop: (grace) => task.terminate(grace ?? 1_000) });
    await m.assign("demand", ["u0", "u1"], "ai", { preemptNoticeMs: 100 });
    assert.deepEqual(m.modes(), { u0: { mode: "ai", leaseId: "demand" }, u1: { mode: "ai", leaseId: "demand" } });
    assert.ok(seen.includes("idle,idle"), `both units were idle together between the leases: ${seen.join(" | ")}`);
  });

  it("machine scope: one idle process over all idle units, restarted with the remaining ones", async () => {
    const { manager: m } = newManager("idle-4.log", "machine");
    await m.start();
    const first = await until("machine-wide idle process", async () => (await idleLog("idle-4.log")).starts[0]);
    assert.deepEqual([first.units, first.devices], ["u0,u1", "GPU-0000,GPU-1111"]);
    await m.assign("lease-4", ["u1"], "ai");
    assert.equal(await isAlive(first.pid), false);
    const second = await until("restarted idle process", async () => (await idleLog("idle-4.log")).starts[1]);
    assert.deepEqual([second.units, second.devices], ["u0", "GPU-0000"]);
    await m.release("lease-4");
    const third = await until("idle process over both units again", async () => (await idleLog("idle-4.log")).starts[2]);
    assert.equal(third.units, "u0,u1");
  });

  it("restarts an idle workload that exits, and kills one that ignores SIGTERM after the grace period", async () => {
    const crashing = new CapacityManager({
      units: [{ id: "u0", device: "GPU-0000" }],
      idle: { command: `echo run >> ${path.join(dir, "crash.log")}; exit 1`, restartDelayMs: 20, maxRestartDelayMs: 40 },
    });
    manager = crashing;
    await crashing.start();
    await until("three restarts", async () => ((await readFile(path.join(dir, "crash.log"), "utf8").catch(() => "")).split("\n").length > 3 ? true : undefined));
    await crashing.close();

    const stubborn = new CapacityManager({
      units: [{ id: "u0", device: "GPU-0000" }],
      idle: {
        command: [
          NODE,
          "-e",
          "process.on('SIGTERM', () => {}); require('fs').writeFileSync(process.argv[1], String(process.pid)); setInterval(() => {}, 1000);",
          path.join(dir, "stubborn.pid"),
        ],
        stopGraceMs: 200,
      },
    });
    manager = stubborn;
    await stubborn.start();
    const pid = await until("stubborn idle process", async () => Number(await readFile(path.join(dir, "stubborn.pid"), "utf8").catch(() => "")) || undefined);
    await stubborn.assign("lease-5", ["u0"], "ai");
    assert.equal(await isAlive(pid), false, "killed after the grace period");
    assert.deepEqual(stubborn.idleProcesses(), []);
  });
});

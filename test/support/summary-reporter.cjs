// Mocha's spec reporter, plus the runner's own counts written as JSON to the file named by
// SUANLI_TEST_SUMMARY, so .ci/run can print "tests: N passed, M failed" without parsing text.
// At the end it also prints each test file's wall time (its top-level suites, hooks included),
// slowest first, so a CI log shows where the time goes; the summary file carries them too. Beside
// it, the CPU seconds the file cost: this process's own, and its children's (the nodes, CLIs,
// chains and containers it started and that ended within the file: Linux adds a reaped child's CPU,
// its own children's included, to /proc/self/stat's cutime and cstime). CI is CPU-bound on 2 cores,
// so the CPU column is what a faster suite has to cut.
const fs = require("node:fs");
const path = require("node:path");
const Mocha = require("mocha");

const { EVENT_RUN_END, EVENT_SUITE_BEGIN, EVENT_SUITE_END, EVENT_TEST_FAIL, EVENT_TEST_PASS } = Mocha.Runner.constants;

/** How many of the slowest files the table lists (SUANLI_TEST_FILE_TIMES=all lists every one). */
const TABLE_ROWS = 25;

/** CPU milliseconds so far: this process's, and its reaped children's (0 where /proc is missing). */
function cpuNow() {
  const own = process.cpuUsage();
  let children = 0;
  try {
    // Fields after the command name (which may hold spaces, so split after its closing paren):
    // state is field 3; cutime and cstime are fields 16 and 17, in clock ticks (100 a second on Linux).
    const fields = fs.readFileSync("/proc/self/stat", "utf8").split(") ")[1].split(" ");
    children = ((Number(fields[13]) + Number(fields[14])) * 1000) / 100;
  } catch {
    children = 0;
  }
  return { own: (own.user + own.system) / 1000, children };
}

class SummaryReporter extends Mocha.reporters.Spec {
  constructor(runner, options) {
    super(runner, options);
    /** file (relative to the working directory) → milliseconds spent in its top-level suites */
    const fileMs = new Map();
    /** file → { own, children } CPU milliseconds */
    const fileCpu = new Map();
    const started = new Map();
    const fileOf = (suite) => (suite.file ? path.relative(process.cwd(), suite.file) : "(no file)");
    const topLevel = (suite) => suite.parent !== undefined && suite.parent.root === true;
    /** The files whose tests or hooks failed (a hook's file is its suite's): scripts/test-lanes.sh runs them again alone. */
    const failedFiles = new Set();
    /** file → tests passed in it (a rerun replaces a failed file's count with its own). */
    const filePasses = new Map();
    const fileOfRunnable = (runnable) => {
      let node = runnable;
      while (node && !node.file) node = node.parent;
      return node?.file ? path.relative(process.cwd(), node.file) : "(no file)";
    };
    runner.on(EVENT_TEST_FAIL, (runnable) => failedFiles.add(fileOfRunnable(runnable)));
    runner.on(EVENT_TEST_PASS, (test) => filePasses.set(fileOfRunnable(test), (filePasses.get(fileOfRunnable(test)) ?? 0) + 1));
    runner.on(EVENT_SUITE_BEGIN, (suite) => {
      if (topLevel(suite)) started.set(suite, { t0: process.hrtime.bigint(), cpu: cpuNow() });
    });
    runner.on(EVENT_SUITE_END, (suite) => {
      const start = started.get(suite);
      if (start === undefined) return;
      started.delete(suite);
      const ms = Number((process.hrtime.bigint() - start.t0) / 1_000_000n);
      const cpu = cpuNow();
      const file = fileOf(suite);
      fileMs.set(file, (fileMs.get(file) ?? 0) + ms);
      const before = fileCpu.get(file) ?? { own: 0, children: 0 };
      fileCpu.set(file, { own: before.own + cpu.own - start.cpu.own, children: before.children + cpu.children - start.cpu.children });
    });
    runner.once(EVENT_RUN_END, () => {
      const rows = [...fileMs.entries()].sort((a, b) => b[1] - a[1]);
      const total = rows.reduce((sum, [, ms]) => sum + ms, 0);
      const shown = process.env.SUANLI_TEST_FILE_TIMES === "all" ? rows : rows.slice(0, TABLE_ROWS);
      const seconds = (ms) => (ms / 1000).toFixed(1).padStart(7);
      const cpuOf = (file) => fileCpu.get(file) ?? { own: 0, children: 0 };
      // One file alone prints its row only when asked (SUANLI_TEST_FILE_TIMES=all): what a change to one file saved.
      if (rows.length > 1 || process.env.SUANLI_TEST_FILE_TIMES === "all") {
        console.log(`  wall time per test file (hooks included), ${shown.length} slowest of ${rows.length}, ${(total / 1000).toFixed(1)} s in all:`);
        for (const [file, ms] of shown) console.log(`  ${seconds(ms)} s  ${file}`);
        console.log();
        // The same files by CPU: the test process's own, and the children it started.
        const byCpu = [...fileCpu.entries()].sort((a, b) => b[1].own + b[1].children - (a[1].own + a[1].children));
        const cpuShown = process.env.SUANLI_TEST_FILE_TIMES === "all" ? byCpu : byCpu.slice(0, TABLE_ROWS);
        const sum = byCpu.reduce((acc, [, cpu]) => ({ own: acc.own + cpu.own, children: acc.children + cpu.children }), { own: 0, children: 0 });
        console.log(
          `  CPU per test file (own + children), ${cpuShown.length} costliest of ${byCpu.length}, ${((sum.own + sum.children) / 1000).toFixed(1)} s in all (${(sum.own / 1000).toFixed(1)} s own, ${(sum.children / 1000).toFixed(1)} s children):`,
        );
        for (const [file, cpu] of cpuShown) console.log(`  ${seconds(cpu.own + cpu.children)} s  (${seconds(cpu.own).trim()} + ${seconds(cpu.children).trim()})  ${file}`);
        console.log();
      }
      const { passes, failures, pending, tests } = this.stats;
      const file = process.env.SUANLI_TEST_SUMMARY;
      if (file)
        fs.writeFileSync(
          file,
          JSON.stringify({
            passes,
            failures,
            pending,
            tests,
            failedFiles: [...failedFiles].sort(),
            passesByFile: Object.fromEntries(filePasses),
            files: Object.fromEntries(rows),
            cpu: Object.fromEntries(rows.map(([f]) => [f, cpuOf(f)])),
          }),
        );
      // Mocha's own `--exit`, which Hardhat's runner lacks: once every test has run, the process
      // must end. A test that leaks a handle (a server, a socket, a child's pipe, a timer) would
      // otherwise keep it alive forever and a CI run would wait for its hard limit with nothing
      // printed. The timer is unref'd: a clean run exits without waiting for it.
      const graceMs = Number(process.env.SUANLI_TEST_EXIT_GRACE_MS ?? 60_000);
      setTimeout(() => {
        const held = process.getActiveResourcesInfo().filter((kind) => kind !== "Timeout");
        console.log(
          `\n  the test run ended ${graceMs / 1000} s ago and the process is still held open by: ${held.join(", ") || "(timers only)"}; exiting (a test leaked a handle)`,
        );
        process.exit(failures > 0 ? 1 : 0);
      }, graceMs).unref();
    });
  }
}

module.exports = SummaryReporter;

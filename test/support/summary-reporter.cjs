// Mocha's spec reporter, plus the runner's own counts written as JSON to the file named by
// SUANLI_TEST_SUMMARY, so .ci/run can print "tests: N passed, M failed" without parsing text.
// At the end it also prints each test file's wall time (its top-level suites, hooks included),
// slowest first, so a CI log shows where the time goes; the summary file carries them too.
const fs = require("node:fs");
const path = require("node:path");
const Mocha = require("mocha");

const { EVENT_RUN_END, EVENT_SUITE_BEGIN, EVENT_SUITE_END } = Mocha.Runner.constants;

/** How many of the slowest files the table lists (SUANLI_TEST_FILE_TIMES=all lists every one). */
const TABLE_ROWS = 25;

class SummaryReporter extends Mocha.reporters.Spec {
  constructor(runner, options) {
    super(runner, options);
    /** file (relative to the working directory) → milliseconds spent in its top-level suites */
    const fileMs = new Map();
    const started = new Map();
    const fileOf = (suite) => (suite.file ? path.relative(process.cwd(), suite.file) : "(no file)");
    const topLevel = (suite) => suite.parent !== undefined && suite.parent.root === true;
    runner.on(EVENT_SUITE_BEGIN, (suite) => {
      if (topLevel(suite)) started.set(suite, process.hrtime.bigint());
    });
    runner.on(EVENT_SUITE_END, (suite) => {
      const t0 = started.get(suite);
      if (t0 === undefined) return;
      started.delete(suite);
      const ms = Number((process.hrtime.bigint() - t0) / 1_000_000n);
      const file = fileOf(suite);
      fileMs.set(file, (fileMs.get(file) ?? 0) + ms);
    });
    runner.once(EVENT_RUN_END, () => {
      const rows = [...fileMs.entries()].sort((a, b) => b[1] - a[1]);
      const total = rows.reduce((sum, [, ms]) => sum + ms, 0);
      const shown = process.env.SUANLI_TEST_FILE_TIMES === "all" ? rows : rows.slice(0, TABLE_ROWS);
      if (rows.length > 1) {
        console.log(`  wall time per test file (hooks included), ${shown.length} slowest of ${rows.length}, ${(total / 1000).toFixed(1)} s in all:`);
        for (const [file, ms] of shown) console.log(`  ${(ms / 1000).toFixed(1).padStart(7)} s  ${file}`);
        console.log();
      }
      const { passes, failures, pending, tests } = this.stats;
      const file = process.env.SUANLI_TEST_SUMMARY;
      if (file) fs.writeFileSync(file, JSON.stringify({ passes, failures, pending, tests, files: Object.fromEntries(rows) }));
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

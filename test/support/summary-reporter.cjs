// Mocha's spec reporter, plus the runner's own counts written as JSON to the file named by
// SUANLI_TEST_SUMMARY, so .ci/run can print "tests: N passed, M failed" without parsing text.
const fs = require("node:fs");
const Mocha = require("mocha");

class SummaryReporter extends Mocha.reporters.Spec {
  constructor(runner, options) {
    super(runner, options);
    const file = process.env.SUANLI_TEST_SUMMARY;
    if (!file) return;
    runner.once(Mocha.Runner.constants.EVENT_RUN_END, () => {
      const { passes, failures, pending, tests } = this.stats;
      fs.writeFileSync(file, JSON.stringify({ passes, failures, pending, tests }));
    });
  }
}

module.exports = SummaryReporter;

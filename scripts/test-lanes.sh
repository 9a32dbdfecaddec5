#!/usr/bin/env bash
# Runs the whole mocha suite, the same files `npm test` runs, on a 2-core CI machine, in
# $SUANLI_TEST_LANES lanes at once (default 3): one mocha process each, every lane with its own
# log. Most of a test's wall time is spent waiting on child processes, the chain, the network or a
# task's own seconds, so two lanes left the cores idle much of the time (the README test alone
# used about 0.65 of a core, measured with /usr/bin/time), and a run took 23 min of tests.
# scripts/test-lanes-plan.mjs deals the files so that the lanes end together, by each file's
# time in test/lane-times.json, with two rules:
#   - the README test (test/e2e/readme.test.ts) runs first in lane 0: it runs the README's commands
#     as pasted, on the README's fixed ports, devnet accounts and scratch paths in the repo root.
#     Its one timing-sensitive step (an extend while a 60 s job runs) comes right after the submit;
#   - the Podman tests run one after another in one lane: they share the container storage.
# Every other file uses its own 127.0.0.1:0 ports and temporary directories.
# The contracts are compiled and the CLI bundled once first; every lane runs with --no-compile.
# Each lane's log is printed in full once all are done, and its JSON summary; when
# SUANLI_TEST_SUMMARY names a file, the summaries are added into it (the shape .ci/run reads),
# and when SUANLI_LANE_TIMES_OUT names one, it gets every file's wall time (test/lane-times.json's
# "files").
# Exit code: non-zero when any lane fails or reports no summary.
set -uo pipefail
cd "$(dirname "$0")/.."

# .ci/run builds both itself before it starts typecheck and lint beside the tests, and sets
# SUANLI_LANES_BUILT=1 so that no second build writes artifacts while tsc reads them.
if [ "${SUANLI_LANES_BUILT:-}" != 1 ]; then
  npx hardhat build --quiet || exit 1
  # The `suanli` command's bundle (scripts/build-cli.ts): the many CLI commands and nodes the tests
  # start then load one prebuilt file instead of compiling TypeScript at every start (about 2 s each
  # on 2 cores). bin/suanli.mjs runs the sources whenever the bundle is missing or not current.
  npx tsx scripts/build-cli.ts || exit 1
fi

# The files hardhat-mocha would load for a plain `hardhat test mocha` (every .js/.cjs/.mjs/.ts/
# .cts/.mts file under test/), dealt over the lanes.
mapfile -t all < <(find test -type f -regextype posix-extended -regex '.*\.(js|cjs|mjs|ts|cts|mts)$' | sort)
lanes="${SUANLI_TEST_LANES:-3}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
node scripts/test-lanes-plan.mjs "$lanes" "${all[@]}" >"$work/plan.tsv" || exit 1

start=$SECONDS
# A lane that runs past its limit is stopped (TERM to its whole process group, KILL 30 s later) and
# its log printed with what it had done: a hung test must fail the run with the name of the last
# test that finished, not hold CI silently until the machine's hard limit. Whole runs take about
# 15 min a lane on 2 cores; the limit leaves room for a loaded host.
# Lanes read nothing: their stdin is /dev/null, so a file that reads stdin when loaded cannot wait
# on a terminal or a pipe that never closes.
limit="${SUANLI_LANE_TIMEOUT_S:-2400}"
run_lane() {
  local n="$1"
  local files
  mapfile -t files < <(awk -F '\t' -v lane="$n" '$1 == lane { print $2 }' "$work/plan.tsv")
  SUANLI_TEST_SUMMARY="$work/summary-$n.json" timeout --kill-after=30 "$limit" npx hardhat test mocha --no-compile "${files[@]}" </dev/null >"$work/lane-$n.log" 2>&1
  local rc=$?
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    echo "-- lane $n ran past its limit of $limit s and was stopped: the last test named above is the one after which it hung" >>"$work/lane-$n.log"
  fi
  echo "-- lane $n: ${#files[@]} files, $((SECONDS - start)) s, exit code $rc" >>"$work/lane-$n.log"
  return "$rc"
}
status=0
pids=()
for ((n = 0; n < lanes; n++)); do
  run_lane "$n" &
  pids+=("$!")
done
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
for ((n = 0; n < lanes; n++)); do
  printf '\n== test lane %d (%d files%s)\n' "$n" "$(awk -F '\t' -v lane="$n" '$1 == lane' "$work/plan.tsv" | wc -l)" "$([ "$n" = 0 ] && echo ', the README first')"
  cat "$work/lane-$n.log"
done

# The failures of every lane once more, last: CI shows only the tail of a long log, and a lane's
# failure report sits in the middle of it. Mocha's own report, from its "N failing" line to the
# lane's closing line (the titles, the assertion and the first stack lines of each), without the
# stack lines inside node_modules. When SUANLI_TEST_FAILURES names a file, it gets the same text
# (.ci/run prints it again after everything else).
failures="$work/failures.txt"
: >"$failures"
for ((n = 0; n < lanes; n++)); do
  if grep -Eq '[0-9]+ failing' "$work/lane-$n.log"; then
    {
      printf '\n== failures in lane %d\n' "$n"
      sed -n '/[0-9][0-9]* failing/,/^-- lane /p' "$work/lane-$n.log" | grep -v '^ *at .*node_modules' | head -c 8000
    } >>"$failures"
  fi
done
cat "$failures"
if [ -n "${SUANLI_TEST_FAILURES:-}" ]; then cp "$failures" "$SUANLI_TEST_FAILURES"; fi

summaries=()
for ((n = 0; n < lanes; n++)); do
  if [ -s "$work/summary-$n.json" ]; then
    summaries+=("$work/summary-$n.json")
  else
    echo "lane $n reported no summary: its runner died before the end"
    status=1
  fi
done
if [ "${#summaries[@]}" -eq "$lanes" ]; then
  # Every lane's counts added up, to $SUANLI_TEST_SUMMARY (for .ci/run), and every file's wall time
  # to $SUANLI_LANE_TIMES_OUT (to refresh test/lane-times.json).
  node -e '
    const fs = require("fs");
    const parts = process.argv.slice(1).map((f) => JSON.parse(fs.readFileSync(f, "utf8")));
    const sum = (k) => parts.reduce((total, part) => total + (part[k] ?? 0), 0);
    const out = { passes: sum("passes"), failures: sum("failures"), pending: sum("pending"), tests: sum("tests"), files: Object.assign({}, ...parts.map((part) => part.files)) };
    if (process.env.SUANLI_TEST_SUMMARY) fs.writeFileSync(process.env.SUANLI_TEST_SUMMARY, JSON.stringify(out));
    if (process.env.SUANLI_LANE_TIMES_OUT) {
      const seconds = Object.fromEntries(Object.entries(out.files).sort(([a], [b]) => a.localeCompare(b)).map(([file, ms]) => [file, Math.round(ms / 100) / 10]));
      fs.writeFileSync(process.env.SUANLI_LANE_TIMES_OUT, JSON.stringify(seconds, null, 2) + "\n");
    }
    console.log(`\nall lanes: ${out.passes} passed, ${out.failures} failed, ${out.pending} pending`);
  ' "${summaries[@]}" || status=1
fi
exit "$status"

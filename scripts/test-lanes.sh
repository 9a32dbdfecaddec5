#!/usr/bin/env bash
# Runs the whole mocha suite, the same files `npm test` runs, on a 2-core CI machine: first the
# README test alone, then two lanes at once (one per core; most of a test's wall time is spent
# waiting on child processes, the chain or the network, so one lane leaves a core idle):
#   lane 0: test/e2e/readme.test.ts, alone. It runs the README's commands as pasted: the README's
#           fixed ports, devnet accounts and scratch paths in the repo root, and a 20 s job whose
#           extend must land while it runs. Beside the other lanes it twice saw its lease end
#           before its extend, which it never did alone or under a plain CPU load; alone it costs
#           no wall time, as lane 1 stays the longest even without it.
#   lane 1: the rest of test/e2e/ (but the five named below) and the node tests that drive Podman, one after another. They
#           start real nodes, devnets and CLIs, and the Podman tests share the container storage,
#           so they never run beside each other;
#   lane 2: every other test file (contracts, common, offers, p2p, sdk, node), on their own
#           127.0.0.1:0 ports and temporary directories. The attestation tests attest-backoff and
#           attest-busy are back here: a scheduled challenge answered `busy` is retried within
#           seconds (node/attest/challenge/challenger.ts BUSY_RETRY_BASE_MS), not at the next scan, and they
#           passed run together with every other attestation test file.
# The contracts are compiled and the CLI bundled once first; every lane runs with --no-compile. Each lane writes its
# own log, printed in full once all are done (lane 0 first), and its own JSON summary; when
# SUANLI_TEST_SUMMARY names a file, the summaries are added into it (the shape .ci/run reads).
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
# .cts/.mts file under test/), split by path.
mapfile -t all < <(find test -type f -regextype posix-extended -regex '.*\.(js|cjs|mjs|ts|cts|mts)$' | sort)
lane0=()
lane1=()
lane2=()
for file in "${all[@]}"; do
  case "$file" in
    test/e2e/readme.test.ts) lane0+=("$file") ;;
    # End-to-end files that start no container, no `suanli devnet` (its attestor nodes take fixed
    # ports) and no fixed port: in the other lane, which balances the two (lane 1 had grown past it).
    test/e2e/matching-race.test.ts | test/e2e/group-extend-migrate.test.ts | test/e2e/task-outcome-names.test.ts | test/e2e/group-job.test.ts | test/e2e/group-resume.test.ts) lane2+=("$file") ;;
    test/e2e/* | test/node/provider-container.test.ts | test/node/provider-container-bounds.test.ts | test/node/provider-container-inputs.test.ts | test/node/provider-container-storage.test.ts | test/node/provider-images.test.ts | test/node/provider-task-user.test.ts) lane1+=("$file") ;;
    *) lane2+=("$file") ;;
  esac
done

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
start=$SECONDS
# A lane that runs past its limit is stopped (TERM to its whole process group, KILL 30 s later) and
# its log printed with what it had done: a hung test must fail the run with the name of the last
# test that finished, not hold CI silently until the machine's hard limit. Whole runs take about
# 5 min (lane 0) and 12 min (lanes 1 and 2) on 2 cores; the limits leave room for a loaded host.
# Lanes read nothing: their stdin is /dev/null, so a file that reads stdin when loaded cannot wait
# on a terminal or a pipe that never closes.
lane_limit() { if [ "$1" = 0 ]; then echo "${SUANLI_LANE0_TIMEOUT_S:-1200}"; else echo "${SUANLI_LANE_TIMEOUT_S:-2400}"; fi; }
run_lane() {
  local n="$1"
  shift
  local limit
  limit="$(lane_limit "$n")"
  SUANLI_TEST_SUMMARY="$work/summary-$n.json" timeout --kill-after=30 "$limit" npx hardhat test mocha --no-compile "$@" </dev/null >"$work/lane-$n.log" 2>&1
  local rc=$?
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    echo "-- lane $n ran past its limit of $limit s and was stopped: the last test named above is the one after which it hung" >>"$work/lane-$n.log"
  fi
  echo "-- lane $n: $# files, $((SECONDS - start)) s, exit code $rc" >>"$work/lane-$n.log"
  echo "$rc" >"$work/rc-$n"
  return "$rc"
}
status=0
run_lane 0 "${lane0[@]}" || status=1
run_lane 1 "${lane1[@]}" &
pid1=$!
run_lane 2 "${lane2[@]}" &
pid2=$!
wait "$pid1" || status=1
wait "$pid2" || status=1
printf '\n== test lane 0 (%d file: the README, alone)\n' "${#lane0[@]}"
cat "$work/lane-0.log"
printf '\n== test lane 1 (%d files: end-to-end and Podman)\n' "${#lane1[@]}"
cat "$work/lane-1.log"
printf '\n== test lane 2 (%d files: the rest)\n' "${#lane2[@]}"
cat "$work/lane-2.log"

# The failures of every lane once more, last: CI shows only the tail of a long log, and a lane's
# failure report sits in the middle of it. Mocha's own report, from its "N failing" line to the
# lane's closing line (the titles, the assertion and the first stack lines of each), without the
# stack lines inside node_modules. When SUANLI_TEST_FAILURES names a file, it gets the same text
# (.ci/run prints it again after everything else).
failures="$work/failures.txt"
: >"$failures"
for n in 0 1 2; do
  if grep -Eq '[0-9]+ failing' "$work/lane-$n.log"; then
    {
      printf '\n== failures in lane %d\n' "$n"
      sed -n '/[0-9][0-9]* failing/,/^-- lane /p' "$work/lane-$n.log" | grep -v '^ *at .*node_modules' | head -c 8000
    } >>"$failures"
  fi
done
cat "$failures"

for n in 0 1 2; do
  if [ ! -s "$work/summary-$n.json" ]; then
    echo "lane $n reported no summary: its runner died before the end"
    status=1
  fi
done

# A second run, alone, of the files that failed (docs/testing.md "Flaky tests"). The lanes run
# beside each other and beside typecheck and lint on 2 shared cores; a timing-sensitive test that
# fails there about once in two CI runs, each time another one, passed every time alone. Up to 3
# failed files (more is a breakage, not a flake: no rerun) run once more, one mocha run, nothing
# beside them. A file that fails again fails the run. One that passes leaves the run green, and
# its lane failure is printed under "flaky", for its cause to be fixed. SUANLI_RERUN_FAILED=0 turns
# the rerun off.
failed_files=()
all_reported=1
for n in 0 1 2; do
  if [ -s "$work/summary-$n.json" ]; then
    before=${#failed_files[@]}
    mapfile -t -O "${#failed_files[@]}" failed_files < <(node -e 'for (const f of JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).failedFiles ?? []) console.log(f)' "$work/summary-$n.json")
    # A lane that failed without a failed test (it died, or exited non-zero after its tests) is no flake: no rerun.
    if [ "$(cat "$work/rc-$n" 2>/dev/null || echo 1)" != 0 ] && [ "${#failed_files[@]}" -eq "$before" ]; then all_reported=0; fi
  else
    all_reported=0
  fi
done
rerun=""
if [ "$status" -ne 0 ] && [ "$all_reported" = 1 ] && [ "${SUANLI_RERUN_FAILED:-1}" != 0 ] && [ "${#failed_files[@]}" -ge 1 ] && [ "${#failed_files[@]}" -le 3 ] && [[ ! " ${failed_files[*]} " =~ " (no file) " ]]; then
  printf '\n== rerun, alone, of the %d failed file(s): %s\n' "${#failed_files[@]}" "${failed_files[*]}"
  SUANLI_TEST_SUMMARY="$work/summary-rerun.json" timeout --kill-after=30 "${SUANLI_LANE_TIMEOUT_S:-2400}" npx hardhat test mocha --no-compile "${failed_files[@]}" </dev/null >"$work/lane-rerun.log" 2>&1
  rerun_rc=$?
  cat "$work/lane-rerun.log"
  if [ "$rerun_rc" -eq 0 ] && [ -s "$work/summary-rerun.json" ]; then
    rerun="$work/summary-rerun.json"
    status=0
    printf '\n== flaky: these failed in their lane and passed alone; fix their cause\n%s\n' "${failed_files[*]}"
    { printf '\n== flaky (failed in a lane, passed when run again alone: fix the cause)'; cat "$failures"; } >"$failures.flaky"
    mv "$failures.flaky" "$failures"
  else
    printf '\n== the rerun failed too (exit code %d): these are failures, not flakes\n' "$rerun_rc"
  fi
fi
if [ -n "${SUANLI_TEST_FAILURES:-}" ]; then cp "$failures" "$SUANLI_TEST_FAILURES"; fi

if [ -n "${SUANLI_TEST_SUMMARY:-}" ] && [ -s "$work/summary-0.json" ] && [ -s "$work/summary-1.json" ] && [ -s "$work/summary-2.json" ]; then
  # With a green rerun, the rerun files' counts replace their lanes' counts (their passes then; no failures).
  node -e '
    const fs = require("fs");
    const parts = process.argv.slice(1, 4).map((f) => JSON.parse(fs.readFileSync(f, "utf8")));
    const rerun = process.argv[5] ? JSON.parse(fs.readFileSync(process.argv[5], "utf8")) : undefined;
    const sum = (k) => parts.reduce((total, part) => total + (part[k] ?? 0), 0);
    const out = { passes: sum("passes"), failures: sum("failures"), pending: sum("pending"), tests: sum("tests"), files: Object.assign({}, ...parts.map((part) => part.files)) };
    if (rerun) {
      const again = new Set(parts.flatMap((part) => part.failedFiles ?? []));
      const before = parts.reduce((total, part) => total + Object.entries(part.passesByFile ?? {}).reduce((t, [f, n]) => t + (again.has(f) ? n : 0), 0), 0);
      out.passes = out.passes - before + rerun.passes;
      out.failures = rerun.failures;
      out.flaky = [...again];
    }
    fs.writeFileSync(process.argv[4], JSON.stringify(out));
    console.log(`\nall lanes: ${out.passes} passed, ${out.failures} failed, ${out.pending} pending${out.flaky ? ` (flaky, passed alone: ${out.flaky.join(", ")})` : ""}`);
  ' "$work/summary-0.json" "$work/summary-1.json" "$work/summary-2.json" "$SUANLI_TEST_SUMMARY" "$rerun" || status=1
fi
exit "$status"

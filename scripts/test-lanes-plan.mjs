// Splits the test files over CI's lanes (scripts/test-lanes.sh) so that they end together.
//   node scripts/test-lanes-plan.mjs LANES FILE...
// prints one line per file, "<lane>\t<file>", in the order each lane runs them.
//
// Each file's wall time comes from test/lane-times.json (seconds, measured by a whole CI run:
// scripts/test-lanes.sh writes a fresh table to $SUANLI_LANE_TIMES_OUT); a file it does not list
// counts as the table's default for its folder. Files are dealt longest first to the lane that
// ends soonest (longest-processing-time scheduling), with two fixed rules:
//   - the README test (test/e2e/readme.test.ts) runs first in lane 0: it uses the README's fixed
//     ports and scratch paths in the repository root, so it is never two at once;
//   - the files that drive Podman run one after another in one lane: they share the container
//     storage (images, the registry's pulls, the label-based clean-up), so they are dealt as one.
import { readFileSync } from "node:fs";

const README = "test/e2e/readme.test.ts";
/** The files that start Podman containers (they share the container storage). */
const PODMAN = new Set([
  "test/node/provider-container.test.ts",
  "test/node/provider-container-bounds.test.ts",
  "test/node/provider-container-inputs.test.ts",
  "test/node/provider-container-storage.test.ts",
  "test/node/provider-images.test.ts",
  "test/node/provider-task-user.test.ts",
  "test/e2e/container-images.test.ts",
  "test/e2e/container-tasks.test.ts",
  "test/e2e/output-snapshot-race.test.ts",
]);

const [lanesArg, ...files] = process.argv.slice(2);
const lanes = Number(lanesArg);
if (!Number.isInteger(lanes) || lanes < 2 || lanes > 8) {
  console.error(`test-lanes-plan: LANES must be an integer from 2 to 8, got ${JSON.stringify(lanesArg)}`);
  process.exit(2);
}
const table = JSON.parse(readFileSync(new URL("../test/lane-times.json", import.meta.url), "utf8"));
const timeOf = (file) => table.files[file] ?? (file.startsWith("test/e2e/") ? table.defaults.e2e : table.defaults.other);

const units = [];
const podman = files.filter((file) => PODMAN.has(file));
if (podman.length > 0) units.push({ files: podman, seconds: podman.reduce((sum, file) => sum + timeOf(file), 0) });
for (const file of files) if (file !== README && !PODMAN.has(file)) units.push({ files: [file], seconds: timeOf(file) });
units.sort((a, b) => b.seconds - a.seconds || a.files[0].localeCompare(b.files[0]));

const plan = Array.from({ length: lanes }, () => ({ seconds: 0, files: [] }));
if (files.includes(README)) {
  plan[0].files.push(README);
  plan[0].seconds += timeOf(README);
}
for (const unit of units) {
  const lane = plan.reduce((best, candidate) => (candidate.seconds < best.seconds ? candidate : best));
  lane.files.push(...unit.files);
  lane.seconds += unit.seconds;
}
plan.forEach((lane, index) => {
  for (const file of lane.files) console.log(`${index}\t${file}`);
  console.error(`lane ${index}: ${lane.files.length} files, about ${Math.round(lane.seconds)} s by test/lane-times.json`);
});

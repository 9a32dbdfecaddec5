/**
 * CI's lane plan (scripts/test-lanes-plan.mjs): every test file runs exactly once, the README test
 * first in lane 0, the Podman tests together in one lane, and the lanes' planned times within the
 * longest file of each other.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readFile } from "node:fs/promises";
import { promisify } from "node:util";

const run = promisify(execFile);
const FILES = [
  "test/contracts/LeaseMarket.property.test.ts",
  "test/e2e/chaos-soak.test.ts",
  "test/e2e/container-tasks.test.ts",
  "test/e2e/readme.test.ts",
  "test/e2e/resume-checkpoint.test.ts",
  "test/node/provider-container.test.ts",
  "test/node/provider-images.test.ts",
  "test/node/not-in-the-table.test.ts",
  "test/sdk/package.test.ts",
];

async function plan(lanes: string, files: string[]): Promise<Map<number, string[]>> {
  const { stdout } = await run(process.execPath, ["scripts/test-lanes-plan.mjs", lanes, ...files]);
  const byLane = new Map<number, string[]>();
  for (const line of stdout.trim().split("\n")) {
    const [lane = "", file = ""] = line.split("\t");
    byLane.set(Number(lane), [...(byLane.get(Number(lane)) ?? []), file]);
  }
  return byLane;
}

describe("CI's lane plan (scripts/test-lanes-plan.mjs)", function () {
  this.timeout(30_000);

  it("runs every file once, the README first in lane 0, the Podman files in one lane, the lanes balanced by test/lane-times.json", async () => {
    const byLane = await plan("3", FILES);
    assert.equal(byLane.size, 3);
    assert.deepEqual([...byLane.values()].flat().sort(), [...FILES].sort());
    assert.equal(byLane.get(0)![0], "test/e2e/readme.test.ts");
    const podman = ["test/e2e/container-tasks.test.ts", "test/node/provider-container.test.ts", "test/node/provider-images.test.ts"];
    const podmanLanes = new Set([...byLane.entries()].filter(([, files]) => files.some((file) => podman.includes(file))).map(([lane]) => lane));
    assert.equal(podmanLanes.size, 1, `the Podman files share one lane: ${JSON.stringify([...byLane])}`);
    const table = JSON.parse(await readFile("test/lane-times.json", "utf8")) as { defaults: { e2e: number; other: number }; files: Record<string, number> };
    const seconds = (file: string) => table.files[file] ?? (file.startsWith("test/e2e/") ? table.defaults.e2e : table.defaults.other);
    const totals = [...byLane.values()].map((files) => files.reduce((sum, file) => sum + seconds(file), 0));
    const longestUnit = Math.max(
      seconds("test/e2e/readme.test.ts"),
      podman.reduce((sum, file) => sum + seconds(file), 0),
      ...FILES.map(seconds),
    );
    assert.ok(Math.max(...totals) - Math.min(...totals) <= longestUnit, `lanes balanced: ${totals.join(", ")} s`);
  });

  it("refuses a lane count outside 2 to 8, saying what it accepts", async () => {
    await assert.rejects(plan("1", FILES), (error: { stderr?: string }) => {
      assert.match(error.stderr ?? "", /LANES must be an integer from 2 to 8, got "1"/);
      return true;
    });
  });
});

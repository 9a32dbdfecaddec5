/**
 * No import cycle in node/, sdk/ or common/ (issue 17): a module graph without cycles loads in
 * one order, and its layers can be read (and split) one at a time.
 */
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { importCycles, importGraph } from "./support/import-graph.js";

describe("import cycles", () => {
  it("node/, sdk/ and common/ import each other without a cycle", () => {
    const graph = importGraph(["node", "sdk", "common"]);
    assert.ok(graph.size > 100, `read the sources (${graph.size} files)`);
    const cycles = importCycles(graph).map((cycle) => cycle.map((file) => path.relative(process.cwd(), file)));
    assert.deepEqual(cycles, [], `import cycles:\n${cycles.map((cycle) => `  ${cycle.join(" <-> ")}`).join("\n")}`);
  });

  it("the check finds a cycle through type-only imports and re-exports", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "suanli-cycles-"));
    try {
      await writeFile(path.join(dir, "a.ts"), 'import type { B } from "./b.js";\nexport type A = B;\n');
      await writeFile(path.join(dir, "b.ts"), 'export { c as B } from "./c.js";\n');
      await writeFile(path.join(dir, "c.ts"), 'import type { A } from "./a.js";\nexport const c = 1 as unknown as A;\n');
      await writeFile(path.join(dir, "d.ts"), 'import { c } from "./c.js";\nexport const d = c;\n');
      const cycles = importCycles(importGraph([dir])).map((cycle) => cycle.map((file) => path.basename(file)));
      assert.deepEqual(cycles, [["a.ts", "b.ts", "c.ts"]]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

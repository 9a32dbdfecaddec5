/**
 * `npm run bench -- <suite> [--json] [suite options]`. Each suite is bench/<suite>.ts exporting
 * `run(args: string[]): Promise<Record<string, unknown>>`; it prints its own human table and
 * returns a summary. With --json the summary is printed as one JSON object on the last line.
 */
import { readdir } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { stringifyPlain } from "../common/json.js";

const here = path.dirname(fileURLToPath(import.meta.url));
const suites = (await readdir(here)).filter((f) => f.endsWith(".ts") && f !== "run.ts" && !f.startsWith("_")).map((f) => f.slice(0, -3));

const [suite, ...rest] = process.argv.slice(2);
if (!suite || !suites.includes(suite)) {
  console.error(`usage: npm run bench -- <suite> [--json]\nsuites: ${suites.join(", ") || "(none yet)"}`);
  process.exit(2);
}
const json = rest.includes("--json");
const mod = (await import(path.join(here, `${suite}.ts`))) as { run(args: string[]): Promise<Record<string, unknown>> };
const summary = await mod.run(rest.filter((a) => a !== "--json"));
if (json) process.stdout.write(`${stringifyPlain({ suite, ...summary })}\n`);
process.exit(0);

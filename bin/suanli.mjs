#!/usr/bin/env node
// The `suanli` command. Runs the TypeScript sources through tsx. Suanli needs Node >= 22.13;
// when started by an older Node (a machine whose system Node is 20), it re-runs itself with the
// Node 22 binary that the `node` npm package installed next to it.
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const [major, minor] = process.versions.node.split(".").map(Number);
if (major < 22 || (major === 22 && minor < 13)) {
  const bundled = join(here, "..", "node_modules", "node", "bin", "node");
  if (!existsSync(bundled) || process.env.SUANLI_REEXEC) {
    console.error(`suanli needs Node.js >= 22.13 (this is ${process.versions.node}). Run \`npm ci\` in the package, or install Node 22.`);
    process.exit(1);
  }
  const child = spawnSync(bundled, [fileURLToPath(import.meta.url), ...process.argv.slice(2)], {
    stdio: "inherit",
    env: { ...process.env, SUANLI_REEXEC: "1" },
  });
  process.exit(child.status ?? 1);
}

const { register } = await import("tsx/esm/api");
register();
await import(join(here, "..", "node", "cli", "main.ts"));

#!/usr/bin/env node
// The `suanli` command. Runs the prebuilt bundle of the TypeScript sources when it is current
// (scripts/build-cli.ts), and otherwise the sources themselves through tsx. Suanli needs Node >= 22.13;
// when started by an older Node (a machine whose system Node is 20), it re-runs itself with the
// Node 22 binary that the `node` npm package installed next to it.
import { spawn } from "node:child_process";
import module from "node:module";
import { existsSync, readFileSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const bundlePath = join(here, "..", "build", "cli", "suanli.mjs");
const [major, minor] = process.versions.node.split(".").map(Number);
if (major < 22 || (major === 22 && minor < 13)) {
  const bundled = join(here, "..", "node_modules", "node", "bin", "node");
  if (!existsSync(bundled) || process.env.SUANLI_REEXEC) {
    console.error(`suanli needs Node.js >= 22.13 (this is ${process.versions.node}). Run \`npm ci\` in the package, or install Node 22.`);
    process.exit(1);
  }
  const child = spawn(bundled, [fileURLToPath(import.meta.url), ...process.argv.slice(2)], {
    stdio: "inherit",
    env: { ...process.env, SUANLI_REEXEC: "1" },
  });
  // A signal meant for `suanli` (SIGTERM from a supervisor, npm or npx passing one on) goes to the
  // Node 22 process that does the work; this one only waits and exits the way the child did.
  // Ctrl-C already reaches both (the terminal signals the whole process group): passing SIGINT on
  // as well would be a second Ctrl-C, which skips the node's clean stop.
  process.on("SIGINT", () => {});
  for (const signal of ["SIGTERM", "SIGHUP"]) {
    process.on(signal, () => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    });
  }
  child.on("error", (error) => {
    console.error(`suanli: cannot start ${bundled}: ${error.message}`);
    process.exit(1);
  });
  child.on("exit", (code, signal) => {
    if (signal) {
      process.removeAllListeners(signal);
      process.kill(process.pid, signal);
    } else process.exit(code ?? 1);
  });
} else if (freshBundle()) {
  // The prebuilt bundle (npm run build:cli) while every source it holds is unchanged: a command
  // starts without compiling TypeScript. SUANLI_FROM_SOURCE=1 always runs the sources.
  // Source maps are not on from the start: Node would parse the 6 MB map at the first stack trace
  // any library builds, about 1 s of a chain read's start. The CLI turns them on before it prints
  // an unexpected error's stack (node/cli/main.ts), which then names the TypeScript sources.
  // V8's code cache on disk (Node >= 22.1): the 6 MB bundle is parsed and compiled once, later
  // commands load the cached code. It lives next to the bundle, in a folder of the user who built
  // it, not in the shared /tmp/node-compile-cache (another local user could create that first and
  // feed V8 their cache). Where this user cannot write it, Node returns a failed status, silently:
  // no cache, nothing printed. NODE_COMPILE_CACHE, set, still chooses the folder (Node enables it
  // at start); NODE_DISABLE_COMPILE_CACHE=1 turns it off.
  module.enableCompileCache?.(join(here, "..", "build", "cli", ".compile-cache"));
  await import(pathToFileURL(bundlePath).href);
} else {
  const { register } = await import("tsx/esm/api");
  register();
  await import(join(here, "..", "node", "cli", "main.ts"));
}

/** Whether build/cli/suanli.mjs exists and every source file in it has the size and mtime it had when built. */
function freshBundle() {
  if (process.env.SUANLI_FROM_SOURCE === "1") return false;
  try {
    const { inputs } = JSON.parse(readFileSync(join(here, "..", "build", "cli", "inputs.json"), "utf8"));
    if (!existsSync(bundlePath)) return false;
    for (const [file, built] of Object.entries(inputs)) {
      const now = statSync(join(here, "..", file));
      if (now.size !== built.size || now.mtimeMs !== built.mtimeMs) return false;
    }
    return true;
  } catch {
    return false;
  }
}

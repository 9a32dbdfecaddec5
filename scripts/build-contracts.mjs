#!/usr/bin/env node
// `npm run devnet`, `demo`, `deploy` and `bench` build the contracts first. Hardhat's quiet build
// prints nothing, and a first build (a fresh clone: no artifacts/build-info yet) compiles every
// contract with solc-js for minutes on a small machine, which read as a hang (issue #40 item 7).
// A first build says so in one line before it starts and how long it took after; later starts,
// which compile nothing or only what changed, stay quiet. Exit code: Hardhat's.
import { existsSync, readdirSync } from "node:fs";
import { spawnSync } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const buildInfo = path.join(root, "artifacts", "build-info");
const first = !existsSync(buildInfo) || readdirSync(buildInfo).length === 0;
const started = Date.now();
if (first) process.stderr.write("Compiling the contracts (first build only: about 1 to 3 minutes on 2 cores)...\n");
const hardhat = path.join(root, "node_modules", ".bin", "hardhat");
const result = spawnSync(hardhat, ["build", "--quiet"], { cwd: root, stdio: "inherit" });
const code = result.status ?? 1;
if (first && code === 0) process.stderr.write(`Compiled the contracts in ${Math.round((Date.now() - started) / 1000)} s.\n`);
process.exit(code);

/**
 * The contracts' build as a new user meets it (issue #40 item 7): solc's transient-storage warning
 * from OpenZeppelin's guard is dropped by its code (and nothing else is), and a first build says it
 * compiles and how long it took instead of sitting silent for minutes.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { CompilerOutput, CompilerOutputError } from "hardhat/types/solidity";
import config from "../hardhat.config.js";
import quiet, { TRANSIENT_STORAGE_WARNING, withoutTransientStorageWarning } from "../scripts/hardhat-quiet-warnings.ts";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

function diagnostic(severity: CompilerOutputError["severity"], errorCode: string, message: string): CompilerOutputError {
  return { type: severity === "error" ? "TypeError" : "Warning", component: "general", severity, errorCode, message, formattedMessage: `${message}\n` };
}

describe("contracts build: solc's noise and the first build", () => {
  it("drops warning 2394 only: other warnings, and an error that shares the code, still print", () => {
    const transient = diagnostic("warning", TRANSIENT_STORAGE_WARNING, "Transient storage as defined by EIP-1153 can break the composability");
    const unused = diagnostic("warning", "2072", "Unused local variable.");
    const error = diagnostic("error", TRANSIENT_STORAGE_WARNING, "an error is never dropped");
    const output: CompilerOutput = { sources: {}, contracts: {}, errors: [transient, unused, transient, error] };
    assert.deepEqual(withoutTransientStorageWarning(output).errors, [unused, error]);
    const clean: CompilerOutput = { sources: {}, contracts: {}, errors: [unused] };
    assert.equal(withoutTransientStorageWarning(clean), clean);
    assert.equal(withoutTransientStorageWarning({ sources: {}, contracts: {} }).errors, undefined);
  });

  it("the Hardhat config loads the plugin that drops it", () => {
    assert.ok(config.plugins?.includes(quiet), "hardhat.config.ts lists scripts/hardhat-quiet-warnings.ts among its plugins");
  });

  it("the Hardhat config loads in plain Node without tsx, as `suanli devnet` loads it from the built CLI", () => {
    // The built CLI imports "hardhat" in-process; Node strips the config's types itself and resolves
    // its imports as written (a `.js` name for a `.ts` file is not found there: the last CI's failure).
    const env = { ...process.env };
    delete env.NODE_OPTIONS;
    const probe = spawnSync(process.execPath, ["--input-type=module", "-e", 'const { network } = await import("hardhat"); console.log(typeof network.connect);'], {
      cwd: ROOT,
      encoding: "utf8",
      env,
      timeout: 60_000,
    });
    assert.equal(probe.status, 0, probe.stderr);
    assert.equal(probe.stdout.trim(), "function");
  });

  it("a first build says it compiles and how long it took; a later one prints nothing; Hardhat's exit code is kept", () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "suanli-build-"));
    try {
      // The script's own layout (scripts/, node_modules/.bin/hardhat, artifacts/) with a stand-in for
      // Hardhat that records its arguments and exits with the code the test asks for.
      mkdirSync(path.join(dir, "scripts"));
      mkdirSync(path.join(dir, "node_modules", ".bin"), { recursive: true });
      copyFileSync(path.join(ROOT, "scripts", "build-contracts.mjs"), path.join(dir, "scripts", "build-contracts.mjs"));
      const hardhat = path.join(dir, "node_modules", ".bin", "hardhat");
      writeFileSync(hardhat, `#!/bin/sh\necho "$@" > "${dir}/args"\nexit "\${FAKE_EXIT:-0}"\n`);
      chmodSync(hardhat, 0o755);
      const run = (exit = 0) =>
        spawnSync(process.execPath, [path.join(dir, "scripts", "build-contracts.mjs")], { encoding: "utf8", env: { ...process.env, FAKE_EXIT: String(exit) } });

      const first = run();
      assert.equal(first.status, 0, first.stderr);
      assert.equal(readFileSync(path.join(dir, "args"), "utf8"), "build --quiet\n");
      assert.match(first.stderr, /^Compiling the contracts \(first build only: about 1 to 3 minutes on 2 cores\)\.\.\.\nCompiled the contracts in \d+ s\.\n$/);
      const failed = run(3);
      assert.equal(failed.status, 3);
      assert.doesNotMatch(failed.stderr, /Compiled the contracts/);

      mkdirSync(path.join(dir, "artifacts", "build-info"), { recursive: true });
      writeFileSync(path.join(dir, "artifacts", "build-info", "solc.json"), "{}");
      const later = run();
      assert.equal(later.status, 0);
      assert.equal(later.stderr, "");
      assert.equal(later.stdout, "");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

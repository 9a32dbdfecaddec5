/**
 * The test runner loads every file under test/, fixtures included. A fixture that acts when it is
 * imported (a top-level await, a read of stdin, a server) either crashes the runner
 * (`ERR_REQUIRE_ASYNC_MODULE` for a .ts with top-level await) or holds it open forever (a .mjs
 * waiting for stdin to end): both once kept a CI lane alive until the machine's hard limit. Each
 * fixture program does nothing unless it is the process's main script: imported with stdin left
 * open, it must print nothing and let the process end by itself.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { readdirSync, statSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

function fixturePrograms(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const file = path.join(dir, name);
    if (statSync(file).isDirectory()) return fixturePrograms(file);
    return /\.(m|c)?(t|j)s$/.test(name) && file.split(path.sep).includes("fixtures") ? [file] : [];
  });
}

/** Imports `file` in a fresh Node process whose stdin stays open; resolves once it exits or after `ms`. */
function importAlone(file: string, ms: number): Promise<{ exited: boolean; code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", `await import(${JSON.stringify(pathToFileURL(file).href)});`], {
      stdio: ["pipe", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString("utf8")));
    child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString("utf8")));
    child.stdin.on("error", () => undefined);
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      resolve({ exited: false, code: null, output });
    }, ms);
    child.once("error", reject);
    child.once("close", (code) => {
      clearTimeout(timer);
      resolve({ exited: true, code, output });
    });
  });
}

describe("test fixtures are inert when the test runner loads them", function () {
  this.timeout(60_000);
  const files = fixturePrograms("test");

  it("finds the fixture programs (the check below is not vacuous)", () => {
    assert.ok(
      files.some((file) => file.endsWith("faulty-runner.mjs")),
      `fixture programs found: ${files.join(", ")}`,
    );
    assert.ok(
      files.some((file) => file.endsWith("own-address-fetch.ts")),
      `fixture programs found: ${files.join(", ")}`,
    );
  });

  it("imports each one with stdin open: it prints nothing and its process ends by itself", async () => {
    const results = await Promise.all(files.map(async (file) => ({ file, ...(await importAlone(file, 20_000)) })));
    const busy = results.filter((result) => !result.exited || result.code !== 0 || result.output.trim() !== "");
    assert.deepEqual(
      busy.map(
        ({ file, exited, code, output }) =>
          `${file}: ${exited ? `exit ${code}` : "still running after 20 s"}${output.trim() ? `, printed ${JSON.stringify(output.trim().slice(0, 200))}` : ""}`,
      ),
      [],
    );
  });
});

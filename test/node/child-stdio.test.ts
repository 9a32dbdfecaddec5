/**
 * Issue #33 item 12: a write to a child process that has exited (EPIPE) must never end the node.
 * Every child the node starts goes through node/process/child.ts, which gives each stdio pipe an
 * error listener; the attack runs in its own Node process (an uncaught EPIPE would end it).
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";

const FIXTURE = path.resolve("test/node/fixtures/dead-child-pipes.ts");

function runFixture(mode: "bare" | "guarded"): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", FIXTURE, mode], { stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString("utf8")));
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")));
    child.once("error", reject);
    child.once("close", (code) => resolve({ code, stdout, stderr }));
  });
}

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const file = path.join(dir, name);
    if (statSync(file).isDirectory()) return sources(file);
    return file.endsWith(".ts") ? [file] : [];
  });
}

describe("child process pipes (EPIPE)", function () {
  this.timeout(60_000);

  it("a bare spawn whose child exits before reading its input ends the Node process (the failure mode is real)", async () => {
    const result = await runFixture("bare");
    assert.notEqual(result.code, 0);
    assert.match(result.stderr, /EPIPE/);
    assert.ok(!result.stdout.includes("survived"));
  });

  it("through the node's helpers the same writes are errors on the pipe, and the process lives on", async () => {
    const result = await runFixture("guarded");
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stdout, /^runEngine exit 3$/m, "the engine call still reports the child's own exit code");
    assert.match(result.stdout, /^late write errors 0:EPIPE$/m, "the late write failed on stdin (fd 0) and was handed to the handler");
    assert.match(result.stdout, /^survived$/m);
  });

  it("no module of node/, sdk/ or common/ starts a child except through node/process/child.ts", () => {
    const offenders = ["node", "sdk", "common"]
      .flatMap((dir) => sources(dir))
      .filter((file) => path.relative(".", file) !== path.join("node", "process", "child.ts"))
      .filter((file) => /^import (?!type )[^;]*from "(node:)?child_process"/m.test(readFileSync(file, "utf8")));
    assert.deepEqual(offenders, []);
  });
});

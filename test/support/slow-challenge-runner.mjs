// The reference runner program behind a slow compute: every challenge reaches it only after the
// delay its first argument names (ms), so a challenge stays in flight long enough for a chaos test
// to kill the attestor that sent it. Everything else passes through in order. Run with
// `node slow-challenge-runner.mjs <ms>`, or `node slow-challenge-runner.mjs <file>` for the delay
// the file holds when each challenge comes (a test shortens it once the kill is done); the
// reference runner runs as its child through tsx.
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath, pathToFileURL } from "node:url";

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const arg = process.argv[2] ?? "0";
  const delayMs = () => Number(/^\d+$/.test(arg) ? arg : readFileSync(arg, "utf8").trim());
  const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
  const child = spawn(process.execPath, ["--import", "tsx", path.join(root, "node/attest/runner/reference-runner.ts")], { cwd: root, stdio: ["pipe", "inherit", "inherit"] });
  child.once("exit", (code) => process.exit(code ?? 1));
  let queue = Promise.resolve();
  for await (const line of createInterface({ input: process.stdin })) {
    const slow = line.includes('"type":"challenge"');
    queue = queue.then(async () => {
      if (slow) await new Promise((resolve) => setTimeout(resolve, delayMs()));
      child.stdin.write(`${line}\n`);
    });
  }
  await queue;
  child.stdin.end();
}

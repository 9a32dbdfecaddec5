// The reference runner program behind a slow compute: every challenge reaches it only after the
// delay its first argument names (ms), so a challenge stays in flight long enough for a chaos test
// to kill the attestor that sent it. Everything else passes through in order. Run with
// `node slow-challenge-runner.mjs <ms>`, or `node slow-challenge-runner.mjs <file>` where the
// file's first line is the delay and each further line a challenge id to let through at once; it
// is read again while a challenge waits, so a test can release the challenges it does not mean to
// kill, and shorten the delay once the kill is done. The reference runner runs as its child
// through tsx.
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath, pathToFileURL } from "node:url";

/** How often a waiting challenge looks at the file again. */
const POLL_MS = 25;

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const arg = process.argv[2] ?? "0";
  const control = () => {
    if (/^\d+$/.test(arg)) return { delayMs: Number(arg), released: [] };
    const [delay = "", ...released] = readFileSync(arg, "utf8")
      .split("\n")
      .map((line) => line.trim().toLowerCase());
    // A file caught while it is rewritten (empty): held on.
    return { delayMs: delay === "" ? Infinity : Number(delay), released };
  };
  const hold = async (id) => {
    const started = Date.now();
    for (;;) {
      const { delayMs, released } = control();
      if (Date.now() - started >= delayMs || released.includes(id)) return;
      await new Promise((resolve) => setTimeout(resolve, Math.max(1, Math.min(POLL_MS, delayMs - (Date.now() - started)))));
    }
  };
  const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
  const child = spawn(process.execPath, ["--import", "tsx", path.join(root, "node/attest/runner/reference-runner.ts")], { cwd: root, stdio: ["pipe", "inherit", "inherit"] });
  child.once("exit", (code) => process.exit(code ?? 1));
  let queue = Promise.resolve();
  for await (const line of createInterface({ input: process.stdin })) {
    const slow = line.includes('"type":"challenge"');
    queue = queue.then(async () => {
      if (slow) await hold(String(JSON.parse(line).id ?? "").toLowerCase());
      child.stdin.write(`${line}\n`);
    });
  }
  await queue;
  child.stdin.end();
}

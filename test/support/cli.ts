import { spawn } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
export const SUANLI_BIN = path.join(root, "bin/suanli.mjs");

export type CliResult = { code: number | null; stdout: string; stderr: string };

/** Runs the real `suanli` command as a child process and collects its output. */
export function runCli(args: string[], options: { env?: Record<string, string>; timeoutMs?: number } = {}): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [SUANLI_BIN, ...args], {
      cwd: root,
      env: { ...process.env, SUANLI_KEY: "", ...options.env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    const timer = setTimeout(() => child.kill("SIGKILL"), options.timeoutMs ?? 60_000);
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** The JSON object a `--json` command printed on its last stdout line. */
export function lastJson<T = Record<string, unknown>>(stdout: string): T {
  const lines = stdout.trim().split("\n");
  return JSON.parse(lines[lines.length - 1]) as T;
}

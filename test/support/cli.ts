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
  return JSON.parse(lines[lines.length - 1]!) as T;
}

export type RunningCli = {
  pid: number;
  /** The first JSON object the command printed on a stdout line. */
  ready: Promise<Record<string, unknown>>;
  /** Everything printed to stderr so far. */
  stderr(): string;
  /** Sends `signal` to the process and resolves with its exit code (SIGKILL after `graceMs`). */
  stop(signal?: NodeJS.Signals, graceMs?: number): Promise<number | null>;
};

/**
 * Starts a long-running `suanli` command (a node, the devnet) as a child process. `ready` resolves
 * with the first JSON line it prints (commands print their description once running, with --json)
 * and rejects if the process exits first or `timeoutMs` passes.
 */
export function startCli(args: string[], options: { env?: Record<string, string>; timeoutMs?: number } = {}): RunningCli {
  const child = spawn(process.execPath, [SUANLI_BIN, ...args], {
    cwd: root,
    env: { ...process.env, SUANLI_KEY: "", ...options.env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  const exited = new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)));
  const ready = new Promise<Record<string, unknown>>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`suanli ${args.join(" ")}: no JSON line within ${options.timeoutMs ?? 60_000} ms; stderr: ${stderr}`)),
      options.timeoutMs ?? 60_000,
    );
    child.stdout.on("data", (chunk: Buffer) => {
      stdout += chunk.toString();
      for (const line of stdout.split("\n").slice(0, -1)) {
        if (!line.startsWith("{")) continue;
        clearTimeout(timer);
        resolve(JSON.parse(line) as Record<string, unknown>);
        return;
      }
    });
    exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`suanli ${args.join(" ")} exited with ${code} before it was ready; stderr: ${stderr}`));
    }, reject);
  });
  ready.catch(() => undefined);
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  return {
    pid: child.pid!,
    ready,
    stderr: () => stderr,
    async stop(signal = "SIGTERM", graceMs = 20_000) {
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
      child.kill(signal);
      const timer = setTimeout(() => child.kill("SIGKILL"), graceMs);
      const code = await exited;
      clearTimeout(timer);
      return code;
    },
  };
}

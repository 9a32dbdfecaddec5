/**
 * Child processes of the demo: real `suanli` nodes started from their config files, with their
 * output in log files. Each is stopped by its own PID (SIGTERM, then SIGKILL after a grace).
 */
import type { ChildProcess } from "node:child_process";
import { spawnChild } from "../process/child.js";
import { createWriteStream } from "node:fs";
import { createServer } from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";

const BIN = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../bin/suanli.mjs");

export type NodeProcess = { name: string; child: ChildProcess; logFile: string; stop(): Promise<void>; exited: Promise<number | null> };

/** Starts `suanli <args...>` as a child process; its stdout and stderr go to `logFile`. */
export function startNodeProcess(name: string, args: string[], logFile: string, env: Record<string, string> = {}): NodeProcess {
  const log = createWriteStream(logFile, { flags: "a" });
  const child = spawnChild(process.execPath, [BIN, ...args], { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
  child.stdout!.pipe(log);
  child.stderr!.pipe(log);
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  return {
    name,
    child,
    logFile,
    exited,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 8_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** A TCP port free on 127.0.0.1 right now. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

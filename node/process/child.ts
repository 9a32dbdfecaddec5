/**
 * The one place the node starts child processes. Every child's stdio pipes get an `error`
 * listener here: a pipe to a child that has exited fails with EPIPE (a write to its stdin) or
 * ECONNRESET, and Node throws an `error` event nobody listens to as an uncaught exception, which
 * ends the whole node (this took a provider down once: issue #33, item 12). The child's end is
 * reported by its own `exit` / `close` events, so losing a write to a dead child loses nothing
 * the caller is not told anyway.
 *
 * test/node/child-stdio.test.ts writes to children that have exited through each path, and checks
 * that no other module imports node:child_process.
 */
import { execFile, spawn, type ChildProcess, type ExecFileException, type ExecFileOptions, type SpawnOptions } from "node:child_process";
import type { Readable, Writable } from "node:stream";

/** Called with a stdio stream's error (EPIPE, ECONNRESET, ...) instead of crashing the node. */
export type StdioErrorHandler = (error: NodeJS.ErrnoException, fd: number) => void;

/**
 * Adds an `error` listener to every stdio stream of `child` (stdin, stdout, stderr and extra
 * pipes), so a broken pipe is an event, never an uncaught exception. Returns the child.
 */
export function guardStdio<T extends ChildProcess>(child: T, onError?: StdioErrorHandler): T {
  child.stdio.forEach((stream, fd) => {
    if (!stream) return;
    (stream as Readable | Writable).on("error", (error: NodeJS.ErrnoException) => onError?.(error, fd));
  });
  return child;
}

/** `spawn` with guarded stdio (see the header). */
export function spawnChild(command: string, args: readonly string[], options: SpawnOptions, onError?: StdioErrorHandler): ChildProcess {
  return guardStdio(spawn(command, args, options), onError);
}

export type ExecTextCallback = (error: ExecFileException | null, stdout: string, stderr: string) => void;

/** `execFile` with text output and guarded stdio (see the header). */
export function execFileText(file: string, args: readonly string[], options: Omit<ExecFileOptions, "encoding">, callback: ExecTextCallback): ChildProcess {
  return guardStdio(execFile(file, args, { ...options, encoding: "utf8" }, (error, stdout, stderr) => callback(error, String(stdout), String(stderr))));
}

export type ExecTextResult = { stdout: string; stderr: string };

/** `execFileText` as a promise: rejects with the ExecFileException (its `stdout`/`stderr` attached) on a failure. */
export function execFileTextAsync(file: string, args: readonly string[], options: Omit<ExecFileOptions, "encoding"> = {}): Promise<ExecTextResult> {
  return new Promise((resolve, reject) => {
    execFileText(file, args, options, (error, stdout, stderr) => {
      if (error) reject(Object.assign(error, { stdout, stderr }));
      else resolve({ stdout, stderr });
    });
  });
}

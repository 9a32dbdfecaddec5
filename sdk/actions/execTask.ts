import { EXEC_PROTOCOL } from "../../common/p2p/protocols.js";
import { parseJsonFrame, jsonFrame } from "../../common/p2p/streams.js";
import { execFrameSchema, execStartedSchema, TASK_IO_CONTROL_MAX_BYTES } from "../../common/protocols/task-io.js";
import { InvalidInputError } from "../../common/errors.js";
import type { SuanliContext } from "../internal/context.js";
import { openTaskStream } from "../internal/task-io.js";
import { taskAttempt } from "./downloadOutput.js";
import { runDetached } from "../../common/detached.js";

/** Output kept in the result per stream; more still reaches `onOutput`. */
const KEPT_OUTPUT_BYTES = 1024 * 1024;

/**
 * Options of `client.exec`.
 *
 * @example
 * import { createClient, type ExecTaskParameters } from "suanli/sdk";
 * const options: ExecTaskParameters = {
 *   timeoutSeconds: 60,
 *   stdin: "print(1 + 1)\n",
 *   onOutput: (stream, chunk) => (stream === "stdout" ? process.stdout : process.stderr).write(chunk),
 * };
 * await client.exec(taskId, ["python3"], options);
 */
export type ExecTaskParameters = {
  /** Seconds the command may run (default 300; the provider caps it). */
  timeoutSeconds?: number;
  /** Bytes for the command's standard input (then it is closed); an async iterable streams it. Default: none. */
  stdin?: string | Uint8Array | AsyncIterable<Uint8Array>;
  /** Each chunk of output as it arrives. */
  onOutput?: (stream: "stdout" | "stderr", chunk: Uint8Array) => void;
  /** For a group task: which machine, by rank (default 0). */
  rank?: number;
  /** Aborting it kills the command and ends the call. */
  signal?: AbortSignal;
  /**
   * Run the command on a pseudo-terminal of `rows` × `cols` (an interactive shell: `npx suanli exec
   * -t`). Its output all arrives as `stdout`; `stdin` carries the keys typed (Ctrl-C as byte 3).
   * `onResize` is called once with a function that resizes the terminal (call it on every
   * resize of yours). `term`: the TERM the command sees (default xterm-256color).
   */
  tty?: { rows: number; cols: number; term?: string; onResize?: (resize: (size: { rows: number; cols: number }) => void) => void };
};

/**
 * How the command ended and what it printed (each stream up to 1 MiB; use `onOutput` for more).
 *
 * @example
 * import { createClient, type ExecTaskReturnType } from "suanli/sdk";
 * const result: ExecTaskReturnType = await client.exec(taskId, "ls -la");
 * console.log(result.exitCode, result.stdout, result.stderr, result.timedOut);
 */
export type ExecTaskReturnType = { exitCode: number | null; signal: string | null; timedOut: boolean; stdout: string; stderr: string };

/**
 * Runs a command inside the running task's environment on its provider (the same sandbox or
 * container, user, limits, variables and working directory), streaming its output, and returns
 * its exit code. A string runs through /bin/sh -c; an array is an argv. Only the lease's renter
 * may; the task must be running. Node only.
 *
 * @example
 * import { createClient } from "suanli/sdk";
 * const { exitCode, stdout } = await client.exec(taskId, "nvidia-smi && ls output/");
 * console.log(exitCode, stdout);
 */
export async function execTask(ctx: SuanliContext, taskId: string, command: string | string[], parameters: ExecTaskParameters = {}): Promise<ExecTaskReturnType> {
  if (typeof command === "string" ? command.length === 0 : !Array.isArray(command) || command.length === 0) {
    throw new InvalidInputError("exec", [{ path: "command", message: "expected a non-empty string or argv array" }]);
  }
  const attempt = await taskAttempt(ctx, taskId, parameters.rank ?? 0);
  const tty = parameters.tty;
  if (tty && ![tty.rows, tty.cols].every((n) => Number.isInteger(n) && n >= 1 && n <= 1000)) {
    throw new InvalidInputError("exec", [{ path: "tty", message: "expected whole rows and cols from 1 to 1000" }]);
  }
  const params = {
    command,
    timeoutSeconds: parameters.timeoutSeconds ?? 300,
    // Every field as the provider's schema outputs it: the signature's bodyHash covers them.
    ...(tty ? { tty: { rows: tty.rows, cols: tty.cols, term: tty.term ?? "xterm-256color" } } : {}),
  };
  const { lp, stream } = await openTaskStream(ctx, attempt, EXEC_PROTOCOL, "exec", params, {
    responseSchema: execStartedSchema,
    maxFrameBytes: TASK_IO_CONTROL_MAX_BYTES,
    signal: parameters.signal,
  });
  const onAbort = () => stream.abort(new Error("exec aborted by the caller"));
  tty?.onResize?.((size) => {
    const rows = Math.max(1, Math.min(1000, Math.floor(size.rows)));
    const cols = Math.max(1, Math.min(1000, Math.floor(size.cols)));
    runDetached(lp.write(jsonFrame({ resize: { rows, cols } })), undefined, "Sending a terminal resize");
  });
  parameters.signal?.addEventListener("abort", onAbort, { once: true });
  // Standard input, then its end.
  runDetached(
    (async () => {
      try {
        const input = parameters.stdin;
        if (typeof input === "string" || input instanceof Uint8Array) {
          const bytes = typeof input === "string" ? Buffer.from(input) : Buffer.from(input);
          for (let at = 0; at < bytes.length; at += 48 * 1024) await lp.write(jsonFrame({ stdin: bytes.subarray(at, at + 48 * 1024).toString("base64") }));
        } else if (input) {
          for await (const chunk of input) {
            const bytes = Buffer.from(chunk);
            for (let at = 0; at < bytes.length; at += 48 * 1024) await lp.write(jsonFrame({ stdin: bytes.subarray(at, at + 48 * 1024).toString("base64") }));
          }
        }
        await lp.write(jsonFrame({ stdinEnd: true }));
      } catch {
        // the command ended first
      }
    })(),
    undefined,
    "Sending standard input",
  );
  const kept = { stdout: [] as Buffer[], stderr: [] as Buffer[] };
  const keptBytes = { stdout: 0, stderr: 0 };
  try {
    for (let frames = 0; frames < Number.MAX_SAFE_INTEGER; frames++) {
      const frame = parseJsonFrame(execFrameSchema, (await lp.read()).subarray(), "exec output");
      if ("stream" in frame) {
        const chunk = Buffer.from(frame.data, "base64");
        parameters.onOutput?.(frame.stream, chunk);
        if (keptBytes[frame.stream] < KEPT_OUTPUT_BYTES) {
          kept[frame.stream].push(chunk.subarray(0, KEPT_OUTPUT_BYTES - keptBytes[frame.stream]));
          keptBytes[frame.stream] += chunk.length;
        }
        continue;
      }
      await stream.close().catch(() => undefined);
      return {
        exitCode: frame.exitCode,
        signal: frame.signal,
        timedOut: frame.timedOut,
        stdout: Buffer.concat(kept.stdout).toString("utf8"),
        stderr: Buffer.concat(kept.stderr).toString("utf8"),
      };
    }
    throw new Error("unreachable");
  } finally {
    parameters.signal?.removeEventListener("abort", onAbort);
  }
}

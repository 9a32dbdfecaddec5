/**
 * The external runner: drives a program that speaks the stdin/stdout contract (contract.ts,
 * docs/attestation.md), such as a CUDA runner. The program is started on first use and kept for
 * later challenges (a GPU context is slow to create); it is restarted if it exits, and killed if
 * a challenge is aborted mid-compute. Opened rows are checked against the committed root before
 * they leave the node, so a broken runner shows up in the provider's logs, not as a failed
 * attestation.
 */
import type { GpuEvidence } from "../../../common/attest/cc.js";
import type { ChildProcess } from "node:child_process";
import { spawnChild } from "../../process/child.js";
import path from "node:path";
import { hexToBytes, type Hex } from "viem";
import { leafHash, verifyMerkleProof } from "../../../common/attest/merkle.js";
import type { OpenedRowMessage } from "../../../common/attest/messages.js";
import { runDetached } from "../../../common/detached.js";
import type { Logger } from "../../log/logger.js";
import type { MemoryRunner } from "./memory-runner.js";
import { RUNNER_MAX_LINE_BYTES, RUNNER_PROTOCOL, runnerLineSchema, type RunnerLine, type RunnerRequest } from "./contract.js";
import { ExternalMemoryRunner } from "./external-memory.js";
import { nodeSha256 } from "./hash.js";
import { RunnerError, type Runner, type RunnerChallenge, type RunnerCommitment, type RowPick } from "./types.js";

export type ExternalRunnerOptions = {
  /** The program to run (absolute path or a name on PATH). */
  command: string;
  args?: string[];
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  /** Time the program has to print its hello line. Default 30 s (CUDA initialisation can be slow). */
  startTimeoutMs?: number;
  /** Time the program has to answer an open request. Default 60 s. */
  openTimeoutMs?: number;
  logger?: Logger;
};

type Waiter = { resolve: (line: RunnerLine) => void; reject: (error: Error) => void };

class RunnerProcess {
  readonly child: ChildProcess;
  readonly exited: Promise<number | null>;
  private buffer = "";
  private readonly lines: RunnerLine[] = [];
  private waiter: Waiter | undefined;
  private failure: Error | undefined;

  constructor(options: ExternalRunnerOptions) {
    this.child = spawnChild(options.command, options.args ?? [], { cwd: options.cwd, env: options.env ?? process.env, stdio: ["pipe", "pipe", "pipe"] });
    this.exited = new Promise((resolve) => {
      this.child.once("exit", (code, signal) => {
        this.fail(new RunnerError(`The runner program exited (${signal ?? `code ${code}`}).`));
        resolve(code);
      });
      this.child.once("error", (error) => {
        this.fail(new RunnerError(`The runner program could not be started: ${options.command}`, { cause: error, metaMessages: ["Check attest.runner.command."] }));
        resolve(null);
      });
    });
    this.child.stdout!.setEncoding("utf8");
    this.child.stdout!.on("data", (chunk: string) => this.onData(chunk));
    let stderr = "";
    this.child.stderr!.setEncoding("utf8");
    this.child.stderr!.on("data", (chunk: string) => {
      stderr += chunk;
      let newline: number;
      while ((newline = stderr.indexOf("\n")) >= 0) {
        options.logger?.debug("Runner says", { line: stderr.slice(0, newline).slice(0, 1000) });
        stderr = stderr.slice(newline + 1);
      }
      if (stderr.length > 64 * 1024) stderr = "";
    });
  }

  private onData(chunk: string): void {
    this.buffer += chunk;
    let newline: number;
    while ((newline = this.buffer.indexOf("\n")) >= 0) {
      const text = this.buffer.slice(0, newline).trim();
      this.buffer = this.buffer.slice(newline + 1);
      if (text) this.onLine(text);
    }
    if (this.buffer.length > RUNNER_MAX_LINE_BYTES) {
      this.fail(new RunnerError("The runner program wrote a line longer than the contract allows."));
      this.child.kill("SIGKILL");
    }
  }

  private onLine(text: string): void {
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      this.fail(
        new RunnerError("The runner program wrote something that is not JSON on stdout.", {
          details: text.slice(0, 200),
          metaMessages: ["Runners log to stderr; stdout carries protocol lines only."],
        }),
      );
      return;
    }
    const parsed = runnerLineSchema.safeParse(json);
    if (!parsed.success) {
      this.fail(
        new RunnerError("The runner program wrote a line outside the contract.", { details: parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ") }),
      );
      return;
    }
    if (this.waiter) {
      const waiter = this.waiter;
      this.waiter = undefined;
      waiter.resolve(parsed.data);
    } else this.lines.push(parsed.data);
  }

  private fail(error: Error): void {
    this.failure ??= error;
    if (this.waiter) {
      const waiter = this.waiter;
      this.waiter = undefined;
      waiter.reject(this.failure);
    }
  }

  get alive(): boolean {
    return this.failure === undefined && this.child.exitCode === null && this.child.signalCode === null;
  }

  send(request: RunnerRequest): void {
    if (this.failure) throw this.failure;
    this.child.stdin!.write(`${JSON.stringify(request)}\n`);
  }

  /** The next line, or a RunnerError when the runner dies, the signal aborts or `timeoutMs` passes. */
  next(timeoutMs: number | undefined, signal: AbortSignal | undefined, what: string): Promise<RunnerLine> {
    const queued = this.lines.shift();
    if (queued) return Promise.resolve(queued);
    if (this.failure) return Promise.reject(this.failure);
    // Aborted while it waited for its turn: the listener below would never fire.
    if (signal?.aborted) return Promise.reject(signal.reason instanceof Error ? signal.reason : new RunnerError(`Aborted while waiting for the runner's ${what}.`));
    return new Promise((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      const cleanup = () => {
        if (timer) clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
      };
      const onAbort = () => {
        cleanup();
        this.waiter = undefined;
        reject(signal!.reason instanceof Error ? signal!.reason : new RunnerError(`Aborted while waiting for the runner's ${what}.`));
      };
      if (timeoutMs !== undefined) {
        timer = setTimeout(() => {
          cleanup();
          this.waiter = undefined;
          reject(new RunnerError(`The runner program did not send its ${what} within ${timeoutMs} ms.`));
        }, timeoutMs);
      }
      signal?.addEventListener("abort", onAbort, { once: true });
      this.waiter = {
        resolve: (line) => {
          cleanup();
          resolve(line);
        },
        reject: (error) => {
          cleanup();
          reject(error);
        },
      };
    });
  }

  async stop(graceMs: number): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    this.child.stdin!.end();
    const wait = (ms: number) => Promise.race([this.exited.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), ms).unref())]);
    if (await wait(graceMs)) return;
    this.child.kill("SIGTERM");
    if (await wait(graceMs)) return;
    this.child.kill("SIGKILL");
    await this.exited;
  }
}

export class ExternalRunner implements Runner {
  readonly name: string;
  /** The contract: a new challenge replaces the answer the program holds, so it keeps the slot until its open. */
  readonly holdsOneAnswer = true;
  /** The program takes one request at a time (the runner contract): a round of several machines is refused busy. */
  readonly concurrent = false;
  private readonly options: ExternalRunnerOptions;
  private process: RunnerProcess | undefined;
  /** Serializes every exchange with the program: the contract is one request at a time. */
  private queue: Promise<unknown> = Promise.resolve();
  /** The challenge whose answer the program currently holds. */
  private current: string | undefined;
  private closed = false;
  /** The running program's hello capabilities. */
  private capabilities: readonly string[] = [];
  /** Counts program starts: an answer or buffer held by an earlier start is gone. */
  private starts = 0;
  /** Starts asked for ahead of a challenge (warm, or a restart after a stop) and not yet done. */
  private startsPending = 0;
  /** The memory phase on the same program (its `mem-*` requests), for a program whose hello lists `memory`. */
  readonly memory: MemoryRunner;

  constructor(options: ExternalRunnerOptions) {
    this.options = options;
    this.name = `external:${path.basename(options.command)}`;
    this.memory = new ExternalMemoryRunner(this);
  }

  private exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.queue.then(fn, fn);
    this.queue = run.catch(() => undefined);
    return run;
  }

  private async started(signal?: AbortSignal): Promise<RunnerProcess> {
    if (this.closed) throw new RunnerError("The runner is closed.");
    if (this.process?.alive) return this.process;
    if (this.process) await this.process.stop(500);
    const proc = new RunnerProcess(this.options);
    this.process = proc;
    this.current = undefined;
    let hello: RunnerLine;
    try {
      hello = await proc.next(this.options.startTimeoutMs ?? 30_000, signal, "hello line");
    } catch (error) {
      await proc.stop(0);
      throw error;
    }
    if (hello.type !== "hello") {
      await proc.stop(500);
      throw new RunnerError(`The runner program's first line must be a hello, got "${hello.type}".`);
    }
    if (hello.protocol !== RUNNER_PROTOCOL) {
      await proc.stop(500);
      throw new RunnerError(`The runner program speaks ${hello.protocol}; this node needs ${RUNNER_PROTOCOL}.`, {
        metaMessages: ["Version 2 computes one sub-challenge per unit (docs/attestation.md, Runner contract): update the runner program."],
      });
    }
    this.capabilities = hello.capabilities ?? [];
    this.starts++;
    this.options.logger?.info("Runner started", { runner: hello.name, pid: proc.child.pid, capabilities: this.capabilities });
    return proc;
  }

  /**
   * For the parts of the contract beside the GEMM challenge (external-memory.ts): starts the
   * program if needed, checks that its hello lists `capability`, sends `request` and returns the
   * answer line, one exchange at a time. A line of type `error` becomes a RunnerError. When the
   * signal aborts or `timeoutMs` passes the program is stopped (a GPU kernel cannot be interrupted
   * any other way) and restarts on next use. `start` is the program's start count when it answered.
   */
  exchange(
    capability: string,
    request: RunnerRequest,
    what: string,
    options: { signal?: AbortSignal; timeoutMs?: number; sameStart?: number; expect?: RunnerLine["type"]; releaseOnError?: RunnerRequest } = {},
  ): Promise<{ line: RunnerLine; start: number }> {
    return this.exclusive(async () => {
      // Its cutoff passed while it waited for its turn: nothing is sent, and nothing is stopped.
      if (options.signal?.aborted) throw options.signal.reason instanceof Error ? options.signal.reason : new RunnerError(`Aborted before asking for the runner's ${what}.`);
      if (options.sameStart !== undefined && (this.starts !== options.sameStart || !this.process?.alive))
        throw new RunnerError("The runner program restarted since it filled the buffers: what it held is gone.");
      const proc = await this.started(options.signal);
      if (!this.capabilities.includes(capability)) {
        throw new RunnerError(`The runner program does not implement the ${capability} requests: its hello lists no "${capability}" capability.`, {
          metaMessages: [`Add "capabilities":["${capability}"] to the hello once the program answers them (docs/attestation.md, Runner contract).`],
        });
      }
      return { line: await this.ask(proc, request, what, options), start: this.starts };
    });
  }

  /**
   * One request and its answer, inside `exclusive`. Aborted or timed out: the program is stopped
   * (a GPU kernel cannot be interrupted any other way) and restarts on next use. An `error` line
   * becomes a RunnerError (after `releaseOnError` is sent: it may hold part of what it was asked to
   * build). An answer of another type than `expect`, or for another id, means the program is out of
   * step with the one-request-at-a-time contract: it is stopped, or every later answer would be read
   * against the wrong request.
   */
  private async ask(
    proc: RunnerProcess,
    request: RunnerRequest,
    what: string,
    options: { signal?: AbortSignal; timeoutMs?: number; expect?: RunnerLine["type"]; releaseOnError?: RunnerRequest },
  ): Promise<RunnerLine> {
    proc.send(request);
    let line: RunnerLine;
    try {
      line = await proc.next(options.timeoutMs, options.signal, what);
    } catch (error) {
      await proc.stop(0);
      this.restartSoon();
      throw error;
    }
    if (line.type === "error") {
      if (options.releaseOnError) proc.send(options.releaseOnError);
      throw new RunnerError(`The runner program could not answer with its ${what}.`, { details: line.message });
    }
    if (options.expect !== undefined && (line.type !== options.expect || !("id" in line) || line.id !== request.id.toLowerCase())) {
      await proc.stop(500);
      this.restartSoon();
      throw new RunnerError(
        `The runner program answered a ${request.type} request with a ${line.type} line${"id" in line && line.id ? ` for ${line.id}` : ""}; the program was stopped.`,
      );
    }
    return line;
  }

  /** Sends a request that has no answer (a release) to the program, if it still runs the start given. */
  notify(request: RunnerRequest, start: number): Promise<void> {
    return this.exclusive(async () => {
      if (this.starts === start && this.process?.alive) this.process.send(request);
    });
  }

  /** Time the program has to answer an open request. */
  get openTimeoutMs(): number {
    return this.options.openTimeoutMs ?? 60_000;
  }

  /** Starts the runner program now (and waits for its hello), not inside the first challenge's deadline. */
  warm(): Promise<void> {
    this.startsPending++;
    return this.exclusive(async () => {
      try {
        if (!this.closed) await this.started();
      } finally {
        this.startsPending--;
      }
    });
  }

  /**
   * Whether the program is being started ahead of a challenge (a warm, or the restart after a
   * stop): a challenge taken now would wait for its start-up inside its deadline, so the provider
   * answers `busy` instead (a refusal an attestor tries again, never a failure).
   */
  get starting(): boolean {
    return this.startsPending > 0;
  }

  /**
   * After the program was stopped mid-exchange (an aborted or timed-out challenge, an answer out of
   * step), it starts again at once in the background: the next challenge finds it running instead
   * of paying its start-up (seconds for a CUDA context) inside its deadline.
   */
  private restartSoon(): void {
    if (!this.closed) runDetached(this.warm(), this.options.logger, "Restarting the runner program after a stop", { runner: this.name });
  }

  computeCommit(challenge: RunnerChallenge, options: { signal?: AbortSignal } = {}): Promise<RunnerCommitment> {
    return this.exclusive(async () => {
      const { signal } = options;
      const proc = await this.started(signal);
      const started = performance.now();
      this.current = challenge.id.toLowerCase();
      const request: RunnerRequest = {
        type: "challenge",
        id: this.current,
        rowsPerUnit: challenge.rowsPerUnit,
        cols: challenge.cols,
        rounds: challenge.rounds,
        units: [...challenge.units],
      };
      const line = await this.ask(proc, request, "commit", { signal, expect: "commit" });
      if (line.type !== "commit") throw new RunnerError(`The runner program answered a challenge with a ${line.type} line.`);
      if (line.rowsPerUnit !== challenge.rowsPerUnit || line.units.length !== challenge.units.length) {
        throw new RunnerError(
          `The runner program committed to ${line.units.length} units of ${line.rowsPerUnit} rows, the challenge has ${challenge.units.length} of ${challenge.rowsPerUnit}.`,
        );
      }
      const named = line.units.filter((unit) => unit.device !== undefined).length;
      if (named !== 0 && named !== line.units.length) throw new RunnerError("The runner program named a device for some units and not for others: name one per unit, or none.");
      const devices = named ? line.units.map((unit) => unit.device!) : undefined;
      const evidenced = line.units.filter((unit) => unit.cc !== undefined).length;
      if (evidenced !== 0 && evidenced !== line.units.length)
        throw new RunnerError("The runner program gave CC evidence for some units and not for others: give it for every unit, or none.");
      const cc = evidenced ? line.units.map((unit) => unit.cc!) : undefined;
      return this.commitment(
        challenge,
        line.units.map((unit) => unit.root),
        line.computeMs ?? performance.now() - started,
        devices,
        cc,
      );
    });
  }

  private commitment(challenge: RunnerChallenge, roots: readonly Hex[], computeMs: number, devices?: readonly string[], cc?: readonly GpuEvidence[]): RunnerCommitment {
    let released = false;
    const id = challenge.id.toLowerCase();
    return {
      roots,
      rowsPerUnit: challenge.rowsPerUnit,
      computeMs,
      ...(devices?.length ? { devices } : {}),
      ...(cc?.length ? { cc } : {}),
      openRows: (picks, options = {}) =>
        this.exclusive(async () => {
          if (released || this.current !== id || !this.process?.alive)
            throw new RunnerError("The runner no longer holds this answer (released, replaced by a newer challenge, or restarted).");
          const proc = this.process;
          const request: RunnerRequest = { type: "open", id, picks: picks.map((p) => ({ unit: p.unit, index: p.index })) };
          const line = await this.ask(proc, request, "rows", { timeoutMs: this.openTimeoutMs, signal: options.signal, expect: "rows" });
          if (line.type !== "rows") throw new RunnerError(`The runner program answered an open request with a ${line.type} line.`);
          return this.checkRows(challenge, roots, picks, line.rows);
        }),
      release: () =>
        this.exclusive(async () => {
          if (released) return;
          released = true;
          if (this.current === id && this.process?.alive) {
            this.process.send({ type: "release", id });
            this.current = undefined;
          }
        }),
    };
  }

  /** Puts rows in the order asked and checks every one against its unit's committed root. */
  private checkRows(challenge: RunnerChallenge, roots: readonly Hex[], picks: readonly RowPick[], rows: OpenedRowMessage[]): OpenedRowMessage[] {
    const byKey = new Map(rows.map((row) => [`${row.unit}:${row.index}`, row]));
    return picks.map(({ unit, index }) => {
      const row = byKey.get(`${unit}:${index}`);
      const root = roots[unit];
      const leafKey = challenge.units[unit]?.leafKey;
      if (!row || root === undefined || leafKey === undefined) throw new RunnerError(`The runner program did not return unit ${unit} row ${index}.`);
      const data = hexToBytes(row.data as Hex);
      if (data.length !== challenge.cols * 4)
        throw new RunnerError(`The runner program returned unit ${unit} row ${index} with ${data.length} bytes, expected ${challenge.cols * 4}.`);
      const leaf = leafHash(hexToBytes(leafKey), index, data, nodeSha256);
      const proof = row.proof.map((sibling) => hexToBytes(sibling));
      if (!verifyMerkleProof(hexToBytes(root), leaf, index, challenge.rowsPerUnit, proof, nodeSha256)) {
        throw new RunnerError(`The runner program's unit ${unit} row ${index} does not match the root it committed to.`, {
          metaMessages: ["Check the runner against docs/attestation.md (unit seeds and leaf keys, leaf and node hashing, padding)."],
        });
      }
      return row;
    });
  }

  /** The runner program's process id while it runs (for tests and diagnostics). */
  get pid(): number | undefined {
    return this.process?.alive ? this.process.child.pid : undefined;
  }

  async close(): Promise<void> {
    this.closed = true;
    // Stopping the program first makes any exchange still waiting on it fail at once.
    await this.process?.stop(2_000);
    await this.queue.catch(() => undefined);
    this.process = undefined;
  }
}

/**
 * A fixed set of worker threads running cpu-worker.ts tasks. Workers start lazily and are
 * replaced after a crash or an abort (an abort terminates the workers running the aborted run's
 * tasks: a running matrix loop cannot be interrupted otherwise; other runs' tasks, such as the
 * other machines of a challenge round computed at once, go on).
 */
import { availableParallelism } from "node:os";
import { Worker } from "node:worker_threads";
import type { WorkerReply, WorkerRequest, WorkerTask } from "./cpu-worker.js";
import { RunnerError } from "./types.js";
import { runDetached } from "../../../common/detached.js";

const ENTRY = new URL("./cpu-worker-entry.mjs", import.meta.url);

type Pending = { resolve: (reply: WorkerReply & { ok: true }) => void; reject: (error: Error) => void };

class PoolWorker {
  readonly worker: Worker;
  readonly ready: Promise<void>;
  busy = false;
  private readonly pending = new Map<number, Pending>();

  constructor(onExit: (self: PoolWorker) => void) {
    this.worker = new Worker(ENTRY);
    this.ready = new Promise((resolve, reject) => {
      const onMessage = (message: unknown) => {
        if ((message as { ready?: boolean }).ready) {
          this.worker.off("message", onMessage);
          this.worker.on("message", (reply: WorkerReply) => this.settle(reply));
          resolve();
        }
      };
      this.worker.on("message", onMessage);
      this.worker.once("error", (error) => {
        reject(new RunnerError("A CPU runner worker failed to start.", { cause: error }));
        this.failAll(error);
      });
      this.worker.once("exit", (code) => {
        reject(new RunnerError(`A CPU runner worker exited with code ${code} before it was ready.`));
        this.failAll(new Error(`worker exited with code ${code}`));
        onExit(this);
      });
    });
    // A rejected ready promise is reported through the task that awaits it.
    this.ready.catch(() => undefined);
  }

  run(taskId: number, task: WorkerTask): Promise<WorkerReply & { ok: true }> {
    return new Promise((resolve, reject) => {
      this.pending.set(taskId, { resolve, reject });
      this.worker.postMessage({ taskId, task } satisfies WorkerRequest);
    });
  }

  private settle(reply: WorkerReply): void {
    const pending = this.pending.get(reply.taskId);
    if (!pending) return;
    this.pending.delete(reply.taskId);
    if (reply.ok) pending.resolve(reply);
    else pending.reject(new RunnerError("A CPU runner task failed.", { details: reply.message }));
  }

  failAll(cause: unknown): void {
    for (const pending of this.pending.values()) pending.reject(new RunnerError("A CPU runner worker stopped during a task.", { cause }));
    this.pending.clear();
  }
}

type Entry = { task: WorkerTask; resolve: (r: WorkerReply & { ok: true }) => void; reject: (e: Error) => void; worker?: PoolWorker };

export class WorkerPool {
  readonly size: number;
  private workers: PoolWorker[] = [];
  private readonly queue: Entry[] = [];
  private nextTaskId = 1;
  private closed = false;

  constructor(size = availableParallelism()) {
    if (!Number.isInteger(size) || size < 1) throw new RangeError("a pool needs at least one worker");
    this.size = size;
  }

  /** Runs one task on the next free worker. */
  run(task: WorkerTask, signal?: AbortSignal): Promise<WorkerReply & { ok: true }> {
    if (this.closed) return Promise.reject(new RunnerError("The CPU runner is closed."));
    if (signal?.aborted) return Promise.reject(abortError(signal));
    return new Promise((resolve, reject) => {
      const entry: Entry = { task, resolve, reject };
      const onAbort = () => {
        const queued = this.queue.indexOf(entry);
        if (queued >= 0) this.queue.splice(queued, 1);
        // A running task cannot be interrupted: end its worker, later tasks get a fresh one.
        if (entry.worker) runDetached(this.terminate(entry.worker), undefined, "Ending the worker of an aborted task");
        reject(abortError(signal!));
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      const done =
        <T>(fn: (value: T) => void) =>
        (value: T) => {
          signal?.removeEventListener("abort", onAbort);
          fn(value);
        };
      entry.resolve = done(resolve);
      entry.reject = done(reject);
      this.queue.push(entry);
      this.dispatch();
    });
  }

  private dispatch(): void {
    while (this.queue.length > 0) {
      let worker = this.workers.find((w) => !w.busy);
      if (!worker && this.workers.length < this.size) {
        worker = new PoolWorker((dead) => this.remove(dead));
        this.workers.push(worker);
      }
      if (!worker) return;
      const entry = this.queue.shift()!;
      const chosen = worker;
      chosen.busy = true;
      entry.worker = chosen;
      const taskId = this.nextTaskId++;
      chosen.ready
        .then(() => chosen.run(taskId, entry.task))
        .then(entry.resolve, entry.reject)
        .finally(() => {
          chosen.busy = false;
          this.dispatch();
        });
    }
  }

  private remove(worker: PoolWorker): void {
    this.workers = this.workers.filter((w) => w !== worker);
    this.dispatch();
  }

  private async terminate(worker: PoolWorker): Promise<void> {
    if (!this.workers.includes(worker)) return;
    this.workers = this.workers.filter((w) => w !== worker);
    worker.failAll(new Error("terminated"));
    await worker.worker.terminate();
    this.dispatch();
  }

  private async terminateAll(): Promise<void> {
    const workers = this.workers;
    this.workers = [];
    await Promise.all(
      workers.map(async (w) => {
        w.failAll(new Error("terminated"));
        await w.worker.terminate();
      }),
    );
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const entry of this.queue.splice(0)) entry.reject(new RunnerError("The CPU runner is closed."));
    await this.terminateAll();
  }
}

function abortError(signal: AbortSignal): Error {
  return signal.reason instanceof Error ? signal.reason : new DOMException("The operation was aborted.", "AbortError");
}

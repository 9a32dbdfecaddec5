/**
 * Where a lease's log lines are read from: the running (or just ended) task's own buffer, or a
 * closed buffer of one system line when the task never ran.
 */
import { LogBuffer, type LogLine, type LogRead } from "../runtime/logs.js";
import type { TaskHandle } from "../runtime/runtime.js";

/** What a task's log reader needs. */
export type LogSource = { read(fromSeq: number): LogRead; follow(fromSeq: number, signal: AbortSignal): AsyncIterable<LogLine>; closed(): boolean };

export function sourceOfHandle(handle: TaskHandle): LogSource {
  return {
    read: (fromSeq) => handle.readLogs(fromSeq),
    follow: (fromSeq, signal) => handle.logs(fromSeq, signal),
    closed: () => handle.state === "exited",
  };
}

/** A closed log holding one system line (why a task never ran). */
export function oneLineSource(text: string): { source: LogSource; nextSeq: number } {
  const buffer = new LogBuffer();
  buffer.push("system", text);
  buffer.close();
  return {
    source: { read: (fromSeq) => buffer.read(fromSeq), follow: (fromSeq, signal) => buffer.follow(fromSeq, signal), closed: () => buffer.isClosed },
    nextSeq: buffer.nextSeq,
  };
}

/** The finished tasks' logs, the most recent `max` kept in memory for late readers. */
export class FinishedLogs {
  private readonly sources = new Map<bigint, LogSource>();
  constructor(private readonly max: number) {}

  get(leaseId: bigint): LogSource | undefined {
    return this.sources.get(leaseId);
  }

  keep(leaseId: bigint, source: LogSource): void {
    this.sources.set(leaseId, source);
    while (this.sources.size > this.max) this.sources.delete(this.sources.keys().next().value!);
  }
}

/**
 * A task's log: lines with sequence numbers and timestamps, kept in a bounded ring so a reader
 * that connects late (or reconnects with the last seq it saw) gets what is still held and is told
 * how many lines it missed.
 */
export type LogStream = "stdout" | "stderr" | "system";

export type LogLine = {
  /** Starts at 0, +1 per line, never reused within a task. */
  seq: number;
  /** Milliseconds since the epoch when the line was complete. */
  at: number;
  stream: LogStream;
  text: string;
};

export type LogRead = {
  lines: LogLine[];
  /** Lines at or after `fromSeq` that the buffer no longer holds. */
  dropped: number;
  /** The seq of the next line to come. */
  nextSeq: number;
};

export type LogBufferOptions = {
  /** Lines held; older ones are dropped first. */
  maxLines?: number;
  /** Longer lines are cut into pieces of this many characters. */
  maxLineChars?: number;
};

export class LogBuffer {
  private readonly lines: LogLine[] = [];
  private nextSeqValue = 0;
  private closed = false;
  private waiters: (() => void)[] = [];
  readonly maxLines: number;
  readonly maxLineChars: number;

  constructor(options: LogBufferOptions = {}) {
    this.maxLines = options.maxLines ?? 10_000;
    this.maxLineChars = options.maxLineChars ?? 16 * 1024;
  }

  get nextSeq(): number {
    return this.nextSeqValue;
  }

  get isClosed(): boolean {
    return this.closed;
  }

  /** Appends one line (already redacted); a line longer than maxLineChars becomes several. */
  push(stream: LogStream, text: string): void {
    if (this.closed) return;
    const at = Date.now();
    for (let start = 0; start === 0 || start < text.length; start += this.maxLineChars) {
      this.lines.push({ seq: this.nextSeqValue++, at, stream, text: text.slice(start, start + this.maxLineChars) });
      if (this.lines.length > this.maxLines) this.lines.shift();
    }
    this.wake();
  }

  /** Lines with seq >= fromSeq that are still held. */
  read(fromSeq = 0): LogRead {
    const first = this.lines[0]?.seq ?? this.nextSeqValue;
    const from = Math.max(0, fromSeq);
    const dropped = from < first ? first - from : 0;
    return { lines: this.lines.filter((line) => line.seq >= from), dropped, nextSeq: this.nextSeqValue };
  }

  /** No more lines will come; followers finish after the held lines. */
  close(): void {
    this.closed = true;
    this.wake();
  }

  /** Yields held lines from `fromSeq`, then new ones as they come, until the log closes or `signal` aborts. */
  async *follow(fromSeq = 0, signal?: AbortSignal): AsyncGenerator<LogLine> {
    let next = Math.max(0, fromSeq);
    while (!signal?.aborted) {
      // The newest lines are always held, so nothing to read means nothing new yet.
      const { lines } = this.read(next);
      if (lines.length > 0) {
        for (const line of lines) {
          yield line;
          next = line.seq + 1;
        }
        continue;
      }
      if (this.closed) return;
      await this.waitForMore(signal);
    }
  }

  private waitForMore(signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        signal?.removeEventListener("abort", done);
        resolve();
      };
      this.waiters.push(done);
      signal?.addEventListener("abort", done, { once: true });
    });
  }

  private wake(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const wake of waiters) wake();
  }
}

/** Splits a byte stream into lines (UTF-8), keeping an unterminated tail until more comes or it ends. */
export class LineSplitter {
  private tail = "";
  private readonly decoder = new TextDecoder("utf-8");

  constructor(
    private readonly onLine: (line: string) => void,
    private readonly maxPendingChars = 64 * 1024,
  ) {}

  write(chunk: Uint8Array): void {
    const text = this.tail + this.decoder.decode(chunk, { stream: true });
    const parts = text.split("\n");
    this.tail = parts.pop() ?? "";
    for (const part of parts) this.onLine(part.endsWith("\r") ? part.slice(0, -1) : part);
    // A program that never prints a newline must not grow memory without bound.
    while (this.tail.length > this.maxPendingChars) {
      this.onLine(this.tail.slice(0, this.maxPendingChars));
      this.tail = this.tail.slice(this.maxPendingChars);
    }
  }

  end(): void {
    const rest = this.tail + this.decoder.decode();
    this.tail = "";
    if (rest !== "") this.onLine(rest);
  }
}

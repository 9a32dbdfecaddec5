import { pino, type Logger as PinoLogger } from "pino";
import { z } from "zod";

export const logOptionsSchema = z.strictObject({
  /** Lowest level written. `silent` writes nothing (tests). */
  level: z.enum(["trace", "debug", "info", "warn", "error", "fatal", "silent"]).default("info"),
  /** `json`: one JSON object per line (for log collectors); `pretty`: one readable line. */
  format: z.enum(["json", "pretty"]).default("pretty"),
});
export type LogOptions = z.output<typeof logOptionsSchema>;

export type LogContext = Record<string, unknown>;

/**
 * A structured logger: a fixed message plus a context object,
 * `logger.info("Lease opened", { leaseId })`. Children add bound fields (`module`).
 * Bigints are written as decimal strings; keys named like secrets are redacted.
 */
export interface Logger {
  trace(message: string, context?: LogContext): void;
  debug(message: string, context?: LogContext): void;
  info(message: string, context?: LogContext): void;
  warn(message: string, context?: LogContext, error?: unknown): void;
  error(message: string, context?: LogContext, error?: unknown): void;
  child(bindings: LogContext): Logger;
  readonly level: string;
}

// Values under these keys never reach a log line in clear (task secrets, keys, signatures of auth).
const REDACT_KEYS = ["secret", "secrets", "privateKey", "password", "token", "authorization", "env"];

function sanitize(value: unknown, depth = 0): unknown {
  if (typeof value === "bigint") return value.toString();
  if (depth > 6 || value === null || typeof value !== "object") return value;
  if (value instanceof Error) return { name: value.name, message: value.message };
  if (Array.isArray(value)) return value.map((item) => sanitize(item, depth + 1));
  if (value instanceof Uint8Array) return `<${value.byteLength} bytes>`;
  const out: Record<string, unknown> = {};
  for (const [key, child] of Object.entries(value)) {
    out[key] = REDACT_KEYS.includes(key) ? "[redacted]" : sanitize(child, depth + 1);
  }
  return out;
}

class PinoBackedLogger implements Logger {
  constructor(private readonly inner: PinoLogger) {}
  get level(): string {
    return this.inner.level;
  }
  trace(message: string, context?: LogContext): void {
    if (this.inner.isLevelEnabled("trace")) this.inner.trace(sanitize(context ?? {}) as object, message);
  }
  debug(message: string, context?: LogContext): void {
    if (this.inner.isLevelEnabled("debug")) this.inner.debug(sanitize(context ?? {}) as object, message);
  }
  info(message: string, context?: LogContext): void {
    if (this.inner.isLevelEnabled("info")) this.inner.info(sanitize(context ?? {}) as object, message);
  }
  warn(message: string, context?: LogContext, error?: unknown): void {
    if (this.inner.isLevelEnabled("warn")) this.inner.warn(sanitize(withError(context, error)) as object, message);
  }
  error(message: string, context?: LogContext, error?: unknown): void {
    if (this.inner.isLevelEnabled("error")) this.inner.error(sanitize(withError(context, error)) as object, message);
  }
  child(bindings: LogContext): Logger {
    return new PinoBackedLogger(this.inner.child(sanitize(bindings) as object));
  }
}

function withError(context: LogContext | undefined, error: unknown): LogContext {
  if (error === undefined) return context ?? {};
  const e = error as { name?: string; shortMessage?: string; message?: string };
  return { ...context, err: { name: e?.name, message: e?.shortMessage ?? e?.message ?? String(error) } };
}

/** Pretty format: `10:04:05.123 INFO  [module] Message key=value ...` on one line. */
function prettyLine(object: Record<string, unknown>): string {
  const { level, time, msg, module, ...rest } = object as { level: string; time: number; msg: string; module?: string };
  const fields = Object.entries(rest)
    .filter(([key]) => key !== "pid" && key !== "hostname")
    .map(([key, value]) => `${key}=${typeof value === "string" ? value : JSON.stringify(value)}`)
    .join(" ");
  const clock = new Date(time).toISOString().slice(11, 23);
  return `${clock} ${String(level).toUpperCase().padEnd(5)} ${module ? `[${module}] ` : ""}${msg}${fields ? ` ${fields}` : ""}\n`;
}

/**
 * Creates the root logger. Logs go to stderr so that stdout stays free for command output
 * (`--json`).
 */
export function createLogger(options: Partial<LogOptions> = {}, bindings: LogContext = {}): Logger {
  const opts = logOptionsSchema.parse(options);
  const base = { level: opts.level, base: undefined, formatters: { level: (label: string) => ({ level: label }) } };
  let inner: PinoLogger;
  if (opts.format === "json") {
    inner = pino(base, pino.destination({ fd: 2, sync: true }));
  } else {
    inner = pino(base, {
      write(line: string) {
        process.stderr.write(prettyLine(JSON.parse(line) as Record<string, unknown>));
      },
    });
  }
  const root = new PinoBackedLogger(inner);
  return Object.keys(bindings).length ? root.child(bindings) : root;
}

/** A logger that writes nothing; the default in libraries and tests. */
export function silentLogger(): Logger {
  return createLogger({ level: "silent" });
}

/**
 * Fire-and-forget work, the one way: a promise that nobody awaits (a timer tick, an event
 * handler, a background flush) is handed to `runDetached`, which logs its failure instead of
 * leaving an unhandled rejection (that would end a Node process). Lint enforces it
 * (`@typescript-eslint/no-floating-promises` with `ignoreVoid: false`): a promise is awaited,
 * returned, or handed to `runDetached`.
 *
 * No Node or DOM imports: the daemon, the SDK and the browser pages all use it.
 */

/** The slice of a logger `runDetached` writes to: node/log's `Logger` and `console` both fit. */
export interface DetachedLogger {
  warn(message: string, context?: Record<string, unknown>, error?: unknown): void;
}

/**
 * Starts watching `work` and returns at once. If it rejects, `log.warn` gets
 * `"<what> failed"` with `context` and the error. `log` undefined is for library code that has
 * no logger (the SDK, common/ p2p plumbing) and work whose failure is expected and harmless
 * (closing a stream the peer already closed): the failure is then dropped on purpose.
 *
 * @example runDetached(this.flush(), this.logger, "Flushing the offer book", { peers });
 */
export function runDetached(work: PromiseLike<unknown>, log: DetachedLogger | undefined, what: string, context: Record<string, unknown> = {}): void {
  Promise.resolve(work).then(
    () => undefined,
    (error: unknown) => {
      try {
        log?.warn(`${what} failed`, context, error);
      } catch {
        // A logger that throws must not turn a logged failure into an unhandled rejection.
      }
    },
  );
}

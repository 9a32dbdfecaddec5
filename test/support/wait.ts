/**
 * Polls `check` until it returns a truthy value or `timeoutMs` passes (then throws, naming `what`
 * and, when given, what `state` says about where things stood: the clue a CI failure leaves).
 */
export async function waitFor<T>(
  what: string,
  check: () => T | Promise<T>,
  options: { timeoutMs?: number; intervalMs?: number; state?: () => unknown } = {},
): Promise<NonNullable<T>> {
  const timeoutMs = options.timeoutMs ?? 10_000;
  const intervalMs = options.intervalMs ?? 20;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value as NonNullable<T>;
    if (Date.now() > deadline) {
      const state = options.state ? `; state: ${await describeState(options.state)}` : "";
      throw new Error(`Timed out after ${timeoutMs} ms waiting for ${what}${state}`);
    }
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

async function describeState(state: () => unknown): Promise<string> {
  try {
    return JSON.stringify(await state(), (_key, v: unknown) => (typeof v === "bigint" ? v.toString() : v));
  } catch (error) {
    return `(could not be read: ${error instanceof Error ? error.message : String(error)})`;
  }
}

/** Whether a process with this pid exists (signal 0 checks without sending anything). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * A provider node as a real child process (`suanli provider start --config FILE --json`), for
 * crash, restart and chaos tests: the test holds its pid and sends it real signals.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { createInterface } from "node:readline";
import { SUANLI_BIN } from "./cli.js";
import { providerPeer, type ProviderPeer } from "./renter.js";

export type Ready = { event: "ready"; address: `0x${string}`; addrs: string[]; pid: number; machines: { machineId: number }[]; metricsUrl: string | null };

/** A provider node as a real child process: `suanli provider start --config FILE --json`. */
export class ProviderProcess {
  private constructor(
    readonly child: ChildProcess,
    readonly ready: Ready,
    /** Every line the node wrote to stderr (its logs), kept up to date while it runs. */
    readonly stderr: string[],
  ) {}

  /**
   * Starts the node and waits for its ready line (`timeoutMs`, default 60 s: a loaded machine is
   * slow). `onLine` sees each stderr line as it comes, from the first (a fault injected on a log line).
   * `env` adds to (or overrides) the environment it inherits (SUANLI_* variables are not inherited).
   * `onSpawn` gets the child as soon as it exists, before it is ready: a test's after hook can
   * stop it by pid even when the hook that started it failed or timed out before this returned.
   * A node that does not become ready is killed (SIGKILL) before this rejects.
   */
  static async start(
    configFile: string,
    options: { timeoutMs?: number; onLine?: (line: string) => void; env?: Record<string, string>; onSpawn?: (child: ChildProcess) => void } = {},
  ): Promise<ProviderProcess> {
    const timeoutMs = options.timeoutMs ?? 60_000;
    const env: Record<string, string> = {};
    for (const [key, value] of Object.entries(process.env)) if (value !== undefined && !key.startsWith("SUANLI_")) env[key] = value;
    Object.assign(env, options.env);
    const child = spawn(process.execPath, [SUANLI_BIN, "provider", "start", "--config", configFile, "--json"], { env, stdio: ["ignore", "pipe", "pipe"] });
    options.onSpawn?.(child);
    const stderr: string[] = [];
    createInterface({ input: child.stderr! }).on("line", (line) => {
      stderr.push(line);
      options.onLine?.(line);
    });
    const readying = new Promise<Ready>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the provider did not start within ${timeoutMs / 1000} s:\n${stderr.slice(-20).join("\n")}`)), timeoutMs);
      createInterface({ input: child.stdout! }).on("line", (line) => {
        if (!line.startsWith("{")) return;
        let parsed: Ready;
        try {
          parsed = JSON.parse(line) as Ready;
        } catch {
          return;
        }
        if (parsed.event === "ready") {
          clearTimeout(timer);
          resolve(parsed);
        }
      });
      child.once("exit", (code) => {
        clearTimeout(timer);
        reject(new Error(`the provider exited with ${code} before it was ready:\n${stderr.slice(-20).join("\n")}`));
      });
    });
    let ready: Ready;
    try {
      ready = await readying;
    } catch (error) {
      // Not ready in time (or its output unreadable): no node may outlive the test that started it.
      await stopChild(child, "SIGKILL");
      throw error;
    }
    return new ProviderProcess(child, ready, stderr);
  }

  get peer(): ProviderPeer {
    return providerPeer(this.ready.address, this.ready.addrs);
  }

  /** Sends `signal` to the node's own pid and waits for it to exit (at once when it has exited already). */
  async kill(signal: NodeJS.Signals): Promise<number | null> {
    return stopChild(this.child, signal);
  }
}

/** Sends `signal` to the child's own pid and waits for it to exit (at once when it has exited already); its exit code. */
export async function stopChild(child: ChildProcess, signal: NodeJS.Signals): Promise<number | null> {
  if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return child.exitCode;
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  try {
    process.kill(child.pid, signal);
  } catch (error) {
    // Gone between the check and the signal: its exit event is on its way.
    if ((error as NodeJS.ErrnoException).code !== "ESRCH") throw error;
  }
  return exited;
}

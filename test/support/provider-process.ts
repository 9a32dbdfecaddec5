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
  readonly stderr: string[] = [];
  private constructor(
    readonly child: ChildProcess,
    readonly ready: Ready,
  ) {}

  /** Starts the node and waits for its `ready` line (`readyTimeoutMs`, default 60 s: a container runtime's first start takes longer). */
  static async start(configFile: string, options: { readyTimeoutMs?: number } = {}): Promise<ProviderProcess> {
    const readyTimeoutMs = options.readyTimeoutMs ?? 60_000;
    const env: Record<string, string> = {};
    for (const [key, value] of Object.entries(process.env)) if (value !== undefined && !key.startsWith("SUANLI_")) env[key] = value;
    const child = spawn(process.execPath, [SUANLI_BIN, "provider", "start", "--config", configFile, "--json"], { env, stdio: ["ignore", "pipe", "pipe"] });
    const stderr: string[] = [];
    createInterface({ input: child.stderr! }).on("line", (line) => stderr.push(line));
    const ready = await new Promise<Ready>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the provider did not start within ${readyTimeoutMs / 1000} s:\n${stderr.slice(-20).join("\n")}`)), readyTimeoutMs);
      createInterface({ input: child.stdout! }).on("line", (line) => {
        if (!line.startsWith("{")) return;
        const parsed = JSON.parse(line) as Ready;
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
    const provider = new ProviderProcess(child, ready);
    provider.stderr.push(...stderr);
    return provider;
  }

  get peer(): ProviderPeer {
    return providerPeer(this.ready.address, this.ready.addrs);
  }

  /** Sends `signal` to the node's own pid and waits for it to exit (at once when it has exited already). */
  async kill(signal: NodeJS.Signals): Promise<number | null> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return this.child.exitCode;
    const exited = new Promise<number | null>((resolve) => this.child.once("exit", (code) => resolve(code)));
    process.kill(this.child.pid!, signal);
    return exited;
  }
}

/**
 * A provider node as a real child process (`suanli provider start --config FILE --json`), for
 * crash, restart and chaos tests: the test holds its pid and sends it real signals.
 * `writeProviderConfig` writes the config file such a node starts from (and funds its wallet), on
 * test/support/devnet.ts's devnet or on one run as its own process (`suanli devnet`).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { writeFile } from "node:fs/promises";
import { createInterface } from "node:readline";
import path from "node:path";
import { SUANLI_BIN } from "./cli.js";
import { fund, type Devnet } from "./devnet.js";
import { merge } from "./merge.js";
import { freePort } from "./ports.js";
import { testProviderConfig } from "./provider.js";
import { providerPeer, type ProviderPeer } from "./renter.js";

export type ProviderConfigOptions = {
  /** The test's scratch folder: the config goes to `<dir>/provider-<index>.json`, the node's data to `<dir>/provider-<index>/` unless `dataDir` says where. */
  dir: string;
  /** The node's data folder (default `<dir>/provider-<index>/`). */
  dataDir?: string;
  /** The chain's RPC URL for the node (default the devnet's own; a proxy's in chaos tests). */
  rpcUrl?: string;
  /** Listen on a port of 127.0.0.1 chosen now instead of a random one at each start: a restarted node is found where it was (default false). */
  fixedPort?: boolean;
  /** Merged into the config last (test/support/provider.ts's test config, then the process's own settings, then these). */
  overrides?: Record<string, unknown>;
  /** Base units of the test token minted to the provider's wallet for its stake (default 2,000,000,000; a `Devnet` only). */
  fundTokens?: bigint;
};

/** A devnet run as its own process (`suanli devnet --port P --deployments DIR`): where it answers and its deployments folder. */
export type DevnetProcess = { rpcUrl: string; deploymentsDir: string };

/**
 * Writes the config of provider `index` (devnet account `index`) for `ProviderProcess.start`: the shared test
 * provider config, JSON logs at info, the devnet's deployment, libp2p on 127.0.0.1 without the DHT. Funds the
 * wallet for the stake on a `Devnet`; on a `DevnetProcess` (which may not be running yet) the test funds it
 * itself, as a user does (`suanli wallet faucet`).
 *
 * @example
 * import { ProviderProcess, writeProviderConfig } from "../support/provider-process.js";
 * const { configFile } = await writeProviderConfig(devnet, 1, { dir, fixedPort: true });
 * const node = await ProviderProcess.start(configFile);
 */
export async function writeProviderConfig(devnet: Devnet | DevnetProcess, index: number, options: ProviderConfigOptions): Promise<{ configFile: string; dataDir: string }> {
  const configFile = path.join(options.dir, `provider-${index}.json`);
  const dataDir = options.dataDir ?? path.join(options.dir, `provider-${index}`);
  const port = options.fixedPort ? await freePort() : 0;
  const processSettings = {
    dataDir,
    log: { level: "info", format: "json" },
    chain: { rpcUrl: options.rpcUrl ?? devnet.rpcUrl, deploymentsDir: devnet.deploymentsDir, pollingIntervalMs: 100 },
    p2p: { listen: [`/ip4/127.0.0.1/tcp/${port}`], allowPrivateAddresses: true, dht: { enabled: false }, gossip: { ipColocationWhitelist: ["127.0.0.1"] } },
  };
  await writeFile(configFile, JSON.stringify(testProviderConfig(index, merge(processSettings, options.overrides ?? {})), null, 2));
  if ("wallet" in devnet) await fund(devnet, await devnet.wallet(index), options.fundTokens ?? 2_000_000_000n);
  else if (options.fundTokens !== undefined) throw new Error("writeProviderConfig: fundTokens needs a Devnet; fund a devnet process's wallet through it");
  return { configFile, dataDir };
}

/** A node that exited before it was ready (a refused start): its exit code and everything it wrote. */
export class ProviderExitedError extends Error {
  constructor(
    readonly code: number | null,
    readonly stdout: string[],
    readonly stderr: string[],
  ) {
    super(`the provider exited with ${code} before it was ready:\n${stderr.slice(-20).join("\n")}`);
    this.name = "ProviderExitedError";
  }
}

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
   * `args` go after `--config FILE` (e.g. `--dataDir DIR`, a flag that overrides the file).
   * A node that does not become ready is killed (SIGKILL) before this rejects; one that exits first
   * rejects with a ProviderExitedError (its exit code, stdout and stderr).
   */
  static async start(
    configFile: string,
    options: { timeoutMs?: number; onLine?: (line: string) => void; env?: Record<string, string>; onSpawn?: (child: ChildProcess) => void; args?: string[] } = {},
  ): Promise<ProviderProcess> {
    const timeoutMs = options.timeoutMs ?? 60_000;
    const env: Record<string, string> = {};
    for (const [key, value] of Object.entries(process.env)) if (value !== undefined && !key.startsWith("SUANLI_")) env[key] = value;
    Object.assign(env, options.env);
    const child = spawn(process.execPath, [SUANLI_BIN, "provider", "start", "--config", configFile, ...(options.args ?? []), "--json"], { env, stdio: ["ignore", "pipe", "pipe"] });
    options.onSpawn?.(child);
    const stderr: string[] = [];
    const stdout: string[] = [];
    createInterface({ input: child.stderr! }).on("line", (line) => {
      stderr.push(line);
      options.onLine?.(line);
    });
    const readying = new Promise<Ready>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the provider did not start within ${timeoutMs / 1000} s:\n${stderr.slice(-20).join("\n")}`)), timeoutMs);
      createInterface({ input: child.stdout! }).on("line", (line) => {
        stdout.push(line);
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
      // "close", not "exit": its output is all read by then (a refused start's reason is its last lines).
      child.once("close", (code) => {
        clearTimeout(timer);
        reject(new ProviderExitedError(code, stdout, stderr));
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

/**
 * A real ERC-4337 bundler for the devnet and the tests (issue 38, docs/aa.md): Pimlico's Alto from npm, run as its own
 * process against a chain's JSON-RPC endpoint, ready once it answers `eth_supportedEntryPoints`, stopped by its PID.
 * It listens on 127.0.0.1 only (alto-loopback.mjs) and gets no more of our environment than it needs.
 */
import type { ChildProcess } from "node:child_process";
import { createRequire } from "node:module";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import type { Address, Hex } from "viem";
import { BundlerUnavailableError, checkBundler } from "../../common/account-abstraction.js";
import { devnetPrivateKey } from "../../common/devnet.js";
import { spawnChild } from "../process/child.js";
import { SuanliError } from "../../common/errors.js";

export class BundlerError extends SuanliError {
  override name = "BundlerError";
}

export type BundlerOptions = {
  /** The chain's JSON-RPC endpoint. */
  rpcUrl: string;
  /** The EntryPoint v0.8 (its canonical address: Alto tells the version by it). */
  entryPoint: Address;
  /** Keys of the accounts that send the bundles (they pay the gas, the EntryPoint refunds them from each account). */
  executorKeys: readonly Hex[];
  /** Key of the account that deploys Alto's simulation contracts at start and refills the executors. */
  utilityKey: Hex;
  /** Port to listen on, on 127.0.0.1; a free one by default. It must be free: startBundler checks before starting Alto. */
  port?: number;
  /**
   * Alto's safe mode: the ERC-7562 validation rules checked by tracing each user operation's validation with a
   * JavaScript tracer (`debug_traceCall`). Hardhat's network has no JavaScript tracers, so on the Hardhat devnet it must
   * be off; Anvil has them. docs/aa.md says which checks this turns off.
   */
  safeMode: boolean;
  /** How long to wait for it to answer, ms (default 30 s: Alto loads ~180 MB of modules and deploys its simulations). */
  readyTimeoutMs?: number;
  /** Alto's log level (default "warn"). */
  logLevel?: "trace" | "debug" | "info" | "warn" | "error";
};

export type Bundler = {
  /** Alto's JSON-RPC endpoint for bundler clients (`eth_sendUserOperation`...). */
  url: string;
  pid: number;
  /** The last output Alto printed (for error messages). */
  output(): string;
  stop(): Promise<void>;
};

/** Alto's command, run with this process's Node (Alto's script asks for whatever `node` is on the PATH). */
function altoScript(): string {
  try {
    // The package exports only its library (esm/index.js); its bin is esm/cli/alto.js beside it.
    return path.join(path.dirname(createRequire(import.meta.url).resolve("@pimlico/alto")), "cli/alto.js");
  } catch (cause) {
    throw new BundlerError("@pimlico/alto is not installed: it is the devnet's bundler", {
      cause: cause as Error,
      metaMessages: ["Install the development dependencies (`npm ci`)."],
    });
  }
}

/**
 * Alto's server listens on "0.0.0.0" (it has no host option): this preload, next to this file (and found from the CLI
 * bundle too, whose `import.meta.url` is rewritten to this file's, scripts/build-cli.ts), moves it to 127.0.0.1.
 */
const LOOPBACK_PRELOAD = new URL("./alto-loopback.mjs", import.meta.url).href;

/** Binds `port` (0: any) on 127.0.0.1, where Alto will listen, and frees it again; the port, or the bind's error. */
async function bindLoopback(port: number): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => server.once("error", reject).listen({ port, host: "127.0.0.1", exclusive: true }, resolve));
  const bound = (server.address() as { port: number }).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return bound;
}

/**
 * Fails unless `port` is free on 127.0.0.1. Readiness is an answer on that port: an Alto left behind by a devnet killed
 * with SIGKILL would answer in place of the new one, which cannot bind. (A listener on every interface holds 127.0.0.1's
 * port too, so one bind covers both; binding "0.0.0.0" to check would itself listen beyond the loopback.)
 */
async function assertPortFree(port: number): Promise<void> {
  try {
    await bindLoopback(port);
  } catch (cause) {
    const code = (cause as NodeJS.ErrnoException).code;
    throw new BundlerError(
      code === "EADDRINUSE"
        ? `Port ${port} on 127.0.0.1 is in use: a previous Alto (from a devnet killed with SIGKILL) may still be running`
        : `Cannot listen on 127.0.0.1:${port}: ${(cause as Error).message}`,
      {
        cause: cause as Error,
        metaMessages: [
          `Find what holds it with \`ss -ltnp 'sport = :${port}'\` (or \`lsof -i :${port}\`; an Alto shows as \`alto.js\` in \`ps\`), stop it by its PID,`,
          "or choose another port (`suanli devnet --bundler-port N`, 0 for any free one).",
        ],
      },
    );
  }
}

/** Alto's environment: what Node needs, and its keys; not this process's (its secrets stay out of Alto's ~280 packages). */
function altoEnvironment(options: BundlerOptions): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ALTO_EXECUTOR_PRIVATE_KEYS: options.executorKeys.join(","), ALTO_UTILITY_PRIVATE_KEY: options.utilityKey };
  for (const name of ["PATH", "HOME", "TMPDIR"] as const) if (process.env[name] !== undefined) env[name] = process.env[name];
  return env;
}

/**
 * Starts Alto against `rpcUrl` for `entryPoint` and resolves once it serves that EntryPoint. Keys travel in its
 * environment (Alto reads `ALTO_*`), not on its command line. Fails with BundlerError, Alto's last output attached, when
 * it exits or does not answer in time.
 */
export async function startBundler(options: BundlerOptions): Promise<Bundler> {
  if (options.executorKeys.length === 0) throw new BundlerError("The bundler needs at least one executor key");
  const port = options.port ?? (await bindLoopback(0));
  if (options.port !== undefined) await assertPortFree(port);
  const url = `http://127.0.0.1:${port}`;
  const args = [
    ...["--import", LOOPBACK_PRELOAD],
    altoScript(),
    ...["--entrypoints", options.entryPoint, "--rpc-url", options.rpcUrl, "--port", String(port)],
    ...["--safe-mode", String(options.safeMode), "--log-level", options.logLevel ?? "warn"],
    // A devnet mines a block per transaction: poll it often, and bundle as soon as an operation arrives.
    ...["--block-time", "250", "--min-bundle-interval", "50", "--max-bundle-interval", "250"],
    // No executor refills: the devnet funds them, and a refill loop would spend the utility account's gas.
    ...["--refilling-wallets", "false", "--utility-wallet-monitor", "false"],
    // Any origin's pages may call it (Alto's CORS reflects the Origin): the renter console's passkey sign-in sends
    // user operations from the browser (docs/console.md). Loopback does not keep other sites' pages in this
    // machine's browser out; on a devnet they could only spend devnet ETH (docs/aa.md).
    ...["--enable-cors", "true"],
  ];
  // Alto loads a .env from its working folder: run it where there is none of ours.
  const child: ChildProcess = spawnChild(process.execPath, args, {
    cwd: tmpdir(),
    stdio: ["ignore", "pipe", "pipe"],
    env: altoEnvironment(options),
  });
  let output = "";
  const keep = (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-16_384);
  };
  child.stdout!.on("data", keep);
  child.stderr!.on("data", keep);
  let exitCode: number | null | undefined;
  const exited = new Promise<void>((resolve) =>
    child.once("exit", (code) => {
      exitCode = code;
      resolve();
    }),
  );
  const spawnError = new Promise<never>((_, reject) => child.once("error", reject));
  spawnError.catch(() => undefined);
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
    const killer = setTimeout(() => child.kill("SIGKILL"), 5_000);
    await exited;
    clearTimeout(killer);
  };

  const deadline = Date.now() + (options.readyTimeoutMs ?? 30_000);
  for (;;) {
    if (exitCode !== undefined) throw new BundlerError(`Alto exited (code ${exitCode}) before serving:\n${output}`);
    const answer = await Promise.race([
      checkBundler(url, options.entryPoint, 1_000).then(
        () => "ready" as const,
        (error: unknown) => error as Error,
      ),
      spawnError,
    ]).catch(async (cause: unknown) => {
      throw new BundlerError(`Alto could not be started: ${(cause as Error).message}`, { cause: cause as Error });
    });
    if (answer === "ready") {
      // An answer from a process that is not our Alto (which has exited) is no readiness.
      if (exitCode !== undefined) throw new BundlerError(`Alto exited (code ${exitCode}) before serving:\n${output}`);
      break;
    }
    // It answers, but for another EntryPoint: waiting will not change that.
    if (answer instanceof BundlerUnavailableError && answer.reason === "entry-point") {
      await stop();
      throw new BundlerError(answer.shortMessage);
    }
    if (Date.now() > deadline) {
      await stop();
      throw new BundlerError(`Alto did not answer on ${url} within ${options.readyTimeoutMs ?? 30_000} ms:\n${output}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  return { url, pid: child.pid!, output: () => output, stop };
}

/** Devnet accounts of the devnet's bundler: Hardhat funds accounts 0-19, and the devnet and tests use 0-9 (common/devnet.ts). */
export const DEVNET_BUNDLER_EXECUTOR_INDEX = 19;
export const DEVNET_BUNDLER_UTILITY_INDEX = 18;

/**
 * The devnet's bundler: Alto for `entryPoint`, sending bundles from devnet account 19 (its utility account 18), with
 * safe mode off, because the Hardhat devnet has no JavaScript tracers (docs/aa.md says which checks that turns off).
 */
export function startDevnetBundler(options: { rpcUrl: string; entryPoint: Address; port?: number; logLevel?: BundlerOptions["logLevel"] }): Promise<Bundler> {
  return startBundler({
    ...options,
    executorKeys: [devnetPrivateKey(DEVNET_BUNDLER_EXECUTOR_INDEX)],
    utilityKey: devnetPrivateKey(DEVNET_BUNDLER_UTILITY_INDEX),
    safeMode: false,
  });
}

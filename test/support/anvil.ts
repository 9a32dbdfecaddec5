/**
 * Foundry's Anvil as a chain nobody here wrote (TOOLCHAIN.md, "Checked 2026-12-04"): the binary from the
 * `@foundry-rs/anvil` devDependency's platform package, started on a free 127.0.0.1 port.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);

/** The platform package that ships the binary, as @foundry-rs/anvil's own launcher names it. */
function anvilBinary(): string {
  const arch = { x64: "amd64", arm64: "arm64" }[process.arch as string];
  const platform = { linux: "linux", darwin: "darwin", win32: "win32" }[process.platform as string];
  if (!arch || !platform) throw new Error(`Anvil ships no binary for ${process.platform}/${process.arch}`);
  return require.resolve(`@foundry-rs/anvil-${platform}-${arch}/bin/anvil${process.platform === "win32" ? ".exe" : ""}`);
}

export type Anvil = { rpcUrl: string; pid: number; stop(): Promise<void> };

/**
 * Starts Anvil with `chainId` on 127.0.0.1 (port chosen by the system) and resolves once it listens. Its accounts
 * are the standard test mnemonic's, the same keys as the devnet's (common/devnet.ts devnetAccount).
 */
export function startAnvil({ chainId, timeoutMs = 20_000 }: { chainId: number; timeoutMs?: number }): Promise<Anvil> {
  const child: ChildProcess = spawn(anvilBinary(), ["--host", "127.0.0.1", "--port", "0", "--chain-id", String(chainId)], { stdio: ["ignore", "pipe", "pipe"] });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
    await exited;
  };
  return new Promise<Anvil>((resolve, reject) => {
    let output = "";
    const timer = setTimeout(() => {
      stop().catch(() => undefined);
      reject(new Error(`Anvil did not listen within ${timeoutMs} ms:\n${output}`));
    }, timeoutMs);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const listening = /Listening on (127\.0\.0\.1:\d+)/.exec(output);
      if (!listening) return;
      clearTimeout(timer);
      child.stdout!.off("data", onData);
      // Keep draining its output so a full pipe never blocks it.
      child.stdout!.resume();
      resolve({ rpcUrl: `http://${listening[1]}`, pid: child.pid!, stop });
    };
    child.stdout!.on("data", onData);
    child.stderr!.on("data", (chunk: Buffer) => (output += chunk.toString()));
    child.once("error", (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`Anvil exited (${code}) before listening:\n${output}`));
    });
  });
}

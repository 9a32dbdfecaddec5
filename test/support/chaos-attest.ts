/**
 * Chaos helpers for the attestor role (test/e2e/chaos-attestors.test.ts), beside the RPC proxy and
 * the money check in chaos.ts:
 *
 * - `AttestorProcess`: an attestor node as a real child process (`suanli attestor start --config
 *   FILE --json`), to SIGKILL mid-challenge and restart on the same data dir.
 * - `partition` / `heal`: cut one in-process node off from one peer with the node's own libp2p
 *   connection gater (both directions, dials and inbound), and undo it.
 * - `waitForLine`: waits for a log line of a child process (JSON logs on stderr).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { writeFile } from "node:fs/promises";
import path from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { peerIdFromString } from "@libp2p/peer-id";
import { devnetPrivateKey } from "../../common/devnet.js";
import { peerGuardOf, type SuanliHost } from "../../common/p2p/host.js";
import { SUANLI_BIN } from "./cli.js";
import type { Devnet } from "./devnet.js";
import { merge } from "./merge.js";
import { waitFor } from "./wait.js";

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

/** What `suanli attestor start --json` prints once it runs. */
export type AttestorReady = { address: `0x${string}`; peerId: string; addrs: string[] };

/** The config file of an attestor node in its own process: devnet account `index`, JSON logs at info. */
export function attestorProcessConfig(devnet: Devnet, index: number, dataDir: string, overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return merge(
    {
      dataDir,
      log: { level: "info", format: "json" },
      chain: { rpcUrl: devnet.rpcUrl, deploymentsDir: devnet.deploymentsDir, pollingIntervalMs: 100, privateKey: devnetPrivateKey(index) },
      p2p: {
        listen: ["/ip4/127.0.0.1/tcp/0"],
        allowPrivateAddresses: true,
        dht: { enabled: false },
        gossip: { heartbeatIntervalMs: 200, ipColocationWhitelist: ["127.0.0.1"] },
        connections: { inboundPerSecondPerHost: 1000 },
      },
      offers: { sweepIntervalMs: 200 },
      attest: { challenge: { preset: "cpu-devnet" }, runner: { workers: 1 } },
    },
    overrides,
  );
}

/** An attestor node as a real child process; `stderr` holds its log lines as they come. */
export class AttestorProcess {
  private constructor(
    readonly child: ChildProcess,
    readonly ready: AttestorReady,
    readonly stderr: string[],
  ) {}

  /** Writes `config` to `configFile` and starts `suanli attestor start --config configFile --json`. */
  static async start(configFile: string, config: Record<string, unknown>): Promise<AttestorProcess> {
    await writeFile(configFile, JSON.stringify(config, null, 2));
    const env: Record<string, string> = {};
    for (const [key, value] of Object.entries(process.env)) if (value !== undefined && !key.startsWith("SUANLI_")) env[key] = value;
    const child = spawn(process.execPath, [SUANLI_BIN, "attestor", "start", "--config", configFile, "--json"], { cwd: repoRoot, env, stdio: ["ignore", "pipe", "pipe"] });
    const stderr: string[] = [];
    createInterface({ input: child.stderr! }).on("line", (line) => stderr.push(line));
    const ready = await new Promise<AttestorReady>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the attestor did not start within 60 s:\n${stderr.slice(-20).join("\n")}`)), 60_000);
      createInterface({ input: child.stdout! }).on("line", (line) => {
        if (!line.startsWith("{")) return;
        const parsed = JSON.parse(line) as Partial<AttestorReady>;
        if (parsed.peerId && parsed.address && parsed.addrs) {
          clearTimeout(timer);
          resolve(parsed as AttestorReady);
        }
      });
      child.once("exit", (code) => {
        clearTimeout(timer);
        reject(new Error(`the attestor exited with ${code} before it was ready:\n${stderr.slice(-20).join("\n")}`));
      });
    });
    return new AttestorProcess(child, ready, stderr);
  }

  /** Its first listen address, with its /p2p/ suffix. */
  get addr(): string {
    const addr = this.ready.addrs[0];
    if (!addr) throw new Error("the attestor listens on no address");
    return addr.includes("/p2p/") ? addr : `${addr}/p2p/${this.ready.peerId}`;
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Sends `signal` to the node's own pid and waits for it to exit. */
  async kill(signal: NodeJS.Signals): Promise<void> {
    if (!this.running) return;
    const exited = new Promise<void>((resolve) => this.child.once("exit", () => resolve()));
    process.kill(this.child.pid!, signal);
    await exited;
  }
}

/** Parsed JSON log lines of `lines` (a child's stderr) from `from` on; lines that are not JSON are skipped. */
export function logEntries(lines: readonly string[], from = 0): Record<string, unknown>[] {
  const entries: Record<string, unknown>[] = [];
  for (const line of lines.slice(from)) {
    if (!line.startsWith("{")) continue;
    try {
      entries.push(JSON.parse(line) as Record<string, unknown>);
    } catch {
      // a line cut short by a kill
    }
  }
  return entries;
}

/** Waits until a JSON log line of `lines` (from index `from`) has `msg` and satisfies `match`; returns it. */
export function waitForLine(
  lines: readonly string[],
  msg: string,
  match: (entry: Record<string, unknown>) => boolean = () => true,
  options: { from?: number; timeoutMs?: number } = {},
): Promise<Record<string, unknown>> {
  return waitFor(`the log line "${msg}"`, () => logEntries(lines, options.from).find((entry) => entry.msg === msg && match(entry)), {
    timeoutMs: options.timeoutMs ?? 30_000,
    intervalMs: 20,
  });
}

/**
 * Cuts `host` off from `peer`: its connection gater refuses the peer (dials out and connections
 * in) and the open connections are closed. A partition as the node sees it: every dial fails.
 */
export async function partition(host: SuanliHost, peer: string): Promise<void> {
  const guard = peerGuardOf(host);
  if (!guard) throw new Error("the host was not made by createHost: it has no connection gater");
  guard.penalize(peer, undefined, -1_000_000);
  await host.hangUp(peerIdFromString(peer));
}

/** Ends a partition made by `partition`. */
export function heal(host: SuanliHost, peer: string): void {
  const guard = peerGuardOf(host);
  if (!guard) throw new Error("the host was not made by createHost: it has no connection gater");
  guard.forgive(peer);
}

/**
 * Checks a command's own flags before it reaches the chain or joins the network: every problem is
 * collected and reported at once (exit 2), so a typo answers at once instead of after the RPC and
 * libp2p start-up, and the user fixes all of them in one go.
 */
import { readFileSync } from "node:fs";
import { multiaddr } from "@multiformats/multiaddr";
import { CliError, ExitCode } from "./output.js";
import type { WalletFlags } from "./account.js";

const KEY_PATTERN = /^0x[0-9a-fA-F]{64}$/;
const RPC_PROTOCOLS = new Set(["http:", "https:", "ws:", "wss:"]);

/** The problems found in a command line; `throwIfAny` reports them all in one usage error. */
export class FlagProblems {
  readonly list: string[] = [];

  add(problem: string): void {
    this.list.push(problem);
  }

  /** `--flag`'s value as a finite number, or undefined (and a problem) when it is not one. */
  number(flag: string, value: string | undefined): number | undefined {
    if (value === undefined) return undefined;
    const n = Number(value);
    if (value.trim() === "" || !Number.isFinite(n)) {
      this.add(`--${flag} must be a number, got "${value}"`);
      return undefined;
    }
    return n;
  }

  /** A whole number, 0 or more (a count); undefined when absent or refused. */
  count(flag: string, value: string | undefined): number | undefined {
    if (value === undefined) return undefined;
    const n = Number(value);
    if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n)) {
      this.add(`--${flag} must be a whole number, 0 or more, got "${value}"`);
      return undefined;
    }
    return n;
  }

  throwIfAny(): void {
    if (this.list.length === 0) return;
    if (this.list.length === 1) throw new CliError(this.list[0]!, ExitCode.usage);
    throw new CliError(
      `${this.list.length} problems with the command line:`,
      ExitCode.usage,
      this.list.map((p) => `- ${p}`),
    );
  }
}

/** Flags of the commands that reach the chain (and, for a renter's, the network). */
export type PreflightFlags = WalletFlags & { rpcUrl?: string; bootstrap?: string };

/**
 * Checks --rpc-url, the wallet flags (--key, --key-file, SUANLI_KEY, --devnet-account, never two
 * of them at once where the choice would be silent) and --bootstrap, adding every problem to
 * `problems`. Reads nothing over the network.
 */
export function checkChainFlags(flags: PreflightFlags, problems: FlagProblems, env: NodeJS.ProcessEnv = process.env): void {
  if (flags.rpcUrl !== undefined) {
    let protocol: string | undefined;
    try {
      protocol = new URL(flags.rpcUrl).protocol;
    } catch {
      protocol = undefined;
    }
    if (!protocol || !RPC_PROTOCOLS.has(protocol)) problems.add(`--rpc-url must be an http(s):// or ws(s):// URL such as http://127.0.0.1:8545, got "${flags.rpcUrl}"`);
  }
  if (flags.key !== undefined && flags.keyFile !== undefined) problems.add("--key and --key-file both give a wallet: pass one of them");
  if (flags.devnetAccount !== undefined && (flags.key !== undefined || flags.keyFile !== undefined)) {
    problems.add(`--devnet-account and ${flags.key !== undefined ? "--key" : "--key-file"} both give a wallet: pass one of them`);
  }
  if (flags.key !== undefined && !KEY_PATTERN.test(flags.key)) problems.add("--key must be 0x followed by 64 hex digits");
  if (flags.keyFile !== undefined) {
    try {
      const key = readFileSync(flags.keyFile, "utf8").trim();
      if (!KEY_PATTERN.test(key)) problems.add(`--key-file ${flags.keyFile} must hold 0x followed by 64 hex digits`);
    } catch (error) {
      problems.add(`Cannot read --key-file ${flags.keyFile}: ${(error as NodeJS.ErrnoException).code ?? String(error)}`);
    }
  }
  // SUANLI_KEY is used only when no flag gives a key; then it must be one.
  if (flags.key === undefined && flags.keyFile === undefined && env.SUANLI_KEY && !KEY_PATTERN.test(env.SUANLI_KEY)) {
    problems.add("SUANLI_KEY (environment) must be 0x followed by 64 hex digits; unset it or fix it");
  }
  if (flags.devnetAccount !== undefined) {
    const index = Number(flags.devnetAccount);
    if (flags.devnetAccount.trim() === "" || !Number.isInteger(index) || index < 0 || index > 999) {
      problems.add(`--devnet-account must be an integer from 0 to 999, got "${flags.devnetAccount}"`);
    }
  }
  for (const addr of (flags.bootstrap ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean)) {
    try {
      multiaddr(addr);
    } catch {
      problems.add(`--bootstrap "${addr}" is not a multiaddr (such as /ip4/127.0.0.1/tcp/4001/p2p/12D3KooW...)`);
    }
  }
}

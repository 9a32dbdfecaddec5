/**
 * What the renter commands print and how they exit: follow-up hints that run as printed, exit codes,
 * output downloads with their progress bar and verification label. Split from renter.ts (commands).
 */
import type { Command } from "commander";
import { InvalidInputError } from "../../../common/errors.js";
import type { DownloadOutputReturnType, SuanliClient, TaskReceipt } from "../../../sdk/index.js";
import type { ChainFlags } from "../context.js";
import { ExitCode } from "../output.js";

export type RenterFlags = ChainFlags & { bootstrap?: string; nodeUrl?: string; stateDir?: string; smartAccount?: string; bundler?: string; paymaster?: string };

/** `value` quoted for a POSIX shell when it needs to be. */
function shellWord(value: string): string {
  return /^[A-Za-z0-9_/.:,=@%+-]+$/.test(value) ? value : `'${value.replaceAll("'", `'\\''`)}'`;
}

const FOLLOW_UP_FLAGS: [keyof RenterFlags, string][] = [
  ["rpcUrl", "--rpc-url"],
  ["deployments", "--deployments"],
  ["bootstrap", "--bootstrap"],
  ["nodeUrl", "--node-url"],
  ["stateDir", "--state-dir"],
  ["keyFile", "--key-file"],
  ["devnetAccount", "--devnet-account"],
  ["smartAccount", "--smart-account"],
  ["bundler", "--bundler"],
  ["paymaster", "--paymaster"],
];

/**
 * The flags the user typed that a follow-up command needs to reach the same chain, network, task
 * list and wallet, shell-quoted: a printed hint then runs as shown. A key given with --key is not
 * printed back (the hint would put it in logs); the hint says where it goes.
 */
export function followUpFlags(command: Command): string {
  const flags = command.opts<RenterFlags>();
  const words: string[] = [];
  for (const [name, flag] of FOLLOW_UP_FLAGS) {
    const value = flags[name];
    if (typeof value === "string" && command.getOptionValueSource(name) === "cli") words.push(flag, shellWord(value));
  }
  if (flags.key !== undefined && command.getOptionValueSource("key") === "cli") words.push("--key", "<your key>");
  return words.length ? ` ${words.join(" ")}` : "";
}

/** Whether the task stopped because its renter cancelled it (closed the lease), not by a failure. */
export function cancelledByRenter(receipt: Pick<TaskReceipt, "state" | "leases">): boolean {
  return receipt.state === "stopped" && receipt.leases.some((lease) => lease.endReason === "RenterClosed" || lease.gas.some((step) => step.step === "close (cancel)"));
}

/** Maps SDK errors to exit codes scripts rely on. */
export function renterExitCode(error: unknown): number | undefined {
  const name = (error as Error)?.name;
  if (name === "NoMatchError" || name === "AllocationError") return ExitCode.noMatch;
  if (name === "InsufficientBalanceError" || name === "InsufficientGasError") return ExitCode.insufficientFunds;
  if (name === "NoWalletError" || error instanceof InvalidInputError) return ExitCode.usage;
  return undefined;
}

export async function downloadWithProgress(
  client: SuanliClient,
  taskId: string,
  dir: string,
  json: boolean,
  options: { maxBytes?: number | undefined; rank?: number | undefined; resume?: boolean },
): Promise<DownloadOutputReturnType> {
  const tty = !json && process.stderr.isTTY;
  let last = 0;
  const result = await client.downloadOutput(taskId, {
    dir,
    ...(options.maxBytes !== undefined ? { maxBytes: options.maxBytes } : {}),
    ...(options.rank !== undefined ? { rank: options.rank } : {}),
    ...(options.resume !== undefined ? { resume: options.resume } : {}),
    onProgress: tty
      ? ({ bytes, totalBytes }) => {
          if (Date.now() - last < 100 && bytes < totalBytes) return;
          last = Date.now();
          const width = 30;
          const filled = totalBytes === 0 ? width : Math.round((bytes / totalBytes) * width);
          process.stderr.write(`\r[${"#".repeat(filled)}${".".repeat(width - filled)}] ${(bytes / 1e6).toFixed(1)}/${(totalBytes / 1e6).toFixed(1)} MB`);
        }
      : undefined,
  });
  if (tty) process.stderr.write("\n");
  return result;
}

/** What the digest was checked against, in words; a snapshot says UNVERIFIED in capitals. */
export function verificationLabel(result: Pick<DownloadOutputReturnType, "verified" | "verifiedAgainst" | "snapshot">): string {
  if (result.verified && result.verifiedAgainst === "chain") return "verified against the chain's completion report (and the provider's signed one)";
  if (result.verified) return "verified against the provider's signed completion report (the lease ended without one on-chain)";
  return result.snapshot ? "UNVERIFIED: a snapshot of a running task (nothing is signed until it ends)" : "UNVERIFIED";
}

export function renderOutput(result: DownloadOutputReturnType, dir: string): string {
  return [
    `${result.files.length} file(s), ${result.bytes} bytes in ${dir}${result.transferred < result.bytes ? ` (${result.transferred} transferred, the rest resumed)` : ""}`,
    result.outputCid ? `  CID ${result.outputCid}: ${verificationLabel(result)} (any node serves it: suanli data get)` : `  digest ${result.digest}: ${verificationLabel(result)}`,
  ].join("\n");
}

/**
 * A held completion by name (issue #34 finding 1): the provider completed the lease and its collateral stays
 * locked until `until` (unix seconds), so a fault observed before the completion can still land and credit the
 * renter. Empty for every other lease.
 */
export function heldText(until: number | null | undefined): string {
  if (until === null || until === undefined) return "";
  return `, collateral held until ${new Date(until * 1000).toISOString()} (a fault observed before the completion can still land)`;
}

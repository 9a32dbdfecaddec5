import { readFile } from "node:fs/promises";
import type { Account } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { DEVNET_CHAIN_ID, devnetAccount } from "../../common/devnet.js";
import { CliError, ExitCode } from "./output.js";

/** Wallet options every command that signs accepts. */
export type WalletFlags = { key?: string; keyFile?: string; devnetAccount?: string };

const KEY_PATTERN = /^0x[0-9a-fA-F]{64}$/;

/**
 * Resolves the wallet of a command, strongest first: --key, --key-file, the SUANLI_KEY
 * environment variable, --devnet-account (devnet only). Throws a usage error naming what to
 * pass when there is none.
 */
export async function resolveAccount(flags: WalletFlags, chainId: number, env = process.env): Promise<Account> {
  let key = flags.key;
  if (!key && flags.keyFile) {
    try {
      key = (await readFile(flags.keyFile, "utf8")).trim();
    } catch (error) {
      throw new CliError(`Cannot read --key-file ${flags.keyFile}: ${(error as NodeJS.ErrnoException).code ?? error}`, ExitCode.usage);
    }
  }
  if (flags.devnetAccount !== undefined && (flags.key || flags.keyFile)) {
    throw new CliError(`--devnet-account and ${flags.key ? "--key" : "--key-file"} both give a wallet: pass one of them`, ExitCode.usage);
  }
  const source = flags.key ? "--key" : flags.keyFile ? `--key-file ${flags.keyFile}` : "SUANLI_KEY (environment)";
  key ||= env.SUANLI_KEY;
  if (key) {
    if (!KEY_PATTERN.test(key)) throw new CliError(`${source} must be 0x followed by 64 hex digits`, ExitCode.usage);
    return privateKeyToAccount(key as `0x${string}`);
  }
  if (flags.devnetAccount !== undefined) {
    const index = Number(flags.devnetAccount);
    if (!Number.isInteger(index) || index < 0 || index > 999) {
      throw new CliError(`--devnet-account must be an integer from 0 to 999, got "${flags.devnetAccount}"`, ExitCode.usage);
    }
    if (chainId !== DEVNET_CHAIN_ID) {
      throw new CliError(`--devnet-account works only on the devnet (chain ${DEVNET_CHAIN_ID}); this chain is ${chainId}`, ExitCode.usage);
    }
    return devnetAccount(index);
  }
  throw new CliError("No wallet: this command signs transactions or requests", ExitCode.usage, [
    "Pass --key 0x<64 hex>, --key-file FILE, set SUANLI_KEY, or on the devnet --devnet-account N (0-9 are funded).",
  ]);
}

import { mnemonicToAccount, type HDAccount } from "viem/accounts";

/**
 * The well-known mnemonic of Hardhat's development network. Its accounts hold 10,000 ETH on
 * every devnet and have no value anywhere else. Never use it on a real chain.
 */
export const DEVNET_MNEMONIC = "test test test test test test test test test test test junk";

/** The chain id of Hardhat's development network (`npm run chain` and the embedded chain). */
export const DEVNET_CHAIN_ID = 31337;

/** Devnet account `index` (0 deploys and governs; others play providers, renters, attestors). */
export function devnetAccount(index: number): HDAccount {
  return mnemonicToAccount(DEVNET_MNEMONIC, { addressIndex: index });
}

/** The private key of devnet account `index`, for child processes that take a key in config. */
export function devnetPrivateKey(index: number): `0x${string}` {
  const key = devnetAccount(index).getHdKey().privateKey;
  if (!key) throw new Error(`devnet account ${index} has no private key`);
  return `0x${Buffer.from(key).toString("hex")}`;
}

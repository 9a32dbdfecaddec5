/**
 * The gateway's own EVM key: the address renters delegate "forward" to (docs/endpoints.md). It is
 * generated on the first start and kept in the data dir (`gateway.key`, mode 0600), so a restarted
 * gateway keeps the delegations its endpoints carry. It holds no funds and signs nothing but
 * forward requests to the leases renters delegated.
 */
import { chmod, readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from "viem/accounts";
import { z } from "zod";
import { SuanliError } from "../../common/errors.js";

export const GATEWAY_KEY_FILE = "gateway.key";

const keySchema = z
  .string()
  .trim()
  .regex(/^0x[0-9a-fA-F]{64}$/, "expected 0x followed by 64 hex digits");

/** Reads the gateway's key from `dataDir`, creating it (0600) when there is none. */
export function loadGatewayKey(dataDir: string): Promise<PrivateKeyAccount> {
  return loadNodeKey(dataDir, GATEWAY_KEY_FILE, "gateway");
}

/** Reads a key of the node's own (`<dataDir>/<name>`, 0600) for one of its services, creating it when there is none. */
export async function loadNodeKey(dataDir: string, name: string, what: string): Promise<PrivateKeyAccount> {
  const file = path.join(dataDir, name);
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw new SuanliError(`Cannot read the ${what} key ${file}`, { cause: error });
    try {
      await writeFile(file, `${generatePrivateKey()}\n`, { mode: 0o600, flag: "wx" });
    } catch (written) {
      // Another process made it first: read theirs.
      if ((written as NodeJS.ErrnoException).code !== "EEXIST") throw new SuanliError(`Cannot write the ${what} key ${file}`, { cause: written });
    }
    text = await readFile(file, "utf8");
  }
  const parsed = keySchema.safeParse(text);
  if (!parsed.success) throw new SuanliError(`The ${what} key ${file} is not a private key: ${parsed.error.issues[0]?.message}`);
  await chmod(file, 0o600);
  return privateKeyToAccount(parsed.data as `0x${string}`);
}

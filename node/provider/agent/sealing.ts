/**
 * Sealed task secrets: a renter seals each secret env value to the provider's sealing key for one
 * lease and variable (common/sealed.ts); the node keeps that key in its data dir and opens the
 * values only in memory, just before the task starts, never storing the opened values (records
 * keep the sealed form).
 */
import { randomBytes } from "node:crypto";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import type { LocalAccount } from "viem";
import { InvalidInputError, SuanliError } from "../../../common/errors.js";
import { sealingKeyPairFromSeed, sealingKeyStatement, type SealingKey, type SealingKeyPair } from "../../../common/sealed.js";
import type { TaskSpec } from "../runtime/task.js";

/**
 * The spec with its sealed env values opened (in memory only, as `{ value, secret: true }`).
 * A value that does not open for this lease, variable and key is the renter's error.
 */
export async function openSealedSpec(sealing: { keyPair: SealingKeyPair; chainId: number } | undefined, leaseId: bigint, spec: TaskSpec): Promise<TaskSpec> {
  const sealed = Object.entries(spec.env).filter(([, value]) => typeof value !== "string" && "sealed" in value);
  if (sealed.length === 0) return spec;
  const env = { ...spec.env };
  for (const [name, value] of sealed) {
    try {
      if (!sealing) throw new Error("this provider has no sealing key");
      env[name] = { value: await sealing.keyPair.open((value as { sealed: string }).sealed, { chainId: sealing.chainId, leaseId, name }), secret: true };
    } catch {
      throw new InvalidInputError("task", [
        {
          path: `env.${name}`,
          message: "the sealed value does not open with this provider's key for this lease and variable; seal it again to the key in the provider's acceptance",
        },
      ]);
    }
  }
  return { ...spec, env };
}

/** The sealing key file cannot be used. */
export class SealingKeyError extends SuanliError {
  override name = "SealingKeyError";
}

/**
 * The node's key for sealed secrets: a P-256 key pair derived from a 32-byte seed kept in
 * `<dataDir>/sealing.key` (mode 0600, created on first start), and the wallet's signature that
 * binds its public key to this provider on this chain (sent with every reserve acceptance and
 * published with every offer).
 */
export async function loadSealingKey(dataDir: string, account: LocalAccount, chainId: number): Promise<{ keyPair: SealingKeyPair; key: SealingKey }> {
  const file = path.join(dataDir, "sealing.key");
  let seedHex = (
    await readFile(file, "utf8").catch((error: NodeJS.ErrnoException) => {
      if (error.code === "ENOENT") return undefined;
      throw error;
    })
  )?.trim();
  if (seedHex === undefined) {
    seedHex = randomBytes(32).toString("hex");
    await mkdir(dataDir, { recursive: true });
    // wx: never overwrite a key another start wrote meanwhile.
    await writeFile(file, `${seedHex}\n`, { mode: 0o600, flag: "wx" }).catch(async (error: NodeJS.ErrnoException) => {
      if (error.code !== "EEXIST") throw error;
      seedHex = (await readFile(file, "utf8")).trim();
    });
  }
  if (!/^[0-9a-f]{64}$/.test(seedHex!))
    throw new SealingKeyError(`The sealing key ${file} is not 64 hex digits`, {
      metaMessages: ["Move it away to create a new one (renters seal to the key in each acceptance)."],
    });
  const keyPair = await sealingKeyPairFromSeed(Buffer.from(seedHex!, "hex"));
  const signature = await account.signMessage({ message: sealingKeyStatement(chainId, account.address, keyPair.publicKey) });
  return { keyPair, key: { publicKey: keyPair.publicKey, signature } };
}

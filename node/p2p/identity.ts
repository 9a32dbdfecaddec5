import { randomBytes } from "node:crypto";
import { chmod, mkdir, open, readFile, rename, stat, unlink } from "node:fs/promises";
import path from "node:path";
import { generateKeyPair, privateKeyFromProtobuf, privateKeyToProtobuf } from "@libp2p/crypto/keys";
import type { PrivateKey } from "@libp2p/interface";
import { SuanliError } from "../../common/errors.js";

export class IdentityError extends SuanliError {
  override name = "IdentityError";
}

/**
 * Loads the node's libp2p identity from `file`, or creates one (Ed25519, written 0600) when the
 * file does not exist. The peer id is what a provider registers on-chain, so it must survive
 * restarts; a key readable by other users is refused, as ssh refuses such keys.
 */
export async function loadOrCreatePeerKey(file: string): Promise<{ key: PrivateKey; created: boolean }> {
  let bytes: Uint8Array | undefined;
  try {
    const info = await stat(file);
    if (process.platform !== "win32" && (info.mode & 0o077) !== 0) {
      throw new IdentityError(`The peer key ${file} is readable by other users`, {
        metaMessages: [`Restrict it: chmod 600 ${file}`],
      });
    }
    bytes = await readFile(file);
  } catch (error) {
    if (error instanceof IdentityError) throw error;
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") {
      throw new IdentityError(`Cannot read the peer key ${file}`, { cause: error });
    }
  }
  if (bytes) {
    try {
      return { key: privateKeyFromProtobuf(bytes), created: false };
    } catch (error) {
      throw new IdentityError(`The peer key ${file} is not a libp2p private key`, {
        cause: error,
        metaMessages: ["Restore the original file, or move it away to start with a new identity (then update the peer id registered on-chain)."],
      });
    }
  }

  const key = await generateKeyPair("Ed25519");
  await mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  // Written to a temp file first and renamed, so a crash never leaves half a key behind.
  const temp = `${file}.${randomBytes(4).toString("hex")}.tmp`;
  const handle = await open(temp, "wx", 0o600);
  try {
    await handle.writeFile(privateKeyToProtobuf(key));
    await handle.sync();
  } finally {
    await handle.close();
  }
  try {
    await chmod(temp, 0o600);
    await rename(temp, file);
  } catch (error) {
    await unlink(temp).catch(() => undefined);
    throw new IdentityError(`Cannot write the peer key ${file}`, { cause: error });
  }
  return { key, created: true };
}

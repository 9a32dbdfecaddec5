/**
 * Block verification and CID parsing for the data plane. Blocks that arrive over bitswap are
 * verified by bitswap itself (it derives the CID from the bytes it received, so bytes that do not
 * hash to a wanted CID never satisfy the want); blocks read back from the local level store are
 * verified here, so a corrupted disk cannot hand a task bytes that are not the CID's.
 */
import type { Blockstore } from "interface-blockstore";
import { CID } from "multiformats/cid";
import { sha256, sha512 } from "multiformats/hashes/sha2";
import { identity } from "multiformats/hashes/identity";
import { InvalidCidError } from "./errors.js";

/** Parses a CID string (v0 `Qm...` or v1), or throws InvalidCidError. */
export function parseCid(value: string): CID {
  if (typeof value !== "string" || value.length < 8 || value.length > 200) throw new InvalidCidError(String(value));
  try {
    return CID.parse(value.trim());
  } catch (error) {
    throw new InvalidCidError(value, error);
  }
}

/** The block is not the bytes its CID names. */
export class BlockMismatchError extends Error {
  override name = "BlockMismatchError";
  constructor(readonly cid: string) {
    super(`block ${cid} does not hash to its CID`);
  }
}

async function collect(chunks: Iterable<Uint8Array> | AsyncIterable<Uint8Array>): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  let length = 0;
  for await (const chunk of chunks) {
    parts.push(chunk);
    length += chunk.length;
  }
  if (parts.length === 1) return parts[0]!;
  const bytes = new Uint8Array(length);
  let offset = 0;
  for (const part of parts) {
    bytes.set(part, offset);
    offset += part.length;
  }
  return bytes;
}

/** Throws BlockMismatchError unless `bytes` hash to `cid` (sha2-256, sha2-512 or identity). */
export async function verifyBlock(cid: CID, bytes: Uint8Array): Promise<void> {
  const code = cid.multihash.code;
  const hasher = code === sha256.code ? sha256 : code === sha512.code ? sha512 : code === identity.code ? identity : undefined;
  if (!hasher) throw new BlockMismatchError(`${cid.toString()} (unsupported hash 0x${code.toString(16)})`);
  const digest = await hasher.digest(bytes);
  const want = cid.multihash.digest;
  if (digest.digest.length !== want.length || !digest.digest.every((byte, index) => byte === want[index])) throw new BlockMismatchError(cid.toString());
}

/** Helia's event for a block that came from the network and was stored (helia/src/storage.ts). */
const NETWORK_BLOCK_STORED = "blocks:get:blockstore:put";

/**
 * A read view of `inner` that verifies every block it returns (hashing those read from the local
 * store; those fetched for it Helia hashed on arrival) and counts the distinct blocks
 * and bytes read (`seen`), for the exporter. `onFetched` hears each block Helia had to fetch from
 * the network for it (with its size).
 */
export function verifyingBlockstore(inner: Blockstore, seen: Map<string, number>, onFetched?: (bytes: number) => void): Blockstore {
  const view = {
    async *get(cid: CID, options?: { onProgress?: (event: { type: string }) => void }) {
      let fetched = false;
      const onProgress = (event: { type: string }) => {
        if (event.type === NETWORK_BLOCK_STORED) fetched = true;
        options?.onProgress?.(event);
      };
      const bytes = await collect(inner.get(cid, { ...options, onProgress } as Parameters<Blockstore["get"]>[1]));
      // A block Helia fetched for this read is the very bytes it hashed against the CID on arrival
      // (helia/src/storage.ts, raceBlockRetrievers); one read back from the local store is hashed here.
      if (fetched) onFetched?.(bytes.length);
      else await verifyBlock(cid, bytes);
      seen.set(cid.toString(), bytes.length);
      yield bytes;
    },
    has: (cid: CID, options?: object) => inner.has(cid, options),
    put: (cid: CID, bytes: Uint8Array, options?: object) => inner.put(cid, bytes, options),
  };
  return view as unknown as Blockstore;
}

/** Reads a whole block from a blockstore. */
export async function readBlock(store: Blockstore, cid: CID, options?: object): Promise<Uint8Array> {
  return collect(store.get(cid, options));
}

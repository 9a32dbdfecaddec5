/**
 * keccak256 for hot paths: a node validating thousands of offers a second hashes each one about
 * eight times (two EIP-712 digests of two structs, two recovered public keys). viem's pure-JS
 * keccak costs 15-55 µs a hash on those short inputs; hash-wasm's WebAssembly Keccak costs 1-3 µs.
 * WebAssembly compiles asynchronously, so until `keccakReady` settles (a few milliseconds after
 * import), or if it cannot start at all, @noble/hashes' pure-JS keccak answers: the same bytes,
 * only slower.
 */
import { keccak_256 } from "@noble/hashes/sha3.js";
import { createKeccak, type IHasher } from "hash-wasm";

let hasher: IHasher | undefined;

/** Settles once the WebAssembly hasher is in use (or could not start; the pure-JS one stays). */
export const keccakReady: Promise<void> = createKeccak(256).then(
  (created) => {
    hasher = created;
  },
  () => undefined,
);

/** keccak256 of `data` as 32 fresh bytes. Synchronous: one shared hasher, never left mid-hash. */
export function keccak256Bytes(data: Uint8Array): Uint8Array {
  if (!hasher) return keccak_256(data);
  hasher.init();
  hasher.update(data);
  return hasher.digest("binary");
}

/**
 * The output digest rule of common/output-digest.ts over files held in memory, with @noble/hashes'
 * streaming SHA-256 (pure JS: no node:crypto, so the browser SDK recomputes the digest with it):
 *
 *   sha256 over, for each file in ascending byte order of its relative POSIX path:
 *   path (UTF-8) || 0x00 || size in decimal (ASCII) || 0x00 || content
 *
 * Also the digest of an output manifest's file list that an HTTP relay passes along with the
 * bytes of a read (so a client can tell that the bytes follow the manifest it listed).
 */
import { sha256 } from "@noble/hashes/sha2.js";
import { bytesToHex } from "@noble/hashes/utils.js";
import type { Hex } from "viem";
import { stringifyPlain } from "./json.js";

const encoder = new TextEncoder();

function compareBytes(a: Uint8Array, b: Uint8Array): number {
  const length = Math.min(a.length, b.length);
  for (let i = 0; i < length; i++) if (a[i] !== b[i]) return a[i]! - b[i]!;
  return a.length - b.length;
}

/**
 * The output digest of files given as bytes (the provider's rule).
 *
 * @example
 * import { digestOutputBytes } from "suanli/common/output-bytes-digest";
 * const digest = digestOutputBytes([{ path: "model.bin", data: new Uint8Array([1, 2]) }]);
 */
export function digestOutputBytes(files: readonly { path: string; data: Uint8Array }[]): Hex {
  const sorted = files.map((file) => ({ name: encoder.encode(file.path), data: file.data })).sort((a, b) => compareBytes(a.name, b.name));
  const hash = sha256.create();
  for (const file of sorted) {
    hash.update(file.name);
    hash.update(Uint8Array.of(0));
    hash.update(encoder.encode(String(file.data.length)));
    hash.update(Uint8Array.of(0));
    hash.update(file.data);
  }
  return `0x${bytesToHex(hash.digest())}`;
}

/** sha256 of the canonical JSON of a manifest's `files` (`[{ path, size }, ...]`), hex without 0x. */
export function outputFilesDigest(files: readonly { path: string; size: number }[]): string {
  return bytesToHex(sha256(encoder.encode(stringifyPlain(files.map((file) => ({ path: file.path, size: file.size }))))));
}

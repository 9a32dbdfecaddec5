/**
 * Writes a UnixFS DAG out as files (or only walks it, fetching every block): streamed file by
 * file, each entry name checked so that nothing lands outside the target.
 */
import { createWriteStream } from "node:fs";
import { mkdir } from "node:fs/promises";
import path from "node:path";
import { Readable, Writable } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { UnixFS } from "@helia/unixfs";
import type { Multiaddr } from "@multiformats/multiaddr";
import type { CID } from "multiformats/cid";
import { DataQuotaError, UnsafeDataError } from "./errors.js";

/** Called with the bytes done so far. */
export type Progress = (bytes: number) => void;

export type WalkOptions = {
  signal: AbortSignal;
  offline: boolean;
  providers: Multiaddr[] | undefined;
  onProgress: Progress | undefined;
  maxBytes: number | undefined;
};

const MAX_DEPTH = 64;
const MAX_ENTRIES = 1_000_000;

/** A name a DAG entry may carry: one path segment, no `..`, no NUL. */
export function safeEntryName(name: string): boolean {
  return name.length > 0 && name.length <= 255 && name !== "." && name !== ".." && !name.includes("/") && !name.includes("\\") && !name.includes("\0");
}

/**
 * Walks `cid`; with a `target`, writes a file there or creates a folder (mode 0755/0644).
 * Returns the bytes of file content.
 */
export async function writeDag(fs: UnixFS, cid: CID, target: string | undefined, options: WalkOptions): Promise<number> {
  let bytes = 0;
  let entries = 0;
  const blockOptions = { signal: options.signal, offline: options.offline, providers: options.providers };
  const visit = async (node: CID, at: string | undefined, depth: number): Promise<void> => {
    if (depth > MAX_DEPTH) throw new UnsafeDataError(cid.toString(), `deeper than ${MAX_DEPTH} folders`);
    if (++entries > MAX_ENTRIES) throw new UnsafeDataError(cid.toString(), `more than ${MAX_ENTRIES} entries`);
    const stat = await fs.stat(node, blockOptions);
    if (stat.type === "directory") {
      if (at) await mkdir(at, { recursive: depth === 0, mode: 0o755 });
      for await (const entry of fs.ls(node, blockOptions)) {
        if (!safeEntryName(entry.name)) throw new UnsafeDataError(cid.toString(), `entry name ${JSON.stringify(entry.name.slice(0, 80))} would leave the folder`);
        await visit(entry.cid, at ? path.join(at, entry.name) : undefined, depth + 1);
      }
      return;
    }
    if (options.maxBytes !== undefined && bytes + Number(stat.size) > options.maxBytes)
      throw new DataQuotaError(`The data ${cid.toString()}`, bytes + Number(stat.size), options.maxBytes);
    const counted = async function* () {
      for await (const chunk of fs.cat(node, blockOptions)) {
        bytes += chunk.length;
        if (options.maxBytes !== undefined && bytes > options.maxBytes) throw new DataQuotaError(`The data ${cid.toString()}`, bytes, options.maxBytes);
        options.onProgress?.(bytes);
        yield chunk;
      }
    };
    const sink = at
      ? createWriteStream(at, { flags: "wx", mode: 0o644 })
      : new Writable({
          write: (_chunk, _encoding, done) => done(),
        });
    await pipeline(Readable.from(counted()), sink, { signal: options.signal });
  };
  await visit(cid, target, 0);
  return bytes;
}

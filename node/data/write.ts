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
 * Files moved at once. One at a time, each file cost the round trips of its root and then its
 * leaves with the link idle in between (a 16-file folder: 32 of them); a few overlap those waits.
 */
export const FILE_CONCURRENCY = 4;
/** Blocks of one file asked for at once (the exporter's default is all of a node's links, up to 1024). */
export const BLOCK_READ_CONCURRENCY = 32;

/**
 * Walks `cid`; with a `target`, writes a file there or creates a folder (mode 0755/0644).
 * Folders are walked in order; up to FILE_CONCURRENCY files are fetched and written at once, and
 * the first failure stops the others. Returns the bytes of file content.
 */
export async function writeDag(fs: UnixFS, cid: CID, target: string | undefined, options: WalkOptions): Promise<number> {
  let bytes = 0;
  /** Sizes of the files started: the quota is checked against them as one file at a time would. */
  let planned = 0;
  let entries = 0;
  const stop = new AbortController();
  const signal = AbortSignal.any([options.signal, stop.signal]);
  const blockOptions = { signal, offline: options.offline, providers: options.providers, blockReadConcurrency: BLOCK_READ_CONCURRENCY };
  const running = new Set<Promise<void>>();
  let failure: { error: unknown } | undefined;
  const fail = (error: unknown) => {
    failure ??= { error };
    stop.abort(error);
  };
  const writeFile = async (node: CID, at: string | undefined): Promise<void> => {
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
    await pipeline(Readable.from(counted()), sink, { signal });
  };
  const visit = async (node: CID, at: string | undefined, depth: number): Promise<void> => {
    if (failure) return;
    if (depth > MAX_DEPTH) throw new UnsafeDataError(cid.toString(), `deeper than ${MAX_DEPTH} folders`);
    if (++entries > MAX_ENTRIES) throw new UnsafeDataError(cid.toString(), `more than ${MAX_ENTRIES} entries`);
    const stat = await fs.stat(node, blockOptions);
    if (stat.type === "directory") {
      if (at) await mkdir(at, { recursive: depth === 0, mode: 0o755 });
      for await (const entry of fs.ls(node, blockOptions)) {
        if (!safeEntryName(entry.name)) throw new UnsafeDataError(cid.toString(), `entry name ${JSON.stringify(entry.name.slice(0, 80))} would leave the folder`);
        await visit(entry.cid, at ? path.join(at, entry.name) : undefined, depth + 1);
        if (failure) return;
      }
      return;
    }
    if (options.maxBytes !== undefined && planned + Number(stat.size) > options.maxBytes)
      throw new DataQuotaError(`The data ${cid.toString()}`, planned + Number(stat.size), options.maxBytes);
    planned += Number(stat.size);
    while (running.size >= FILE_CONCURRENCY) await Promise.race(running);
    if (failure) return;
    const task: Promise<void> = writeFile(node, at)
      .catch(fail)
      .finally(() => running.delete(task));
    running.add(task);
  };
  try {
    await visit(cid, target, 0);
  } catch (error) {
    fail(error);
  }
  await Promise.allSettled([...running]);
  if (failure) throw failure.error;
  return bytes;
}

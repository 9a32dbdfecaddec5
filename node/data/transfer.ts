/**
 * Data over HTTP (docs/data.md, "HTTP API"): what a renter uploads is staged on the node's disk
 * (a file's bytes as they are, a folder as a tar stream), imported with DataStore.add and the
 * staging copy removed; what a renter downloads is written out of the DAG by DataStore.get (every
 * block verified) into a staging folder and streamed back (a file's bytes, a folder as tar).
 * Staging keeps the store's checks in one place (symlinks, entry names, depth, caps) at the cost
 * of one temporary copy on disk.
 */
import { randomUUID } from "node:crypto";
import { createReadStream, createWriteStream } from "node:fs";
import { mkdir, rm, stat } from "node:fs/promises";
import path from "node:path";
import { Readable, Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import { extract, create as createTar, type ReadEntry } from "tar";
import { DataQuotaError, DataSourceError } from "./errors.js";
import type { DataEntry, DataStore } from "./store.js";
import { safeEntryName } from "./write.js";

/** Entries a folder upload may hold; beyond it the upload is refused (DataSourceError). */
const MAX_UPLOAD_ENTRIES = 100_000;
const MAX_UPLOAD_DEPTH = 64;

export type UploadKind = "file" | "folder";

/** What the staging folder of the API's transfers is, under the node's data folder. */
export function stagingDir(dataDir: string): string {
  return path.join(path.resolve(dataDir), "data", "staging");
}

/** Counts the bytes of a stream and fails it with DataQuotaError past `maxBytes`. */
function byteCap(maxBytes: number, onProgress?: (bytes: number) => void): Transform {
  let bytes = 0;
  return new Transform({
    transform(chunk: Buffer, _encoding, done) {
      bytes += chunk.length;
      if (bytes > maxBytes) return done(new DataQuotaError("The upload would exceed data.pinnedBytes", bytes, maxBytes));
      onProgress?.(bytes);
      done(null, chunk);
    },
  });
}

/**
 * Stages an upload (a file's bytes, or a folder as a tar stream of its contents), adds it to the
 * store (pinned) and removes the staging copy. At most `maxBytes` are accepted from the client.
 */
export async function addUpload(store: DataStore, body: Readable, parameters: { kind: UploadKind; name: string; staging: string; maxBytes: number }): Promise<DataEntry> {
  const dir = path.join(parameters.staging, `up-${randomUUID()}`);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  try {
    const target = path.join(dir, parameters.name);
    if (parameters.kind === "file") {
      await pipeline(body, byteCap(parameters.maxBytes), createWriteStream(target, { flags: "wx", mode: 0o600 }));
    } else {
      await mkdir(target, { mode: 0o700 });
      await extractFolder(body, target, parameters.maxBytes);
    }
    return await store.add(target, { name: parameters.name });
  } finally {
    body.resume();
    await rm(dir, { recursive: true, force: true });
  }
}

async function extractFolder(body: Readable, target: string, maxBytes: number): Promise<void> {
  let entries = 0;
  let refused: string | undefined;
  const unpack = extract({
    cwd: target,
    strict: true,
    preserveOwner: false,
    // Modes from the archive are not the node's business: files 0644, folders 0755 (set below).
    filter: (entryPath, entry) => {
      const type = (entry as ReadEntry).type;
      const segments = entryPath.split("/").filter((segment) => segment !== "" && segment !== ".");
      if (++entries > MAX_UPLOAD_ENTRIES) refused ??= `more than ${MAX_UPLOAD_ENTRIES} entries`;
      else if (segments.length > MAX_UPLOAD_DEPTH) refused ??= `${JSON.stringify(entryPath.slice(0, 80))} is deeper than ${MAX_UPLOAD_DEPTH} folders`;
      else if (!segments.every(safeEntryName)) refused ??= `the entry name ${JSON.stringify(entryPath.slice(0, 80))} would leave the folder`;
      else if (type !== "File" && type !== "OldFile" && type !== "ContiguousFile" && type !== "Directory")
        refused ??= `${JSON.stringify(entryPath.slice(0, 80))} is a ${type}: only regular files and folders are accepted`;
      else {
        (entry as ReadEntry).mode = type === "Directory" ? 0o755 : 0o644;
        return true;
      }
      return false;
    },
  });
  try {
    await pipeline(body, byteCap(maxBytes), unpack);
  } catch (error) {
    if (error instanceof DataQuotaError) throw error;
    throw new DataSourceError("the uploaded tar stream", error instanceof Error ? error.message : String(error), error);
  }
  if (refused) throw new DataSourceError("the uploaded folder", refused);
}

export type Download = {
  kind: UploadKind;
  /** Bytes of file content (the sum over a folder's files). */
  bytes: number;
  /** The file's bytes, or the folder as a tar stream of its contents. */
  stream: Readable;
  /** Removes the staging copy (call once the stream is done or abandoned). */
  cleanup(): Promise<void>;
};

/**
 * Makes `cid` local (fetched into the cache, bounded by data.cacheBytes, unless pinned), writes it
 * out verified into a staging folder and opens it as a stream.
 */
export async function openDownload(store: DataStore, cid: string, parameters: { staging: string; timeoutMs?: number; providers?: string[] }): Promise<Download> {
  await store.fetch(cid, { timeoutMs: parameters.timeoutMs, providers: parameters.providers });
  const dir = path.join(parameters.staging, `down-${randomUUID()}`);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const cleanup = () => rm(dir, { recursive: true, force: true });
  try {
    const target = path.join(dir, "data");
    const { bytes } = await store.get(cid, target, { timeoutMs: parameters.timeoutMs, providers: parameters.providers });
    if ((await stat(target)).isDirectory()) {
      const stream = Readable.from(createTar({ cwd: target, portable: true, noDirRecurse: false }, ["."]));
      return { kind: "folder", bytes, stream, cleanup };
    }
    return { kind: "file", bytes, stream: createReadStream(target), cleanup };
  } catch (error) {
    await cleanup();
    throw error;
  }
}

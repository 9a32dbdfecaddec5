/**
 * The UnixFS CID of files, computed as a node's DataStore.add imports them (CID v1, raw leaves,
 * @helia/unixfs's default 1 MiB chunks and balanced layout of 1,024 links; a folder's entries
 * wrapped as one folder) over a blockstore that keeps nothing: only the CID is computed. One
 * implementation for the SDK's data actions (a local folder: sdk/internal/data.ts) and the output
 * downloads (files on disk, or in memory through a node's relay in a browser: docs/data.md
 * "Outputs"). Browser-safe: it runs ipfs-unixfs-importer itself (what @helia/unixfs's add runs,
 * with @helia/unixfs's defaults written out here), which pulls in no libp2p or Node built-in;
 * entries' contents are any byte iterables.
 */
import { importer, type ImportCandidate } from "ipfs-unixfs-importer";
import { fixedSize } from "ipfs-unixfs-importer/chunker";
import { balanced } from "ipfs-unixfs-importer/layout";
import type { CID } from "multiformats/cid";

/** One entry of a folder: a relative `/`-separated path, and content for a file (none for a folder). */
export type UnixfsEntry = { path: string; content?: Uint8Array | AsyncIterable<Uint8Array> | Iterable<Uint8Array> };

/** A blockstore that keeps nothing: importing with it only computes CIDs. */
const discard = {
  put: async (cid: CID) => cid,
  has: async () => false,
  get: () => {
    throw new Error("hash-only blockstore holds no blocks");
  },
};

export const UNIXFS_IMPORT_OPTIONS = { rawLeaves: true, cidVersion: 1 } as const;

/** @helia/unixfs's own defaults (its commands/add.js): a CID computed here is the CID a node's add gives. */
const importOptions = () => ({ ...UNIXFS_IMPORT_OPTIONS, layout: balanced({ maxChildrenPerNode: 1024 }), chunker: fixedSize({ chunkSize: 1_048_576 }) });

function hashOnly(entries: AsyncIterable<UnixfsEntry> | Iterable<UnixfsEntry>) {
  return importer(entries as AsyncIterable<ImportCandidate>, discard as unknown as Parameters<typeof importer>[1], { ...importOptions(), wrapWithDirectory: true });
}

/**
 * The CID of a folder of `entries` (wrapped as one folder, as DataStore.add does), or undefined
 * when there is no entry.
 *
 * @example
 * import { folderCid } from "suanli/common/unixfs-cid";
 * const cid = await folderCid([{ path: "result.txt", content: new TextEncoder().encode("42\n") }]);
 */
export async function folderCid(entries: AsyncIterable<UnixfsEntry> | Iterable<UnixfsEntry>): Promise<string | undefined> {
  let last: CID | undefined;
  for await (const imported of hashOnly(entries)) last = imported.cid;
  return last?.toString();
}

/**
 * The CID of one file wrapped in a folder under `name` (DataStore.add of a file).
 *
 * @example
 * import { fileCid } from "suanli/common/unixfs-cid";
 * const cid = await fileCid("result.txt", new TextEncoder().encode("42\n"));
 */
export async function fileCid(name: string, content: NonNullable<UnixfsEntry["content"]>): Promise<string> {
  // DataStore.add of a file is @helia/unixfs's addFile: the file alone, wrapped in a folder under its name.
  let last: CID | undefined;
  for await (const imported of hashOnly([{ path: name, content }])) last = imported.cid;
  return last!.toString();
}

/**
 * The UnixFS CID of files, computed as a node's DataStore.add imports them (CID v1, raw leaves,
 * @helia/unixfs's default 1 MiB chunks; a folder's entries wrapped as one folder) over a
 * blockstore that keeps nothing: only the CID is computed. One implementation for the SDK's data
 * actions (a local folder: sdk/internal/data.ts) and the output downloads (files on disk or in
 * memory, docs/data.md "Outputs"). Browser-safe: entries' contents are any byte iterables.
 */
import { unixfs } from "@helia/unixfs";
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

function hashOnly() {
  return unixfs({ blockstore: discard } as unknown as Parameters<typeof unixfs>[0]);
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
  for await (const imported of hashOnly().addAll(entries as AsyncIterable<UnixfsEntry>, { ...UNIXFS_IMPORT_OPTIONS, wrapWithDirectory: true })) last = imported.cid;
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
  return (await hashOnly().addFile({ path: name, content: content as AsyncIterable<Uint8Array> }, UNIXFS_IMPORT_OPTIONS)).toString();
}

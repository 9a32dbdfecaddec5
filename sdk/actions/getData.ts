import { createWriteStream } from "node:fs";
import { lstat, mkdir, rm } from "node:fs/promises";
import path from "node:path";
import { Readable, Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import { extract, type ReadEntry } from "tar";
import { z } from "zod";
import { DATA_HEADERS } from "../../common/api/data.js";
import { cidSchema, DataIntegrityError, DataRequestError, dataRequest, localCid, parseInput } from "../internal/data.js";
import type { DataProgress } from "./addData.js";

const getDataSchema = z.strictObject({
  /** The node's HTTP API, e.g. http://127.0.0.1:8080 (its data routes answer only on the node's own machine). */
  nodeUrl: z.string().url(),
  /** Aborts the request. */
  signal: z.custom<AbortSignal>((value) => value instanceof AbortSignal).optional(),
  /** Called as bytes move: `{ bytes, totalBytes }`. */
  onProgress: z.custom<(progress: DataProgress) => void>((value) => typeof value === "function").optional(),
  /** How long the node waits for blocks it lacks, ms (default: its data.fetchTimeoutMs). */
  timeoutMs: z.number().int().min(100).max(86_400_000).optional(),
  /** Multiaddrs (ending in /p2p/<peer id>) of nodes known to have the data, for the node to dial. */
  providers: z.array(z.string().min(1).max(500)).max(16).optional(),
  /** Re-hash what arrived and compare with the CID (default true); false only for data imported with other UnixFS parameters. */
  verify: z.boolean().default(true),
});

/**
 * What getData takes: the node's API URL, and optionally a progress callback, how long the node
 * may wait for the data, provider hints, whether to verify, and an AbortSignal.
 *
 * @example
 * import { getData, type GetDataParameters } from "suanli/sdk";
 * const parameters: GetDataParameters = { nodeUrl: "http://127.0.0.1:8080", timeoutMs: 60_000 };
 * await getData("bafy...", "./dataset", parameters);
 */
export type GetDataParameters = z.input<typeof getDataSchema>;

/**
 * Where the data was written, its form, its bytes of file content, and `verified`: re-hashed to
 * the CID asked for.
 *
 * @example
 * import { getData, type GetDataReturnType } from "suanli/sdk";
 * const got: GetDataReturnType = await getData("bafy...", "./dataset", { nodeUrl: "http://127.0.0.1:8080" });
 * console.log(got.kind, got.path, got.bytes, got.verified);
 */
export type GetDataReturnType = { cid: string; kind: "file" | "folder"; path: string; bytes: number; verified: boolean };

/**
 * Gets data from a node into `target` (which must not exist yet): a file, or a folder it creates.
 * The node fetches blocks it lacks over bitswap (each verified against its CID) and streams the
 * content back; the SDK then re-imports what it wrote with the node's UnixFS parameters and
 * compares the root CID, and removes `target` and throws DataIntegrityError when they differ.
 * Node only; the node's API must be on the same machine.
 *
 * @example
 * import { getData } from "suanli/sdk";
 * const got = await getData("bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi", "./dataset", {
 *   nodeUrl: "http://127.0.0.1:8080",
 *   onProgress: ({ bytes, totalBytes }) => console.error(`${bytes} / ${totalBytes} bytes`),
 * });
 * console.log(got.path, got.verified); // ./dataset true
 */
export async function getData(cid: string, target: string, parameters: GetDataParameters): Promise<GetDataReturnType> {
  const options = parseInput(getDataSchema, parameters, "getData parameters");
  const root = parseInput(cidSchema, cid, "CID");
  const destination = path.resolve(parseInput(z.string().min(1), target, "getData target"));
  if (
    await lstat(destination).then(
      () => true,
      () => false,
    )
  ) {
    throw new DataRequestError(`${destination} already exists: getData writes a new file or folder`, { metaMessages: ["Name a path that does not exist yet."] });
  }
  const query = new URLSearchParams();
  if (options.timeoutMs !== undefined) query.set("timeoutMs", String(options.timeoutMs));
  if (options.providers?.length) query.set("providers", options.providers.join(","));
  const route = `/v1/data/${root}${query.size ? `?${query}` : ""}`;
  const response = await dataRequest(options.nodeUrl, route, { signal: options.signal });
  const kind = response.headers.get(DATA_HEADERS.kind);
  const totalBytes = Number(response.headers.get(DATA_HEADERS.bytes) ?? Number.NaN);
  if ((kind !== "file" && kind !== "folder") || !response.body) throw new DataRequestError(`The node's answer to GET ${route} is not in the documented shape`);
  let received = 0;
  const counter = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      received += chunk.length;
      options.onProgress?.({ bytes: received, totalBytes: Number.isFinite(totalBytes) ? totalBytes : undefined });
      done(null, chunk);
    },
  });
  const body = Readable.fromWeb(response.body as Parameters<typeof Readable.fromWeb>[0]);
  try {
    if (kind === "file") await pipeline(body, counter, createWriteStream(destination, { flags: "wx", mode: 0o644 }));
    else {
      await mkdir(destination);
      const { unpack, check } = extractSafely(destination);
      await pipeline(body, counter, unpack);
      check();
    }
    const verified = options.verify ? await localCid(destination) : undefined;
    if (verified !== undefined && verified !== root) throw new DataIntegrityError(root, verified, `What the node sent for ${root}`);
    return { cid: root, kind, path: destination, bytes: kind === "file" ? received : totalBytes, verified: verified !== undefined };
  } catch (error) {
    await rm(destination, { recursive: true, force: true });
    throw error;
  }
}

/**
 * Extracts a tar of regular files and folders only, every name inside the folder; anything else
 * is skipped and makes `check` throw once the stream is done.
 */
function extractSafely(destination: string) {
  let refused: string | undefined;
  const unpack = extract({
    cwd: destination,
    strict: true,
    preserveOwner: false,
    filter: (entryPath, entry) => {
      const type = (entry as ReadEntry).type;
      const segments = entryPath.split("/").filter((segment) => segment !== "" && segment !== ".");
      if (segments.some((segment) => segment === ".." || segment.includes("\\"))) refused ??= `an entry outside the folder (${entryPath.slice(0, 80)})`;
      else if (type !== "File" && type !== "OldFile" && type !== "ContiguousFile" && type !== "Directory")
        refused ??= `a ${type} (${entryPath.slice(0, 80)}): only files and folders are accepted`;
      else {
        (entry as ReadEntry).mode = type === "Directory" ? 0o755 : 0o644;
        return true;
      }
      return false;
    },
  });
  return {
    unpack,
    check: () => {
      if (refused) throw new DataRequestError(`The node sent ${refused}`);
    },
  };
}

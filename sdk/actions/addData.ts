import { createReadStream } from "node:fs";
import path from "node:path";
import { Readable, Transform } from "node:stream";
import { create as createTar } from "tar";
import { z } from "zod";
import { DATA_MEDIA_TYPES, dataEntrySchema, type DataEntryView } from "../../common/api/data.js";
import { DataIntegrityError, dataAnswer, dataRequest, inspectLocal, localCid, parseInput, walkLocal } from "../internal/data.js";

/**
 * Progress of a transfer: bytes sent (addData: the request body, a folder's tar headers included)
 * or received so far, and the content's size when known.
 *
 * @example
 * import { addData, type DataProgress } from "suanli/sdk";
 * const onProgress = ({ bytes, totalBytes }: DataProgress) => console.error(`${bytes} / ${totalBytes ?? "?"}`);
 * await addData("./dataset", { nodeUrl: "http://127.0.0.1:8080", onProgress });
 */
export type DataProgress = { bytes: number; totalBytes: number | undefined };

const addDataSchema = z.strictObject({
  /** The node's HTTP API, e.g. http://127.0.0.1:8080 (its data routes answer only on the node's own machine). */
  nodeUrl: z.string().url(),
  /** Aborts the request. */
  signal: z.custom<AbortSignal>((value) => value instanceof AbortSignal).optional(),
  /** The name kept with the pin; for a file it is also the name the file is wrapped under (part of the CID). Default: the file or folder's own name. */
  name: z
    .string()
    .min(1)
    .max(200)
    .refine((name) => name !== "." && name !== ".." && !/[/\\\0]/.test(name), "expected one path segment")
    .optional(),
  /** Called as bytes move: `{ bytes, totalBytes }`. */
  onProgress: z.custom<(progress: DataProgress) => void>((value) => typeof value === "function").optional(),
});

/**
 * What addData takes: the node's API URL, and optionally the name kept with the pin, a progress
 * callback and an AbortSignal.
 *
 * @example
 * import { addData, type AddDataParameters } from "suanli/sdk";
 * const parameters: AddDataParameters = { nodeUrl: "http://127.0.0.1:8080", onProgress: ({ bytes }) => console.error(bytes) };
 * await addData("./dataset", parameters);
 */
export type AddDataParameters = z.input<typeof addDataSchema>;

/**
 * The pinned root as the node lists it, and `verified`: the renter hashed the same files itself
 * and got the same CID.
 *
 * @example
 * import { addData, type AddDataReturnType } from "suanli/sdk";
 * const added: AddDataReturnType = await addData("./dataset", { nodeUrl: "http://127.0.0.1:8080" });
 * console.log(added.cid, added.bytes, added.verified);
 */
export type AddDataReturnType = DataEntryView & { verified: true };

/**
 * Adds a local file or folder to a node (pinned there: it serves it to providers over bitswap).
 * The content is streamed (a file's bytes, a folder as a tar of its contents), never held whole
 * in memory. While it uploads, the SDK hashes the same files with the node's UnixFS parameters;
 * a node that pins another CID throws DataIntegrityError. Symlinks and special files are refused.
 * Node only; the node must run with `data.enabled` and its API on the same machine.
 *
 * @example
 * import { addData } from "suanli/sdk";
 * const { cid } = await addData("./dataset", {
 *   nodeUrl: "http://127.0.0.1:8080",
 *   onProgress: ({ bytes, totalBytes }) => console.error(`${bytes} / ${totalBytes ?? "?"} bytes`),
 * });
 * console.log(cid); // bafy...
 */
export async function addData(localPath: string, parameters: AddDataParameters): Promise<AddDataReturnType> {
  const options = parseInput(addDataSchema, parameters, "addData parameters");
  const source = path.resolve(parseInput(z.string().min(1), localPath, "addData path"));
  const local = await inspectLocal(source);
  const name = options.name ?? (path.basename(source) || "data");
  let sent = 0;
  const counter = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      sent += chunk.length;
      options.onProgress?.({ bytes: sent, totalBytes: local.bytes });
      done(null, chunk);
    },
  });
  let body: Readable;
  if (local.kind === "file") body = createReadStream(source);
  else {
    const entries: string[] = [];
    for await (const entry of walkLocal(source)) entries.push(entry.path);
    // noDirRecurse: every entry is listed (folders first), so nothing is archived twice.
    body = Readable.from(createTar({ cwd: source, portable: true, noDirRecurse: true }, entries));
  }
  const route = `/v1/data?name=${encodeURIComponent(name)}`;
  const [response, expected] = await Promise.all([
    dataRequest(options.nodeUrl, route, {
      method: "POST",
      headers: { "content-type": DATA_MEDIA_TYPES[local.kind] },
      body: Readable.toWeb(body.pipe(counter)) as ReadableStream<Uint8Array>,
      duplex: "half",
      signal: options.signal,
    }),
    localCid(source, name),
  ]);
  const entry = await dataAnswer(response, dataEntrySchema, "POST /v1/data");
  if (entry.cid !== expected) throw new DataIntegrityError(expected, entry.cid, `What the node pinned for ${source}`);
  return { ...entry, verified: true };
}

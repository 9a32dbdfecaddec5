/**
 * What the data actions share: requests to a node's data routes (errors under the node's own
 * names), and the renter's own CID of local files, computed as the node imports them (UnixFS,
 * CID v1, raw leaves, 1 MiB chunks; a file wrapped in a folder under its name, a folder's files
 * wrapped as one folder) so that what a node pins or hands back can be checked against it. Node only.
 */
import { createReadStream } from "node:fs";
import { lstat, readdir } from "node:fs/promises";
import path from "node:path";
import { z } from "zod";
import { SuanliError } from "../../common/errors.js";
import { fileCid, folderCid } from "../../common/unixfs-cid.js";
import { parseInput } from "../../common/validation.js";

/**
 * A node's data route refused or failed the request. `name` is the node's own error name
 * (`DataNotFoundError`, `DataQuotaError`, `DataDisabledError`, `DataAccessRefusedError`,
 * `InvalidCidError`, ...), `status` the HTTP status; a node that cannot be reached is
 * `DataRequestError` itself.
 *
 * @example
 * import { getData, DataRequestError } from "suanli/sdk";
 * try {
 *   await getData("bafy...", "./out", { nodeUrl: "http://127.0.0.1:8080", timeoutMs: 10_000 });
 * } catch (error) {
 *   if (!(error instanceof DataRequestError)) throw error;
 *   if (error.name === "DataNotFoundError") console.error("nobody reachable serves it:", error.shortMessage);
 *   else if (error.name === "DataDisabledError") console.error(error.shortMessage); // says how to enable the data plane
 * }
 */
export class DataRequestError extends SuanliError {
  override name = "DataRequestError";
  /** The HTTP status the node answered; undefined when it could not be reached. */
  readonly status: number | undefined;
  constructor(message: string, parameters: { name?: string; status?: number; cause?: unknown; metaMessages?: string[] } = {}) {
    super(message, { cause: parameters.cause, metaMessages: parameters.metaMessages, details: parameters.status ? `HTTP ${parameters.status}` : undefined });
    if (parameters.name) this.name = parameters.name;
    this.status = parameters.status;
  }
}

/**
 * The content does not hash to the CID: the node pinned something other than what was sent
 * (addData), or the bytes received are not the CID's (getData; what was written is removed).
 * Data imported elsewhere with other UnixFS parameters (chunk size, CID version) cannot be
 * re-hashed to its CID this way: pass `verify: false` to getData for such data.
 *
 * @example
 * import { getData, DataIntegrityError } from "suanli/sdk";
 * try {
 *   await getData(cid, "./dataset", { nodeUrl: "http://127.0.0.1:8080" });
 * } catch (error) {
 *   if (error instanceof DataIntegrityError) console.error(`expected ${error.expected}, got ${error.actual}`);
 * }
 */
export class DataIntegrityError extends SuanliError {
  override name = "DataIntegrityError";
  constructor(
    readonly expected: string,
    readonly actual: string,
    what: string,
  ) {
    super(`${what} hashes to ${actual}, not ${expected}`, {
      metaMessages: ["The node's answer is not the data you asked for: do not use it. Data imported with other UnixFS parameters cannot be checked this way (verify: false)."],
    });
  }
}

export const cidSchema = z
  .string()
  .min(1)
  .max(200)
  .regex(/^[A-Za-z0-9]+$/, "expected a CID (bafy... or Qm...)");

export { parseInput };

/**
 * The connection was reset before any answer: what fetch reports when it reuses a kept-alive
 * connection the node closed at that moment (its keep-alive timeout, api.limits.keepAliveTimeoutMs).
 */
function resetBeforeAnswer(error: unknown): boolean {
  const code = (error as { cause?: { code?: unknown } } | null)?.cause?.code;
  return code === "ECONNRESET" || code === "EPIPE" || code === "UND_ERR_SOCKET";
}

/**
 * Sends a request to a node's data route; a refusal throws DataRequestError under the node's error
 * name. A request whose connection was reset before any answer is sent once more, on a new
 * connection, when that is safe: its body can be sent again (none, text or bytes; not a stream) and
 * it is not a DELETE (removing twice would answer that nothing is there).
 */
export async function dataRequest(nodeUrl: string, route: string, init: RequestInit & { duplex?: "half" } = {}): Promise<Response> {
  let response: Response;
  const repeatable =
    (init.method ?? "GET").toUpperCase() !== "DELETE" && (init.body === undefined || init.body === null || typeof init.body === "string" || init.body instanceof Uint8Array);
  try {
    try {
      response = await fetch(new URL(route, nodeUrl), init);
    } catch (error) {
      if (!repeatable || init.signal?.aborted || !resetBeforeAnswer(error)) throw error;
      response = await fetch(new URL(route, nodeUrl), init);
    }
  } catch (error) {
    if (init.signal?.aborted) throw init.signal.reason ?? error;
    throw new DataRequestError(`Cannot reach the node at ${nodeUrl}`, {
      cause: error,
      metaMessages: ["Is the node running with api.enabled and data.enabled? `suanli node start` prints its API URL."],
    });
  }
  if (response.ok) return response;
  const json = (await response.json().catch(() => null)) as { error?: { name?: string; message?: string } } | null;
  throw new DataRequestError(json?.error?.message ?? `HTTP ${response.status} from ${route}`, { name: json?.error?.name ?? "DataRequestError", status: response.status });
}

/** The JSON body of a successful answer, parsed with its schema. */
export async function dataAnswer<S extends z.ZodType>(response: Response, schema: S, route: string): Promise<z.output<S>> {
  const parsed = schema.safeParse(await response.json().catch(() => undefined));
  if (!parsed.success) throw new DataRequestError(`The node's answer to ${route} is not in the documented shape`, { status: response.status });
  return parsed.data;
}

export type LocalData = { kind: "file" | "folder"; bytes: number; files: number };

/** What is at `local`: a regular file or a folder of regular files and folders (symlinks and devices refused). */
export async function inspectLocal(local: string): Promise<LocalData> {
  const info = await lstat(local).catch((error: unknown) => {
    throw new DataRequestError(`Cannot read ${local}: it does not exist or cannot be read`, { cause: error });
  });
  if (info.isFile()) return { kind: "file", bytes: info.size, files: 1 };
  if (!info.isDirectory()) throw new DataRequestError(`${local} is not a regular file or a folder`);
  let bytes = 0;
  let files = 0;
  for await (const entry of walkLocal(local)) {
    if (entry.size !== undefined) {
      bytes += entry.size;
      files++;
    }
  }
  return { kind: "folder", bytes, files };
}

/** A folder's entries (paths relative, `/`-separated), folders before their contents; symlinks and devices refused. */
export async function* walkLocal(root: string): AsyncGenerator<{ path: string; size?: number }> {
  const stack = [""];
  while (stack.length) {
    const relative = stack.pop()!;
    for (const name of (await readdir(path.join(root, relative))).sort()) {
      const child = path.join(relative, name);
      const info = await lstat(path.join(root, child));
      const posix = child.split(path.sep).join("/");
      if (info.isDirectory()) {
        yield { path: posix };
        stack.push(child);
      } else if (info.isFile()) {
        yield { path: posix, size: info.size };
      } else {
        throw new DataRequestError(`${path.join(root, child)} is a symlink or a special file: only regular files and folders are added`);
      }
    }
  }
}

/**
 * The CID a node gives `local` when it adds it (DataStore.add's parameters), computed without
 * storing anything. A file is wrapped in a folder under `name` (default: its own name).
 */
export async function localCid(local: string, name = path.basename(local)): Promise<string> {
  const info = await lstat(local);
  if (info.isFile()) return fileCid(name, createReadStream(local));
  const entries = async function* () {
    for await (const entry of walkLocal(local)) {
      yield entry.size === undefined ? { path: entry.path } : { path: entry.path, content: createReadStream(path.join(local, entry.path)) };
    }
  };
  const cid = await folderCid(entries());
  if (!cid) throw new DataRequestError(`${local} is an empty folder: nothing to add`);
  return cid;
}

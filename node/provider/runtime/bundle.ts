/**
 * Fetching and unpacking a task's workspace bundle: a .tar.gz named by URL with a required sha256.
 * The download is streamed to a file while it is hashed and counted, so a bundle over the size cap
 * is cut off, and one whose digest differs is deleted before anything reads it. Unpacking checks
 * every entry first (relative paths only, no `..`, links that stay inside, size and count caps)
 * and only then extracts, so a bad archive leaves nothing half-written in the workspace.
 */
import { createHash } from "node:crypto";
import { createReadStream, createWriteStream } from "node:fs";
import { stat, unlink } from "node:fs/promises";
import path from "node:path";
import { once } from "node:events";
import { fileURLToPath } from "node:url";
import * as tar from "tar";
import { BundleDigestMismatchError, BundleFetchError, BundleTooLargeError, BundleUnpackError, FetchRefusedError } from "../errors.js";
import { checkUrl, compileFetchPolicy, policedGet, type FetchPolicy } from "./fetch-policy.js";

export type FetchBundleOptions = {
  url: string;
  /** Expected sha256, 64 lowercase hex digits. */
  sha256: string;
  /** Where to write the bundle (outside the workspace). */
  destFile: string;
  maxBytes: number;
  timeoutMs: number;
  signal?: AbortSignal | undefined;
  /** Where the URL may point (default: no file:, public addresses only). */
  policy?: Partial<FetchPolicy> | undefined;
  /** What the file is, in messages (default "Bundle"; the container runtime says "Image archive"). */
  label?: string;
};

/** The URL without query, fragment or credentials: signed URLs carry tokens that must not reach logs. */
export function displayUrl(url: string): string {
  try {
    const parsed = new URL(url);
    return parsed.protocol === "file:" ? `file://${parsed.pathname}` : `${parsed.protocol}//${parsed.host}${parsed.pathname}`;
  } catch {
    return "(invalid URL)";
  }
}

/**
 * What the renter is told about any failure to get the file over the network: one text for a
 * closed port, a port that answers something other than HTTP, a timeout, an unknown host and every
 * HTTP status, so a URL is not a probe of what listens where (issue #33, item 10). The network
 * error itself stays in the error's `cause`, for the operator's log.
 */
export const UNREACHABLE = "the server could not be reached or did not serve the file";

function fetchFailure(shown: string, error: unknown, what: string, signal: AbortSignal | undefined): BundleFetchError {
  // The node's own abort (the lease ended, the node stops) is not the URL's doing.
  if (signal?.aborted) return new BundleFetchError(shown, "aborted", error, what);
  return new BundleFetchError(shown, UNREACHABLE, error, what);
}

/**
 * Downloads (http/https) or copies (file, when the policy allows it) the bundle to destFile and
 * checks its sha256. A URL the policy refuses fails with FetchRefusedError before anything is sent.
 */
export async function fetchBundle(options: FetchBundleOptions): Promise<{ bytes: number }> {
  const shown = displayUrl(options.url);
  const label = options.label ?? "Bundle";
  const what = label.toLowerCase();
  const url = new URL(options.url);
  const policy = compileFetchPolicy(options.policy);
  checkUrl(url, policy);
  const hash = createHash("sha256");
  const out = createWriteStream(options.destFile, { mode: 0o600 });
  let bytes = 0;

  const take = async (chunk: Uint8Array) => {
    bytes += chunk.byteLength;
    if (bytes > options.maxBytes) throw new BundleTooLargeError(`${label} ${shown}`, options.maxBytes);
    hash.update(chunk);
    if (!out.write(chunk)) await once(out, "drain");
  };

  try {
    if (url.protocol === "file:") {
      const file = fileURLToPath(url);
      const info = await stat(file).catch((error: NodeJS.ErrnoException) => {
        throw new BundleFetchError(shown, error.code === "ENOENT" ? "no such file" : (error.code ?? error.message), error, what);
      });
      if (!info.isFile()) throw new BundleFetchError(shown, "not a regular file", undefined, what);
      if (info.size > options.maxBytes) throw new BundleTooLargeError(`${label} ${shown}`, options.maxBytes);
      for await (const chunk of createReadStream(file)) await take(chunk as Buffer);
    } else if (url.protocol === "http:" || url.protocol === "https:") {
      const signals = [AbortSignal.timeout(options.timeoutMs)];
      if (options.signal) signals.push(options.signal);
      const signal = AbortSignal.any(signals);
      let response: import("node:http").IncomingMessage;
      try {
        ({ response } = await policedGet(url, policy, signal));
      } catch (error) {
        if (error instanceof FetchRefusedError) throw error;
        if ((error as { cause?: unknown })?.cause instanceof FetchRefusedError) throw (error as { cause: FetchRefusedError }).cause;
        throw fetchFailure(shown, error, what, options.signal);
      }
      const status = response.statusCode ?? 0;
      if (status < 200 || status > 299) {
        response.destroy();
        throw fetchFailure(shown, new Error(`HTTP ${status}`), what, options.signal);
      }
      const declared = Number(response.headers["content-length"]);
      if (Number.isFinite(declared) && declared > options.maxBytes) {
        response.destroy();
        throw new BundleTooLargeError(`${label} ${shown}`, options.maxBytes);
      }
      try {
        // Bounded by maxBytes: take() throws once the cap is passed.
        for await (const chunk of response) await take(chunk as Buffer);
      } catch (error) {
        response.destroy();
        if (error instanceof BundleTooLargeError) throw error;
        throw fetchFailure(shown, error, what, options.signal);
      }
    } else {
      throw new BundleFetchError(shown, `unsupported protocol ${url.protocol}`, undefined, what);
    }
    out.end();
    await once(out, "finish");
  } catch (error) {
    out.destroy();
    await unlink(options.destFile).catch(() => undefined);
    throw error;
  }

  const actual = hash.digest("hex");
  if (actual !== options.sha256) {
    await unlink(options.destFile).catch(() => undefined);
    // The digest of what was served is not told: it would make any URL a probe of its content.
    throw new BundleDigestMismatchError(shown, options.sha256, label);
  }
  return { bytes };
}

export type UnpackOptions = {
  /** Sum of the entries' sizes. */
  maxUnpackedBytes: number;
  maxEntries: number;
};

const ALLOWED_TYPES = new Set(["File", "OldFile", "ContiguousFile", "Directory", "SymbolicLink", "Link"]);

/** Whether a relative archive path stays inside the directory it is extracted to. */
function staysInside(relative: string): boolean {
  if (relative === "" || path.posix.isAbsolute(relative) || /^[A-Za-z]:/.test(relative)) return false;
  const normal = path.posix.normalize(relative);
  return normal !== ".." && !normal.startsWith("../");
}

/** Checks every entry of a .tar.gz, then extracts it into `dir` (which should be empty). */
export async function unpackBundle(file: string, dir: string, options: UnpackOptions): Promise<{ entries: number; bytes: number }> {
  let entries = 0;
  let bytes = 0;
  let problem: string | undefined;
  let tooLarge: BundleTooLargeError | undefined;
  const check = (entry: tar.ReadEntry) => {
    if (problem || tooLarge) return;
    entries++;
    bytes += entry.size ?? 0;
    const name = entry.path;
    if (!ALLOWED_TYPES.has(entry.type)) problem = `entry "${name}" is a ${entry.type}; only files, directories and links are accepted`;
    else if (!staysInside(name)) problem = `entry "${name}" would be written outside the workspace`;
    else if (entry.type === "SymbolicLink" && (path.posix.isAbsolute(entry.linkpath ?? "") || !staysInside(path.posix.join(path.posix.dirname(name), entry.linkpath ?? ""))))
      problem = `link "${name}" points outside the workspace (${entry.linkpath})`;
    else if (entry.type === "Link" && !staysInside(entry.linkpath ?? "")) problem = `hard link "${name}" points outside the workspace`;
    else if (entries > options.maxEntries) tooLarge = new BundleTooLargeError(`The bundle's entry count`, options.maxEntries, "entries");
    else if (bytes > options.maxUnpackedBytes) tooLarge = new BundleTooLargeError(`The bundle's unpacked size`, options.maxUnpackedBytes);
  };
  try {
    await tar.t({ file, strict: true, onReadEntry: check });
  } catch (error) {
    throw new BundleUnpackError(`not a readable .tar.gz (${(error as Error).message})`, error);
  }
  if (problem) throw new BundleUnpackError(problem);
  if (tooLarge) throw tooLarge;
  try {
    await tar.x({ file, cwd: dir, strict: true, preserveOwner: false, filter: (name) => staysInside(name) });
  } catch (error) {
    throw new BundleUnpackError((error as Error).message, error);
  }
  return { entries, bytes };
}

/** sha256 of a file, hex. */
export async function sha256File(file: string): Promise<string> {
  const hash = createHash("sha256");
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest("hex");
}

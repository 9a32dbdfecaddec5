import { OUTPUT_PROTOCOL } from "../../common/p2p/protocols.js";
import { OUTPUT_ACK_BYTES, OUTPUT_FRAME_BYTES, TASK_IO_CONTROL_MAX_BYTES, outputManifestSchema, type OutputManifest } from "../../common/protocols/task-io.js";
import { OutputDownloadError } from "../errors.js";
import type { SuanliContext } from "../internal/context.js";
import { taskAttempt, verifyOutputDigest } from "../internal/output-verify.js";
import { openTaskStream } from "../internal/task-io.js";

export { taskAttempt };

/**
 * Options of `client.downloadOutput`.
 *
 * @example
 * import { createClient, type DownloadOutputParameters } from "suanli/sdk";
 * const options: DownloadOutputParameters = {
 *   dir: "./results", maxBytes: 20 * 1024 ** 3, resume: true,
 *   onProgress: ({ bytes, totalBytes }) => console.log(`${bytes}/${totalBytes}`),
 * };
 * await client.downloadOutput(taskId, options);
 */
export type DownloadOutputParameters = {
  /**
   * Folder to write the files into (created when missing). Required over libp2p (the Node SDK
   * with `bootstrap`); leave it out through a node's relay (`nodeUrl`, browsers): the files then
   * come back in memory as `files[i].data`.
   */
  dir?: string;
  /** Refuse an output larger than this many bytes (default 64 GiB over libp2p, 1 GiB in memory through a relay). */
  maxBytes?: number;
  /**
   * Continue a download that stopped: files already complete are kept, a partial one is continued
   * (default true). Through a relay a broken connection is resumed by itself (up to 5 times in a row).
   */
  resume?: boolean;
  /** For a group task (several machines): which machine's output, by rank (default 0). */
  rank?: number;
  /** Called as bytes arrive. */
  onProgress?: (progress: { bytes: number; totalBytes: number; file: string }) => void;
  /** Aborting it stops the download (run it again to resume). */
  signal?: AbortSignal;
};

/**
 * What `client.downloadOutput` wrote and whether it checks out against the provider's signed
 * completion report. `verified` is false only for a snapshot of a task still running (nothing
 * is signed yet); a final output that does not match throws OutputDigestMismatchError.
 *
 * @example
 * import { createClient, type DownloadOutputReturnType } from "suanli/sdk";
 * const result: DownloadOutputReturnType = await client.downloadOutput(taskId, { dir: "./results" });
 * console.log(result.files.length, result.bytes, result.digest, result.verified, result.snapshot);
 */
export type DownloadOutputReturnType = {
  /** The files, relative to `dir`, in digest order; `data`: their bytes, only through a relay (no `dir`). */
  files: { path: string; size: number; data?: Uint8Array }[];
  bytes: number;
  /** The digest recomputed over the files (common/output-digest.ts: the provider's rule). */
  digest: `0x${string}`;
  /** True when `digest` equals the digest of the provider's verified completion report (and the chain's). */
  verified: boolean;
  /** True when the task still runs: a snapshot of its output/ so far, not verifiable yet. */
  snapshot: boolean;
  leaseId: bigint;
  /** Bytes actually transferred this time (less than `bytes` when a download was resumed). */
  transferred: number;
};

const ACK_FRAME = Uint8Array.of(1);

type LocalFs = typeof import("node:fs/promises");
type LocalPath = typeof import("node:path");

/** Where the download starts: the first file not complete on disk, and how much of it is there. */
async function resumePoint(fs: LocalFs, pathLib: LocalPath, dir: string, manifest: OutputManifest, resume: boolean): Promise<{ index: number; offset: number }> {
  if (!resume) return { index: 0, offset: 0 };
  for (const [index, file] of manifest.files.entries()) {
    const local = await fs.lstat(pathLib.join(dir, file.path)).catch(() => undefined);
    if (local?.isFile() && local.size === file.size) continue;
    return { index, offset: local?.isFile() && local.size < file.size ? local.size : 0 };
  }
  return { index: manifest.files.length, offset: 0 };
}

function sameFiles(a: OutputManifest, b: OutputManifest): boolean {
  return a.files.length === b.files.length && a.files.every((file, i) => file.path === b.files[i]?.path && file.size === b.files[i]?.size);
}

/**
 * Downloads the task's output folder (what it wrote to `$SUANLI_OUTPUT_DIR`) from its provider
 * into `dir`, streamed over libp2p, and checks it: the SDK recomputes the digest with the
 * provider's rule and compares it with the provider's signed completion report, itself checked
 * against the chain's CompletionReported event. A mismatch throws OutputDigestMismatchError
 * naming both digests. While the task still runs it downloads a snapshot (`verified: false`).
 * A download that stopped resumes where it left off. Node only.
 *
 * @example
 * import { createClient } from "suanli/sdk";
 * const receipt = await client.wait(taskId);
 * const { files, bytes, digest, verified } = await client.downloadOutput(taskId, { dir: "./results" });
 * console.log(`${files.length} files, ${bytes} bytes, ${digest} ${verified ? "verified" : "unverified"}`);
 */
export async function downloadOutput(ctx: SuanliContext, taskId: string, parameters: DownloadOutputParameters = {}): Promise<DownloadOutputReturnType> {
  if (typeof parameters?.dir !== "string" || parameters.dir.length === 0) throw new OutputDownloadError("`dir` is required: the folder to write the output into");
  const maxBytes = parameters.maxBytes ?? 64 * 1024 ** 3;
  const attempt = await taskAttempt(ctx, taskId, parameters.rank ?? 0);
  const fs = await import("node:fs/promises");
  const pathLib = await import("node:path");
  const { digestOutputFiles } = await import("../../common/output-digest.js");
  const dir = pathLib.resolve(parameters.dir);

  const listed = await openTaskStream(
    ctx,
    attempt,
    OUTPUT_PROTOCOL,
    "output",
    { op: "list" },
    {
      responseSchema: outputManifestSchema,
      maxFrameBytes: TASK_IO_CONTROL_MAX_BYTES,
      signal: parameters.signal,
    },
  );
  await listed.stream.close().catch(() => undefined);
  let manifest = listed.answer;
  if (manifest.totalBytes > maxBytes) throw new OutputDownloadError(`The output is ${manifest.totalBytes} bytes, over maxBytes (${maxBytes})`);
  await fs.mkdir(dir, { recursive: true });
  const start = await resumePoint(fs, pathLib, dir, manifest, parameters.resume ?? true);

  let transferred = 0;
  const startFile = manifest.files[start.index];
  if (startFile) {
    const params = { op: "read", fromPath: startFile.path, fromOffset: start.offset };
    const read = await openTaskStream(ctx, attempt, OUTPUT_PROTOCOL, "output", params, {
      responseSchema: outputManifestSchema,
      maxFrameBytes: Math.max(OUTPUT_FRAME_BYTES, TASK_IO_CONTROL_MAX_BYTES),
      signal: parameters.signal,
    });
    if (!sameFiles(manifest, read.answer)) {
      read.stream.abort(new Error("the output changed"));
      throw new OutputDownloadError("The task's output changed between listing and reading (a running task writes to it); download again");
    }
    manifest = read.answer;
    let consumed = 0;
    let done = manifest.files.slice(0, start.index).reduce((sum, file) => sum + file.size, 0) + start.offset;
    try {
      for (const [index, file] of manifest.files.entries()) {
        if (index < start.index) continue;
        const target = pathLib.resolve(dir, file.path);
        if (!target.startsWith(dir + pathLib.sep)) throw new OutputDownloadError(`The provider listed ${file.path}, outside the folder`);
        await fs.mkdir(pathLib.dirname(target), { recursive: true });
        let position = index === start.index ? start.offset : 0;
        const handle = await fs.open(target, position > 0 ? "r+" : "w");
        try {
          await handle.truncate(position);
          while (position < file.size) {
            parameters.signal?.throwIfAborted();
            const frame = (await read.lp.read({ signal: parameters.signal })).subarray();
            if (frame.length === 0 || position + frame.length > file.size) throw new OutputDownloadError(`The provider sent more bytes than ${file.path} holds`);
            await handle.write(frame, 0, frame.length, position);
            consumed += frame.length;
            while (consumed >= OUTPUT_ACK_BYTES) {
              consumed -= OUTPUT_ACK_BYTES;
              await read.lp.write(ACK_FRAME).catch(() => undefined);
            }
            position += frame.length;
            transferred += frame.length;
            done += frame.length;
            parameters.onProgress?.({ bytes: done, totalBytes: manifest.totalBytes, file: file.path });
          }
        } finally {
          await handle.close();
        }
      }
    } catch (error) {
      read.stream.abort(error instanceof Error ? error : new Error(String(error)));
      if (error instanceof OutputDownloadError) throw error;
      throw new OutputDownloadError(`The download of ${taskId}'s output stopped after ${transferred} bytes; run it again to resume`, { cause: error });
    }
    await read.stream.close().catch(() => undefined);
  }

  const digest = await digestOutputFiles(
    dir,
    manifest.files.map((file) => ({ rel: file.path })),
  );
  const result: DownloadOutputReturnType = {
    files: manifest.files.map((file) => ({ path: file.path, size: file.size })),
    bytes: manifest.totalBytes,
    digest,
    verified: false,
    snapshot: manifest.kind === "snapshot",
    leaseId: attempt.leaseId,
    transferred,
  };
  if (manifest.kind === "snapshot") return result;

  return { ...result, verified: await verifyOutputDigest(ctx, attempt, digest) };
}

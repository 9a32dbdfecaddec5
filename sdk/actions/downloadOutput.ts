import { OUTPUT_PROTOCOL } from "../../common/p2p/protocols.js";
import { OUTPUT_ACK_BYTES, OUTPUT_FRAME_BYTES, TASK_IO_CONTROL_MAX_BYTES, outputManifestSchema, type OutputManifest } from "../../common/protocols/task-io.js";
import { CompletionMismatchError, OutputDigestMismatchError, OutputDownloadError, OutputUnverifiableError } from "../errors.js";
import type { SuanliContext } from "../internal/context.js";
import { outputState, taskAttempt, verifyOutputDigest, type OutputVerification } from "../internal/output-verify.js";
import { checkManifest, stagingName } from "../internal/output-manifest.js";
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
  /**
   * Refuse an output larger than this many bytes (default 64 GiB over libp2p, 1 GiB in memory
   * through a relay). Checked against the sizes the provider lists before anything is written,
   * and against the bytes that actually arrive while they stream.
   */
  maxBytes?: number;
  /**
   * Continue a download that stopped (default true): it is staged in
   * `dir/.suanli-partial-<leaseId>/` until its digest checks out, and a new download of the same
   * listing keeps the complete files there and continues the partial one. Through a relay a
   * broken connection is resumed by itself (up to 5 times in a row).
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
 * What `client.downloadOutput` wrote and whether it checks out. Whether the files must verify is
 * decided from the task's own state (its lease on-chain and its provider's status), never from
 * the provider's unsigned manifest: the output of a task that is over verifies against the signed
 * digest (`verified: true`) or the download throws (OutputDigestMismatchError,
 * CompletionMismatchError, OutputUnverifiableError) and keeps nothing. Only a task still running
 * gives a snapshot (`snapshot: true`, `verified: false`: nothing is signed yet).
 *
 * @example
 * import { createClient, type DownloadOutputReturnType } from "suanli/sdk";
 * const result: DownloadOutputReturnType = await client.downloadOutput(taskId, { dir: "./results" });
 * console.log(result.files.length, result.bytes, result.digest, result.verified, result.verifiedAgainst, result.snapshot);
 */
export type DownloadOutputReturnType = {
  /** The files, relative to `dir`, in digest order; `data`: their bytes, only through a relay (no `dir`). */
  files: { path: string; size: number; data?: Uint8Array }[];
  bytes: number;
  /** The digest recomputed over the files (common/output-digest.ts: the provider's rule). */
  digest: `0x${string}`;
  /** True when the files match the signed digest of the task's output (see `verifiedAgainst`); false only for a snapshot. */
  verified: boolean;
  /**
   * The files' UnixFS CID when the signed digest is that CID's (the provider pinned the output by
   * CID, docs/data.md "Outputs"): any node can serve it (`getData`); null when the signed digest
   * is `digest` itself, and for a snapshot.
   */
  outputCid: string | null;
  /**
   * What the digest was checked against: `"chain"`, the lease's CompletionReported event (and the
   * provider's signed report, which must equal it); `"signed-report"`, the provider's EIP-712
   * signed completion report alone, when the lease ended without one on-chain (the renter closed
   * it after a cancel, a fault, a preemption) or it is not mined yet; null for a snapshot.
   */
  verifiedAgainst: OutputVerification | null;
  /** True when the task still runs (by the chain and by its provider): a snapshot of its output/ so far, not verifiable yet. */
  snapshot: boolean;
  leaseId: bigint;
  /** Bytes actually transferred this time (less than `bytes` when a download was resumed). */
  transferred: number;
};

const ACK_FRAME = Uint8Array.of(1);

type LocalFs = typeof import("node:fs/promises");
type LocalPath = typeof import("node:path");

/** Where the download starts: the first file not complete in the staging folder, and how much of it is there. */
async function resumePoint(fs: LocalFs, pathLib: LocalPath, files: string, manifest: OutputManifest): Promise<{ index: number; offset: number }> {
  for (const [index, file] of manifest.files.entries()) {
    const local = await fs.lstat(pathLib.join(files, file.path)).catch(() => undefined);
    if (local?.isFile() && local.size === file.size) continue;
    return { index, offset: local?.isFile() && local.size < file.size ? local.size : 0 };
  }
  return { index: manifest.files.length, offset: 0 };
}

function sameFiles(a: OutputManifest, b: OutputManifest): boolean {
  return a.kind === b.kind && a.files.length === b.files.length && a.files.every((file, i) => file.path === b.files[i]?.path && file.size === b.files[i]?.size);
}

/**
 * The staging folder of this download: kept from an earlier attempt only when it was filled from
 * the same listing (same kind, paths and sizes) and `resume` is on; otherwise emptied.
 */
async function prepareStaging(fs: LocalFs, pathLib: LocalPath, stage: string, manifest: OutputManifest, resume: boolean): Promise<string> {
  const files = pathLib.join(stage, "files");
  const recorded = pathLib.join(stage, "manifest.json");
  const before = await fs
    .readFile(recorded, "utf8")
    .then((text) => JSON.parse(text) as OutputManifest)
    .catch(() => undefined);
  if (!resume || !before || !sameFiles(before, manifest)) {
    await fs.rm(stage, { recursive: true, force: true });
    await fs.mkdir(files, { recursive: true });
    await fs.writeFile(recorded, JSON.stringify({ kind: manifest.kind, files: manifest.files }));
  }
  return files;
}

/** Moves the checked files from the staging folder to their place in `dir`, then removes the staging folder. */
async function moveIntoPlace(fs: LocalFs, pathLib: LocalPath, stage: string, dir: string, manifest: OutputManifest): Promise<void> {
  const files = pathLib.join(stage, "files");
  for (const file of manifest.files) {
    const target = pathLib.resolve(dir, file.path);
    await fs.mkdir(pathLib.dirname(target), { recursive: true });
    try {
      await fs.rename(pathLib.join(files, file.path), target);
    } catch (error) {
      throw new OutputDownloadError(`Cannot put ${file.path} in ${dir}: ${(error as Error).message}`, {
        cause: error,
        metaMessages: [`The verified files are still in ${stage}/files.`],
      });
    }
  }
  await fs.rm(stage, { recursive: true, force: true });
}

/**
 * Downloads the task's output folder (what it wrote to `$SUANLI_OUTPUT_DIR`) from its provider
 * into `dir`, streamed over libp2p, and checks it. The task's state decides: over (its lease
 * ended on-chain, or its provider reports it ended), the SDK recomputes the digest with the
 * provider's rule and compares it with the signed digest (the chain's CompletionReported event,
 * else the provider's signed completion report); a mismatch throws OutputDigestMismatchError
 * naming both digests. Still running, it downloads a snapshot (`verified: false`). The bytes are
 * counted as they arrive (never more than `maxBytes`) and staged in a folder inside `dir`; files
 * are moved to their place only once checked, so a file that fails verification is never left in
 * `dir`. A download that stopped resumes where it left off. Node only.
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
  if (!Number.isSafeInteger(maxBytes) || maxBytes < 0) throw new OutputDownloadError(`maxBytes must be a whole number of bytes, 0 or more (got ${maxBytes})`);
  const attempt = await taskAttempt(ctx, taskId, parameters.rank ?? 0);
  const fs = await import("node:fs/promises");
  const pathLib = await import("node:path");
  const { digestOutputFiles } = await import("../../common/output-digest.js");
  const dir = pathLib.resolve(parameters.dir);

  // The task's own state, read before the listing: the manifest's `kind` is only the provider's word.
  const state = await outputState(ctx, attempt, parameters.signal);
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
  const staging = stagingName(attempt.leaseId);
  checkManifest(manifest, maxBytes, staging);
  await fs.mkdir(dir, { recursive: true });
  const stage = pathLib.join(dir, staging);
  const staged = await prepareStaging(fs, pathLib, stage, manifest, parameters.resume ?? true);
  const start = await resumePoint(fs, pathLib, staged, manifest);

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
    // Bytes on disk for this output: what an earlier attempt staged, then every byte that arrives.
    let done = manifest.files.slice(0, start.index).reduce((sum, file) => sum + file.size, 0) + start.offset;
    try {
      for (const [index, file] of manifest.files.entries()) {
        if (index < start.index) continue;
        const target = pathLib.resolve(staged, file.path);
        if (!target.startsWith(staged + pathLib.sep)) throw new OutputDownloadError(`The provider listed ${file.path}, outside the folder`);
        await fs.mkdir(pathLib.dirname(target), { recursive: true });
        let position = index === start.index ? start.offset : 0;
        const handle = await fs.open(target, position > 0 ? "r+" : "w");
        try {
          await handle.truncate(position);
          while (position < file.size) {
            parameters.signal?.throwIfAborted();
            const frame = (await read.lp.read({ signal: parameters.signal })).subarray();
            if (frame.length === 0 || position + frame.length > file.size) throw new OutputDownloadError(`The provider sent more bytes than ${file.path} holds`);
            if (done + frame.length > maxBytes) throw new OutputDownloadError(`The provider sent more than maxBytes (${maxBytes}); the download stopped there`);
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
    staged,
    manifest.files.map((file) => ({ rel: file.path })),
  );
  // Over by the chain or by its provider (or the provider itself calls it final): it must verify.
  const mustVerify = state.over || manifest.kind === "final";
  let verifiedAgainst: OutputVerification | null = null;
  let outputCid: string | null = null;
  if (mustVerify) {
    try {
      // Asked only when `digest` is not the signed one: the files' CID (Node only, @helia/unixfs).
      const cidOfFiles = async () => (outputCid = await (await import("../internal/data.js")).localCid(staged));
      verifiedAgainst = await verifyOutputDigest(ctx, attempt, digest, state, cidOfFiles);
    } catch (error) {
      // Files that fail verification are not left anywhere in `dir`; other errors (the provider
      // unreachable) keep them staged for the next attempt.
      if (error instanceof OutputDigestMismatchError || error instanceof CompletionMismatchError || error instanceof OutputUnverifiableError) {
        await fs.rm(stage, { recursive: true, force: true });
      }
      throw error;
    }
  }
  await moveIntoPlace(fs, pathLib, stage, dir, manifest);
  return {
    files: manifest.files.map((file) => ({ path: file.path, size: file.size })),
    bytes: manifest.totalBytes,
    digest,
    verified: verifiedAgainst !== null,
    outputCid,
    verifiedAgainst,
    snapshot: !mustVerify,
    leaseId: attempt.leaseId,
    transferred,
  };
}

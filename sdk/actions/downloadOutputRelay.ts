/**
 * `client.downloadOutput` for a client without libp2p (a browser, or any client made with
 * `nodeUrl`): the output comes through the node's HTTP relay routes
 * (POST /v1/leases/{id}/output/list and /read), is held in memory, and is checked exactly as over
 * libp2p: the SDK recomputes the digest with the provider's rule and compares it with the
 * provider's signed completion report and the chain. The relay node only forwards the renter's
 * signed requests (it cannot forge or widen them: the provider checks the signature, its bodyHash
 * over the params and its nonce), and it cannot alter a byte unnoticed: whether the files must
 * verify is decided from the task's state (chain and provider status), not from the manifest's
 * `kind`. Memory grows only with the bytes that actually arrive (never by a listed size), and
 * they are counted against `maxBytes` as they come. An output the provider committed by its UnixFS
 * CID is checked by computing the CID of the bytes in memory (common/unixfs-cid.ts), as the Node
 * download does of the files on disk. Browser-safe.
 */
import { OUTPUT_HEADERS } from "../../common/api/relay.js";
import { digestOutputBytes, outputFilesDigest } from "../../common/output-bytes-digest.js";
import { outputManifestSchema } from "../../common/protocols/task-io.js";
import { folderCid } from "../../common/unixfs-cid.js";
import { OutputDownloadError, SuanliError, TaskIoUnsupportedError } from "../errors.js";
import { authorize, type SuanliContext } from "../internal/context.js";
import { checkManifest } from "../internal/output-manifest.js";
import { outputState, taskAttempt, verifyOutputDigest, type OutputVerification } from "../internal/output-verify.js";
import type { DownloadOutputParameters, DownloadOutputReturnType } from "./downloadOutput.js";

/** Default cap of an output held in memory (a browser tab): 1 GiB. */
export const RELAY_OUTPUT_DEFAULT_MAX_BYTES = 1024 ** 3;
/** Times a broken read is resumed (from where it stopped) before the download fails. */
const MAX_RESUMES = 5;

/** The node's answer ended before the bytes it announced: the connection broke. */
class IncompleteReadError extends Error {}

/**
 * A broken connection (resumed from where it stopped), as opposed to an answer on purpose (a
 * refusal: bad signature, no output, too large, the output changed), which is final.
 */
function isBreak(error: unknown): boolean {
  return error instanceof IncompleteReadError || !(error instanceof SuanliError) || error.name === "ProviderRequestError";
}

/**
 * Downloads the task's output through the node's relay into memory and verifies it.
 *
 * @example
 * import { createClient } from "suanli/sdk/browser";
 * const result = await client.downloadOutput(taskId, { maxBytes: 256 * 1024 ** 2 });
 * for (const file of result.files) console.log(file.path, file.size, file.data?.byteLength, result.verified);
 */
export async function downloadOutputRelay(
  ctx: SuanliContext,
  taskId: string,
  parameters: Omit<DownloadOutputParameters, "dir"> & { dir?: string } = {},
): Promise<DownloadOutputReturnType> {
  const relay = ctx.link.relayOutput;
  if (!relay) throw new TaskIoUnsupportedError("This client has no relay for output downloads: create it with `nodeUrl`");
  if (parameters.dir !== undefined) {
    throw new OutputDownloadError("`dir` needs the Node SDK over libp2p: through a node's HTTP relay (`nodeUrl`) the files come back in memory as `files[i].data`", {
      metaMessages: ["Leave `dir` out, or create the client with `bootstrap` instead of `nodeUrl`."],
    });
  }
  const maxBytes = parameters.maxBytes ?? RELAY_OUTPUT_DEFAULT_MAX_BYTES;
  if (!Number.isSafeInteger(maxBytes) || maxBytes < 0) throw new OutputDownloadError(`maxBytes must be a whole number of bytes, 0 or more (got ${maxBytes})`);
  const attempt = await taskAttempt(ctx, taskId, parameters.rank ?? 0);
  const signed = async (params: Record<string, unknown>) => ({ auth: await authorize(ctx, attempt, "output", params), params });

  // The task's own state, read before the listing: the manifest's `kind` is only the provider's word.
  const state = await outputState(ctx, attempt, parameters.signal);
  const listParams = { op: "list" };
  const manifest = outputManifestSchema.parse(await relay.list(attempt.leaseId, await signed(listParams), parameters.signal));
  checkManifest(manifest, maxBytes);
  const expectedFiles = outputFilesDigest(manifest.files);

  // Each file's bytes as they arrive (chunks, joined once the file is complete).
  const received: Uint8Array[][] = manifest.files.map(() => []);
  let index = 0;
  let offset = 0;
  let done = 0;
  const skipEmpty = () => {
    while (index < manifest.files.length && offset >= manifest.files[index]!.size) {
      index++;
      offset = 0;
    }
  };
  skipEmpty();
  let resumes = 0;
  while (index < manifest.files.length) {
    parameters.signal?.throwIfAborted();
    const params = { op: "read", fromPath: manifest.files[index]!.path, fromOffset: offset };
    const startedAt = done;
    try {
      const response = await relay.read(attempt.leaseId, await signed(params), parameters.signal);
      const header = (name: string) => response.headers.get(name);
      if (
        header(OUTPUT_HEADERS.kind) !== manifest.kind ||
        header(OUTPUT_HEADERS.totalBytes) !== String(manifest.totalBytes) ||
        header(OUTPUT_HEADERS.manifestDigest) !== expectedFiles
      ) {
        await response.body?.cancel().catch(() => undefined);
        throw new OutputDownloadError("The task's output changed between listing and reading (a running task writes to it); download again");
      }
      if (!response.body) throw new OutputDownloadError("The node answered an output read without a body");
      const reader = response.body.getReader();
      try {
        for (;;) {
          const { value, done: ended } = await reader.read();
          if (ended) break;
          let chunk = value;
          while (chunk.length > 0) {
            if (index >= manifest.files.length) throw new OutputDownloadError("The node sent more bytes than the output's manifest lists");
            const file = manifest.files[index]!;
            const take = Math.min(chunk.length, file.size - offset);
            if (done + take > maxBytes) throw new OutputDownloadError(`The node sent more than maxBytes (${maxBytes}); the download stopped there`);
            // A copy: the stream may reuse its buffer.
            received[index]!.push(chunk.slice(0, take));
            offset += take;
            done += take;
            chunk = chunk.subarray(take);
            parameters.onProgress?.({ bytes: done, totalBytes: manifest.totalBytes, file: file.path });
            skipEmpty();
          }
        }
      } finally {
        reader.releaseLock();
      }
      if (index < manifest.files.length) throw new IncompleteReadError(`The node's answer ended after ${done} of ${manifest.totalBytes} bytes`);
    } catch (error) {
      if (parameters.signal?.aborted) throw error;
      if (!isBreak(error)) throw error;
      if (done > startedAt) resumes = 0;
      if (++resumes > MAX_RESUMES) {
        throw new OutputDownloadError(`The download of ${taskId}'s output through the node stopped after ${done} of ${manifest.totalBytes} bytes (${MAX_RESUMES} resumes)`, {
          cause: error,
        });
      }
    }
  }

  const files = manifest.files.map((file, i) => ({ path: file.path, size: file.size, data: joinChunks(received[i]!) }));
  const digest = digestOutputBytes(files);
  // Over by the chain or by its provider (or the provider itself calls it final): it must verify,
  // or this throws and the bytes are not handed over.
  const mustVerify = state.over || manifest.kind === "final";
  // Asked only when the older digest is not the signed one: the files' UnixFS CID, the files as the provider's data plane imported them.
  let outputCid: string | null = null;
  const cidOfFiles = async () => {
    const cid = await folderCid(files.map((file) => ({ path: file.path, content: file.data })));
    outputCid = cid ?? null;
    return cid ?? "";
  };
  const verifiedAgainst: OutputVerification | null = mustVerify ? await verifyOutputDigest(ctx, attempt, digest, state, cidOfFiles) : null;
  return {
    files,
    bytes: manifest.totalBytes,
    digest,
    verified: verifiedAgainst !== null,
    outputCid,
    verifiedAgainst,
    snapshot: !mustVerify,
    leaseId: attempt.leaseId,
    transferred: done,
  };
}

/** One buffer of the chunks that arrived for a file (sized by what arrived, not by the listing). */
function joinChunks(chunks: readonly Uint8Array[]): Uint8Array {
  if (chunks.length === 1) return chunks[0]!;
  const out = new Uint8Array(chunks.reduce((sum, chunk) => sum + chunk.length, 0));
  let at = 0;
  for (const chunk of chunks) {
    out.set(chunk, at);
    at += chunk.length;
  }
  return out;
}

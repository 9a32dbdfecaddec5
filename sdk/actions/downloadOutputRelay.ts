/**
 * `client.downloadOutput` for a client without libp2p (a browser, or any client made with
 * `nodeUrl`): the output comes through the node's HTTP relay routes
 * (POST /v1/leases/{id}/output/list and /read), is held in memory, and is checked exactly as over
 * libp2p: the SDK recomputes the digest with the provider's rule and compares it with the
 * provider's signed completion report and the chain. The relay node only forwards the renter's
 * signed requests (it cannot forge or widen them: the provider checks the signature, its bodyHash
 * over the params and its nonce), and it cannot alter a byte unnoticed. Browser-safe.
 */
import { OUTPUT_HEADERS } from "../../common/api/relay.js";
import { digestOutputBytes, outputFilesDigest } from "../../common/output-bytes-digest.js";
import { outputManifestSchema } from "../../common/protocols/task-io.js";
import { OutputDownloadError, SuanliError, TaskIoUnsupportedError } from "../errors.js";
import { authorize, type SuanliContext } from "../internal/context.js";
import { taskAttempt, verifyOutputDigest } from "../internal/output-verify.js";
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
  const attempt = await taskAttempt(ctx, taskId, parameters.rank ?? 0);
  const signed = async (params: Record<string, unknown>) => ({ auth: await authorize(ctx, attempt, "output", params), params });

  const listParams = { op: "list" };
  const manifest = outputManifestSchema.parse(await relay.list(attempt.leaseId, await signed(listParams), parameters.signal));
  if (manifest.totalBytes > maxBytes) throw new OutputDownloadError(`The output is ${manifest.totalBytes} bytes, over maxBytes (${maxBytes})`);
  const expectedFiles = outputFilesDigest(manifest.files);

  const data = manifest.files.map((file) => new Uint8Array(file.size));
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
            data[index]!.set(chunk.subarray(0, take), offset);
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

  const files = manifest.files.map((file, i) => ({ path: file.path, size: file.size, data: data[i]! })); // one buffer per file (allocated above)
  const digest = digestOutputBytes(files);
  const result: DownloadOutputReturnType = {
    files,
    bytes: manifest.totalBytes,
    digest,
    verified: false,
    snapshot: manifest.kind === "snapshot",
    leaseId: attempt.leaseId,
    transferred: done,
  };
  if (manifest.kind === "snapshot") return result;
  return { ...result, verified: await verifyOutputDigest(ctx, attempt, digest) };
}

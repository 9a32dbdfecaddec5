/**
 * Checks of an output manifest before a byte is downloaded, browser-safe. The manifest is the
 * provider's unsigned word (and passes through any relay): its `totalBytes` is only a claim, so
 * the sizes of the files it lists are added up here, must agree with it, and must fit the
 * caller's `maxBytes`. The bytes are counted again as they arrive (downloadOutput*.ts).
 */
import type { OutputManifest } from "../../common/protocols/task-io.js";
import { OutputDownloadError } from "../errors.js";

/** The folder inside `dir` where a Node download is staged until it checks out. */
export function stagingName(leaseId: bigint): string {
  return `.suanli-partial-${leaseId}`;
}

/**
 * Throws OutputDownloadError when the listed sizes do not add up to `totalBytes`, exceed
 * `maxBytes`, a path is listed twice, or (Node) a path falls in the staging folder.
 */
export function checkManifest(manifest: OutputManifest, maxBytes: number, staging?: string): void {
  let listed = 0;
  const seen = new Set<string>();
  for (const file of manifest.files) {
    listed += file.size;
    if (seen.has(file.path)) throw new OutputDownloadError(`The provider's output listing names ${file.path} twice`);
    seen.add(file.path);
    if (staging !== undefined && (file.path === staging || file.path.startsWith(`${staging}/`))) {
      throw new OutputDownloadError(`The output holds ${file.path}, under the folder name this SDK stages its downloads in (${staging}): it cannot be staged`);
    }
  }
  if (listed !== manifest.totalBytes) {
    throw new OutputDownloadError(`The provider's output listing does not add up: its files hold ${listed} bytes, it says ${manifest.totalBytes}`, {
      metaMessages: ["Nothing was downloaded. A provider (or relay) that lists sizes it does not send is not to be trusted."],
    });
  }
  if (listed > maxBytes) throw new OutputDownloadError(`The output is ${listed} bytes, over maxBytes (${maxBytes})`);
}

/**
 * Checks a task bundle's sha256 before any money moves: a wrong digest found by the provider
 * costs the renter a lease opening (gas, and the seconds the provider bills before reporting the
 * failure). Only when the client can fetch the URL itself: a bundle the provider reaches but the
 * client does not (a private network, or in a browser a server that sends no CORS headers) is left
 * to the provider's own check. The digest is @noble/hashes' streaming SHA-256 (pure JS, the
 * implementation viem builds on), so the same code runs in Node and in browsers without holding
 * the bundle in memory and without node:crypto in a browser bundle.
 */
import { sha256 as sha256Hash } from "@noble/hashes/sha2.js";
import { bytesToHex } from "@noble/hashes/utils.js";
import { InvalidInputError } from "../../common/errors.js";

/** Bundles larger than this are not downloaded twice; the provider checks them. */
const MAX_CHECK_BYTES = 512 * 1024 * 1024;
const CHECK_TIMEOUT_MS = 30_000;

export type BundleCheck = { checked: true } | { checked: false; reason: string };

/**
 * Fetches `url` and compares its sha256 with `sha256` (hex, optional 0x). Throws
 * InvalidInputError (field `sha256`) on a mismatch; returns why it could not check otherwise.
 */
export async function checkBundleDigest(url: string, sha256: string, options: { timeoutMs?: number } = {}): Promise<BundleCheck> {
  if (!/^https?:\/\//i.test(url)) return { checked: false, reason: "not an http(s) URL" };
  const expected = sha256.toLowerCase().replace(/^0x/, "");
  let response: Response;
  try {
    response = await fetch(url, { signal: AbortSignal.timeout(options.timeoutMs ?? CHECK_TIMEOUT_MS) });
  } catch (error) {
    return { checked: false, reason: `cannot fetch it from here (${(error as Error).message})` };
  }
  if (!response.ok || !response.body) {
    await response.body?.cancel().catch(() => undefined);
    return { checked: false, reason: `HTTP ${response.status} from here` };
  }
  const declared = Number(response.headers.get("content-length") ?? "0");
  if (declared > MAX_CHECK_BYTES) {
    await response.body.cancel().catch(() => undefined);
    return { checked: false, reason: `larger than ${MAX_CHECK_BYTES} bytes` };
  }
  const hash = sha256Hash.create();
  let bytes = 0;
  try {
    for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
      bytes += chunk.byteLength;
      if (bytes > MAX_CHECK_BYTES) return { checked: false, reason: `larger than ${MAX_CHECK_BYTES} bytes` };
      hash.update(chunk);
    }
  } catch (error) {
    return { checked: false, reason: `download interrupted (${(error as Error).message})` };
  }
  const actual = bytesToHex(hash.digest());
  if (actual !== expected) {
    throw new InvalidInputError(
      "task bundle",
      [{ path: "sha256", message: `the bundle at ${url} has sha256 ${actual}, not ${expected}` }],
      ["Nothing was reserved or paid. Compute the digest of the file you serve (sha256sum job.tar.gz) and pass it."],
    );
  }
  return { checked: true };
}

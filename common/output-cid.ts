/**
 * Outputs as a CID (issue 36, docs/data.md "Outputs"). A provider whose data plane is on imports
 * a task's output folder as UnixFS (CID v1, dag-pb root, raw leaves, sha2-256: DataStore.add's
 * parameters) and signs, as the completion's `outputDigest`, the 32 bytes of that root CID's
 * sha2-256 multihash digest. The CID is rebuilt from the signed bytes32 alone (version 1,
 * codec dag-pb, hash sha2-256 are fixed), so the on-chain report and the signed one bind the CID:
 * any node may serve its blocks and the renter verifies them against it without trusting the server.
 *
 * A provider with its data plane off signs the older digest (common/output-digest.ts) over the
 * same folder. Both are sha256 preimages of different encodings, so files that match one cannot
 * be made to match the other: the renter accepts either, and only the CID form is served by CID.
 * Browser-safe (multiformats only).
 */
import { CID } from "multiformats/cid";
import * as Digest from "multiformats/hashes/digest";
import { sha256 } from "multiformats/hashes/sha2";
import { bytesToHex, hexToBytes, type Hex } from "viem";

/** The dag-pb codec: a UnixFS folder's root. */
export const DAG_PB_CODE = 0x70;

/**
 * The output CID the bytes32 `outputDigest` names (a CID v1, dag-pb, sha2-256), as its base32
 * string (`bafy...`). Any 32 bytes give a CID; only a digest a provider signed in CID form names
 * data that exists.
 *
 * @example
 * import { outputCidOf } from "suanli/common/output-cid";
 * const cid = outputCidOf(receipt.completion.outputDigest); // "bafybei..."
 */
export function outputCidOf(outputDigest: Hex): string {
  if (!/^0x[0-9a-fA-F]{64}$/.test(outputDigest)) throw new Error(`Expected a bytes32 output digest (0x and 64 hex digits), got ${String(outputDigest).slice(0, 80)}`);
  return CID.createV1(DAG_PB_CODE, Digest.create(sha256.code, hexToBytes(outputDigest))).toString();
}

/**
 * The bytes32 `outputDigest` that commits to `cid`, or undefined when `cid` is not a CID v1 with a
 * dag-pb root and a sha2-256 digest (the only form an output CID takes).
 *
 * @example
 * import { outputDigestOf } from "suanli/common/output-cid";
 * const digest = outputDigestOf("bafybei..."); // "0x..." or undefined
 */
export function outputDigestOf(cid: string | CID): Hex | undefined {
  let parsed: CID;
  try {
    parsed = typeof cid === "string" ? CID.parse(cid) : cid;
  } catch {
    return undefined;
  }
  if (parsed.version !== 1 || parsed.code !== DAG_PB_CODE || parsed.multihash.code !== sha256.code || parsed.multihash.digest.length !== 32) return undefined;
  return bytesToHex(parsed.multihash.digest);
}

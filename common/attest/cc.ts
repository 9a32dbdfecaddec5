/**
 * Confidential-computing (CC) evidence as it travels (docs/attestation.md, "Confidential-computing
 * evidence"): what a GPU in CC mode signs for a challenge, one per unit, carried beside the
 * provider's commit. Verified by node/attest/cc/cc-evidence.ts and cc-nvidia.ts (Node only: X.509);
 * this file is only the shape and its bounds, so the SDK and browsers can read it too.
 */
import { sha256 } from "@noble/hashes/sha2.js";
import { bytesToHex, hexToBytes, keccak256, stringToBytes, type Hex } from "viem";
import { z } from "zod";

const hexBytes = (maxBytes: number) =>
  z
    .string()
    .regex(/^0x([0-9a-fA-F]{2})+$/, "expected 0x and whole bytes")
    .max(2 + 2 * maxBytes);

/** A certificate (PEM) is at most this long: NVIDIA's device certificates are about 1 KiB. */
export const MAX_CC_CERTIFICATE_CHARS = 8_192;
/** Certificates in a device chain: NVIDIA's Hopper chain has five. */
export const MAX_CC_CHAIN = 8;
/** A MEASUREMENTS response: 64 blocks of SHA-384 values, opaque data and a signature fit in 8 KiB (a Hopper's is about 4 KiB). */
export const MAX_CC_RESPONSE_BYTES = 8_192;

/** Most characters of a unit's CC-mode report (`nvidia-smi conf-compute -f` and `-grs`: two short lines). */
export const MAX_CC_MODE_CHARS = 1_024;

/** What a provider attaches per unit: the SPDM 1.1 exchange, the device's certificate chain, and the host's CC mode. */
export const gpuEvidenceSchema = z.strictObject({
  /** The SPDM GET_MEASUREMENTS request as sent to the GPU; its nonce is `ccEvidenceNonce(challenge id, unit, the unit's root)`. */
  request: hexBytes(64),
  /** The GPU's MEASUREMENTS response, signature included. */
  response: hexBytes(MAX_CC_RESPONSE_BYTES),
  /** Device certificate chain, PEM, leaf (the attestation key) first. */
  certificates: z.array(z.string().min(1).max(MAX_CC_CERTIFICATE_CHARS)).min(1).max(MAX_CC_CHAIN),
  /**
   * The host's confidential-computing mode as `nvidia-smi conf-compute -f` and `nvidia-smi
   * conf-compute -grs` print it ("CC status: ON", "Confidential Compute GPUs Ready state: ready").
   * The host's word, not the GPU's: the signed report carries no CC-mode field (node/attest/cc/cc-mode.ts).
   */
  mode: z.string().max(MAX_CC_MODE_CHARS).optional(),
});
export type GpuEvidence = z.output<typeof gpuEvidenceSchema>;

/** Upper bound on one unit's evidence as JSON (a Hopper's is about 14 KiB). */
export const MAX_CC_EVIDENCE_JSON_BYTES = 32 * 1024;

/** One unit's evidence as a commit (and the runner contract) carries it: the shape, at most MAX_CC_EVIDENCE_JSON_BYTES as JSON. */
export const boundedGpuEvidenceSchema = gpuEvidenceSchema.refine((e) => JSON.stringify(e).length <= MAX_CC_EVIDENCE_JSON_BYTES, {
  message: `one unit's evidence is at most ${MAX_CC_EVIDENCE_JSON_BYTES} bytes as JSON`,
});

/** An attestation's `cc` when its attestor verified no confidential-computing evidence. */
export const NO_CC: Hex = `0x${"00".repeat(32)}`;

/**
 * An attestation's `cc`: keccak256 of the GPUs the attestor verified, one per unit in unit order,
 * each `<chip>:<deviceId>` as the device certificate names it (e.g. "GH100:48B02D92494BADF4"),
 * joined by newlines; NO_CC for none.
 */
export function ccIdentitiesHash(units: readonly { chip: string; deviceId: string }[]): Hex {
  if (!units.length) return NO_CC;
  return keccak256(stringToBytes(units.map((unit) => `${unit.chip}:${unit.deviceId}`).join("\n")));
}

/** Domain tag of a unit's evidence nonce. */
export const CC_NONCE_TAG = "suanli/attest/cc/v1";

/**
 * The nonce unit u's GPU must sign (the SPDM request's 32-byte nonce):
 * SHA-256(utf8("suanli/attest/cc/v1") ‖ challengeId ‖ uint32_be(u) ‖ root_u). The challenge id binds
 * the attestor's seed, the provider, the machine id and the claim; u and root_u bind the evidence to
 * this unit and to the answer the provider committed for it, so a report fetched for one unit, one
 * machine's challenge or before the unit's answer existed does not verify for another.
 */
export function ccEvidenceNonce(challengeId: Hex, unit: number, root: Hex): Hex {
  if (!Number.isInteger(unit) || unit < 0 || unit > 0xffff_ffff) throw new RangeError(`a unit index must be a uint32, got ${unit}`);
  const tag = stringToBytes(CC_NONCE_TAG);
  const id = hexToBytes(challengeId);
  const rootBytes = hexToBytes(root);
  if (id.length !== 32 || rootBytes.length !== 32) throw new RangeError("the challenge id and the root are 32 bytes each");
  const input = new Uint8Array(tag.length + 32 + 4 + 32);
  input.set(tag, 0);
  input.set(id, tag.length);
  new DataView(input.buffer).setUint32(tag.length + 32, unit, false);
  input.set(rootBytes, tag.length + 36);
  return bytesToHex(sha256(input));
}

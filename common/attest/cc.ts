/**
 * Confidential-computing (CC) evidence as it travels (docs/attestation.md, "Confidential-computing
 * evidence"): what a GPU in CC mode signs for a challenge, one per unit, carried beside the
 * provider's commit. Verified by node/attest/cc-evidence.ts and cc-nvidia.ts (Node only: X.509);
 * this file is only the shape and its bounds, so the SDK and browsers can read it too.
 */
import { keccak256, stringToBytes, type Hex } from "viem";
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

/** What a provider attaches per unit: the SPDM 1.1 exchange and the device's certificate chain. */
export const gpuEvidenceSchema = z.strictObject({
  /** The SPDM GET_MEASUREMENTS request as sent to the GPU; its nonce is the challenge id. */
  request: hexBytes(64),
  /** The GPU's MEASUREMENTS response, signature included. */
  response: hexBytes(MAX_CC_RESPONSE_BYTES),
  /** Device certificate chain, PEM, leaf (the attestation key) first. */
  certificates: z.array(z.string().min(1).max(MAX_CC_CERTIFICATE_CHARS)).min(1).max(MAX_CC_CHAIN),
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

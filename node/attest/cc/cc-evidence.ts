/**
 * Verification of NVIDIA confidential-computing (CC) device evidence, the design of
 * docs/attestation-threats.md ("Confidential-computing evidence"): a Hopper or later GPU in CC mode
 * answers an SPDM 1.1 GET_MEASUREMENTS request carrying a requester nonce with a MEASUREMENTS
 * response signed (ECDSA P-384 over SHA-384 of request ‖ response-without-signature) by its
 * device attestation key, whose X.509 certificate chains to NVIDIA's device identity root. The
 * attestor sets each unit's request nonce to ccEvidenceNonce(challenge id, unit, the unit's root)
 * (common/attest/cc.ts); the signature covers the request, so the evidence belongs to this unit of
 * this challenge (the response's own nonce is the GPU's, not an echo).
 *
 * Checked here: the certificate chain (each signed by the next, all valid now, the last signed
 * by a pinned root), the leaf's signature over the transcript, the nonce, the message layout,
 * and the measurement blocks against reference values (NVIDIA's RIMs) where given.
 *
 * Tested against evidence recorded from a real H100 with its chain to NVIDIA's root
 * (test/node/fixtures/cc/nvidia-hopper/, read further by cc-nvidia.ts) and against a constructed
 * fixture whose throw-away chain lets each check be broken on purpose (test/node/fixtures/cc/README.md).
 * Node only (node:crypto parses and verifies X.509).
 */
import { AsnConvert } from "@peculiar/asn1-schema";
import { BasicConstraints, Certificate, id_ce_basicConstraints } from "@peculiar/asn1-x509";
import { X509Certificate, createHash, verify as verifySignature } from "node:crypto";
import { bytesToHex, hexToBytes, type Hex } from "viem";
import { gpuEvidenceSchema, type GpuEvidence } from "../../../common/attest/cc.js";

const SPDM_VERSION_11 = 0x11;
const GET_MEASUREMENTS = 0xe0;
const MEASUREMENTS = 0x60;
const NONCE_BYTES = 32;
/** ECDSA P-384 signature, r ‖ s. */
const SIGNATURE_BYTES = 96;
/** DMTF measurement specification. */
const DMTF_SPEC = 0x01;

export { gpuEvidenceSchema, type GpuEvidence };

export type MeasurementBlock = { index: number; valueType: number; value: Hex };

export type GpuEvidenceVerdict =
  | {
      ok: true;
      leafSubject: string;
      /** The attestation-key certificate the chain check verified. */
      leaf: X509Certificate;
      /** The verified chain, leaf first, and the pinned root it ends at (revocation is checked on them: cc-revocation.ts). */
      chain: X509Certificate[];
      anchor: X509Certificate;
      measurements: MeasurementBlock[];
      opaque: Hex;
    }
  | { ok: false; reason: "malformed" | "bad_chain" | "untrusted_root" | "expired_certificate" | "bad_signature" | "wrong_nonce" | "measurement_mismatch"; detail: string };

export type VerifyGpuEvidenceOptions = {
  /** The nonce the evidence must carry (in a challenge: ccEvidenceNonce of the challenge id, the unit and its root). */
  nonce: Hex;
  /** Pinned root certificates (PEM): NVIDIA's device identity CA in production. */
  roots: readonly (string | X509Certificate)[];
  /** Reference measurement values by block index (hex digests); blocks not named are not compared. */
  reference?: ReadonlyMap<number, Hex>;
  /** Time for certificate validity; default now. */
  now?: Date;
};

type ParsedResponse = { nonce: Uint8Array; measurements: MeasurementBlock[]; opaque: Uint8Array; signed: Uint8Array; signature: Uint8Array };

function parseResponse(bytes: Uint8Array): ParsedResponse | string {
  if (bytes.length < 8) return "response shorter than its header";
  if (bytes[0] !== SPDM_VERSION_11) return `response SPDM version 0x${bytes[0]!.toString(16)}, expected 0x11`;
  if (bytes[1] !== MEASUREMENTS) return `response code 0x${bytes[1]!.toString(16)}, expected MEASUREMENTS (0x60)`;
  const blockCount = bytes[4]!;
  // NVIDIA's verifier refuses a report without blocks: nothing in it would describe the firmware.
  if (blockCount === 0) return "the response carries no measurement block";
  const recordLength = bytes[5]! | (bytes[6]! << 8) | (bytes[7]! << 16);
  let at = 8;
  const recordEnd = at + recordLength;
  if (recordEnd > bytes.length) return "measurement record runs past the response";
  const measurements: MeasurementBlock[] = [];
  for (let i = 0; i < blockCount; i++) {
    if (at + 4 > recordEnd) return `measurement block ${i} header runs past the record`;
    const index = bytes[at];
    const spec = bytes[at + 1]!;
    const size = bytes[at + 2]! | (bytes[at + 3]! << 8);
    at += 4;
    if (spec !== DMTF_SPEC) return `measurement block ${index}: specification 0x${spec.toString(16)}, expected DMTF (0x01)`;
    if (at + size > recordEnd || size < 3) return `measurement block ${index} runs past the record`;
    const valueType = bytes[at];
    const valueSize = bytes[at + 1]! | (bytes[at + 2]! << 8);
    if (valueSize !== size - 3) return `measurement block ${index}: value size ${valueSize} does not fit its block of ${size}`;
    // One value per index: with two, a check reading the first and one reading the last would disagree.
    if (measurements.some((measurement) => measurement.index === index)) return `measurement block ${index} appears twice`;
    measurements.push({ index: index!, valueType: valueType!, value: bytesToHex(bytes.subarray(at + 3, at + size)) });
    at += size;
  }
  if (at !== recordEnd) return "measurement record length does not match its blocks";
  if (at + NONCE_BYTES + 2 > bytes.length) return "response ends before its nonce";
  const nonce = bytes.subarray(at, at + NONCE_BYTES);
  at += NONCE_BYTES;
  const opaqueLength = bytes[at]! | (bytes[at + 1]! << 8);
  at += 2;
  if (at + opaqueLength + SIGNATURE_BYTES !== bytes.length) return "opaque data and signature do not end the response";
  const opaque = bytes.subarray(at, at + opaqueLength);
  at += opaqueLength;
  return { nonce, measurements, opaque, signed: bytes.subarray(0, at), signature: bytes.subarray(at) };
}

export type ChainFailure = { ok: false; reason: "malformed" | "bad_chain" | "untrusted_root" | "expired_certificate"; detail: string };

/** A certificate's basicConstraints: whether it is a CA and how many CAs may follow it. Throws on DER that does not parse. */
function basicConstraints(certificate: X509Certificate): { ca: boolean; pathLength?: number } {
  const extension = AsnConvert.parse(certificate.raw, Certificate).tbsCertificate.extensions?.find((candidate) => candidate.extnID === id_ce_basicConstraints);
  if (!extension) return { ca: false };
  const constraints = AsnConvert.parse(extension.extnValue, BasicConstraints);
  return { ca: constraints.cA, ...(constraints.pathLenConstraint === undefined ? {} : { pathLength: constraints.pathLenConstraint }) };
}

/**
 * The X.509 path rules OpenSSL's verification (NVIDIA's verifier) applies beyond signatures: every
 * issuer is a CA (basicConstraints cA; checkIssued already refuses an issuer whose keyUsage lacks
 * keyCertSign), and no issuer has more CAs below it than its pathLenConstraint allows.
 * `issuers[k]` issued the certificate below it; k CAs stand between it and the leaf.
 */
function pathRuleFailure(issuers: readonly X509Certificate[]): ChainFailure | undefined {
  for (const [below, issuer] of issuers.entries()) {
    let constraints: { ca: boolean; pathLength?: number };
    try {
      constraints = basicConstraints(issuer);
    } catch (error) {
      return { ok: false, reason: "malformed", detail: `${issuer.subject}: basicConstraints do not parse: ${(error as Error).message}` };
    }
    if (!constraints.ca) return { ok: false, reason: "bad_chain", detail: `${issuer.subject} issues a certificate but is not a CA (basicConstraints)` };
    if (constraints.pathLength !== undefined && below > constraints.pathLength)
      return { ok: false, reason: "bad_chain", detail: `${issuer.subject} allows ${constraints.pathLength} CA certificates below it, the chain has ${below}` };
  }
  return undefined;
}

/**
 * Parses a certificate chain (PEM or DER, leaf first) and checks it: every certificate valid at
 * `now`, each signed by the next, the last one a pinned root or signed by one, every issuer a CA
 * within its path length. Shared by the device
 * evidence and the reference manifests (cc-rim.ts), which NVIDIA signs under another root.
 */
export function parseAndVerifyChain(
  certificates: readonly (string | Uint8Array)[],
  pinned: readonly (string | X509Certificate)[],
  now: Date,
): { ok: true; chain: X509Certificate[]; anchor: X509Certificate } | ChainFailure {
  let chain: X509Certificate[];
  let roots: X509Certificate[];
  try {
    chain = certificates.map((certificate) => new X509Certificate(certificate));
    roots = pinned.map((root) => (typeof root === "string" ? new X509Certificate(root) : root));
  } catch (error) {
    return { ok: false, reason: "malformed", detail: `a certificate does not parse: ${(error as Error).message}` };
  }
  if (chain.length === 0) return { ok: false, reason: "malformed", detail: "no certificate" };
  for (const cert of chain) {
    // Fails closed: a date that does not read (NaN) is outside every window.
    if (!(now.getTime() >= Date.parse(cert.validFrom) && now.getTime() <= Date.parse(cert.validTo)))
      return { ok: false, reason: "expired_certificate", detail: `${cert.subject} is valid ${cert.validFrom} to ${cert.validTo}` };
  }
  // Anchored first, then verified from the anchor down: every signature is checked under a key a
  // pinned root vouched for, so a chain of the sender's own keys (e.g. RSA with a huge public
  // exponent, costly to verify) costs no signature check under those keys before it is refused.
  const top = chain[chain.length - 1]!;
  const anchor = roots.find((root) => root.fingerprint256 === top.fingerprint256 || (top.checkIssued(root) && top.verify(root.publicKey)));
  if (!anchor) return { ok: false, reason: "untrusted_root", detail: `${top.issuer} is not a pinned root` };
  for (let i = chain.length - 2; i >= 0; i--) {
    if (!chain[i]!.checkIssued(chain[i + 1]!) || !chain[i]!.verify(chain[i + 1]!.publicKey)) {
      return { ok: false, reason: "bad_chain", detail: `${chain[i]!.subject} is not signed by ${chain[i + 1]!.subject}` };
    }
  }
  const issuers = anchor.fingerprint256 === top.fingerprint256 ? chain.slice(1) : [...chain.slice(1), anchor];
  const broken = pathRuleFailure(issuers);
  if (broken) return broken;
  return { ok: true, chain, anchor };
}

/** Verifies CC evidence for a challenge. Pure apart from node:crypto; never throws on bad input. */
export function verifyGpuEvidence(input: unknown, options: VerifyGpuEvidenceOptions): GpuEvidenceVerdict {
  const parsed = gpuEvidenceSchema.safeParse(input);
  if (!parsed.success) return { ok: false, reason: "malformed", detail: parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ") };
  const evidence = parsed.data;
  const request = hexToBytes(evidence.request as Hex);
  const response = hexToBytes(evidence.response as Hex);
  // Param1 0x01: a signature, no other attribute; Param2 0xFF: every measurement block (NVIDIA's
  // verifier sends exactly this). A request for one block would yield an `ok` covering that block only.
  if (request.length !== 4 + NONCE_BYTES + 1 || request[0] !== SPDM_VERSION_11 || request[1] !== GET_MEASUREMENTS || request[2] !== 0x01 || request[3] !== 0xff) {
    return { ok: false, reason: "malformed", detail: "the request is not an SPDM 1.1 GET_MEASUREMENTS for all measurements with a signature (11 e0 01 ff, nonce, slot)" };
  }
  const body = parseResponse(response);
  if (typeof body === "string") return { ok: false, reason: "malformed", detail: body };

  // The challenge is the requester's nonce: SPDM 1.1's MEASUREMENTS response carries a nonce of
  // the responder's own choosing, and the signature covers request ‖ response, so the GPU's
  // signature binds the nonce the attestor put in the request. Checked before the chain: evidence
  // replayed from another challenge is refused without any certificate work.
  const requestNonce = bytesToHex(request.subarray(4, 4 + NONCE_BYTES));
  if (requestNonce !== options.nonce.toLowerCase())
    return { ok: false, reason: "wrong_nonce", detail: `the evidence answers nonce ${requestNonce}, not the challenge's ${options.nonce}` };

  const chained = parseAndVerifyChain(evidence.certificates, options.roots, options.now ?? new Date());
  if (!chained.ok) return chained;
  const chain = chained.chain;
  const transcript = new Uint8Array(request.length + body.signed.length);
  transcript.set(request, 0);
  transcript.set(body.signed, request.length);
  const leaf = chain[0]!;
  let valid: boolean;
  try {
    valid = verifySignature("sha384", transcript, { key: leaf.publicKey, dsaEncoding: "ieee-p1363" }, body.signature);
  } catch (error) {
    return { ok: false, reason: "bad_signature", detail: `the leaf key cannot verify the transcript: ${(error as Error).message}` };
  }
  if (!valid) return { ok: false, reason: "bad_signature", detail: "the MEASUREMENTS response is not signed by the leaf certificate's key" };

  for (const [index, expected] of options.reference ?? new Map()) {
    const block = body.measurements.find((measurement) => measurement.index === index);
    if (!block || block.value !== expected.toLowerCase()) {
      return { ok: false, reason: "measurement_mismatch", detail: `measurement ${index} is ${block?.value ?? "missing"}, the reference is ${expected}` };
    }
  }
  return { ok: true, leafSubject: leaf.subject, leaf, chain, anchor: chained.anchor, measurements: body.measurements, opaque: bytesToHex(body.opaque) };
}

/** SHA-384 of bytes, hex: the digest size of the measurement values. */
export function sha384Hex(data: Uint8Array): Hex {
  return `0x${createHash("sha384").update(data).digest("hex")}`;
}

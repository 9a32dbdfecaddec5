/**
 * NVIDIA's reference integrity manifests (RIMs): the golden measurement values a GPU's signed
 * MEASUREMENTS must match (docs/attestation-threats.md, "Confidential-computing evidence"). A RIM is an
 * ISO/IEC 19770-2 SWID tag, one per VBIOS version and one per driver version, signed with an
 * enveloped XML signature (ECDSA P-384 over SHA-384, C14N 1.1) whose certificate chain runs to
 * NVIDIA's RIM root, a different root from the devices'.
 *
 * `verifyRim` checks the chain and the signature (xml-crypto) and reads the measurements only from
 * what the signature covers, never from the document as received (signature wrapping).
 * `compareWithRims` checks a report's measurement blocks against one or more verified RIMs.
 *
 * Tested against a RIM NVIDIA publishes (test/node/fixtures/cc/nvidia-hopper/README.md).
 */
import { DOMParser } from "@xmldom/xmldom";
import { createHash, createPublicKey, verify as verifySignature, type KeyLike, type X509Certificate } from "node:crypto";
import type { Hex } from "viem";
import { C14nCanonicalization, SignedXml } from "xml-crypto";
import { parseAndVerifyChain, type ChainFailure, type MeasurementBlock } from "./cc-evidence.js";

const DSIG_NS = "http://www.w3.org/2000/09/xmldsig#";
const SHA384_URI = "http://www.w3.org/2001/04/xmldsig-more#sha384";
const ECDSA_SHA384_URI = "http://www.w3.org/2001/04/xmldsig-more#ecdsa-sha384";
/**
 * Canonical XML 1.1. It differs from 1.0 only in how xml:id and xml:base are inherited; a RIM
 * carries neither, so xml-crypto's 1.0 implementation produces the same octets (the test shows the
 * recorded RIM's digest and signature verify, and a one-character edit does not).
 */
const C14N11_URI = "http://www.w3.org/2006/12/xml-c14n11";
const ENVELOPED_URI = "http://www.w3.org/2000/09/xmldsig#enveloped-signature";
/** Every algorithm NVIDIA's RIM signatures name; a signature naming any other is refused. */
const ACCEPTED_ALGORITHMS = new Set([C14N11_URI, ECDSA_SHA384_URI, SHA384_URI, ENVELOPED_URI]);
/** Upper bound on a RIM's size: NVIDIA's are about 20 KiB. */
export const MAX_RIM_BYTES = 256 * 1024;
/**
 * Upper bounds on a RIM's shape, checked before the signature: NVIDIA's have about 85 elements,
 * 6 deep (at most 255 measurement indices). Canonicalization's cost grows with depth × size: a
 * 256 KiB document nested 37,000 deep took minutes of CPU in xml-crypto before it was refused.
 */
export const MAX_RIM_ELEMENTS = 2048;
export const MAX_RIM_DEPTH = 32;

export type RimMeasurement = { index: number; active: boolean; alternatives: Hex[] };
export type Rim = {
  tagId: string;
  /** `GH100` for a Hopper RIM. */
  product: string;
  /** The firmware version it describes: a VBIOS (`96.00.5E.00.01`) or a driver (`550.90.07`). */
  version: string;
  /** RIM measurement index (from 0); the report's SPDM block index is this + 1. */
  measurements: RimMeasurement[];
  /** Subject of the certificate that signed it. */
  signer: string;
  /** When that certificate expires (set by verifyRim): past it, the RIM no longer counts. */
  signerValidTo?: Date;
};

export type RimVerdict = { ok: true; rim: Rim } | ChainFailure | { ok: false; reason: "bad_signature"; detail: string };

class Sha384 {
  getHash(xml: string): string {
    return createHash("sha384").update(xml, "utf8").digest("base64");
  }
  getAlgorithmName(): string {
    return SHA384_URI;
  }
}

class EcdsaSha384 {
  getSignature(): string {
    throw new Error("verification only");
  }
  verifySignature(material: string, key: KeyLike, signatureValue: string): boolean {
    // XML-DSig ECDSA signatures are r ‖ s (RFC 4050), not DER.
    return verifySignature("sha384", Buffer.from(material, "utf8"), { key: createPublicKey(key), dsaEncoding: "ieee-p1363" }, Buffer.from(signatureValue, "base64"));
  }
  getAlgorithmName(): string {
    return ECDSA_SHA384_URI;
  }
}

/** What is wrong with a document's shape (too many elements, too deep), or undefined. Iterative: no recursion on hostile depth. */
function shapeProblem(document: Node): string | undefined {
  const stack: { node: Node; depth: number }[] = [{ node: document, depth: 0 }];
  let count = 0;
  for (let next = stack.pop(); next; next = stack.pop()) {
    if (next.node.nodeType === 1) {
      count += 1;
      if (count > MAX_RIM_ELEMENTS) return `the RIM has more than ${MAX_RIM_ELEMENTS} elements`;
      if (next.depth > MAX_RIM_DEPTH) return `the RIM nests elements more than ${MAX_RIM_DEPTH} deep`;
    }
    for (let child = next.node.firstChild; child; child = child.nextSibling) stack.push({ node: child, depth: next.depth + 1 });
  }
  return undefined;
}

function elements(parent: { getElementsByTagNameNS(ns: string, name: string): ArrayLike<Element> }, ns: string, name: string): Element[] {
  return Array.from(parent.getElementsByTagNameNS(ns, name));
}

/** An attribute by local name, whatever its namespace prefix (`ns2:Hash0`). */
function attribute(element: Element, localName: string): string | undefined {
  for (const attr of Array.from(element.attributes) as Attr[]) if (attr.localName === localName || attr.name === localName) return attr.value;
  return undefined;
}

/** Verifies a RIM (XML text) to a pinned RIM root and reads it. Never throws on bad input. */
export function verifyRim(xml: string, options: { roots: readonly (string | X509Certificate)[]; now?: Date }): RimVerdict {
  if (typeof xml !== "string" || xml.length === 0 || xml.length > MAX_RIM_BYTES)
    return { ok: false, reason: "malformed", detail: `a RIM is XML text of at most ${MAX_RIM_BYTES} bytes` };
  let document: ReturnType<DOMParser["parseFromString"]>;
  try {
    const fail = (message: unknown) => {
      throw new Error(String(message));
    };
    document = new DOMParser({ errorHandler: { error: fail, fatalError: fail } }).parseFromString(xml, "text/xml");
  } catch (error) {
    return { ok: false, reason: "malformed", detail: `the RIM is not well-formed XML: ${(error as Error).message}` };
  }
  const shape = shapeProblem(document);
  if (shape) return { ok: false, reason: "malformed", detail: shape };
  const signatures = elements(document, DSIG_NS, "Signature");
  if (signatures.length !== 1) return { ok: false, reason: "malformed", detail: `a RIM carries exactly one XML signature, this one ${signatures.length}` };
  const signature = signatures[0]!;
  const certificates = elements(signature, DSIG_NS, "X509Certificate").map((element) => Buffer.from((element.textContent ?? "").replace(/\s+/g, ""), "base64"));
  const chained = parseAndVerifyChain(certificates, options.roots, options.now ?? new Date());
  if (!chained.ok) return chained;
  const leaf = chained.chain[0]!;

  // Only NVIDIA's algorithms: xml-crypto's defaults also take SHA-1 digests and RSA signatures.
  const signedInfo = elements(signature, DSIG_NS, "SignedInfo")[0];
  const named = signedInfo ? Array.from(signedInfo.getElementsByTagName("*")).flatMap((element) => attribute(element, "Algorithm") ?? []) : [];
  const foreign = named.find((algorithm) => !ACCEPTED_ALGORITHMS.has(algorithm));
  if (foreign !== undefined) return { ok: false, reason: "bad_signature", detail: `the RIM's signature uses ${foreign}; accepted: ${[...ACCEPTED_ALGORITHMS].join(", ")}` };
  const signed = new SignedXml({ publicCert: leaf.toString() });
  const enveloped = signed.CanonicalizationAlgorithms[ENVELOPED_URI]!;
  signed.CanonicalizationAlgorithms = { [C14N11_URI]: C14nCanonicalization, [ENVELOPED_URI]: enveloped };
  signed.HashAlgorithms = { [SHA384_URI]: Sha384 };
  signed.SignatureAlgorithms = { [ECDSA_SHA384_URI]: EcdsaSha384 };
  let covered: string;
  try {
    signed.loadSignature(signature);
    if (!signed.checkSignature(xml)) return { ok: false, reason: "bad_signature", detail: "the RIM's XML signature does not verify with its signing certificate" };
    const references = signed.getSignedReferences();
    if (references.length !== 1 || attribute(elements(signature, DSIG_NS, "Reference")[0]!, "URI") !== "") {
      return { ok: false, reason: "bad_signature", detail: 'the signature must cover the whole RIM (one reference, URI "")' };
    }
    covered = references[0]!;
  } catch (error) {
    return { ok: false, reason: "bad_signature", detail: (error as Error).message };
  }

  // Everything below is read from the signed octets only.
  const content = readRimContent(covered, leaf.subject);
  return content.ok ? { ok: true, rim: { ...content.rim, signerValidTo: new Date(leaf.validTo) } } : content;
}

/**
 * Reads a RIM's SWID tag: exported for tests only; call it on nothing but the octets a verified
 * signature covers (verifyRim). Fails closed, as NVIDIA's verifier does: a measurement is active
 * unless it says `active="False"`, and one index given twice refuses the RIM.
 */
export function readRimContent(covered: string, signer: string): { ok: true; rim: Rim } | { ok: false; reason: "malformed"; detail: string } {
  let tag: Element | null;
  try {
    tag = new DOMParser().parseFromString(covered, "text/xml").documentElement;
  } catch (error) {
    return { ok: false, reason: "malformed", detail: `the signed content does not parse: ${(error as Error).message}` };
  }
  if (!tag || tag.localName !== "SoftwareIdentity") return { ok: false, reason: "malformed", detail: "the signed content is not a SWID SoftwareIdentity" };
  const meta = Array.from(tag.getElementsByTagName("*")).find((element) => element.localName === "Meta");
  const version = meta ? attribute(meta, "colloquialVersion") : undefined;
  const product = (meta ? attribute(meta, "product") : undefined) ?? attribute(tag, "name");
  if (!version || !product) return { ok: false, reason: "malformed", detail: "the RIM names no product or firmware version (Meta product, colloquialVersion)" };
  const measurements: RimMeasurement[] = [];
  for (const resource of Array.from(tag.getElementsByTagName("*")).filter((element) => element.localName === "Resource" && attribute(element, "type") === "Measurement")) {
    const index = Number(attribute(resource, "index"));
    const count = Number(attribute(resource, "alternatives") ?? "1");
    if (!Number.isInteger(index) || index < 0 || index > 254 || !Number.isInteger(count) || count < 1 || count > 16) {
      return { ok: false, reason: "malformed", detail: `measurement resource ${attribute(resource, "name") ?? "?"}: index 0..254 and 1..16 alternatives expected` };
    }
    if (measurements.some((measurement) => measurement.index === index)) return { ok: false, reason: "malformed", detail: `measurement ${index} is given twice` };
    const alternatives: Hex[] = [];
    for (let i = 0; i < count; i++) {
      const value = attribute(resource, `Hash${i}`);
      if (!value || !/^[0-9a-fA-F]{96}$/.test(value)) return { ok: false, reason: "malformed", detail: `measurement ${index}: Hash${i} is not a SHA-384 value` };
      alternatives.push(`0x${value.toLowerCase()}`);
    }
    measurements.push({ index, active: attribute(resource, "active")?.toLowerCase() !== "false", alternatives });
  }
  return { ok: true, rim: { tagId: attribute(tag, "tagId") ?? "", product, version, measurements, signer } };
}

export type RimMismatch = { block: number; reason: "missing" | "mismatch" | "conflict"; detail: string };

/**
 * The report's measurement blocks against the active measurements of the given RIMs (a VBIOS RIM
 * and a driver RIM together cover a GPU). RIM index i is SPDM block i + 1. Two RIMs may not both
 * claim the same index. Returns every mismatch; empty means every block the given RIMs define
 * matches, so a caller must give both of a GPU's RIMs (no RIM given, nothing compared).
 */
export function compareWithRims(blocks: readonly MeasurementBlock[], rims: readonly Rim[]): RimMismatch[] {
  const golden = new Map<number, { alternatives: Hex[]; from: string }>();
  const mismatches: RimMismatch[] = [];
  for (const rim of rims) {
    for (const measurement of rim.measurements.filter((m) => m.active)) {
      const block = measurement.index + 1;
      const already = golden.get(block);
      if (already) mismatches.push({ block, reason: "conflict", detail: `both ${already.from} and ${rim.version} define block ${block}` });
      else golden.set(block, { alternatives: measurement.alternatives, from: rim.version });
    }
  }
  for (const [block, { alternatives, from }] of golden) {
    const actual = blocks.find((candidate) => candidate.index === block);
    if (!actual) mismatches.push({ block, reason: "missing", detail: `the report has no block ${block} (${from} defines it)` });
    else if (!alternatives.includes(actual.value.toLowerCase() as Hex))
      mismatches.push({ block, reason: "mismatch", detail: `block ${block} is ${actual.value}, ${from} allows ${alternatives.join(" or ")}` });
  }
  return mismatches.sort((a, b) => a.block - b.block);
}

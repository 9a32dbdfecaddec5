/**
 * Revocation of confidential-computing device certificates, offline (docs/attestation-threats.md,
 * "Revocation"). NVIDIA names a CRL in each of its CA certificates (`crl.ndis.nvidia.com`:
 * `l1-root.crl` for the certificates the Device Identity CA issues, `l2-gh100.crl` for those the
 * GH100 Identity issues) and answers OCSP for the rest. A node fetches nothing: the CRLs an
 * attestor checks are files it is given (`attest.cc.crl.files`, a bundle the release ships and
 * updates), each parsed at start-up, and at each commit:
 *
 * - a CRL counts for a certificate only if its issuer name is the certificate's issuer's subject
 *   and its signature (ECDSA, SHA-256/384/512) verifies under that issuer's key from the verified
 *   chain; anything else in a file is never trusted;
 * - a certificate whose serial a counting CRL lists is revoked (`revoked`), however old the CRL;
 * - with `required`, every certificate that names a CRL distribution point must have a fresh
 *   counting CRL (`revocation_unknown` otherwise): fresh = not past its nextUpdate and no older
 *   than `maxAgeDays` (from thisUpdate). Certificates that name none (NVIDIA's per-device BROM and
 *   attestation-key certificates) are checked against whatever CRLs their issuer has here, and
 *   otherwise only by OCSP, which is not built.
 *
 * Freshness limit: a revocation NVIDIA publishes after the bundle's CRLs were fetched is unseen
 * until the attestor runs a bundle that has it: at most min(nextUpdate, thisUpdate + maxAgeDays)
 * after the CRL was issued, when `required` then refuses every unit whose chain it covers.
 */
import { AsnConvert } from "@peculiar/asn1-schema";
import { Certificate, CertificateList, id_ce_cRLDistributionPoints } from "@peculiar/asn1-x509";
import { X509Certificate, verify as verifySignature } from "node:crypto";
import { readFile } from "node:fs/promises";

/** ECDSA signature algorithms a CRL may use (NVIDIA's are ecdsa-with-SHA256 / SHA384), and their hash. */
const CRL_SIGNATURE_HASHES: Readonly<Record<string, string>> = {
  "1.2.840.10045.4.3.2": "sha256",
  "1.2.840.10045.4.3.3": "sha384",
  "1.2.840.10045.4.3.4": "sha512",
};

export type Crl = {
  /** Where it came from (for messages). */
  file: string;
  /** DER of the issuer name, hex. */
  issuer: string;
  thisUpdate: Date;
  nextUpdate: Date;
  /** Revoked serial numbers, upper-case hex without leading zeros. */
  revoked: ReadonlySet<string>;
  tbs: Uint8Array;
  signature: Uint8Array;
  hash: string;
  /** Issuer fingerprints whose key verified this CRL's signature (or did not). */
  verifiedBy: Map<string, boolean>;
};

const hex = (bytes: ArrayBuffer | Uint8Array) => Buffer.from(bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes)).toString("hex");
/** A serial number as a comparable string: upper-case hex, no leading zeros (DER adds one for a set high bit). */
const serialKey = (value: string) => value.replace(/^0+/, "").toUpperCase() || "0";

/** Parses one CRL (DER, or PEM `X509 CRL` armour); throws an Error saying what is wrong. */
export function parseCrl(input: Uint8Array | string, file: string): Crl {
  let der: Uint8Array;
  const text = typeof input === "string" ? input : Buffer.from(input).toString("latin1");
  const pem = text.match(/-----BEGIN X509 CRL-----([\s\S]*?)-----END X509 CRL-----/);
  if (pem) der = Buffer.from(pem[1]!.replace(/\s+/g, ""), "base64");
  else if (typeof input === "string") throw new Error(`${file} is neither DER nor a PEM "X509 CRL"`);
  else der = input;
  let list: CertificateList;
  try {
    list = AsnConvert.parse(der, CertificateList);
  } catch (error) {
    throw new Error(`${file} is not a CRL: ${(error as Error).message}`, { cause: error });
  }
  const algorithm = list.signatureAlgorithm.algorithm;
  const hash = CRL_SIGNATURE_HASHES[algorithm];
  if (!hash) throw new Error(`${file} is signed with ${algorithm}; accepted: ECDSA with SHA-256, SHA-384 or SHA-512`);
  if (!list.tbsCertListRaw) throw new Error(`${file}: the signed part of the CRL could not be read`);
  const tbs = list.tbsCertList;
  // RFC 5280 §5.1.2.5: conforming issuers (NVIDIA's included) always give nextUpdate. Without it the
  // parser reads the revoked list as an absent field, so such a file is refused rather than read as
  // revoking nothing; and what was read must encode back to the signed bytes, entry for entry.
  if (!tbs.nextUpdate) throw new Error(`${file} has no nextUpdate (RFC 5280 CRLs must); refused rather than read as revoking nothing`);
  if (Buffer.compare(Buffer.from(AsnConvert.serialize(tbs)), Buffer.from(list.tbsCertListRaw)) !== 0) {
    throw new Error(`${file}: the CRL does not read back to its signed bytes (an encoding this reader does not follow); refused`);
  }
  const issuer = AsnConvert.serialize(tbs.issuer);
  return {
    file,
    issuer: hex(issuer),
    thisUpdate: tbs.thisUpdate.getTime(),
    nextUpdate: tbs.nextUpdate.getTime(),
    revoked: new Set((tbs.revokedCertificates ?? []).map((entry) => serialKey(hex(entry.userCertificate)))),
    tbs: new Uint8Array(list.tbsCertListRaw),
    signature: new Uint8Array(list.signature),
    hash,
    verifiedBy: new Map(),
  };
}

/** Reads and parses `attest.cc.crl.files`; a file that cannot be read or is not a CRL stops the start, named. */
export async function loadCrls(files: readonly string[], readBytes: (file: string) => Promise<Uint8Array> = (file) => readFile(file)): Promise<Crl[]> {
  const crls: Crl[] = [];
  for (const file of files) {
    let bytes: Uint8Array;
    try {
      bytes = await readBytes(file);
    } catch (error) {
      throw new Error(`attest.cc.crl.files: cannot read ${file}: ${(error as Error).message}`, { cause: error });
    }
    try {
      crls.push(parseCrl(bytes, file));
    } catch (error) {
      throw new Error(`attest.cc.crl.files: ${(error as Error).message}`, { cause: error });
    }
  }
  return crls;
}

export type RevocationPolicy = {
  crls: readonly Crl[];
  /** A CRL issued (thisUpdate) longer ago than this is stale: it still revokes, but covers nothing. */
  maxAgeMs: number;
  /** Every certificate naming a CRL distribution point needs a fresh CRL of its issuer. */
  required: boolean;
};

export type RevocationVerdict = { ok: true; fresh: number } | { ok: false; reason: "revoked" | "revocation_unknown"; detail: string };

function subjectDer(certificate: X509Certificate): string {
  return hex(AsnConvert.serialize(AsnConvert.parse(certificate.raw, Certificate).tbsCertificate.subject));
}

function namesDistributionPoint(certificate: X509Certificate): boolean {
  return (AsnConvert.parse(certificate.raw, Certificate).tbsCertificate.extensions ?? []).some((extension) => extension.extnID === id_ce_cRLDistributionPoints);
}

/** Whether `crl` is signed by `issuer`'s key (remembered per issuer). */
function signedBy(crl: Crl, issuer: X509Certificate): boolean {
  const known = crl.verifiedBy.get(issuer.fingerprint256);
  if (known !== undefined) return known;
  let valid: boolean;
  try {
    valid = verifySignature(crl.hash, crl.tbs, issuer.publicKey, crl.signature);
  } catch {
    valid = false;
  }
  crl.verifiedBy.set(issuer.fingerprint256, valid);
  return valid;
}

export function isFresh(crl: Crl, policy: Pick<RevocationPolicy, "maxAgeMs">, now: Date): boolean {
  if (now.getTime() > crl.nextUpdate.getTime()) return false;
  return now.getTime() - crl.thisUpdate.getTime() <= policy.maxAgeMs;
}

/**
 * Checks a verified chain (leaf first) and the pinned root it ends at against the CRLs. Each
 * certificate below the root is looked up in the CRLs its issuer signed.
 */
export function checkRevocation(chain: readonly X509Certificate[], anchor: X509Certificate, policy: RevocationPolicy, now: Date): RevocationVerdict {
  const path = chain[chain.length - 1]!.fingerprint256 === anchor.fingerprint256 ? [...chain] : [...chain, anchor];
  let fresh = 0;
  for (let i = 0; i < path.length - 1; i++) {
    const certificate = path[i]!;
    const issuer = path[i + 1]!;
    const issuerName = subjectDer(issuer);
    const counting = policy.crls.filter((crl) => crl.issuer === issuerName && signedBy(crl, issuer));
    const serial = serialKey(certificate.serialNumber);
    const listing = counting.find((crl) => crl.revoked.has(serial));
    if (listing) {
      return {
        ok: false,
        reason: "revoked",
        detail: `${certificate.subject.replace(/\n/g, ", ")} (serial ${serial}) is revoked by ${listing.file} (issued ${listing.thisUpdate.toISOString()})`,
      };
    }
    const current = counting.some((crl) => isFresh(crl, policy, now));
    if (current) fresh++;
    else if (policy.required && namesDistributionPoint(certificate)) {
      const stale = counting.length
        ? ` (${counting.map((crl) => `${crl.file} issued ${crl.thisUpdate.toISOString()}, next ${crl.nextUpdate.toISOString()}`).join("; ")}: stale)`
        : "";
      return {
        ok: false,
        reason: "revocation_unknown",
        detail: `no fresh CRL of ${issuer.subject.replace(/\n/g, ", ")} for ${certificate.subject.replace(/\n/g, ", ")}${stale} (attest.cc.crl.files, maxAgeDays; attest.cc.crl.required)`,
      };
    }
  }
  return { ok: true, fresh };
}

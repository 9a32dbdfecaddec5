/**
 * What NVIDIA confidential-computing evidence says about the GPU, beyond the SPDM checks of
 * cc-evidence.ts (docs/attestation-threats.md, "Confidential-computing evidence"):
 *
 * - the **device identity** in the attestation-key (leaf) certificate NVIDIA's chain vouches for:
 *   the chip (`NVIDIA:GH100:<device id>` in its subjectAltName) and the firmware ID (FWID) in its
 *   TCG DICE TcbInfo extension;
 * - the **firmware and board** fields of the signed MEASUREMENTS response's opaque data (type,
 *   length, value; little-endian 16-bit type and length): driver and VBIOS versions, project,
 *   project SKU and chip SKU, and the FWID, which must equal the certificate's;
 * - whether that evidence can stand behind a claimed GPU class: the chip must be the class's, and
 *   where the verifier holds a board table, the board must be listed for that class;
 * - that the units of one machine present distinct devices (one GPU is not counted twice).
 *
 * The layouts were read from, and are tested against, a report recorded from a real Hopper GPU with
 * its certificate chain to NVIDIA's device identity root: test/node/fixtures/cc/nvidia-hopper/.
 */
import { AsnConvert } from "@peculiar/asn1-schema";
import { Certificate, SubjectAlternativeName, id_ce_subjectAltName } from "@peculiar/asn1-x509";
import * as asn1js from "asn1js";
import { X509Certificate } from "node:crypto";
import { bytesToHex, hexToBytes, type Hex } from "viem";
import { canonicalGpuName } from "../../../common/gpu.js";
import { verifyGpuEvidence, type GpuEvidenceVerdict, type VerifyGpuEvidenceOptions } from "./cc-evidence.js";

/** NVIDIA's otherName type for the device identity string `NVIDIA:<chip>:<device id>`. */
const NVIDIA_DEVICE_NAME_OID = "1.3.6.1.4.1.412.274.1";
/** TCG DICE TcbInfo (and its older arc), which carries the FWID. */
const TCB_INFO_OIDS = new Set(["2.23.133.5.4.1", "2.23.133.5.4.1.1"]);
const SHA384_OID = "2.16.840.1.101.3.4.2.2";

/** Opaque data field types NVIDIA's GPUs use (those read here). */
const OPAQUE = { driverVersion: 3, vbiosVersion: 6, chipSku: 15, chipSkuMod: 16, project: 17, projectSku: 18, projectSkuMod: 19, fwid: 20 } as const;

/** GPU classes whose chip supports confidential computing, and the chip the evidence must name. */
export const CC_CHIP_BY_CLASS: Readonly<Record<string, string>> = {
  "H100-80GB-SXM": "GH100",
  "H100-80GB-PCIE": "GH100",
  "H200-141GB": "GH100",
};

export type NvidiaOpaque = {
  driverVersion?: string;
  /** As nvidia-smi prints it, e.g. `96.00.9F.00.01`. */
  vbiosVersion?: string;
  project?: string;
  projectSku?: string;
  projectSkuMod?: string;
  chipSku?: string;
  chipSkuMod?: string;
  fwid?: Hex;
  /** Every field, in order, raw: the ones not named above included. */
  fields: { type: number; value: Hex }[];
};

export type NvidiaDeviceIdentity = { chip: string; deviceId: string; fwid?: Hex };

/** The board key a board table is indexed by: `<project>-<project SKU>-<chip SKU>`, e.g. `1010-0200-882`. */
export function boardKey(opaque: NvidiaOpaque): string | undefined {
  if (!opaque.project || !opaque.projectSku || !opaque.chipSku) return undefined;
  return `${opaque.project}-${opaque.projectSku}-${opaque.chipSku}`;
}

function text(value: Uint8Array): string {
  const end = value.indexOf(0);
  return Buffer.from(end < 0 ? value : value.subarray(0, end)).toString("latin1");
}

function vbios(value: Uint8Array): string | undefined {
  if (value.length < 5) return undefined;
  const hex = (byte: number) => byte.toString(16).toUpperCase().padStart(2, "0");
  return [value[3]!, value[2]!, value[1]!, value[0]!, value[4]!].map(hex).join(".");
}

/** Parses the opaque data of an NVIDIA MEASUREMENTS response; a string says what is wrong. */
export function parseNvidiaOpaque(opaque: Hex | Uint8Array): NvidiaOpaque | string {
  const bytes = typeof opaque === "string" ? hexToBytes(opaque) : opaque;
  const out: NvidiaOpaque = { fields: [] };
  let at = 0;
  while (at < bytes.length) {
    if (at + 4 > bytes.length) return `opaque field header at byte ${at} runs past the data`;
    const type = bytes[at]! | (bytes[at + 1]! << 8);
    const length = bytes[at + 2]! | (bytes[at + 3]! << 8);
    at += 4;
    if (at + length > bytes.length) return `opaque field ${type} (${length} bytes) runs past the data`;
    const value = bytes.subarray(at, at + length);
    at += length;
    out.fields.push({ type, value: bytesToHex(value) });
    if (type === OPAQUE.driverVersion) out.driverVersion = text(value);
    else if (type === OPAQUE.vbiosVersion) out.vbiosVersion = vbios(value);
    else if (type === OPAQUE.chipSku) out.chipSku = text(value);
    else if (type === OPAQUE.chipSkuMod) out.chipSkuMod = text(value);
    else if (type === OPAQUE.project) out.project = text(value);
    else if (type === OPAQUE.projectSku) out.projectSku = text(value);
    else if (type === OPAQUE.projectSkuMod) out.projectSkuMod = text(value);
    else if (type === OPAQUE.fwid) out.fwid = bytesToHex(value);
  }
  return out;
}

/** The first (hash algorithm, digest) pair with SHA-384 anywhere in a DER value: the FWID of a TcbInfo. */
function findSha384Digest(node: asn1js.AsnType): Uint8Array | undefined {
  if (node instanceof asn1js.Sequence || node instanceof asn1js.Constructed) {
    const items = node.valueBlock.value;
    const [first, second] = items;
    if (first instanceof asn1js.ObjectIdentifier && first.valueBlock.toString() === SHA384_OID && second instanceof asn1js.OctetString) {
      return new Uint8Array(second.valueBlock.valueHexView);
    }
    for (const item of items) {
      const found = findSha384Digest(item);
      if (found) return found;
    }
  }
  return undefined;
}

/** The device identity in an NVIDIA attestation-key certificate (PEM or parsed); a string says what is missing. */
export function nvidiaDeviceIdentity(leaf: string | X509Certificate): NvidiaDeviceIdentity | string {
  try {
    return readDeviceIdentity(AsnConvert.parse((typeof leaf === "string" ? new X509Certificate(leaf) : leaf).raw, Certificate));
  } catch (error) {
    // A chain verified to a pinned root can still carry extensions that do not parse.
    return `the leaf certificate does not parse: ${(error as Error).message}`;
  }
}

function readDeviceIdentity(certificate: Certificate): NvidiaDeviceIdentity | string {
  const extensions = certificate.tbsCertificate.extensions ?? [];
  let name: string | undefined;
  const san = extensions.find((extension) => extension.extnID === id_ce_subjectAltName);
  if (san) {
    for (const general of AsnConvert.parse(san.extnValue, SubjectAlternativeName)) {
      if (general.otherName?.typeId !== NVIDIA_DEVICE_NAME_OID) continue;
      const value = asn1js.fromBER(general.otherName.value).result;
      if (value instanceof asn1js.Utf8String || value instanceof asn1js.PrintableString) name = value.valueBlock.value;
    }
  }
  const match = name?.match(/^NVIDIA:([A-Za-z0-9]+):([0-9A-Fa-f]+)$/);
  if (!match) return "the leaf certificate names no NVIDIA device (subjectAltName otherName NVIDIA:<chip>:<id>)";
  const identity: NvidiaDeviceIdentity = { chip: match[1]!, deviceId: match[2]!.toUpperCase() };
  const tcb = extensions.find((extension) => TCB_INFO_OIDS.has(extension.extnID));
  if (tcb) {
    const digest = findSha384Digest(asn1js.fromBER(tcb.extnValue.buffer).result);
    if (digest) identity.fwid = bytesToHex(digest);
  }
  return identity;
}

export type NvidiaEvidenceVerdict =
  | ({ ok: true; device: NvidiaDeviceIdentity; firmware: NvidiaOpaque; board?: string } & Pick<Extract<GpuEvidenceVerdict, { ok: true }>, "measurements" | "chain" | "anchor">)
  | Extract<GpuEvidenceVerdict, { ok: false }>
  | { ok: false; reason: "not_nvidia" | "fwid_mismatch" | "not_cc_capable" | "chip_mismatch" | "board_mismatch" | "unknown_board"; detail: string };

export type VerifyNvidiaEvidenceOptions = VerifyGpuEvidenceOptions & {
  /** The GPU class the commit claims for this unit: the evidence must be able to stand behind it. */
  claimedClass?: string;
  /**
   * Board key (`boardKey`) → GPU class. Given, the board must be listed, for the claimed class;
   * absent, the check stops at the chip (which cannot tell an H100 from an H200: both are GH100).
   */
  boards?: ReadonlyMap<string, string>;
};

/** The certificate's FWID must be the one the signed report carries (when the report carries one). */
export function checkFwid(device: NvidiaDeviceIdentity, firmware: NvidiaOpaque): string | undefined {
  if (firmware.fwid === undefined) return undefined;
  if (device.fwid === firmware.fwid) return undefined;
  return `the report's FWID ${firmware.fwid} is not the attestation certificate's ${device.fwid ?? "(none)"}`;
}

/** Can this device and board stand behind `claimedClass`? A failure, or undefined. */
export function checkClaimedClass(
  device: NvidiaDeviceIdentity,
  board: string | undefined,
  claimedClass: string,
  boards?: ReadonlyMap<string, string>,
): Extract<NvidiaEvidenceVerdict, { ok: false }> | undefined {
  const canonical = (canonicalGpuName(claimedClass) ?? claimedClass).split("/")[0]!;
  // Own keys only: "constructor" or "toString" is not a class with a chip.
  const chip = Object.hasOwn(CC_CHIP_BY_CLASS, canonical) ? CC_CHIP_BY_CLASS[canonical] : undefined;
  if (!chip)
    return {
      ok: false,
      reason: "not_cc_capable",
      detail: `${claimedClass} has no confidential-computing evidence; CC-capable classes: ${Object.keys(CC_CHIP_BY_CLASS).join(", ")}`,
    };
  if (device.chip !== chip) return { ok: false, reason: "chip_mismatch", detail: `the evidence is of a ${device.chip}, a ${canonical} is a ${chip}` };
  if (!boards) return undefined;
  const listed = board === undefined ? undefined : boards.get(board);
  if (listed === undefined) return { ok: false, reason: "unknown_board", detail: `board ${board ?? "(unnamed)"} is not in the verifier's board table` };
  if (listed !== canonical) return { ok: false, reason: "board_mismatch", detail: `board ${board} is a ${listed}, not a ${canonical}` };
  return undefined;
}

/** verifyGpuEvidence, then what the evidence says about the GPU and whether it backs the claimed class. Never throws on bad input. */
export function verifyNvidiaGpuEvidence(input: unknown, options: VerifyNvidiaEvidenceOptions): NvidiaEvidenceVerdict {
  const verdict = verifyGpuEvidence(input, options);
  if (!verdict.ok) return verdict;
  const device = nvidiaDeviceIdentity(verdict.leaf);
  if (typeof device === "string") return { ok: false, reason: "not_nvidia", detail: device };
  const firmware = parseNvidiaOpaque(verdict.opaque);
  if (typeof firmware === "string") return { ok: false, reason: "malformed", detail: firmware };
  const fwid = checkFwid(device, firmware);
  if (fwid) return { ok: false, reason: "fwid_mismatch", detail: fwid };
  const board = boardKey(firmware);
  if (options.claimedClass !== undefined) {
    const refused = checkClaimedClass(device, board, options.claimedClass, options.boards);
    if (refused) return refused;
  }
  return { ok: true, device, firmware, ...(board === undefined ? {} : { board }), measurements: verdict.measurements, chain: verdict.chain, anchor: verdict.anchor };
}

/**
 * The units of one machine must present distinct devices: one GPU's evidence offered for two
 * units (or, by an attestor comparing across machines in the same round, two machine ids) is one
 * GPU counted twice. Returns the repeated device id, or undefined.
 */
export function repeatedDevice(devices: readonly NvidiaDeviceIdentity[]): string | undefined {
  const seen = new Set<string>();
  for (const device of devices) {
    const key = `${device.chip}:${device.deviceId}`;
    if (seen.has(key)) return key;
    seen.add(key);
  }
  return undefined;
}

/**
 * Simulated confidential-computing GPUs for tests: a throw-away certificate chain made with
 * openssl when the test starts (root → intermediate → one attestation key per device, each leaf
 * naming `NVIDIA:<chip>:<device id>` in its subjectAltName and an FWID in a TCG DICE TcbInfo
 * extension, as NVIDIA's do), and SPDM 1.1 MEASUREMENTS responses signed by a device's key for any
 * nonce, with NVIDIA's opaque-data layout, and CRLs the simulated CAs sign (the intermediate names
 * a CRL distribution point, as NVIDIA's CA certificates do). A real CC-mode GPU is not available
 * here; the verifier's checks against a real report are test/node/attest/cc-nvidia.test.ts's.
 * Nothing here is NVIDIA's: the root is made up, so only an attestor that pins it accepts this evidence.
 */
import { execFileSync } from "node:child_process";
import { createHash, createPrivateKey, randomBytes, sign, X509Certificate, type KeyObject } from "node:crypto";
import { AsnConvert } from "@peculiar/asn1-schema";
import { AlgorithmIdentifier, Certificate, CertificateList, RevokedCertificate, TBSCertList, Time, Version } from "@peculiar/asn1-x509";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { Hex } from "viem";
import { ccEvidenceNonce, type GpuEvidence } from "../../common/attest/cc.js";

export type SimDevice = { chip: string; deviceId: string; key: KeyObject; certificates: string[]; fwid: Buffer };
export type SimBoard = { project: string; projectSku: string; chipSku: string; driver: string; vbios: Buffer };

/** An H100 PCIe-like board (the recorded report's board fields). */
export const SIM_BOARD: SimBoard = { project: "1010", projectSku: "0200", chipSku: "882", driver: "550.90.07", vbios: Buffer.from("009f009601000000", "hex") };

function openssl(args: string[], cwd: string): void {
  execFileSync("openssl", args, { cwd, stdio: ["ignore", "ignore", "pipe"] });
}

/** DiceTcbInfo ::= SEQUENCE { fwids [6] IMPLICIT SEQUENCE OF FWID }, FWID ::= SEQUENCE { sha384 OID, OCTET STRING } */
function tcbInfoDer(fwid: Buffer): string {
  const oid = Buffer.from("0609608648016503040202", "hex");
  const digest = Buffer.concat([Buffer.from([0x04, fwid.length]), fwid]);
  const one = Buffer.concat([Buffer.from([0x30, oid.length + digest.length]), oid, digest]);
  const list = Buffer.concat([Buffer.from([0xa6, one.length]), one]);
  return Buffer.concat([Buffer.from([0x30, list.length]), list]).toString("hex");
}

/** Makes `count` simulated devices of `chip` under one new root. `close` deletes the key files. */
export function makeSimDevices(
  count: number,
  chip = "GH100",
): {
  rootPem: string;
  rootFile: string;
  intermediatePem: string;
  devices: SimDevice[];
  crl: (issuer: "root" | "intermediate", revoked: readonly string[], o?: SimCrlOptions) => Buffer;
  close: () => void;
} {
  const dir = mkdtempSync(path.join(os.tmpdir(), "suanli-cc-sim-"));
  const ec = (file: string) => openssl(["ecparam", "-name", "secp384r1", "-genkey", "-noout", "-out", file], dir);
  ec("root.key");
  ec("int.key");
  openssl(
    [
      "req",
      "-x509",
      "-new",
      "-key",
      "root.key",
      "-sha384",
      "-days",
      "30",
      "-subj",
      "/CN=Simulated CC Device Root (not NVIDIA)",
      "-addext",
      "basicConstraints=critical,CA:TRUE",
      "-addext",
      "keyUsage=critical,keyCertSign",
      "-out",
      "root.pem",
    ],
    dir,
  );
  writeFileSync(path.join(dir, "ca.ext"), "basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign\ncrlDistributionPoints=URI:http://crl.invalid/simulated-root.crl\n");
  openssl(["req", "-new", "-key", "int.key", "-subj", `/CN=Simulated ${chip} Provisioner ICA`, "-out", "int.csr"], dir);
  openssl(["x509", "-req", "-in", "int.csr", "-CA", "root.pem", "-CAkey", "root.key", "-CAcreateserial", "-sha384", "-days", "30", "-extfile", "ca.ext", "-out", "int.pem"], dir);
  const intPem = readFileSync(path.join(dir, "int.pem"), "utf8");
  const devices: SimDevice[] = [];
  for (let i = 0; i < count; i++) {
    const deviceId = randomBytes(8).toString("hex").toUpperCase();
    const fwid = randomBytes(48);
    ec(`d${i}.key`);
    writeFileSync(
      path.join(dir, `d${i}.ext`),
      `basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nsubjectAltName=otherName:1.3.6.1.4.1.412.274.1;UTF8:NVIDIA:${chip}:${deviceId}\n2.23.133.5.4.1=DER:${tcbInfoDer(fwid)}\n`,
    );
    openssl(["req", "-new", "-key", `d${i}.key`, "-subj", `/CN=Simulated ${chip} attestation key ${i}`, "-out", `d${i}.csr`], dir);
    openssl(
      ["x509", "-req", "-in", `d${i}.csr`, "-CA", "int.pem", "-CAkey", "int.key", "-CAcreateserial", "-sha384", "-days", "30", "-extfile", `d${i}.ext`, "-out", `d${i}.pem`],
      dir,
    );
    devices.push({
      chip,
      deviceId,
      key: createPrivateKey(readFileSync(path.join(dir, `d${i}.key`))),
      certificates: [readFileSync(path.join(dir, `d${i}.pem`), "utf8"), intPem],
      fwid,
    });
  }
  const rootPem = readFileSync(path.join(dir, "root.pem"), "utf8");
  const keys = { root: createPrivateKey(readFileSync(path.join(dir, "root.key"))), intermediate: createPrivateKey(readFileSync(path.join(dir, "int.key"))) };
  for (const file of ["root.key", "int.key", ...devices.map((_, i) => `d${i}.key`)]) rmSync(path.join(dir, file));
  const crl = (issuer: "root" | "intermediate", revoked: readonly string[], o: SimCrlOptions = {}) =>
    simCrl(issuer === "root" ? rootPem : intPem, o.signedBy ?? keys[issuer], revoked, o);
  return { rootPem, rootFile: path.join(dir, "root.pem"), intermediatePem: intPem, devices, crl, close: () => rmSync(dir, { recursive: true, force: true }) };
}

export type SimCrlOptions = { thisUpdate?: Date; nextUpdate?: Date | null; signedBy?: KeyObject };

/** A certificate's serial number as the DER INTEGER's bytes (a leading zero where the high bit is set). */
function serialBytes(serialHex: string): ArrayBuffer {
  const even = serialHex.length % 2 ? `0${serialHex}` : serialHex;
  const bytes = Buffer.from(even, "hex");
  const der = bytes[0]! & 0x80 ? Buffer.concat([Buffer.from([0]), bytes]) : bytes;
  return der.buffer.slice(der.byteOffset, der.byteOffset + der.length) as ArrayBuffer;
}

/** A CRL (DER) issued by `issuerPem`'s subject, signed ECDSA-SHA384 with `key`, listing `revoked` serial numbers (hex). */
export function simCrl(issuerPem: string, key: KeyObject, revoked: readonly string[], o: SimCrlOptions = {}): Buffer {
  const issuer = AsnConvert.parse(new X509Certificate(issuerPem).raw, Certificate).tbsCertificate.subject;
  const thisUpdate = o.thisUpdate ?? new Date(Date.now() - 60_000);
  const nextUpdate = o.nextUpdate === null ? undefined : (o.nextUpdate ?? new Date(thisUpdate.getTime() + 30 * 86_400_000));
  const algorithm = new AlgorithmIdentifier({ algorithm: "1.2.840.10045.4.3.3" });
  const tbs = new TBSCertList({
    version: Version.v2,
    signature: algorithm,
    issuer,
    thisUpdate: new Time(thisUpdate),
    ...(nextUpdate ? { nextUpdate: new Time(nextUpdate) } : {}),
    ...(revoked.length
      ? { revokedCertificates: revoked.map((serial) => new RevokedCertificate({ userCertificate: serialBytes(serial), revocationDate: new Time(thisUpdate) })) }
      : {}),
  });
  const signature = sign("sha384", Buffer.from(AsnConvert.serialize(tbs)), key);
  return Buffer.from(AsnConvert.serialize(new CertificateList({ tbsCertList: tbs, signatureAlgorithm: algorithm, signature: new Uint8Array(signature).buffer })));
}

/** What `nvidia-smi conf-compute -f` and `-grs` print on a host with CC on and the GPUs ready. */
export const CC_MODE_ON = "CC status: ON\n\nConfidential Compute GPUs Ready state: ready\n";

const u16 = (value: number) => Buffer.from([value & 0xff, value >> 8]);
const tlv = (type: number, value: Buffer) => Buffer.concat([u16(type), u16(value.length), value]);
const text = (value: string) => Buffer.concat([Buffer.from(value, "latin1"), Buffer.from([0])]);

/**
 * The device's signed measurements for unit `unit` of challenge `challengeId`, whose committed root
 * is `root` (the request's nonce is ccEvidenceNonce of the three), as a CC-mode GPU answers, with
 * the host's `mode` report.
 */
export function simEvidence(device: SimDevice, challengeId: Hex, unit: number, root: Hex, o: { board?: SimBoard; mode?: string } = {}): GpuEvidence {
  return { ...simEvidenceForNonce(device, ccEvidenceNonce(challengeId, unit, root), o.board), mode: o.mode ?? CC_MODE_ON };
}

/** The device's signed measurements for a request carrying `nonce`, without a mode report. */
export function simEvidenceForNonce(device: SimDevice, nonce: Hex, board: SimBoard = SIM_BOARD): GpuEvidence {
  const request = Buffer.concat([Buffer.from([0x11, 0xe0, 0x01, 0xff]), Buffer.from(nonce.slice(2), "hex"), Buffer.from([0x00])]);
  const blocks = [1, 2, 3].map((index) => {
    const digest = createHash("sha384").update(`simulated firmware ${index}`).digest();
    const value = Buffer.concat([Buffer.from([0x01]), u16(digest.length), digest]);
    return Buffer.concat([Buffer.from([index, 0x01]), u16(value.length), value]);
  });
  const record = Buffer.concat(blocks);
  const opaque = Buffer.concat([
    tlv(3, text(board.driver)),
    tlv(6, board.vbios),
    tlv(15, text(board.chipSku)),
    tlv(17, text(board.project)),
    tlv(18, text(board.projectSku)),
    tlv(20, device.fwid),
  ]);
  const head = Buffer.from([0x11, 0x60, 0x00, 0x00, blocks.length, record.length & 0xff, (record.length >> 8) & 0xff, record.length >> 16]);
  // The responder's own nonce, as a real GPU sends.
  const signed = Buffer.concat([head, record, randomBytes(32), u16(opaque.length), opaque]);
  const signature = sign("sha384", Buffer.concat([request, signed]), { key: device.key, dsaEncoding: "ieee-p1363" });
  return { request: `0x${request.toString("hex")}`, response: `0x${Buffer.concat([signed, signature]).toString("hex")}`, certificates: [...device.certificates] };
}

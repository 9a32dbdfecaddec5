/**
 * Simulated confidential-computing GPUs for tests: a throw-away certificate chain made with
 * openssl when the test starts (root → intermediate → one attestation key per device, each leaf
 * naming `NVIDIA:<chip>:<device id>` in its subjectAltName and an FWID in a TCG DICE TcbInfo
 * extension, as NVIDIA's do), and SPDM 1.1 MEASUREMENTS responses signed by a device's key for any
 * nonce, with NVIDIA's opaque-data layout. A real CC-mode GPU is not available here; the verifier's
 * checks against a real report are test/node/attest/cc-nvidia.test.ts's. Nothing here is NVIDIA's:
 * the root is made up, so only an attestor that pins it accepts this evidence.
 */
import { execFileSync } from "node:child_process";
import { createHash, createPrivateKey, randomBytes, sign, type KeyObject } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { Hex } from "viem";
import type { GpuEvidence } from "../../common/attest/cc.js";

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
export function makeSimDevices(count: number, chip = "GH100"): { rootPem: string; rootFile: string; devices: SimDevice[]; close: () => void } {
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
  writeFileSync(path.join(dir, "ca.ext"), "basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign\n");
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
  for (const file of ["root.key", "int.key", ...devices.map((_, i) => `d${i}.key`)]) rmSync(path.join(dir, file));
  return { rootPem, rootFile: path.join(dir, "root.pem"), devices, close: () => rmSync(dir, { recursive: true, force: true }) };
}

const u16 = (value: number) => Buffer.from([value & 0xff, value >> 8]);
const tlv = (type: number, value: Buffer) => Buffer.concat([u16(type), u16(value.length), value]);
const text = (value: string) => Buffer.concat([Buffer.from(value, "latin1"), Buffer.from([0])]);

/** The device's signed measurements for a request carrying `nonce` (the challenge id), as a CC-mode GPU answers. */
export function simEvidence(device: SimDevice, nonce: Hex, board: SimBoard = SIM_BOARD): GpuEvidence {
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

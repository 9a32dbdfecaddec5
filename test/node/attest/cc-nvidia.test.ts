/**
 * Confidential-computing evidence recorded from a real NVIDIA Hopper GPU (NVIDIA's published
 * sample, test/node/fixtures/cc/nvidia-hopper/README.md), verified to NVIDIA's device identity
 * root: what it proves about the GPU, and each way of reusing or editing it that must fail.
 */
import assert from "node:assert/strict";
import { X509Certificate } from "node:crypto";
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { Hex } from "viem";
import { type GpuEvidence } from "../../../node/attest/cc/cc-evidence.js";
import {
  checkClaimedClass,
  checkFwid,
  nvidiaDeviceIdentity,
  parseNvidiaOpaque,
  repeatedDevice,
  verifyNvidiaGpuEvidence,
  type NvidiaDeviceIdentity,
  type VerifyNvidiaEvidenceOptions,
} from "../../../node/attest/cc/cc-nvidia.js";

const fixtures = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../fixtures/cc");
const recorded = path.join(fixtures, "nvidia-hopper");
const pems = (text: string) => text.match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g) ?? [];
const report = readFileSync(path.join(recorded, "report.hex"), "utf8").trim();
/** The SPDM 1.1 GET_MEASUREMENTS request is 37 bytes; the signed response follows it. */
const evidence: GpuEvidence = {
  request: `0x${report.slice(0, 74)}`,
  response: `0x${report.slice(74)}`,
  certificates: pems(readFileSync(path.join(recorded, "cert-chain.pem"), "utf8")),
};
const nvidiaRoot = readFileSync(path.join(recorded, "device-root.pem"), "utf8");
/** The nonce the recorded request carries (nvtrust's sample challenge). */
const nonce: Hex = "0x931d8dd0add203ac3d8b4fbde75e115278eefcdceac5b87671a748f32364dfcb";
const constructed = JSON.parse(readFileSync(path.join(fixtures, "evidence.json"), "utf8")) as { evidence: GpuEvidence };
const constructedRoot = readFileSync(path.join(fixtures, "root.pem"), "utf8");
/** A day into the constructed chain's validity. */
const constructedNow = new Date(Date.parse(new X509Certificate(constructedRoot).validFrom) + 86_400_000);
/** Checked at a time both chains are valid (NVIDIA's certificates run to 9999). */
const options: VerifyNvidiaEvidenceOptions = { nonce, roots: [nvidiaRoot], now: constructedNow };

/** The response with one byte flipped at byte `offset`. */
function flip(hex: string, offset: number): Hex {
  const at = 2 + offset * 2;
  const byte = (parseInt(hex.slice(at, at + 2), 16) ^ 1).toString(16).padStart(2, "0");
  return `0x${hex.slice(2, at)}${byte}${hex.slice(at + 2)}`;
}
const reason = (input: unknown, extra: Partial<VerifyNvidiaEvidenceOptions> = {}) => {
  const verdict = verifyNvidiaGpuEvidence(input, { ...options, ...extra });
  return verdict.ok ? "ok" : verdict.reason;
};

describe("confidential-computing evidence recorded from an NVIDIA H100 (GH100)", () => {
  it("verifies to NVIDIA's device root and names the chip, the device, the board and the firmware", () => {
    const verdict = verifyNvidiaGpuEvidence(evidence, options);
    assert.equal(verdict.ok, true, verdict.ok ? "" : `${verdict.reason}: ${verdict.detail}`);
    if (!verdict.ok) return;
    assert.deepEqual({ chip: verdict.device.chip, deviceId: verdict.device.deviceId }, { chip: "GH100", deviceId: "48B02D92494BADF4" });
    assert.equal(verdict.board, "1010-0200-882");
    assert.equal(verdict.firmware.driverVersion, "550.90.07");
    assert.equal(verdict.firmware.vbiosVersion, "96.00.9F.00.01");
    // The report's FWID is the attestation certificate's (the check that binds them).
    assert.equal(verdict.firmware.fwid, "0xf5c384aebb579217a2c66b17ed0f28e6a9b8d639041acd7b4721cec004f7275494ba94bb5cdfdb3055ee051762b1f75d");
    assert.equal(verdict.device.fwid, verdict.firmware.fwid);
    assert.equal(verdict.measurements.length, 64);
    assert.deepEqual(
      verdict.measurements.slice(0, 3).map((m) => m.index),
      [1, 2, 3],
    );
  });

  it("takes the challenge from the request: the GPU answers with a nonce of its own, and signs both", () => {
    // SPDM 1.1: the MEASUREMENTS response carries the responder's nonce. A verifier that compared
    // it with the challenge (as this one did before a real report was checked) refuses every GPU.
    const responderNonce = `0x${evidence.response.slice(2 + 2 * (8 + 3520), 2 + 2 * (8 + 3520 + 32))}`;
    assert.notEqual(responderNonce, nonce);
    assert.equal(reason(evidence), "ok");
    assert.equal(reason(evidence, { nonce: responderNonce as Hex }), "wrong_nonce");
    assert.equal(reason(evidence, { nonce: `0x${"00".repeat(32)}` }), "wrong_nonce");
    // The request rewritten to carry another challenge: the GPU's signature covers the request.
    assert.equal(reason({ ...evidence, request: `0x11e001ff${"00".repeat(32)}00` }, { nonce: `0x${"00".repeat(32)}` }), "bad_signature");
    // A request for one block (Param2 0x01) or with another attribute bit (Param1 0x03) is not the exchange the verifier reads.
    assert.equal(reason({ ...evidence, request: `0x11e00101${evidence.request.slice(10)}` }), "malformed");
    assert.equal(reason({ ...evidence, request: `0x11e003ff${evidence.request.slice(10)}` }), "malformed");
  });

  it("refuses an edited report: a measurement, the driver version in the opaque data, the signature", () => {
    const responseBytes = (evidence.response.length - 2) / 2;
    // Block 2's first value byte: 8 header bytes, block 1 (55 bytes), block 2's 7 header bytes.
    assert.equal(reason({ ...evidence, response: flip(evidence.response, 8 + 55 + 7) }), "bad_signature");
    const driverAt = evidence.response.indexOf(Buffer.from("550.90.07").toString("hex"));
    assert.ok(driverAt > 0);
    assert.equal(reason({ ...evidence, response: flip(evidence.response, (driverAt - 2) / 2) }), "bad_signature");
    assert.equal(reason({ ...evidence, response: flip(evidence.response, responseBytes - 1) }), "bad_signature");
  });

  it("refuses the report under another chain, a chain cut short, a foreign leaf and a root not pinned", () => {
    // The same report claimed by another (constructed) device whose chain is pinned: the GPU key did not sign it.
    assert.equal(reason({ ...evidence, certificates: constructed.evidence.certificates }, { roots: [constructedRoot] }), "bad_signature");
    // Only the attestation certificate: it does not reach the pinned root.
    assert.equal(reason({ ...evidence, certificates: [evidence.certificates[0]] }), "untrusted_root");
    // A leaf the next certificate did not issue.
    assert.equal(reason({ ...evidence, certificates: [constructed.evidence.certificates[0], ...evidence.certificates.slice(1)] }), "bad_chain");
    // A verifier that pinned another root.
    assert.equal(reason(evidence, { roots: [constructedRoot] }), "untrusted_root");
  });

  it("backs a GH100 class only: an A100 or RTX 4090 claim is not CC-capable, and a board table separates H100 from H200", () => {
    assert.equal(reason(evidence, { claimedClass: "H100-80GB-PCIE" }), "ok");
    assert.equal(reason(evidence, { claimedClass: "NVIDIA H100 PCIe" }), "ok");
    // The chip alone cannot tell an H100 from an H200 (both GH100): that is what the board table is for.
    assert.equal(reason(evidence, { claimedClass: "H200-141GB" }), "ok");
    assert.equal(reason(evidence, { claimedClass: "A100-80GB" }), "not_cc_capable");
    assert.equal(reason(evidence, { claimedClass: "RTX-4090" }), "not_cc_capable");
    assert.equal(reason(evidence, { claimedClass: "constructor" }), "not_cc_capable");
    const boards = new Map([["1010-0200-882", "H100-80GB-PCIE"]]);
    assert.equal(reason(evidence, { claimedClass: "H100-80GB-PCIE", boards }), "ok");
    assert.equal(reason(evidence, { claimedClass: "H200-141GB", boards }), "board_mismatch");
    assert.equal(reason(evidence, { claimedClass: "H100-80GB-PCIE", boards: new Map([["g520-0200-885", "H100-80GB-SXM"]]) }), "unknown_board");
    // A (hypothetical) next chip's evidence does not back a GH100 class.
    const device = nvidiaDeviceIdentity(evidence.certificates[0]!) as NvidiaDeviceIdentity;
    assert.equal(checkClaimedClass({ ...device, chip: "GB100" }, "1010-0200-882", "H100-80GB-SXM")?.reason, "chip_mismatch");
  });

  it("binds the report's FWID to the certificate's, and never counts one device for two units", () => {
    const device = nvidiaDeviceIdentity(evidence.certificates[0]!) as NvidiaDeviceIdentity;
    const verdict = verifyNvidiaGpuEvidence(evidence, options);
    assert.ok(verdict.ok);
    const firmware = verdict.firmware;
    assert.equal(checkFwid(device, firmware), undefined);
    assert.match(checkFwid({ ...device, fwid: `0x${"11".repeat(48)}` }, firmware) ?? "", /is not the attestation certificate's/);
    assert.match(checkFwid({ chip: device.chip, deviceId: device.deviceId }, firmware) ?? "", /\(none\)/);
    // A report without an FWID field (older firmware) is not compared, as in NVIDIA's verifier.
    assert.equal(checkFwid({ ...device, fwid: `0x${"11".repeat(48)}` }, { ...firmware, fwid: undefined }), undefined);
    assert.equal(repeatedDevice([device, { ...device, deviceId: "0000000000000001" }]), undefined);
    // The same recorded report offered for two units of one machine: one GPU, counted once.
    assert.equal(repeatedDevice([device, { ...device }]), "GH100:48B02D92494BADF4");
  });

  it("refuses what is not NVIDIA evidence: a leaf without the device name, opaque data cut short", () => {
    assert.match(nvidiaDeviceIdentity(constructed.evidence.certificates[0]!) as string, /names no NVIDIA device/);
    assert.match(nvidiaDeviceIdentity("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----") as string, /does not parse/);
    assert.equal(reason(constructed.evidence, { roots: [constructedRoot], nonce: constructedNonce() }), "not_nvidia");
    assert.match(parseNvidiaOpaque("0x03000a003535") as string, /runs past the data/);
    assert.match(parseNvidiaOpaque("0x0300") as string, /header at byte 0/);
    assert.equal(reason({ request: 1 }), "malformed");
  });
});

/** The constructed fixture's challenge, read from its request (bytes 4..36). */
function constructedNonce(): Hex {
  return `0x${constructed.evidence.request.slice(2 + 8, 2 + 8 + 64)}`;
}

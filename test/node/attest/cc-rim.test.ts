/**
 * NVIDIA reference integrity manifests (RIMs): a VBIOS RIM NVIDIA publishes, verified to NVIDIA's
 * RIM root, and compared with the report recorded from a real H100
 * (test/node/fixtures/cc/nvidia-hopper/README.md).
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { Hex } from "viem";
import { verifyNvidiaGpuEvidence } from "../../../node/attest/cc/cc-nvidia.js";
import { compareWithRims, MAX_RIM_BYTES, MAX_RIM_DEPTH, MAX_RIM_ELEMENTS, readRimContent, verifyRim, type Rim } from "../../../node/attest/cc/cc-rim.js";

const recorded = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../fixtures/cc/nvidia-hopper");
const read = (file: string) => readFileSync(path.join(recorded, file), "utf8");
const rimXml = read("vbios-96.00.5E.00.01.swidtag");
const rimRoot = read("rim-root.pem");
const deviceRoot = read("device-root.pem");
/** The RIM's signing certificate ran from June 2023 to June 2025: check it as of then. */
const signedEra = { roots: [rimRoot], now: new Date("2024-06-01T00:00:00Z") };

function verifiedRim(): Rim {
  const verdict = verifyRim(rimXml, signedEra);
  assert.ok(verdict.ok, verdict.ok ? "" : `${verdict.reason}: ${verdict.detail}`);
  return verdict.rim;
}

function reportMeasurements() {
  const report = read("report.hex").trim();
  const certificates = read("cert-chain.pem").match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g) ?? [];
  const verdict = verifyNvidiaGpuEvidence(
    { request: `0x${report.slice(0, 74)}`, response: `0x${report.slice(74)}`, certificates },
    { nonce: "0x931d8dd0add203ac3d8b4fbde75e115278eefcdceac5b87671a748f32364dfcb", roots: [deviceRoot] },
  );
  assert.ok(verdict.ok);
  return { measurements: verdict.measurements, vbios: verdict.firmware.vbiosVersion };
}

const reason = (xml: string, options = signedEra) => {
  const verdict = verifyRim(xml, options);
  return verdict.ok ? "ok" : verdict.reason;
};

describe("NVIDIA reference integrity manifests (a published VBIOS RIM)", () => {
  it("verifies the RIM's XML signature and its chain to NVIDIA's RIM root, and reads the golden measurements", () => {
    const rim = verifiedRim();
    assert.equal(rim.product, "GH100");
    assert.equal(rim.version, "96.00.5E.00.01");
    assert.match(rim.signer, /CN=HCC RIM L4 Signer/);
    assert.equal(rim.measurements.length, 64);
    assert.deepEqual(
      rim.measurements.filter((m) => m.active).map((m) => m.index),
      [0, 1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12],
    );
    assert.deepEqual(rim.measurements.find((m) => m.index === 1)?.alternatives, [
      "0xc3f65ef79a19c029868cd7ce54b10e44f192444edb3506dde29cef2aac4e916c90a4f438e55aa7581a9e384c74d82db6",
    ]);
  });

  it("refuses an edited golden value, an added alternative, a foreign root, an expired signer, and what is not one signed RIM", () => {
    // One hex digit of a golden value: the digest no longer matches.
    assert.equal(reason(rimXml.replace("c3f65ef79a19c029", "c3f65ef79a19c028")), "bad_signature");
    // A second allowed value slipped in, so that other firmware would pass.
    assert.equal(reason(rimXml.replace('alternatives="1" ns2:Hash0="c3f65e', 'alternatives="2" ns2:Hash1="' + "ab".repeat(48) + '" ns2:Hash0="c3f65e')), "bad_signature");
    // The device root is not the RIM root.
    assert.equal(reason(rimXml, { roots: [deviceRoot], now: signedEra.now }), "untrusted_root");
    // Today the signer has expired: a verifier fetches a current RIM rather than trusting an old one.
    assert.equal(reason(rimXml, { roots: [rimRoot], now: new Date("2026-12-01T00:00:00Z") }), "expired_certificate");
    // No signature, two signatures, not XML, too big.
    const signature = rimXml.slice(rimXml.indexOf("<ds:Signature"), rimXml.indexOf("</ds:Signature>") + "</ds:Signature>".length);
    assert.equal(reason(rimXml.replace(signature, "")), "malformed");
    assert.equal(reason(rimXml.replace(signature, signature + signature)), "malformed");
    assert.equal(reason("<SoftwareIdentity"), "malformed");
    assert.equal(reason(" ".repeat(MAX_RIM_BYTES + 1)), "malformed");
  });

  it("compares a report block by block (RIM index i is block i + 1): the H100's VBIOS 96.00.9F.00.01 is not this RIM's 96.00.5E.00.01", () => {
    const rim = verifiedRim();
    const { measurements, vbios } = reportMeasurements();
    assert.equal(vbios, "96.00.9F.00.01");
    assert.notEqual(vbios, rim.version);
    const mismatches = compareWithRims(measurements, [rim]);
    // Eight of the twelve active values match byte for byte across two NVIDIA artefacts; four of
    // those are all zeros, the other four (blocks 4 to 7) are SHA-384 digests, which match only if
    // the index mapping is right. The four that differ are the firmware that changed between the versions.
    const agreeing = rim.measurements.filter((m) => m.active && m.alternatives.includes(measurements.find((b) => b.index === m.index + 1)?.value ?? "0x"));
    assert.deepEqual(
      agreeing.filter((m) => !/^0x0+$/.test(m.alternatives[0]!)).map((m) => m.index + 1),
      [4, 5, 6, 7],
    );
    assert.equal(agreeing.length, 8);
    assert.deepEqual(
      mismatches.map((m) => [m.block, m.reason]),
      [
        [2, "mismatch"],
        [3, "mismatch"],
        [10, "mismatch"],
        [12, "mismatch"],
      ],
    );
    // The same manifest given twice claims every block twice.
    assert.ok(compareWithRims(measurements, [rim, rim]).some((m) => m.reason === "conflict"));
    // A report without a block the RIM defines.
    assert.deepEqual(
      compareWithRims(
        measurements.filter((m) => m.index !== 5),
        [rim],
      )
        .filter((m) => m.reason === "missing")
        .map((m) => m.block),
      [5],
    );
    // A reference that does describe this firmware passes (built from a verified RIM's shape with the report's values).
    const matching: Rim = {
      ...rim,
      measurements: rim.measurements.map((m) => ({ ...m, alternatives: [measurements.find((b) => b.index === m.index + 1)?.value ?? ("0x" as Hex)] })),
    };
    assert.deepEqual(compareWithRims(measurements, [matching]), []);
  });

  it("refuses a RIM shaped to exhaust the verifier (nested 4,000 deep, or thousands of elements) before checking its signature", () => {
    // With NVIDIA's certificates copied in, a hostile document reaches the signature check; its
    // canonicalization grew with depth × size (4,000 deep: seconds; 256 KiB: minutes of CPU).
    const at = rimXml.indexOf("<ns0:Payload");
    const deep = rimXml.slice(0, at) + "<a>".repeat(4000) + "</a>".repeat(4000) + rimXml.slice(at);
    const deepVerdict = verifyRim(deep, signedEra);
    assert.deepEqual(deepVerdict.ok ? "ok" : [deepVerdict.reason, deepVerdict.detail], ["malformed", `the RIM nests elements more than ${MAX_RIM_DEPTH} deep`]);
    const wide = rimXml.slice(0, at) + "<a/>".repeat(MAX_RIM_ELEMENTS) + rimXml.slice(at);
    const wideVerdict = verifyRim(wide, signedEra);
    assert.deepEqual(wideVerdict.ok ? "ok" : [wideVerdict.reason, wideVerdict.detail], ["malformed", `the RIM has more than ${MAX_RIM_ELEMENTS} elements`]);
  });

  it("refuses a signature naming an algorithm NVIDIA does not use (xml-crypto's defaults also take RSA and SHA-1)", () => {
    const detail = (xml: string) => {
      const verdict = verifyRim(xml, signedEra);
      return verdict.ok ? "ok" : `${verdict.reason}: ${verdict.detail}`;
    };
    const rsa = "http://www.w3.org/2001/04/xmldsig-more#rsa-sha256";
    assert.match(detail(rimXml.replace("http://www.w3.org/2001/04/xmldsig-more#ecdsa-sha384", rsa)), new RegExp(`^bad_signature: the RIM's signature uses ${rsa};`));
    const sha1 = "http://www.w3.org/2000/09/xmldsig#sha1";
    assert.match(
      detail(rimXml.replace('DigestMethod Algorithm="http://www.w3.org/2001/04/xmldsig-more#sha384"', `DigestMethod Algorithm="${sha1}"`)),
      new RegExp(`^bad_signature: the RIM's signature uses ${sha1};`),
    );
  });

  it('reads the signed content failing closed: a measurement without active="False" is compared, and one index given twice refuses the RIM', () => {
    // readRimContent is what verifyRim applies to the signed octets; edited text stands in for them here.
    const first = '<ns0:Resource type="Measurement" index="7" active="False"';
    assert.ok(rimXml.includes(first));
    const unmarked = readRimContent(rimXml.replace(first, '<ns0:Resource type="Measurement" index="7"'), "test");
    assert.ok(unmarked.ok);
    assert.equal(unmarked.rim.measurements.find((m) => m.index === 7)?.active, true);
    const twice = readRimContent(rimXml.replace(first, '<ns0:Resource type="Measurement" index="6" active="False"'), "test");
    assert.deepEqual(twice.ok ? "ok" : twice.detail, "measurement 6 is given twice");
    // The published RIM reads the same either way (its measurements all say True or False).
    const published = readRimContent(rimXml, "test");
    assert.ok(published.ok);
    const { signerValidTo, ...content } = verifiedRim();
    assert.deepEqual(published.rim, { ...content, signer: "test" });
    // verifyRim adds when its signer expires: NVIDIA's certificate ran to June 2025.
    assert.equal(signerValidTo?.toISOString(), "2025-06-22T09:30:33.000Z");
  });
});

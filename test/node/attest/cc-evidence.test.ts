/**
 * The confidential-computing evidence verifier against a constructed (not captured) SPDM 1.1
 * fixture: test/node/fixtures/cc/README.md. Each check is shown to reject what it guards against.
 */
import assert from "node:assert/strict";
import { X509Certificate } from "node:crypto";
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { Hex } from "viem";
import { parseAndVerifyChain, verifyGpuEvidence, type GpuEvidence } from "../../../node/attest/cc/cc-evidence.js";

const dir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../fixtures/cc");
const fixture = JSON.parse(readFileSync(path.join(dir, "evidence.json"), "utf8")) as { nonce: Hex; evidence: GpuEvidence; reference: Record<string, Hex> };
const root = readFileSync(path.join(dir, "root.pem"), "utf8");
const reference = new Map(Object.entries(fixture.reference).map(([index, value]) => [Number(index), value]));
// A day into the constructed chain's validity.
const now = new Date(Date.parse(new X509Certificate(root).validFrom) + 86_400_000);
const options = { nonce: fixture.nonce, roots: [root], reference, now };

/** The response with one byte flipped at `offset` (hex digits after 0x). */
function flip(hex: string, byteOffset: number): string {
  const at = 2 + byteOffset * 2;
  const byte = (parseInt(hex.slice(at, at + 2), 16) ^ 1).toString(16).padStart(2, "0");
  return hex.slice(0, at) + byte + hex.slice(at + 2);
}

describe("confidential-computing evidence (constructed SPDM fixture)", () => {
  it("verifies the chain to the pinned root, the signature, the nonce and the measurements", () => {
    const verdict = verifyGpuEvidence(fixture.evidence, options);
    assert.equal(verdict.ok, true, verdict.ok ? "" : `${verdict.reason}: ${verdict.detail}`);
    if (!verdict.ok) return;
    assert.match(verdict.leafSubject, /GPU-0f8e7d6c-5b4a-3928-1706-f5e4d3c2b1a0/);
    assert.deepEqual(
      verdict.measurements.map((m) => m.index),
      [1, 2, 3],
    );
    assert.match(Buffer.from(verdict.opaque.slice(2), "hex").toString("latin1"), /H100-80GB-SXM/);
  });

  it("refuses evidence for another challenge, a changed measurement, a foreign root, a broken chain, an expired chain and garbage", () => {
    const reason = (input: unknown, extra: Partial<typeof options> = {}) => {
      const verdict = verifyGpuEvidence(input, { ...options, ...extra });
      return verdict.ok ? "ok" : verdict.reason;
    };
    assert.equal(reason(fixture.evidence, { nonce: `0x${"00".repeat(32)}` }), "wrong_nonce");
    // A measurement byte changed after signing (inside block 1's digest).
    assert.equal(reason({ ...fixture.evidence, response: flip(fixture.evidence.response, 20) }), "bad_signature");
    // The signature itself damaged.
    const length = (fixture.evidence.response.length - 2) / 2;
    assert.equal(reason({ ...fixture.evidence, response: flip(fixture.evidence.response, length - 5) }), "bad_signature");
    // Honest signature, but the firmware is not the reference.
    assert.equal(reason(fixture.evidence, { reference: new Map<number, Hex>([[2, `0x${"ab".repeat(48)}`]]) }), "measurement_mismatch");
    // A verifier that pinned another root (here: an unrelated certificate) does not trust the chain.
    assert.equal(reason(fixture.evidence, { roots: [fixture.evidence.certificates[0]!] }), "untrusted_root");
    // The chain out of order: the intermediate does not issue the intermediate.
    assert.equal(reason({ ...fixture.evidence, certificates: [fixture.evidence.certificates[1], fixture.evidence.certificates[1]] }), "bad_chain");
    assert.equal(reason(fixture.evidence, { now: new Date(Date.parse("2100-01-01")) }), "expired_certificate");
    assert.equal(reason({ ...fixture.evidence, response: "0x1160" }), "malformed");
    // Well-formed responses (signature bytes aside) with no block, and with block 1 twice: refused as such.
    const detail = (response: string) => {
      const verdict = verifyGpuEvidence({ ...fixture.evidence, response }, options);
      return verdict.ok ? "ok" : `${verdict.reason}: ${verdict.detail}`;
    };
    const tail = `${"00".repeat(32)}0000${"00".repeat(96)}`;
    assert.equal(detail(`0x11600000${"00"}000000${tail}`), "malformed: the response carries no measurement block");
    const block = `0101${"3300"}01${"3000"}${"ab".repeat(48)}`;
    assert.equal(detail(`0x11600000${"02"}${"6e0000"}${block}${block}${tail}`), "malformed: measurement block 1 appears twice");
    assert.equal(reason({ ...fixture.evidence, request: "0x11e000ff" }), "malformed");
    assert.equal(reason({ request: 1 }), "malformed");
  });

  it("applies the X.509 path rules NVIDIA's verifier (OpenSSL) does: every issuer a CA, within its path length", () => {
    // Throw-away chains, each signature valid (test/node/fixtures/cc/constraints/make-chains.sh).
    const pem = (name: string) => readFileSync(path.join(dir, "constraints", `${name}.pem`), "utf8");
    const at = new Date(Date.parse(new X509Certificate(pem("root")).validFrom) + 86_400_000);
    const check = (chain: string[], root: string) => {
      const verdict = parseAndVerifyChain(chain, [pem(root)], at);
      return verdict.ok ? "ok" : `${verdict.reason}: ${verdict.detail}`;
    };
    assert.equal(check([pem("ica-leaf"), pem("ica")], "root"), "ok");
    assert.equal(check([pem("ica-leaf"), pem("ica"), pem("root")], "root"), "ok");
    // An end entity (CA:FALSE) signing a certificate, as a holder of any one device key could.
    assert.equal(
      check([pem("notca-leaf"), pem("notca")], "root"),
      "bad_chain: CN=Constraints Fixture Not A CA (not NVIDIA) issues a certificate but is not a CA (basicConstraints)",
    );
    // A CA whose key usage does not include certificate signing (node's checkIssued refuses it).
    assert.equal(
      check([pem("kuca-leaf"), pem("kuca")], "root"),
      "bad_chain: CN=Constraints Fixture Leaf Under No keyCertSign (not NVIDIA) is not signed by CN=Constraints Fixture CA Without keyCertSign (not NVIDIA)",
    );
    // A root limited to end entities (pathlen 0) above an intermediate, pinned or in the chain.
    const tooDeep = "bad_chain: CN=Constraints Fixture Root pathlen 0 (not NVIDIA) allows 0 CA certificates below it, the chain has 1";
    assert.equal(check([pem("ica-pl0-leaf"), pem("ica-pl0")], "root-pl0"), tooDeep);
    assert.equal(check([pem("ica-pl0-leaf"), pem("ica-pl0"), pem("root-pl0")], "root-pl0"), tooDeep);
    // The intermediate itself is within the root's limit.
    assert.equal(check([pem("ica-pl0")], "root-pl0"), "ok");
  });
  it("refuses replayed evidence and an unanchored chain before checking any signature under the sender's keys", () => {
    // The attestor verifies what a provider sends: signatures under keys the provider chose (e.g.
    // RSA with a huge public exponent) must not be checked before a pinned root vouches for them.
    const verify = X509Certificate.prototype.verify;
    let checks = 0;
    X509Certificate.prototype.verify = function (this: X509Certificate, key) {
      checks++;
      return verify.call(this, key);
    };
    try {
      const foreignRoot = fixture.evidence.certificates[0]!;
      // The chain out of order and anchored nowhere: refused as unanchored, with no signature checked.
      const broken = { ...fixture.evidence, certificates: [fixture.evidence.certificates[1], fixture.evidence.certificates[1]] };
      const unanchored = verifyGpuEvidence(broken, { ...options, roots: [foreignRoot] });
      assert.equal(unanchored.ok ? "ok" : unanchored.reason, "untrusted_root");
      assert.equal(checks, 0);
      // Another challenge's evidence: refused on its nonce, before the chain.
      const replayed = verifyGpuEvidence(fixture.evidence, { ...options, nonce: `0x${"00".repeat(32)}` });
      assert.equal(replayed.ok ? "ok" : replayed.reason, "wrong_nonce");
      assert.equal(checks, 0);
    } finally {
      X509Certificate.prototype.verify = verify;
    }
  });
});

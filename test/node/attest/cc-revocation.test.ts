/**
 * Issue 35, item 10: what confidential-computing evidence must show beyond the chain and the nonce.
 *
 * - The host's CC mode (node/attest/cc/cc-mode.ts), read from what `nvidia-smi conf-compute -f` and
 *   `-grs` print: parsed against a recording from a real H200 with CC off.
 * - Revocation, offline (node/attest/cc/cc-revocation.ts): CRLs signed by the simulated CAs
 *   (test/support/cc-sim.ts) revoke an intermediate or a device; a CRL that is not signed by the
 *   issuer counts for nothing; a stale one revokes but covers nothing; and on NVIDIA's real chain
 *   (test/node/fixtures/cc/nvidia-hopper/) `required` names the CRLs NVIDIA's certificates point to.
 */
import assert from "node:assert/strict";
import { X509Certificate } from "node:crypto";
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { ccModeProblem, parseConfComputeStatus } from "../../../node/attest/cc/cc-mode.js";
import { checkRevocation, loadCrls, parseCrl, type RevocationPolicy } from "../../../node/attest/cc/cc-revocation.js";
import { parseAndVerifyChain } from "../../../node/attest/cc/cc-evidence.js";
import { CC_MODE_ON, makeSimDevices } from "../../support/cc-sim.js";

const fixtures = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../fixtures");
const DAY = 86_400_000;

describe("CC mode as the host reports it (nvidia-smi conf-compute)", () => {
  it("reads a real H200's report (CC off, not ready) and refuses it; ON and ready passes; DEVTOOLS, not-ready or nothing is refused", () => {
    const h200 = readFileSync(path.join(fixtures, "nvidia-smi/h200/conf-compute.txt"), "utf8");
    assert.deepEqual(parseConfComputeStatus(h200), { ccStatus: "OFF", gpusReady: false });
    assert.match(ccModeProblem(h200) ?? "", /^CC status: OFF \(confidential computing must be ON/);
    assert.deepEqual(parseConfComputeStatus(CC_MODE_ON), { ccStatus: "ON", gpusReady: true });
    assert.equal(ccModeProblem(CC_MODE_ON), undefined);
    assert.match(ccModeProblem(h200.replace("OFF", "DEVTOOLS")) ?? "", /^CC status: DEVTOOLS .*debug mode/);
    assert.match(ccModeProblem(h200.replace("OFF", "ON")) ?? "", /GPUs are not ready/);
    assert.match(ccModeProblem("CC status: ON\n") ?? "", /no "Confidential Compute GPUs Ready state:" line/);
    assert.match(ccModeProblem(undefined) ?? "", /carries no CC mode/);
    assert.match(ccModeProblem("Confidential Compute GPUs Ready state: ready") ?? "", /no "CC status:" line/);
  });
});

describe("revocation of CC device certificates from CRL files (offline)", function () {
  this.timeout(30_000);
  let sim: ReturnType<typeof makeSimDevices>;
  before(() => {
    sim = makeSimDevices(2);
  });
  after(() => sim?.close());

  const chainOf = (device: number) => {
    const verified = parseAndVerifyChain(sim.devices[device]!.certificates, [sim.rootPem], new Date());
    assert.ok(verified.ok);
    return verified;
  };
  const serialOf = (pem: string) => new X509Certificate(pem).serialNumber;
  const policy = (crls: Buffer[], o: Partial<RevocationPolicy> = {}): RevocationPolicy => ({
    crls: crls.map((der, i) => parseCrl(der, `crl-${i}.crl`)),
    maxAgeMs: 90 * DAY,
    required: false,
    ...o,
  });
  const check = (device: number, p: RevocationPolicy, now = new Date()) => {
    const { chain, anchor } = chainOf(device);
    return checkRevocation(chain, anchor, p, now);
  };

  it("a CRL its issuer signed revokes a device certificate, or an intermediate (and every device under it)", () => {
    const leaf = serialOf(sim.devices[1]!.certificates[0]!);
    const byIntermediate = policy([sim.crl("intermediate", [leaf])]);
    assert.deepEqual(check(0, byIntermediate), { ok: true, fresh: 1 });
    const revoked = check(1, byIntermediate);
    assert.equal(revoked.ok === false && revoked.reason, "revoked");
    assert.match(!revoked.ok ? revoked.detail : "", new RegExp(`attestation key 1.*\\(serial ${leaf.replace(/^0+/, "")}\\) is revoked by crl-0\\.crl`));

    const intermediate = serialOf(sim.intermediatePem);
    const byRoot = policy([sim.crl("root", [intermediate])]);
    for (const device of [0, 1]) {
      const verdict = check(device, byRoot);
      assert.equal(verdict.ok === false && verdict.reason, "revoked");
      assert.match(!verdict.ok ? verdict.detail : "", /Provisioner ICA/);
    }
  });

  it("a CRL in the issuer's name but not signed by its key counts for nothing; a stale one still revokes but covers nothing", () => {
    const leaf = serialOf(sim.devices[0]!.certificates[0]!);
    // Signed by a device key, not the intermediate's: it names the right issuer and lists the device.
    const forged = policy([sim.crl("intermediate", [leaf], { signedBy: sim.devices[1]!.key })]);
    assert.deepEqual(check(0, forged), { ok: true, fresh: 0 });

    // required: the intermediate names a CRL distribution point, so it needs a fresh CRL of the root.
    const none = check(0, policy([], { required: true }));
    assert.equal(none.ok === false && none.reason, "revocation_unknown");
    assert.match(!none.ok ? none.detail : "", /^no fresh CRL of CN=Simulated CC Device Root \(not NVIDIA\) for CN=Simulated GH100 Provisioner ICA/);
    assert.deepEqual(check(0, policy([sim.crl("root", [])], { required: true })), { ok: true, fresh: 1 });

    // Issued 100 days ago (past maxAgeDays 90), or past its nextUpdate: stale, so not coverage.
    const old = sim.crl("root", [], { thisUpdate: new Date(Date.now() - 100 * DAY), nextUpdate: new Date(Date.now() + 100 * DAY) });
    const lapsed = sim.crl("root", [], { thisUpdate: new Date(Date.now() - 10 * DAY), nextUpdate: new Date(Date.now() - DAY) });
    for (const crl of [old, lapsed]) {
      const verdict = check(0, policy([crl], { required: true }));
      assert.equal(verdict.ok === false && verdict.reason, "revocation_unknown");
      assert.match(!verdict.ok ? verdict.detail : "", /crl-0\.crl issued .*: stale/);
    }
    // A stale CRL that lists the intermediate revokes it all the same: a revocation does not expire.
    const staleRevocation = check(
      0,
      policy([sim.crl("root", [serialOf(sim.intermediatePem)], { thisUpdate: new Date(Date.now() - 10 * DAY), nextUpdate: new Date(Date.now() - DAY) })]),
    );
    assert.equal(staleRevocation.ok === false && staleRevocation.reason, "revoked");
    // A CRL without nextUpdate (RFC 5280 requires one) is refused: read naively, its revoked list would vanish.
    assert.throws(() => parseCrl(sim.crl("root", [serialOf(sim.intermediatePem)], { nextUpdate: null }), "no-next.crl"), /no-next\.crl has no nextUpdate/);
  });

  it("reads DER and PEM CRLs, and names the file that is not one", async () => {
    const der = sim.crl("root", []);
    const pem = `-----BEGIN X509 CRL-----\n${der.toString("base64").replace(/(.{64})/g, "$1\n")}\n-----END X509 CRL-----\n`;
    const files: Record<string, Uint8Array> = { "a.crl": der, "b.pem": Buffer.from(pem), "c.crl": Buffer.from("not a CRL") };
    const read = async (file: string) => files[file] ?? Promise.reject(new Error("ENOENT"));
    const loaded = await loadCrls(["a.crl", "b.pem"], read);
    assert.deepEqual(
      loaded.map((crl) => crl.issuer),
      [loaded[0]!.issuer, loaded[0]!.issuer],
    );
    await assert.rejects(loadCrls(["c.crl"], read), /^Error: attest\.cc\.crl\.files: c\.crl is not a CRL/);
    await assert.rejects(loadCrls(["missing.crl"], read), /attest\.cc\.crl\.files: cannot read missing\.crl: ENOENT/);
  });

  it("on NVIDIA's real H100 chain, `required` asks for the CRLs NVIDIA's CA certificates name (l2-gh100.crl first, signed by the GH100 Identity)", () => {
    const recorded = path.join(fixtures, "cc/nvidia-hopper");
    const certificates = readFileSync(path.join(recorded, "cert-chain.pem"), "utf8").match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g)!;
    const verified = parseAndVerifyChain(certificates, [readFileSync(path.join(recorded, "device-root.pem"), "utf8")], new Date("2025-01-01T00:00:00Z"));
    assert.ok(verified.ok);
    // From the leaf up, the Provisioner ICA is the first certificate that names a CRL (l2-gh100.crl, signed by the GH100 Identity).
    const verdict = checkRevocation(verified.chain, verified.anchor, { crls: [], maxAgeMs: 90 * DAY, required: true }, new Date("2025-01-01T00:00:00Z"));
    assert.equal(verdict.ok === false && verdict.reason, "revocation_unknown");
    assert.match(!verdict.ok ? verdict.detail : "", /^no fresh CRL of CN=NVIDIA GH100 Identity, O=NVIDIA Corporation for CN=NVIDIA GH100 Provisioner ICA 1/);
    // Not required: nothing here to check it against, and nothing refused (the device certificates name no CRL).
    assert.deepEqual(checkRevocation(verified.chain, verified.anchor, { crls: [], maxAgeMs: 90 * DAY, required: false }, new Date("2025-01-01T00:00:00Z")), { ok: true, fresh: 0 });
  });
});

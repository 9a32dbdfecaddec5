/**
 * `attest.cc` at start-up (node/attest/cc/cc-policy.ts loadCcPolicy): a root file that cannot be read
 * or holds no usable certificate stops the node with the key and the file named, instead of
 * refusing every provider's evidence later.
 */
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { createHash, X509Certificate } from "node:crypto";
import { checkCommitEvidence, checkRims, loadCcPolicy, type CcPolicy } from "../../../node/attest/cc/cc-policy.js";
import { DeviceRegistry, ccOptionsSchema } from "../../../node/attest/cc/index.js";
import type { Rim } from "../../../node/attest/cc/cc-rim.js";
import { makeSimDevices, simEvidence } from "../../support/cc-sim.js";
import { verifyNvidiaGpuEvidence } from "../../../node/attest/cc/cc-nvidia.js";

const root = readFileSync(path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../fixtures/cc/root.pem"), "utf8");
const recorded = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../fixtures/cc/nvidia-hopper");
/** NVIDIA's published VBIOS RIM was signed by a certificate valid from June 2023 to June 2025. */
const SIGNED_ERA = new Date("2024-06-01T00:00:00Z");

/** The recorded H100 report's firmware fields and measurement blocks. */
function recordedReport() {
  const report = readFileSync(path.join(recorded, "report.hex"), "utf8").trim();
  const certificates = readFileSync(path.join(recorded, "cert-chain.pem"), "utf8").match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g) ?? [];
  const verdict = verifyNvidiaGpuEvidence(
    { request: `0x${report.slice(0, 74)}`, response: `0x${report.slice(74)}`, certificates },
    { nonce: "0x931d8dd0add203ac3d8b4fbde75e115278eefcdceac5b87671a748f32364dfcb", roots: [readFileSync(path.join(recorded, "device-root.pem"), "utf8")], now: SIGNED_ERA },
  );
  assert.ok(verdict.ok);
  return verdict;
}

describe("attest.cc root files", () => {
  let dir: string;
  before(() => {
    dir = mkdtempSync(path.join(tmpdir(), "suanli-cc-policy-"));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it("loads the pinned roots, and names the key and the file when one is missing or does not parse", async () => {
    const good = path.join(dir, "root.pem");
    writeFileSync(good, root);
    const policy = await loadCcPolicy(ccOptionsSchema.parse({ rootFiles: [good], required: true }));
    assert.equal(policy?.roots.length, 1);
    assert.equal(policy?.required, true);

    const missing = path.join(dir, "no-such-root.pem");
    await assert.rejects(loadCcPolicy(ccOptionsSchema.parse({ rootFiles: [good, missing] })), (error: Error) => {
      assert.match(error.message, /^attest\.cc\.rootFiles: cannot read .*no-such-root\.pem: ENOENT/);
      return true;
    });

    // PEM armour around something that is not a certificate: refused at start-up, not at every commit.
    const broken = path.join(dir, "broken.pem");
    writeFileSync(broken, `${root}\n-----BEGIN CERTIFICATE-----\nTm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n`);
    await assert.rejects(loadCcPolicy(ccOptionsSchema.parse({ rootFiles: [broken] })), (error: Error) => {
      assert.match(error.message, /^attest\.cc\.rootFiles: certificate 2 in .*broken\.pem is not a valid X\.509 certificate/);
      return true;
    });

    const empty = path.join(dir, "empty.pem");
    writeFileSync(empty, "no certificate here\n");
    await assert.rejects(loadCcPolicy(ccOptionsSchema.parse({ rootFiles: [empty] })), /attest\.cc\.rootFiles: .*empty\.pem holds no PEM certificate/);
  });
  it("remembers which machine presented a GPU within the window, bounded, forgetting the longest-ago first", () => {
    const day = 86_400_000;
    const registry = new DeviceRegistry(2);
    assert.equal(registry.claim(["cc:GH100:a", "cc:GH100:b"], "p/1", 0, day, "cc:"), undefined);
    // Another machine within the window: refused, and nothing of its claim recorded.
    assert.deepEqual(registry.claim(["cc:GH100:c", "cc:GH100:a"], "p/2", 1_000, day, "cc:"), { device: "cc:GH100:a", machine: "p/1", agoMs: 1_000 });
    // The same machine again refreshes (and releases b, which it no longer names); a window of 0 never refuses.
    assert.equal(registry.claim(["cc:GH100:a"], "p/1", 2_000, day, "cc:"), undefined);
    assert.equal(registry.claim(["cc:GH100:b"], "p/2", 2_000, day, "cc:"), undefined, "b was released when p/1 passed without it");
    assert.equal(registry.claim(["cc:GH100:a"], "p/9", 2_500, 0, "cc:"), undefined);
    assert.equal(registry.claim(["cc:GH100:b"], "p/3", 3_000 + day, day, "cc:"), undefined);
    // Cap 2: a (p/9), b (p/3) held; c pushes out a, the one presented longest ago.
    assert.equal(registry.claim(["cc:GH100:c"], "p/4", 4_000 + day, day, "cc:"), undefined);
    assert.equal(registry.claim(["cc:GH100:a"], "p/5", 5_000 + day, day, "cc:"), undefined);
    assert.deepEqual(registry.claim(["cc:GH100:c"], "p/6", 6_000 + day, day, "cc:"), { device: "cc:GH100:c", machine: "p/4", agoMs: 2_000 });
  });
  it("refuses a boards entry naming an unknown class, listing the classes it accepts", () => {
    const parsed = ccOptionsSchema.safeParse({ boards: { "1010-0200-882": "H900" } });
    assert.equal(parsed.success, false);
    const issue = parsed.error?.issues[0];
    assert.deepEqual(issue?.path, ["boards", "1010-0200-882"]);
    assert.match(issue?.message ?? "", /^expected a known GPU class name: .*H100-80GB-SXM/);
  });

  describe("attest.cc.rims: NVIDIA's reference integrity manifests", () => {
    it("checks each unit of a commit against the RIMs of its versions and names the unit (simulated CC GPUs)", () => {
      const sim = makeSimDevices(2);
      try {
        const digest = (block: number) => `0x${createHash("sha384").update(`simulated firmware ${block}`).digest("hex")}` as const;
        const rim = (version: string, golden: [number, `0x${string}`][]): Rim => ({
          tagId: version,
          product: "GH100",
          version,
          measurements: golden.map(([index, value]) => ({ index, active: true, alternatives: [value] })),
          signer: "CN=test RIM signer",
        });
        const policyWith = (driverGolden: `0x${string}`): CcPolicy => ({
          required: true,
          roots: [new X509Certificate(sim.rootPem)],
          reuseWindowMs: 0,
          requireCcMode: true,
          rims: {
            required: true,
            byKey: new Map([
              [
                "GH100:96.00.9F.00.01",
                rim("96.00.9F.00.01", [
                  [0, digest(1)],
                  [1, digest(2)],
                ]),
              ],
              ["GH100:550.90.07", rim("550.90.07", [[2, driverGolden]])],
            ]),
          },
        });
        const id = `0x${"5a".repeat(32)}` as const;
        const challenge = { id, provider: `0x${"11".repeat(20)}` as const, machineId: 1, model: "H100-80GB-SXM", units: 2 };
        const roots = [`0x${"a1".repeat(32)}`, `0x${"a2".repeat(32)}`] as const;
        const evidence = sim.devices.map((device, unit) => simEvidence(device, id, unit, roots[unit]!));
        const pass = checkCommitEvidence(policyWith(digest(3)), new DeviceRegistry(), challenge, roots, evidence, Date.now());
        assert.ok(pass.ok);
        assert.deepEqual(
          pass.units?.map((unit) => unit.rims),
          [
            ["96.00.9F.00.01", "550.90.07"],
            ["96.00.9F.00.01", "550.90.07"],
          ],
        );
        const tampered = checkCommitEvidence(policyWith(digest(4)), new DeviceRegistry(), challenge, roots, evidence, Date.now());
        assert.equal(tampered.ok, false);
        assert.match(
          !tampered.ok ? tampered.detail : "",
          /^unit 0: rim_mismatch: firmware measurements differ from NVIDIA's RIMs: block 3 is 0x[0-9a-f]{96}, 550\.90\.07 allows 0x/,
        );
      } finally {
        sim.close();
      }
    });

    const rimFile = path.join(recorded, "vbios-96.00.5E.00.01.swidtag");
    const rimRoot = path.join(recorded, "rim-root.pem");
    const deviceRoot = path.join(recorded, "device-root.pem");
    const options = (rims: Record<string, unknown>) => ccOptionsSchema.parse({ rootFiles: [deviceRoot], rims });

    it("verifies each RIM file at start-up to the RIM root, and names the file when one is expired, untrusted or given twice", async () => {
      const policy = await loadCcPolicy(options({ rootFiles: [rimRoot], files: [rimFile] }), undefined, SIGNED_ERA);
      assert.deepEqual([...(policy?.rims?.byKey.keys() ?? [])], ["GH100:96.00.5E.00.01"]);
      assert.equal(policy?.rims?.required, false);
      // Today its signer has expired: the node does not start on it.
      await assert.rejects(
        loadCcPolicy(options({ rootFiles: [rimRoot], files: [rimFile] })),
        /attest\.cc\.rims\.files: .*vbios-96\.00\.5E\.00\.01\.swidtag does not verify to attest\.cc\.rims\.rootFiles: expired_certificate/,
      );
      // The device root is not the RIM root.
      await assert.rejects(
        loadCcPolicy(options({ rootFiles: [deviceRoot], files: [rimFile] }), undefined, SIGNED_ERA),
        /swidtag does not verify to attest\.cc\.rims\.rootFiles: untrusted_root/,
      );
      await assert.rejects(loadCcPolicy(options({ rootFiles: [rimRoot], files: [rimFile, rimFile] }), undefined, SIGNED_ERA), /is a second RIM for GH100 96\.00\.5E\.00\.01/);
      // Files without a root to check them, and required without files, are configuration errors.
      assert.match(ccOptionsSchema.safeParse({ rims: { files: [rimFile] } }).error?.issues[0]?.message ?? "", /attest\.cc\.rims\.files needs attest\.cc\.rims\.rootFiles/);
      assert.match(ccOptionsSchema.safeParse({ rims: { required: true } }).error?.issues[0]?.message ?? "", /attest\.cc\.rims\.required needs attest\.cc\.rims\.files/);
    });

    it("compares a unit's firmware measurements with the RIMs of its versions: a real H100 report against NVIDIA's RIM", async () => {
      const policy = (await loadCcPolicy(options({ rootFiles: [rimRoot], files: [rimFile] }), undefined, SIGNED_ERA))!;
      const report = recordedReport();
      assert.equal(report.firmware.vbiosVersion, "96.00.9F.00.01");
      // Its VBIOS has no RIM here: compared with nothing when not required, refused when required.
      assert.deepEqual(checkRims(policy.rims!, "GH100", report.firmware, report.measurements, SIGNED_ERA), { ok: true, compared: [] });
      const strict = { ...policy.rims!, required: true };
      assert.deepEqual(checkRims(strict, "GH100", report.firmware, report.measurements, SIGNED_ERA), {
        ok: false,
        detail: "no RIM for GH100 VBIOS 96.00.9F.00.01 (attest.cc.rims.files; attest.cc.rims.required)",
      });
      // Claimed as the RIM's VBIOS: the four blocks that changed between the two VBIOS versions are named.
      const asOther = { ...report.firmware, vbiosVersion: "96.00.5E.00.01" };
      const other = checkRims(policy.rims!, "GH100", asOther, report.measurements, SIGNED_ERA);
      assert.equal(other.ok, false);
      assert.deepEqual([...((!other.ok && other.detail.match(/block \d+ is/g)) || [])], ["block 2 is", "block 3 is", "block 10 is", "block 12 is"]);
      assert.match(!other.ok ? other.detail : "", /^firmware measurements differ from NVIDIA's RIMs: /);
      // Measurements equal to the RIM's golden values pass, and the versions compared are recorded.
      const rim = policy.rims!.byKey.get("GH100:96.00.5E.00.01")!;
      const golden = report.measurements.map((block) => {
        const measurement = rim.measurements.find((m) => m.active && m.index + 1 === block.index);
        return measurement ? { ...block, value: measurement.alternatives[0]! } : block;
      });
      assert.deepEqual(checkRims(policy.rims!, "GH100", asOther, golden, SIGNED_ERA), { ok: true, compared: ["96.00.5E.00.01"] });
      // The required driver RIM is missing: refused even though the VBIOS matches.
      assert.match((checkRims(strict, "GH100", asOther, golden, SIGNED_ERA) as { detail: string }).detail, /^no RIM for GH100 driver 550\.90\.07/);
      // Once the RIM's signer expires it no longer counts.
      assert.match((checkRims(strict, "GH100", asOther, golden, new Date("2026-12-01T00:00:00Z")) as { detail: string }).detail, /^the RIM for VBIOS 96\.00\.5E\.00\.01 expired/);
    });
  });
});

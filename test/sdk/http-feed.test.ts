/**
 * The SDK's HTTP feed (a client created with `nodeUrl`) tells its local matching engine what the
 * node's offer view says: attested, and whether the node's attestor quorum verified the GPUs by
 * confidential-computing evidence, so `gpuIdentityVerified: true` matches the same machines
 * over HTTP as over libp2p.
 */
import assert from "node:assert/strict";
import type { OfferView } from "../../common/api/offers.js";
import { attestationOf } from "../../sdk/internal/http.js";

const NOW = 1_800_000_000;
const attestation = (expiry: number, cc: boolean) => ({
  attestor: `0x${"aa".repeat(20)}` as const,
  units: 1,
  vramMiB: 81_559,
  throughput: 1n,
  issuedAt: NOW - 60,
  expiry,
  current: expiry > NOW,
  gpuIdentityVerified: cc,
  cc: cc ? (`0x${"cc".repeat(32)}` as const) : (`0x${"00".repeat(32)}` as const),
});
const view = (attested: boolean, gpuIdentityVerified: boolean, attestations: ReturnType<typeof attestation>[]) =>
  ({ attested, gpuIdentityVerified, attestations }) as unknown as OfferView;

describe("SDK HTTP feed: the node's attestation verdicts", () => {
  it("carries the CC verdict as ccExpiry, only when the node says the quorum verified the GPUs", () => {
    assert.deepEqual(attestationOf(view(true, true, [attestation(NOW + 3_600, true), attestation(NOW + 7_200, false)]), NOW), {
      attestedAt: NOW - 60,
      expiry: NOW + 7_200,
      ccExpiry: NOW + 3_600,
    });
    // The node's quorum did not verify them (one attestor's cc alone): no ccExpiry.
    assert.deepEqual(attestationOf(view(true, false, [attestation(NOW + 3_600, true)]), NOW), { attestedAt: NOW - 60, expiry: NOW + 3_600 });
    assert.equal(attestationOf(view(false, false, [attestation(NOW + 3_600, true)]), NOW), null);
    // Expired CC attestations do not count.
    assert.deepEqual(attestationOf(view(true, true, [attestation(NOW - 1, true), attestation(NOW + 60, false)]), NOW), { attestedAt: NOW - 60, expiry: NOW + 60 });
  });
});

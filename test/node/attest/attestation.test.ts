import assert from "node:assert/strict";
import type { Attestation } from "../../../common/eip712.js";
import { suanliDomain } from "../../../common/eip712.js";
import { modelHash } from "../../../common/gpu.js";
import { signedAttestationSchema } from "../../../common/offers/message.js";
import { stringifyPlain } from "../../../common/json.js";
import { checkAttestationQuorum, verifyAttestation } from "../../../common/attest/attestation.js";
import { signAttestation } from "../../../common/chain/sign.js";
import { attestorAccount, domain, isAttestor, otherAttestorAccount, providerAccount, strangerAccount } from "./helpers.js";

const now = 1_800_000_000;
const attestation: Attestation = {
  provider: providerAccount.address,
  machineId: 3,
  model: modelHash("H100-80GB-SXM"),
  units: 8,
  vramMiB: 81_559,
  throughput: 9_000_000_000_000_000n,
  challengeId: `0x${"00".repeat(32)}` as const,
  root: `0x${"00".repeat(32)}` as const,
  gpus: `0x${"00".repeat(32)}` as const,
  cc: `0x${"00".repeat(32)}` as const,
  failures: 0,
  lastFailureAt: 0,
  issuedAt: now - 60,
  expiry: now + 3600,
};

describe("hardware attestations", () => {
  it("accepts an attestation signed by an attestor, and survives the offer wire format", async () => {
    const signed = await signAttestation(attestorAccount, domain, attestation);
    const verdict = await verifyAttestation(signed, { domain, isAttestor, now });
    assert.deepEqual(verdict, { valid: true, attestor: attestorAccount.address });
    // As gossiped inside an offer: JSON with bigints as strings, parsed back by the offer schema.
    const wire = signedAttestationSchema.parse(JSON.parse(stringifyPlain(signed)));
    assert.equal((await verifyAttestation(wire, { domain, isAttestor, now })).valid, true);
  });

  it("rejects an attestation past its expiry", async () => {
    const signed = await signAttestation(attestorAccount, domain, attestation);
    assert.deepEqual(await verifyAttestation(signed, { domain, isAttestor, now: attestation.expiry }), { valid: false, reason: "expired" });
  });

  it("rejects an attestation issued in the future beyond the clock skew", async () => {
    const signed = await signAttestation(attestorAccount, domain, { ...attestation, issuedAt: now + 1000 });
    assert.equal((await verifyAttestation(signed, { domain, isAttestor, now })).valid, false);
    assert.equal((await verifyAttestation(signed, { domain, isAttestor, now, maxClockSkewSeconds: 2000 })).valid, true);
  });

  it("rejects an attestation from an address outside the attestor set", async () => {
    const signed = await signAttestation(strangerAccount, domain, attestation);
    assert.deepEqual(await verifyAttestation(signed, { domain, isAttestor, now }), { valid: false, reason: "not_attestor", attestor: strangerAccount.address });
  });

  it("rejects an attestation whose fields were changed after signing, or made for another deployment", async () => {
    const signed = await signAttestation(attestorAccount, domain, attestation);
    const inflated = { ...signed, attestation: { ...signed.attestation, throughput: signed.attestation.throughput * 2n } };
    assert.equal((await verifyAttestation(inflated, { domain, isAttestor, now })).valid, false);
    const otherChain = suanliDomain(1, domain.verifyingContract);
    assert.equal((await verifyAttestation(signed, { domain: otherChain, isAttestor, now })).valid, false);
    const garbage = { ...signed, signature: `0x${"00".repeat(65)}` as const };
    assert.deepEqual(await verifyAttestation(garbage, { domain, isAttestor, now }), { valid: false, reason: "bad_signature" });
  });

  it("rejects an attestation about another machine", async () => {
    const signed = await signAttestation(attestorAccount, domain, attestation);
    const expected = { provider: providerAccount.address, machineId: 3, model: modelHash("H100-80GB-SXM"), units: 8 };
    assert.equal((await verifyAttestation(signed, { domain, isAttestor, now, expected })).valid, true);
    assert.deepEqual(await verifyAttestation(signed, { domain, isAttestor, now, expected: { ...expected, machineId: 4 } }), { valid: false, reason: "mismatch" });
    assert.deepEqual(await verifyAttestation(signed, { domain, isAttestor, now, expected: { ...expected, model: modelHash("A100-80GB") } }), {
      valid: false,
      reason: "mismatch",
    });
  });

  it("counts distinct attestors towards a quorum", async () => {
    const a = await signAttestation(attestorAccount, domain, attestation);
    const aAgain = await signAttestation(attestorAccount, domain, { ...attestation, issuedAt: now - 30 });
    const b = await signAttestation(otherAttestorAccount, domain, { ...attestation, throughput: 8_000_000_000_000_000n });
    const stranger = await signAttestation(strangerAccount, domain, attestation);
    const one = await checkAttestationQuorum([a, aAgain, stranger], { domain, isAttestor, now, quorum: 2 });
    assert.equal(one.met, false);
    assert.deepEqual(one.attestors, [attestorAccount.address]);
    assert.deepEqual(one.rejected, [
      { index: 1, reason: "duplicate" },
      { index: 2, reason: "not_attestor" },
    ]);
    const two = await checkAttestationQuorum([a, stranger, b], { domain, isAttestor, now, quorum: 2 });
    assert.equal(two.met, true);
    assert.equal(two.minThroughput, 8_000_000_000_000_000n);
    const expired = await checkAttestationQuorum([a, b], { domain, isAttestor, now: now + 7200, quorum: 1 });
    assert.equal(expired.met, false);
  });
});

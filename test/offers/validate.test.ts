import assert from "node:assert/strict";
import { generateKeyPair } from "@libp2p/crypto/keys";
import { hashTypedData } from "viem";
import { randomBytes } from "node:crypto";
import { MAX_ATTESTATION_AGE_SECONDS, verifyAttestation } from "../../common/attest/attestation.js";
import { TypedDataRecoverer } from "../../common/eip712-recover.js";
import { sealingKeyPairFromSeed, sealingKeyStatement } from "../../common/sealed.js";
import { suanliDomain, suanliTypes, ANY_RENTER, type Offer } from "../../common/eip712.js";
import { modelHash } from "../../common/gpu.js";
import { CachedChainView } from "../../common/offers/chain-view.js";
import { encodeOfferMessage, offerKey, type OfferMessage } from "../../common/offers/message.js";
import { signOffer } from "../../common/chain/sign.js";
import { signOfferMessage } from "../../common/offers/sign.js";
import { OfferValidator, engineAttestation, isAttested, isCcVerified, minimumLeaseCollateral, type OfferValidation } from "../../common/offers/validate.js";
import { MemoryChainView } from "../support/memory-chain-view.js";
import {
  TEST_CHAIN_ID,
  TEST_MARKET,
  attest,
  buildOfferMessage,
  createProvider,
  createSigner,
  machineSpec,
  nowSec,
  registerOnChain,
  signAttestationFast,
  type ProviderFixture,
} from "../support/offer-fixtures.js";

function expectFailure(result: OfferValidation, reason: string, action: "reject" | "ignore"): void {
  assert.equal(result.ok, false, "expected the message to be refused");
  if (result.ok) return;
  assert.equal(result.reason, reason, result.detail);
  assert.equal(result.action, action);
}

describe("offer validation pipeline", () => {
  let chain: MemoryChainView;
  let cached: CachedChainView;
  let validator: OfferValidator;
  let provider: ProviderFixture;
  const spec = machineSpec(7);

  beforeEach(async () => {
    chain = new MemoryChainView();
    cached = new CachedChainView(chain);
    validator = new OfferValidator({ chainId: TEST_CHAIN_ID, market: TEST_MARKET, chain: cached });
    provider = await createProvider();
    registerOnChain(chain, provider, [spec]);
  });

  it("accepts a well-formed offer of a registered, staked provider's declared machine", async () => {
    const message = await buildOfferMessage(provider, spec);
    const result = await validator.validate(encodeOfferMessage(message));
    assert.ok(result.ok, result.ok ? "" : result.detail);
    assert.equal(result.offer.key, offerKey(provider.address, 7));
    assert.equal(result.offer.message.offer.pricePerUnitSecond, 1_000n);
    assert.equal(isAttested(result.offer.attestation, nowSec()), false);
  });

  it("digests exactly like viem's hashTypedData and verifies a viem account's signature", async () => {
    const recoverer = new TypedDataRecoverer(TEST_CHAIN_ID, TEST_MARKET);
    const offer: Offer = {
      provider: provider.address,
      machineId: 7,
      model: modelHash("A100-80GB"),
      pricePerUnitSecond: 123n,
      minBidPerUnitSecond: 5n,
      minDuration: 1,
      maxDuration: 2,
      collateralBps: 3,
      startWindow: 4,
      nonce: 9n,
      expiry: nowSec() + 100,
      renter: ANY_RENTER,
    };
    const digest = recoverer.digest("Offer", offer);
    assert.equal(digest, hashTypedData({ domain: suanliDomain(TEST_CHAIN_ID, TEST_MARKET), types: suanliTypes, primaryType: "Offer", message: offer }));
    const signature = await signOffer(provider.account, suanliDomain(TEST_CHAIN_ID, TEST_MARKET), offer);
    assert.equal(recoverer.recover(digest, signature), provider.address);
  });

  it("marks an offer attested when a quorum of attestors vouches for it, and not with expired attestations", async () => {
    const attestor = createSigner();
    chain.addAttestor(attestor.address);
    const fresh = await buildOfferMessage(provider, spec, { attestations: [attest(attestor, provider.address, spec)] });
    const result = await validator.validate(encodeOfferMessage(fresh));
    assert.ok(result.ok);
    assert.ok(isAttested(result.offer.attestation, nowSec()));
    assert.deepEqual(result.offer.attestation.attestors, [attestor.address]);

    const stale = await buildOfferMessage(provider, spec, { seq: 2, attestations: [attest(attestor, provider.address, spec, -5)] });
    const staleResult = await validator.validate(encodeOfferMessage(stale));
    assert.ok(staleResult.ok, "an expired attestation is not a forgery");
    assert.equal(isAttested(staleResult.offer.attestation, nowSec()), false);
  });

  it("counts an attestation at most a day from its issue, whatever expiry its attestor signed, in the book and for the matching engine (issue 35 item 9)", async () => {
    const attestor = createSigner();
    chain.addAttestor(attestor.address);
    const now = nowSec();
    const base = attest(attestor, provider.address, spec).attestation;
    // Signed a week long, the challenge 25 h ago: a day-old record of the machine is not evidence now.
    const stale = signAttestationFast(attestor, { ...base, issuedAt: now - 25 * 3_600, expiry: now + 6 * 86_400 });
    const first = await validator.validate(encodeOfferMessage(await buildOfferMessage(provider, spec, { attestations: [stale] })));
    assert.ok(first.ok);
    assert.equal(isAttested(first.offer.attestation, now), false);
    assert.equal(engineAttestation(first.offer.attestation, now), null, "the matching engine sees it unattested");
    // Issued 23 h ago with the same week-long expiry: counted, but only until a day after its issue.
    const recent = signAttestationFast(attestor, { ...base, issuedAt: now - 23 * 3_600, expiry: now + 6 * 86_400 });
    const second = await validator.validate(encodeOfferMessage(await buildOfferMessage(provider, spec, { seq: 2, attestations: [recent] })));
    assert.ok(second.ok);
    assert.equal(second.offer.attestation.attestedUntil, recent.attestation.issuedAt + MAX_ATTESTATION_AGE_SECONDS);
    assert.equal(engineAttestation(second.offer.attestation, now)?.expiry, recent.attestation.issuedAt + MAX_ATTESTATION_AGE_SECONDS);
    assert.equal(isAttested(second.offer.attestation, now + 3_601), false, "an hour later it is a day old");
    const verdict = await verifyAttestation(stale, { domain: suanliDomain(TEST_CHAIN_ID, TEST_MARKET), isAttestor: () => true, now });
    assert.deepEqual(verdict, { valid: false, reason: "expired" });
  });

  it("counts GPUs verified by confidential-computing evidence under the same quorum, for the matching engine", async () => {
    const [a, b] = [createSigner(), createSigner()];
    chain.addAttestor(a.address);
    chain.addAttestor(b.address);
    chain.setQuorum(2);
    const cc = `0x${"c0".repeat(32)}` as const;
    // Both attest; only a verified the GPUs: attested, not CC-verified (one attestor's word is below the quorum).
    const one = await buildOfferMessage(provider, spec, { attestations: [attest(a, provider.address, spec, 3_600, 312_000n, cc), attest(b, provider.address, spec)] });
    const oneResult = await validator.validate(encodeOfferMessage(one));
    assert.ok(oneResult.ok);
    assert.ok(isAttested(oneResult.offer.attestation, nowSec()));
    assert.equal(isCcVerified(oneResult.offer.attestation, nowSec()), false);
    assert.equal(engineAttestation(oneResult.offer.attestation, nowSec())?.ccExpiry, undefined);
    // Both verified: CC-verified until the earlier of the two expires, and the engine is told so.
    const both = await buildOfferMessage(provider, spec, {
      seq: 2,
      attestations: [attest(a, provider.address, spec, 3_600, 312_000n, cc), attest(b, provider.address, spec, 1_800, 312_000n, cc)],
    });
    const bothResult = await validator.validate(encodeOfferMessage(both));
    assert.ok(bothResult.ok);
    assert.ok(isCcVerified(bothResult.offer.attestation, nowSec()));
    assert.equal(bothResult.offer.attestation.ccUntil, bothResult.offer.attestation.attestedUntil);
    assert.equal(engineAttestation(bothResult.offer.attestation, nowSec())?.ccExpiry, both.attestations[1]!.attestation.expiry);
  });

  it("takes each attestor's newest attestation, cc with it: an older CC-verified one does not outlive a newer one without CC", async () => {
    const a = createSigner();
    chain.addAttestor(a.address);
    const cc = `0x${"c1".repeat(32)}` as const;
    const older = attest(a, provider.address, spec, 7_200, 312_000n, cc);
    // Issued one second later, so it is the newer of the two; it expires sooner and verified no GPU.
    const resigned = signAttestationFast(a, { ...attest(a, provider.address, spec, 3_600).attestation, issuedAt: older.attestation.issuedAt + 1 });
    const both = await buildOfferMessage(provider, spec, { attestations: [older, resigned] });
    const result = await validator.validate(encodeOfferMessage(both));
    assert.ok(result.ok);
    assert.ok(isAttested(result.offer.attestation, nowSec()));
    assert.equal(isCcVerified(result.offer.attestation, nowSec()), false);
    assert.equal(result.offer.attestation.attestedUntil, resigned.attestation.expiry);
    // The other way round (the newer one verified the GPUs): CC-verified until the newer one expires.
    const newerCc = signAttestationFast(a, { ...older.attestation, issuedAt: older.attestation.issuedAt + 2, expiry: older.attestation.expiry - 3_600 });
    const olderPlain = signAttestationFast(a, { ...older.attestation, cc: `0x${"00".repeat(32)}` });
    const flipped = await validator.validate(encodeOfferMessage(await buildOfferMessage(provider, spec, { seq: 2, attestations: [olderPlain, newerCc] })));
    assert.ok(flipped.ok);
    assert.equal(flipped.offer.attestation.ccUntil, newerCc.attestation.expiry);
  });

  it("ignores, without punishing, attestations by addresses outside the attestor set", async () => {
    const [a, b, outsider] = [createSigner(), createSigner(), createSigner()];
    chain.addAttestor(a.address);
    chain.addAttestor(b.address);
    chain.setQuorum(2);
    const onlyOutsider = await buildOfferMessage(provider, spec, { attestations: [attest(outsider, provider.address, spec)] });
    const alone = await validator.validate(encodeOfferMessage(onlyOutsider));
    assert.ok(alone.ok, alone.ok ? "" : alone.detail);
    assert.deepEqual(alone.offer.attestation.attestors, [], "the outsider's attestation does not count");
    assert.equal(isAttested(alone.offer.attestation, nowSec()), false);

    const mixed = await buildOfferMessage(provider, spec, {
      seq: 2,
      attestations: [attest(a, provider.address, spec), attest(outsider, provider.address, spec), attest(b, provider.address, spec)],
    });
    const result = await validator.validate(encodeOfferMessage(mixed));
    assert.ok(result.ok, result.ok ? "" : result.detail);
    assert.deepEqual(result.offer.attestation.attestors, [a.address, b.address]);
    assert.ok(isAttested(result.offer.attestation, nowSec()), "two real attestors meet the quorum of two");

    // Many made-up attestor keys make every node read the chain for each: refused.
    const padded = await buildOfferMessage(provider, spec, {
      seq: 3,
      attestations: [createSigner(), createSigner(), createSigner()].map((key) => attest(key, provider.address, spec)),
    });
    expectFailure(await validator.validate(encodeOfferMessage(padded)), "bad_attestation", "reject");

    // Governance removes an attestor: the held offer is re-evaluated on what the others vouch for.
    chain.removeAttestor(b.address);
    cached.invalidateAttestors();
    assert.equal(isAttested(await validator.attestationState(mixed), nowSec()), false, "one attestor left, quorum two");
    chain.setQuorum(1);
    cached.invalidateAttestors();
    const state = await validator.attestationState(mixed);
    assert.deepEqual(state.attestors, [a.address]);
    assert.ok(isAttested(state, nowSec()), "the remaining attestor still vouches for it");
  });

  it("verifies the peer signature over the canonical form, whatever the key order on the wire", async () => {
    const message = await buildOfferMessage(provider, spec);
    const wire = JSON.parse(new TextDecoder().decode(encodeOfferMessage(message))) as Record<string, unknown>;
    const reordered = Object.fromEntries(Object.entries(wire).reverse());
    (reordered.offer as Record<string, unknown>).provider = provider.address.toLowerCase();
    const result = await validator.validate(JSON.stringify(reordered));
    assert.ok(result.ok, result.ok ? "" : result.detail);
  });

  describe("refuses bad input, each with its reason", () => {
    it("an oversized message", async () => {
      const message = await buildOfferMessage(provider, spec);
      const padded = JSON.stringify({ ...JSON.parse(new TextDecoder().decode(encodeOfferMessage(message))), pad: "x".repeat(20_000) });
      expectFailure(await validator.validate(padded), "too_large", "reject");
    });

    it("non-JSON and invalid UTF-8", async () => {
      expectFailure(await validator.validate("{ not json"), "not_json", "reject");
      expectFailure(await validator.validate(Uint8Array.from([0xff, 0xfe, 0x7b])), "not_json", "reject");
    });

    it("a schema-invalid message", async () => {
      const message = await buildOfferMessage(provider, spec);
      const wire = JSON.parse(new TextDecoder().decode(encodeOfferMessage(message))) as Record<string, Record<string, unknown>>;
      wire.capacity!.freeUnits = -1;
      expectFailure(await validator.validate(JSON.stringify(wire)), "schema", "reject");
      expectFailure(await validator.validate(JSON.stringify({ v: 1 })), "schema", "reject");
      expectFailure(await validator.validate("[]"), "schema", "reject");
    });

    it("a malformed offer signature", async () => {
      const message = await buildOfferMessage(provider, spec);
      // s = 0 recovers nothing; the peer signature is redone so only the Offer signature is wrong
      const zeroS = await resign({ ...message, signature: `0x${"11".repeat(32)}${"00".repeat(32)}1b` }, provider);
      expectFailure(await validator.validate(encodeOfferMessage(zeroS)), "bad_signature", "reject");
      const badV = await resign({ ...message, signature: `${message.signature.slice(0, -2)}05` as `0x${string}` }, provider);
      expectFailure(await validator.validate(encodeOfferMessage(badV)), "bad_signature", "reject");
    });

    it("an offer altered after signing (the signature recovers another address)", async () => {
      const message = await buildOfferMessage(provider, spec);
      const altered = await resign({ ...message, offer: { ...message.offer, pricePerUnitSecond: 1n } }, provider);
      expectFailure(await validator.validate(encodeOfferMessage(altered)), "wrong_signer", "reject");
    });

    it("an offer signed by a different key", async () => {
      const message = await buildOfferMessage(provider, spec, { offerSigner: createSigner() });
      expectFailure(await validator.validate(encodeOfferMessage(message)), "wrong_signer", "reject");
    });

    it("a message whose peer signature is by another node's key", async () => {
      const message = await buildOfferMessage(provider, spec, { peerKey: await generateKeyPair("Ed25519") });
      expectFailure(await validator.validate(encodeOfferMessage(message)), "bad_peer_signature", "reject");
    });

    it("a message whose capacity was changed in transit (covered only by the peer signature) and one with a flipped signature bit", async () => {
      const message = await buildOfferMessage(provider, spec);
      const free = message.capacity.freeUnits;
      const altered = { ...message, capacity: { ...message.capacity, freeUnits: free > 0 ? free - 1 : free + 1 } };
      expectFailure(await validator.validate(encodeOfferMessage(altered)), "bad_peer_signature", "reject");
      const last = message.peerSignature.at(-1)!;
      const flipped = { ...message, peerSignature: `${message.peerSignature.slice(0, -1)}${last === "0" ? "1" : "0"}` as typeof message.peerSignature };
      expectFailure(await validator.validate(encodeOfferMessage(flipped)), "bad_peer_signature", "reject");
      // The untouched message passes: the check refuses the change, not the message.
      assert.equal((await validator.validate(encodeOfferMessage(message))).ok, true);
    });

    it("a sealing key not signed by the provider's wallet for this chain, or with its expiry changed (a key signed for it is accepted and kept)", async () => {
      const pair = await sealingKeyPairFromSeed(randomBytes(32));
      const expiresAt = Math.floor(Date.now() / 1000) + 86_400;
      const sign = (signer: { account: { signMessage: (m: { message: string }) => Promise<`0x${string}`> } }, chainId: number) =>
        signer.account.signMessage({ message: sealingKeyStatement(chainId, provider.address, pair.publicKey, expiresAt) });
      const good = await buildOfferMessage(provider, spec, { sealingKey: { publicKey: pair.publicKey, expiresAt, signature: await sign(provider, TEST_CHAIN_ID) } });
      const accepted = await validator.validate(encodeOfferMessage(good));
      assert.ok(accepted.ok, accepted.ok ? "" : accepted.detail);
      assert.equal(accepted.offer.message.sealingKey?.publicKey, pair.publicKey);
      const byStranger = await buildOfferMessage(provider, spec, {
        seq: 2,
        sealingKey: { publicKey: pair.publicKey, expiresAt, signature: await sign(createSigner(), TEST_CHAIN_ID) },
      });
      expectFailure(await validator.validate(encodeOfferMessage(byStranger)), "bad_signature", "reject");
      const otherChain = await buildOfferMessage(provider, spec, {
        seq: 3,
        sealingKey: { publicKey: pair.publicKey, expiresAt, signature: await sign(provider, TEST_CHAIN_ID + 1) },
      });
      expectFailure(await validator.validate(encodeOfferMessage(otherChain)), "bad_signature", "reject");
      // A relay stretching a key's life past what the provider signed (after the good copy was cached).
      const stretched = await buildOfferMessage(provider, spec, {
        seq: 4,
        sealingKey: { publicKey: pair.publicKey, expiresAt: expiresAt + 365 * 86_400, signature: await sign(provider, TEST_CHAIN_ID) },
      });
      expectFailure(await validator.validate(encodeOfferMessage(stretched)), "bad_signature", "reject");
    });

    it("a message relayed under another peer id than the provider registered", async () => {
      const impostor = await createProvider();
      const message = await buildOfferMessage({ ...provider, peerKey: impostor.peerKey, peerId: impostor.peerId }, spec);
      expectFailure(await validator.validate(encodeOfferMessage(message)), "peer_id_mismatch", "reject");
    });

    it("a replayed old sequence number", async () => {
      const message = await buildOfferMessage(provider, spec, { seq: 5 });
      const held = (key: string) => (key === offerKey(provider.address, 7) ? 5 : undefined);
      expectFailure(await validator.validate(encodeOfferMessage(message), held), "stale_seq", "ignore");
      const older = await buildOfferMessage(provider, spec, { seq: 4 });
      expectFailure(await validator.validate(encodeOfferMessage(older), held), "stale_seq", "ignore");
    });

    it("an expired offer, and one that claims to live too long", async () => {
      const expired = await buildOfferMessage(provider, spec, { expiry: nowSec() - 1 });
      expectFailure(await validator.validate(encodeOfferMessage(expired)), "expired", "ignore");
      const forever = await buildOfferMessage(provider, spec, { expiry: nowSec() + 10 * 86_400 });
      expectFailure(await validator.validate(encodeOfferMessage(forever)), "expiry_too_far", "reject");
    });

    it("an unregistered provider and a deregistered one", async () => {
      const stranger = await createProvider();
      const message = await buildOfferMessage(stranger, spec);
      expectFailure(await validator.validate(encodeOfferMessage(message)), "unregistered", "reject");
      chain.deregisterProvider(provider.address);
      const own = await buildOfferMessage(provider, spec);
      expectFailure(await validator.validate(encodeOfferMessage(own)), "unregistered", "reject");
    });

    it("an under-staked provider", async () => {
      const message = await buildOfferMessage(provider, spec, { pricePerUnitSecond: 1_000n, minDuration: 3_600, collateralBps: 5_000 });
      assert.equal(minimumLeaseCollateral(message), 1_800_000n);
      chain.setFreeStake(provider.address, 1_799_999n);
      expectFailure(await validator.validate(encodeOfferMessage(message)), "understaked", "reject");
      cached.invalidateProvider(provider.address);
      chain.setFreeStake(provider.address, 1_800_000n);
      assert.ok((await validator.validate(encodeOfferMessage(message))).ok);
    });

    it("an offer for an undeclared machine, another provider's machine, or one described differently", async () => {
      const undeclared = await buildOfferMessage(provider, machineSpec(99));
      expectFailure(await validator.validate(encodeOfferMessage(undeclared)), "machine_undeclared", "reject");

      const other = await createProvider();
      registerOnChain(chain, other, [machineSpec(8)]);
      const stolen = await buildOfferMessage(provider, machineSpec(8));
      expectFailure(await validator.validate(encodeOfferMessage(stolen)), "machine_not_owned", "reject");

      const moved = await buildOfferMessage(provider, { ...spec, region: "us-east" });
      expectFailure(await validator.validate(encodeOfferMessage(moved)), "machine_mismatch", "reject");
    });

    it("a revoked offer nonce", async () => {
      chain.revokeNonce(provider.address, 1n);
      const message = await buildOfferMessage(provider, spec, { nonce: 1n });
      expectFailure(await validator.validate(encodeOfferMessage(message)), "nonce_revoked", "reject");
    });

    it("an attestation about another machine", async () => {
      const attestor = createSigner();
      chain.addAttestor(attestor.address);
      const elsewhere = await buildOfferMessage(provider, spec, { attestations: [attest(attestor, provider.address, { ...spec, units: 4 })] });
      expectFailure(await validator.validate(encodeOfferMessage(elsewhere)), "bad_attestation", "reject");
    });

    it("an attestation whose cc was changed after signing, even once the genuine one was verified (the signer cache covers every signed field)", async () => {
      const attestor = createSigner();
      chain.addAttestor(attestor.address);
      const genuine = attest(attestor, provider.address, spec);
      const first = await validator.validate(encodeOfferMessage(await buildOfferMessage(provider, spec, { attestations: [genuine] })));
      assert.ok(first.ok && isAttested(first.offer.attestation, nowSec()));
      // The same signature, now claiming GPUs verified by confidential-computing evidence: it recovers another key, outside the attestor set.
      const forged = { ...genuine, attestation: { ...genuine.attestation, cc: `0x${"11".repeat(32)}` as const } };
      const second = await validator.validate(encodeOfferMessage(await buildOfferMessage(provider, spec, { seq: 2, attestations: [forged] })));
      assert.ok(second.ok, "an attestation by a non-attestor is ignored, not punished");
      assert.equal(isAttested(second.offer.attestation, nowSec()), false);
      assert.deepEqual(second.offer.attestation.attestors, []);
    });

    it("an attestation whose failure history was wiped after signing, even once the genuine one was verified", async () => {
      const attestor = createSigner();
      chain.addAttestor(attestor.address);
      const now = nowSec();
      const genuine = signAttestationFast(attestor, { ...attest(attestor, provider.address, spec).attestation, failures: 3, lastFailureAt: now - 60 });
      const first = await validator.validate(encodeOfferMessage(await buildOfferMessage(provider, spec, { attestations: [genuine] })));
      assert.ok(first.ok && isAttested(first.offer.attestation, nowSec()));
      // A provider hiding the failed challenges its pass came after: the same signature over "no failures".
      const wiped = { ...genuine, attestation: { ...genuine.attestation, failures: 0, lastFailureAt: 0 } };
      const second = await validator.validate(encodeOfferMessage(await buildOfferMessage(provider, spec, { seq: 2, attestations: [wiped] })));
      assert.ok(second.ok, "an attestation by a non-attestor is ignored, not punished");
      assert.equal(isAttested(second.offer.attestation, nowSec()), false);
      assert.deepEqual(second.offer.attestation.attestors, []);
    });

    it("inconsistent fields: private offer, unknown model, capacity above the machine, a start window the market refuses", async () => {
      const privateOffer = await buildOfferMessage(provider, spec, { offer: { renter: createSigner().address } });
      expectFailure(await validator.validate(encodeOfferMessage(privateOffer)), "private_offer", "reject");
      const tooFree = await buildOfferMessage(provider, spec, { freeUnits: 9 });
      expectFailure(await validator.validate(encodeOfferMessage(tooFree)), "inconsistent", "reject");
      const alias = await buildOfferMessage(provider, { ...spec, model: "A100" }, { offer: { model: modelHash("A100") } });
      expectFailure(await validator.validate(encodeOfferMessage(alias)), "unknown_model", "reject");
      // LeaseMarket.openLease refuses startWindow < MIN_START_WINDOW (10 s): such an offer could never be opened.
      const instant = await buildOfferMessage(provider, spec, { offer: { startWindow: 9 } });
      expectFailure(await validator.validate(encodeOfferMessage(instant)), "inconsistent", "reject");
      assert.ok((await validator.validate(encodeOfferMessage(await buildOfferMessage(provider, spec, { offer: { startWindow: 10 } })))).ok);
    });

    it("ignores (does not punish) a message it cannot check because the chain is unreachable", async () => {
      const message = await buildOfferMessage(provider, spec);
      chain.failWith = new Error("connection refused");
      expectFailure(await validator.validate(encodeOfferMessage(message)), "chain_unavailable", "ignore");
      chain.failWith = undefined;
      assert.ok((await validator.validate(encodeOfferMessage(message))).ok);
    });
  });

  it("reads the chain once per record and verifies an unchanged offer once", async () => {
    // One expiry for all: the Offer (what is signed) stays the same even if a second ticks by.
    const expiry = nowSec() + 600;
    const first = await buildOfferMessage(provider, spec, { seq: 1, expiry });
    assert.ok((await validator.validate(encodeOfferMessage(first))).ok);
    const readsAfterFirst = chain.reads;
    for (let seq = 2; seq <= 20; seq++) {
      const next = await buildOfferMessage(provider, spec, { seq, expiry });
      assert.ok((await validator.validate(encodeOfferMessage(next))).ok);
    }
    assert.equal(chain.reads, readsAfterFirst, "every chain read after the first came from the cache");
    assert.equal(validator.cacheSizes().offers, 1, "one signed offer, verified once");
  });

  it("keeps its caches bounded", async () => {
    const small = new OfferValidator({ chainId: TEST_CHAIN_ID, market: TEST_MARKET, chain: cached, cacheSize: 8 });
    for (let i = 0; i < 30; i++) {
      const message = await buildOfferMessage(provider, spec, { seq: i + 1, pricePerUnitSecond: BigInt(1_000 + i) });
      assert.ok((await small.validate(encodeOfferMessage(message))).ok);
    }
    assert.ok(small.cacheSizes().offers <= 8);
  });
});

/** Re-signs the peer signature of an altered message (so only the part under test is wrong). */
async function resign(message: OfferMessage, provider: ProviderFixture): Promise<OfferMessage> {
  const { peerSignature: _drop, ...unsigned } = message;
  return signOfferMessage(unsigned, provider.peerKey);
}

import assert from "node:assert/strict";
import { InvalidInputError } from "../../common/errors.js";
import { modelHash } from "../../common/gpu.js";
import { offerEntryFromMessage, reputationScore } from "../../common/matching/index.js";
import { offerKey } from "../../common/offers/message.js";
import { NOW, offerMessage, parsedOfferMessage, providerAddress } from "../support/matching-fixtures.js";

const knowledge = {
  attestation: { attestedAt: NOW - 100, expiry: NOW + 1000 },
  reputation: { leasesCompleted: 3, faults: 1, unitSecondsDelivered: 5000 },
  latencyMs: 12,
};

describe("matching: offer entries", () => {
  it("test fixtures are exactly what the offer message schema outputs", () => {
    const spec = { machineId: 3, units: 4, free: 1, interruptible: 2, onDemand: 1, lowestBid: 77, cluster: 5, minBid: 12 };
    assert.deepEqual(offerMessage(spec), parsedOfferMessage(spec));
  });

  it("builds an entry from a message and what the node knows", () => {
    const message = parsedOfferMessage({ machineId: 3, units: 4, free: 1, interruptible: 2, onDemand: 1, lowestBid: 77, region: "EU-West" });
    const entry = offerEntryFromMessage(message, knowledge);
    assert.equal(entry.key, offerKey(providerAddress(3), 3));
    assert.equal(entry.seq, 1);
    assert.equal(entry.offer, message.offer);
    assert.equal(entry.signature, message.signature);
    assert.equal(entry.machine.region, "EU-West");
    assert.deepEqual(entry.capacity, { freeUnits: 1, onDemandUnits: 1, interruptibleUnits: 2, lowestInterruptibleBid: 77n });
    assert.equal(entry.attestedAt, NOW - 100);
    assert.equal(entry.attestationExpiry, NOW + 1000);
    assert.deepEqual(entry.reputation, { leasesCompleted: 3, faults: 1, unitSecondsDelivered: 5000n });
    assert.equal(entry.latencyMs, 12);
    assert.equal(entry.peerId, "peer-3");
  });

  it("treats a machine without attestation and without measured latency as such", () => {
    const entry = offerEntryFromMessage(offerMessage({ machineId: 1 }), { attestation: null, reputation: knowledge.reputation });
    assert.equal(entry.attestedAt, null);
    assert.equal(entry.attestationExpiry, null);
    assert.equal(entry.latencyMs, null);
  });

  it("refuses offers the engine must not index", () => {
    const message = offerMessage({ machineId: 1 });
    const privateOffer = { ...message, offer: { ...message.offer, renter: providerAddress(99) } };
    assert.throws(() => offerEntryFromMessage(privateOffer, knowledge), { name: "UnindexableOfferError" });
    const alias = { ...message, machine: { ...message.machine, model: "A100" } };
    assert.throws(
      () => offerEntryFromMessage(alias, knowledge),
      (e: unknown) => (e as Error).name === "UnindexableOfferError" && /canonical spelling is A100-80GB/.test((e as Error).message),
    );
    const wrongHash = { ...message, offer: { ...message.offer, model: modelHash("H100-80GB-SXM") } };
    assert.throws(() => offerEntryFromMessage(wrongHash, knowledge), { name: "UnindexableOfferError" });
    const overfull = { ...message, capacity: { ...message.capacity, freeUnits: 8, onDemandUnits: 1 } };
    assert.throws(() => offerEntryFromMessage(overfull, knowledge), { name: "UnindexableOfferError" });
  });

  it("validates what the node knows, naming the field", () => {
    assert.throws(
      () => offerEntryFromMessage(offerMessage({ machineId: 1 }), { ...knowledge, reputation: { ...knowledge.reputation, faults: -1 } }),
      (e: unknown) => e instanceof InvalidInputError && e.fields[0] === "reputation.faults",
    );
  });

  it("scores reputation by the rule of succession", () => {
    assert.equal(reputationScore({ leasesCompleted: 0, faults: 0 }), 0.5);
    assert.equal(reputationScore({ leasesCompleted: 98, faults: 0 }), 0.99);
    assert.equal(reputationScore({ leasesCompleted: 10, faults: 10 }), 0.5);
    assert.ok(reputationScore({ leasesCompleted: 0, faults: 3 }) < 0.25);
  });
});

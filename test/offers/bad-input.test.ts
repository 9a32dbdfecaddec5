import assert from "node:assert/strict";
import { encodeOfferMessage, offerKey, offersTopic, type OfferMessage } from "../../common/offers/message.js";
import { OFFERS_SYNC_PROTOCOL } from "../../common/p2p/protocols.js";
import { offersSyncRequestSchema, offersSyncResponseSchema } from "../../common/offers/sync.js";
import type { OfferValidation } from "../../common/offers/validate.js";
import { createHost, type GossipSubInspect, type SuanliHost } from "../../common/p2p/host.js";
import { request } from "../../common/p2p/reqresp.js";
import { offersTopics } from "../../node/offers/service.js";
import { signOfferMessage } from "../../common/offers/sign.js";
import { MemoryChainView } from "../support/memory-chain-view.js";
import { TEST_CHAIN_ID, buildOfferMessage, createProvider, createSigner, machineSpec, nowSec, registerOnChain, type ProviderFixture } from "../support/offer-fixtures.js";
import { loopbackP2pOptions, startTestNode, waitForMesh, type TestNode } from "../support/nodes.js";
import { waitFor } from "../support/wait.js";

const topic = offersTopic(TEST_CHAIN_ID);

type Attacker = { host: SuanliHost; pubsub: GossipSubInspect; id: string; send(bytes: Uint8Array | string): Promise<void>; stop(): Promise<void> };

/** A bare libp2p peer that speaks gossipsub on the offers topic and publishes whatever it is told. */
async function startAttacker(victim: TestNode): Promise<Attacker> {
  const { identityFile: _f, ...options } = loopbackP2pOptions();
  const host = await createHost({ ...options, topics: offersTopics(TEST_CHAIN_ID) });
  const pubsub = host.services.pubsub as GossipSubInspect;
  pubsub.subscribe(topic);
  await host.dial(victim.host.getMultiaddrs()[0]!);
  await waitFor("the victim's subscription", () => pubsub.getSubscribers(topic).some((peer) => peer.equals(victim.host.peerId)));
  return {
    host,
    pubsub,
    id: host.peerId.toString(),
    async send(bytes) {
      await pubsub.publish(topic, typeof bytes === "string" ? new TextEncoder().encode(bytes) : bytes);
    },
    stop: async () => {
      await host.stop();
    },
  };
}

/** The victim's verdict on the next message from `from`. */
function nextVerdict(victim: TestNode, from: string): Promise<OfferValidation> {
  return new Promise((resolve) => {
    const listener = (result: OfferValidation, _source: string, sender: string | undefined) => {
      if (sender !== from) return;
      victim.offers.gossip.off("validated", listener);
      resolve(result);
    };
    victim.offers.gossip.on("validated", listener);
  });
}

function wireObject(message: OfferMessage): Record<string, unknown> {
  return JSON.parse(new TextDecoder().decode(encodeOfferMessage(message))) as Record<string, unknown>;
}

describe("offer gossip under bad input (real nodes, real TCP on 127.0.0.1)", function () {
  this.timeout(30_000);
  const chain = new MemoryChainView();
  let victim: TestNode;
  let honest: TestNode;
  let wallet: ProviderFixture;
  let provider: ProviderFixture;
  const spec = machineSpec(21);
  const attackers: Attacker[] = [];

  before(async () => {
    victim = await startTestNode({ chain });
    wallet = await createProvider();
    honest = await startTestNode({ chain, bootstrap: [victim.addr], provider: wallet.account });
    provider = { ...wallet, peerKey: honest.peerKey, peerId: honest.host.peerId.toString() };
    registerOnChain(chain, provider, [spec]);
    await waitForMesh([victim, honest]);
    await honest.offers.publisher!.set({
      machine: { ...spec },
      terms: { pricePerUnitSecond: 1_000n, minDuration: 60, maxDuration: 86_400, collateralBps: 1_000, startWindow: 300 },
      capacity: { freeUnits: 8 },
    });
    await waitFor("the honest offer", () => victim.offers.book.get(offerKey(wallet.address, 21)));
  });

  after(async () => {
    await Promise.all(attackers.map((a) => a.stop()));
    await Promise.all([victim.stop({ removeDir: true }), honest.stop({ removeDir: true })]);
  });

  async function attack(payload: Uint8Array | string | (() => Promise<Uint8Array | string>)): Promise<{ verdict: OfferValidation; attacker: Attacker }> {
    const attacker = await startAttacker(victim);
    attackers.push(attacker);
    const verdict = nextVerdict(victim, attacker.id);
    await attacker.send(typeof payload === "function" ? await payload() : payload);
    return { verdict: await verdict, attacker };
  }

  async function expectRejected(payload: Parameters<typeof attack>[0], reason: string): Promise<void> {
    const sizeBefore = victim.offers.book.size;
    const { verdict, attacker } = await attack(payload);
    assert.equal(verdict.ok, false);
    assert.equal(!verdict.ok && verdict.reason, reason, !verdict.ok ? verdict.detail : "");
    assert.equal(!verdict.ok && verdict.action, "reject");
    // Rejected through gossipsub validation: the sending peer's score drops.
    await waitFor("the attacker's score to drop", () => victim.pubsub.getScore(attacker.id) < 0);
    assert.equal(victim.offers.book.size, sizeBefore);
    const rejected = await victim.metrics.offersRejected.get();
    assert.ok(rejected.values.some((v) => v.labels.reason === reason && v.labels.action === "reject" && v.value >= 1));
  }

  async function expectIgnored(payload: Parameters<typeof attack>[0], reason: string): Promise<void> {
    const { verdict, attacker } = await attack(payload);
    assert.equal(!verdict.ok && verdict.reason, reason, !verdict.ok ? verdict.detail : "");
    assert.equal(!verdict.ok && verdict.action, "ignore");
    assert.ok(victim.pubsub.getScore(attacker.id) >= 0, "stale news is not punished: an honest relay may carry it");
  }

  it("an oversized message", async () => {
    const big = { ...wireObject(await buildOfferMessage(provider, spec, { seq: 50 })), padding: "x".repeat(20_000) };
    await expectRejected(JSON.stringify(big), "too_large");
  });

  it("a message that is not JSON", async () => {
    await expectRejected(Uint8Array.from([0x00, 0xff, 0x13, 0x37]), "not_json");
  });

  it("a schema-invalid message", async () => {
    const wire = wireObject(await buildOfferMessage(provider, spec, { seq: 50 }));
    await expectRejected(JSON.stringify({ ...wire, seq: "fifty" }), "schema");
  });

  it("a bad signature", async () => {
    await expectRejected(async () => {
      const message = await buildOfferMessage(provider, spec, { seq: 50 });
      const { peerSignature: _p, ...unsigned } = { ...message, signature: `0x${"22".repeat(32)}${"00".repeat(32)}1c` as const };
      return encodeOfferMessage(await signOfferMessage(unsigned, provider.peerKey));
    }, "bad_signature");
  });

  it("a signature by a different key", async () => {
    await expectRejected(async () => encodeOfferMessage(await buildOfferMessage(provider, spec, { seq: 50, offerSigner: createSigner() })), "wrong_signer");
  });

  it("a relay forging a higher sequence number on the provider's offer", async () => {
    await expectRejected(async () => {
      const forger = await createProvider();
      return encodeOfferMessage(await buildOfferMessage(provider, spec, { seq: 1_000_000, peerKey: forger.peerKey }));
    }, "bad_peer_signature");
  });

  it("a replayed old sequence number", async () => {
    const held = victim.offers.book.get(offerKey(wallet.address, 21))!;
    const old = await buildOfferMessage(provider, spec, { seq: held.seq - 1 >= 0 ? held.seq - 1 : 0 });
    // Re-spelled (keys reversed) so gossipsub's duplicate cache does not hide it from validation.
    const respelled = JSON.stringify(Object.fromEntries(Object.entries(wireObject(old)).reverse()));
    await expectIgnored(respelled, "stale_seq");
  });

  it("an expired offer", async () => {
    await expectIgnored(async () => encodeOfferMessage(await buildOfferMessage(provider, spec, { seq: 60, expiry: nowSec() - 5 })), "expired");
  });

  it("an unregistered provider", async () => {
    const stranger = await createProvider();
    await expectRejected(async () => encodeOfferMessage(await buildOfferMessage(stranger, machineSpec(31))), "unregistered");
  });

  it("an under-staked provider", async () => {
    const poor = await createProvider();
    registerOnChain(chain, poor, [machineSpec(32)], 10n);
    await expectRejected(async () => encodeOfferMessage(await buildOfferMessage(poor, machineSpec(32), { minDuration: 3_600 })), "understaked");
  });

  it("an offer for a machine the provider never declared", async () => {
    await expectRejected(async () => encodeOfferMessage(await buildOfferMessage(provider, machineSpec(33))), "machine_undeclared");
  });

  it("answers an offers-sync request for another chain with WrongChainError", async () => {
    await assert.rejects(request(honest.host, victim.host.peerId, OFFERS_SYNC_PROTOCOL, { chainId: 1, limit: 10 }, { responseSchema: offersSyncResponseSchema }), {
      name: "WrongChainError",
    });
    await assert.rejects(
      request(honest.host, victim.host.peerId, OFFERS_SYNC_PROTOCOL, { chainId: TEST_CHAIN_ID, limit: 10_000 }, { responseSchema: offersSyncResponseSchema }),
      (error: unknown) => (error as Error).name === "InvalidMessageError" && (error as { fields: string[] }).fields[0] === "limit",
    );
  });

  it("a flood of 10,000 junk messages from one peer: all refused, the node keeps serving, memory stays bounded", async function () {
    this.timeout(60_000);
    const attacker = await startAttacker(victim);
    attackers.push(attacker);
    const accepted = () => victim.metrics.offersAccepted.get().then((m) => m.values.reduce((sum, v) => sum + v.value, 0));
    const acceptedBefore = await accepted();
    const heapBefore = process.memoryUsage().heapUsed;

    let sendErrors = 0;
    for (let i = 0; i < 10_000; i++) {
      const junk = i % 3 === 0 ? `junk ${i} ${Math.random()}` : i % 3 === 1 ? JSON.stringify({ v: 1, seq: i }) : JSON.stringify({ v: 1, offer: { provider: i } });
      await attacker.send(junk).catch(() => sendErrors++);
    }
    // After a handful of rejections the attacker is graylisted: the rest is dropped unread.
    await waitFor("the attacker to be graylisted", () => victim.pubsub.getScore(attacker.id) <= -80, { timeoutMs: 20_000 });
    assert.equal(await accepted(), acceptedBefore, "nothing from the flood entered the book");
    assert.equal(victim.offers.book.size, 1);

    // The same junk straight through the node's ingest path: every one refused, with a reason.
    let refused = 0;
    for (let i = 0; i < 10_000; i++) {
      const result = await victim.offers.gossip.ingest(i % 2 ? `{"v":1,"seq":${i}}` : `junk ${i}`, "gossip", "direct");
      if (!result.ok && (result.reason === "schema" || result.reason === "not_json")) refused++;
    }
    assert.equal(refused, 10_000);

    // Still serving: a fresh honest offer propagates, and the offers-sync protocol answers.
    await honest.offers.publisher!.set({
      machine: { ...spec },
      terms: { pricePerUnitSecond: 990n, minDuration: 60, maxDuration: 86_400, collateralBps: 1_000, startWindow: 300 },
      capacity: { freeUnits: 7 },
    });
    await waitFor("the honest update", () => victim.offers.book.get(offerKey(wallet.address, 21))?.pricePerUnitSecond === 990n);
    const page = await request(
      honest.host,
      victim.host.peerId,
      OFFERS_SYNC_PROTOCOL,
      { chainId: TEST_CHAIN_ID, limit: 10 },
      {
        requestSchema: offersSyncRequestSchema,
        responseSchema: offersSyncResponseSchema,
      },
    );
    assert.equal(page.offers.length, 1);

    // Bounded: caches stay within their caps, the heap did not grow with the flood.
    const caches = victim.offers.validator.cacheSizes();
    assert.ok(caches.offers <= 50_000 && caches.attestations <= 50_000 && caches.peerKeys <= 10_000);
    const growthMiB = (process.memoryUsage().heapUsed - heapBefore) / 2 ** 20;
    assert.ok(growthMiB < 96, `heap grew ${growthMiB.toFixed(1)} MiB`);
    assert.ok(sendErrors < 10_000);
  });
});

/**
 * Gossip attacks of issue #23 against real nodes (libp2p over TCP on 127.0.0.1): a graylisted
 * peer that hangs up and redials, a retained score across a reconnect, a large IWANT answer
 * between honest nodes, and oversized frames.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { lpStream } from "@libp2p/utils";
import { offersTopic } from "../../common/offers/message.js";
import { createHost, peerGuardOf, type GossipSubInspect, type SuanliHost } from "../../common/p2p/host.js";
import { offersTopics } from "../../node/offers/service.js";
import { counterValue } from "../support/attacker.js";
import { MemoryChainView } from "../support/memory-chain-view.js";
import { TEST_CHAIN_ID } from "../support/offer-fixtures.js";
import { loopbackP2pOptions, startTestNode, type TestNode } from "../support/nodes.js";
import { waitFor } from "../support/wait.js";

const topic = offersTopic(TEST_CHAIN_ID);

type GossipPeer = { host: SuanliHost; pubsub: GossipSubInspect; id: string };

async function gossipPeer(extra: Record<string, unknown> = {}, topics = offersTopics(TEST_CHAIN_ID)): Promise<GossipPeer> {
  const { identityFile: _f, ...options } = loopbackP2pOptions();
  const host = await createHost({ ...options, connections: { ...options.connections, min: 0 }, topics, ...extra });
  const pubsub = host.services.pubsub as GossipSubInspect;
  for (const name of Object.keys(topics)) pubsub.subscribe(name);
  return { host, pubsub, id: host.peerId.toString() };
}

async function joinVictim(peer: GossipPeer, victim: TestNode): Promise<void> {
  await peer.host.dial(victim.host.getMultiaddrs()[0]!);
  await waitFor("the victim's subscription", () => peer.pubsub.getSubscribers(topic).some((p) => p.equals(victim.host.peerId)));
  await waitFor("the victim to know the peer's subscription", () => victim.pubsub.getSubscribers(topic).some((p) => p.equals(peer.host.peerId)));
}

function validatedFrom(victim: TestNode, from: string): () => number {
  let count = 0;
  victim.offers.gossip.on("validated", (_result, _source, sender) => {
    if (sender === from) count++;
  });
  return () => count;
}

describe("gossip under hostile peers (real nodes, real TCP on 127.0.0.1)", function () {
  this.timeout(60_000);
  const chain = new MemoryChainView();
  let victim: TestNode;
  const peers: GossipPeer[] = [];

  before(async () => {
    victim = await startTestNode({ chain });
  });
  after(async () => {
    await Promise.all(peers.map((peer) => peer.host.stop()));
    await victim?.stop({ removeDir: true });
  });

  it("a graylisted peer that hangs up and redials stays refused, with its old score", async () => {
    const attacker = await gossipPeer();
    peers.push(attacker);
    await joinVictim(attacker, victim);
    const validated = validatedFrom(victim, attacker.id);
    for (let i = 0; i < 40; i++) await attacker.pubsub.publish(topic, new TextEncoder().encode(`junk ${i} ${Math.random()}`)).catch(() => undefined);
    await waitFor("the attacker to be graylisted", () => victim.pubsub.getScore(attacker.id) <= -80, { timeoutMs: 20_000 });
    const guard = peerGuardOf(victim.host)!;
    await waitFor("the victim to remember the attacker", () => guard.scoreOf(attacker.id) <= -80);
    const remembered = guard.scoreOf(attacker.id);
    // The victim hangs up on a graylisted peer itself; the attacker hangs up too, to come back clean.
    await attacker.host.hangUp(victim.host.peerId);
    await waitFor("the connection to close", () => victim.host.getConnections(attacker.host.peerId).length === 0);
    const seen = validated();
    const refusedBefore = await counterValue(victim.metrics.registry, "suanli_p2p_peers_refused_total", { match: "peer" });

    for (let attempt = 0; attempt < 3; attempt++) {
      await attacker.host.dial(victim.host.getMultiaddrs()[0]!).catch(() => undefined);
      await attacker.pubsub.publish(topic, new TextEncoder().encode(`junk again ${attempt}`)).catch(() => undefined);
    }
    await waitFor(
      "the victim to count the refusals",
      async () => (await counterValue(victim.metrics.registry, "suanli_p2p_peers_refused_total", { match: "peer" })) >= refusedBefore + 3,
    );
    assert.equal(victim.host.getConnections(attacker.host.peerId).length, 0, "the redialled connection was refused");
    assert.equal(validated(), seen, "nothing from the redialling attacker was validated again");
    // The memory decays over an hour: the score is (almost exactly) the old one.
    assert.ok(guard.scoreOf(attacker.id) <= remembered * 0.99, `remembered ${guard.scoreOf(attacker.id)}, was ${remembered}`);
    // The victim does not dial it either.
    await assert.rejects(victim.host.dial(attacker.host.peerId));
  });

  it("a penalised peer that reconnects gets its retained gossipsub score back, not a clean 0", async () => {
    const sloppy = await gossipPeer();
    peers.push(sloppy);
    await joinVictim(sloppy, victim);
    for (let i = 0; i < 4; i++) await sloppy.pubsub.publish(topic, new TextEncoder().encode(`not an offer ${i} ${Math.random()}`)).catch(() => undefined);
    await waitFor("the peer's score to drop", () => victim.pubsub.getScore(sloppy.id) < -5);
    await sloppy.host.hangUp(victim.host.peerId);
    await waitFor("the victim to drop the peer from gossip", () => !victim.pubsub.getPeers().some((p) => p.equals(sloppy.host.peerId)));
    // Above the graylist threshold: it may come back ...
    await joinVictim(sloppy, victim);
    await waitFor("the victim to add the peer to gossip again", () => victim.pubsub.getPeers().some((p) => p.equals(sloppy.host.peerId)));
    // ... with its score, decayed a little (0.9 a second), not reset by gossipsub's addPeer.
    const score = victim.pubsub.getScore(sloppy.id);
    assert.ok(score < -1, `score after the reconnect: ${score}`);
  });

  it("an oversized frame is a scored offence: the sender is penalised and disconnected, can redial once, and is refused after a second", async () => {
    const { identityFile: _f, ...options } = loopbackP2pOptions();
    const sender = await createHost({ ...options, connections: { ...options.connections, min: 0 }, gossip: { enabled: false } });
    peers.push({ host: sender, pubsub: undefined as never, id: sender.peerId.toString() });
    const guard = peerGuardOf(victim.host)!;
    const frame = async () => {
      const stream = await sender.dialProtocol(victim.host.getMultiaddrs()[0]!, "/meshsub/1.2.0");
      const lp = lpStream(stream, { maxDataLength: 4 * 1024 * 1024 });
      await lp.write(new Uint8Array(1.5 * 1024 * 1024)).catch(() => undefined);
      await waitFor("the victim to close the connection", () => victim.host.getConnections(sender.peerId).length === 0);
      await waitFor("the sender to see it closed", () => sender.getConnections(victim.host.peerId).length === 0);
    };
    await frame();
    const after = guard.scoreOf(sender.peerId.toString());
    assert.ok(after <= -44 && after > -80, `score after one oversized frame: ${after}`);
    // Not refused yet: an honest peer with a bug reconnects and gossip resumes.
    await sender.dial(victim.host.getMultiaddrs()[0]!);
    await frame();
    assert.ok(guard.scoreOf(sender.peerId.toString()) <= -80);
    await sender.dial(victim.host.getMultiaddrs()[0]!).catch(() => undefined);
    await waitFor("the redial to be refused", () => victim.host.getConnections(sender.peerId).length === 0);
  });
});

describe("gossip between honest nodes: an IWANT answer larger than a frame", function () {
  this.timeout(60_000);
  const iwantTopic = "/suanli/test/iwant";
  let a: GossipPeer;
  let b: GossipPeer;

  after(async () => {
    await a?.host.stop();
    await b?.host.stop();
  });

  it("80 messages of 16 KiB asked in one IWANT all arrive (the answer goes out in parts under the 1 MiB frame limit)", async () => {
    // A slow heartbeat keeps the messages in A's cache while B asks for them.
    a = await gossipPeer({ gossip: { heartbeatIntervalMs: 2_000, ipColocationWhitelist: ["127.0.0.1"] } }, { [iwantTopic]: {} });
    b = await gossipPeer({ gossip: { heartbeatIntervalMs: 2_000, ipColocationWhitelist: ["127.0.0.1"] } }, { [iwantTopic]: {} });
    const payloads: Uint8Array[] = [];
    for (let i = 0; i < 80; i++) {
      const data = new Uint8Array(16 * 1024).fill(i);
      data[0] = 0xee;
      payloads.push(data);
      // Nobody listens yet: the messages go into A's cache only.
      await a.pubsub.publish(iwantTopic, data);
    }
    const received = new Set<number>();
    b.pubsub.addEventListener("message", (event) => {
      if (event.detail.topic === iwantTopic) received.add(event.detail.data[1]!);
    });
    await b.host.dial(a.host.getMultiaddrs()[0]!);
    await waitFor("A to see B's subscription", () => a.pubsub.getSubscribers(iwantTopic).some((p) => p.equals(b.host.peerId)));
    await waitFor("B to see A's subscription", () => b.pubsub.getSubscribers(iwantTopic).some((p) => p.equals(a.host.peerId)));
    // What B's gossipsub sends after an IHAVE: one IWANT with every id (sha256 of the data, StrictNoSign).
    const ids = payloads.map((data) => new Uint8Array(createHash("sha256").update(data).digest()));
    const sendRpc = (b.pubsub as unknown as { sendRpc(id: string, rpc: unknown): boolean }).sendRpc.bind(b.pubsub);
    assert.equal(sendRpc(a.id, { subscriptions: [], messages: [], control: { ihave: [], iwant: [{ messageIDs: ids }], graft: [], prune: [], idontwant: [] } }), true);
    await waitFor("all 80 messages at B", () => received.size === 80, { timeoutMs: 20_000 });
    // And A is still B's gossip peer (not cut out by an oversized frame).
    assert.ok(b.pubsub.getPeers().some((p) => p.equals(a.host.peerId)));
  });
});

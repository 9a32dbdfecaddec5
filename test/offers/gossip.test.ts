import assert from "node:assert/strict";
import { rm } from "node:fs/promises";
import { offerKey } from "../../common/offers/message.js";
import type { MachineOfferInput } from "../../node/offers/publisher.js";
import { Bucket } from "../../node/store/buckets.js";
import { MemoryChainView } from "../support/memory-chain-view.js";
import { createProvider, machineSpec, nowSec, registerOnChain, ZERO_CLUSTER, type ProviderFixture } from "../support/offer-fixtures.js";
import { startTestNode, waitForMesh, type TestNode } from "../support/nodes.js";
import { waitFor } from "../support/wait.js";

const spec = machineSpec(11, { model: "H100-80GB-SXM", units: 8, vramMiB: 81_559, region: "ap-east" });

function machineOffer(price: bigint, freeUnits = 8): MachineOfferInput {
  return {
    machine: {
      machineId: spec.machineId,
      model: spec.model,
      units: spec.units,
      vramMiB: spec.vramMiB,
      interconnect: spec.interconnect,
      region: spec.region,
      cluster: ZERO_CLUSTER,
    },
    terms: { pricePerUnitSecond: price, minDuration: 60, maxDuration: 86_400, collateralBps: 1_000, startWindow: 300 },
    capacity: { freeUnits },
  };
}

describe("offers over gossip between separate nodes (real TCP on 127.0.0.1)", function () {
  this.timeout(30_000);
  const chain = new MemoryChainView();
  let clockOffset = 0;
  const now = () => nowSec() + clockOffset;
  let wallet: ProviderFixture;
  let provider: TestNode;
  const nodes: TestNode[] = [];
  const dirs: string[] = [];
  let key: string;

  before(async () => {
    const seed = await startTestNode({ chain, now });
    nodes.push(seed);
    wallet = await createProvider();
    provider = await startTestNode({ chain, now, bootstrap: [seed.addr], provider: wallet.account });
    nodes.push(provider);
    // The provider registered its node's peer id on-chain.
    registerOnChain(chain, { ...wallet, peerKey: provider.peerKey, peerId: provider.host.peerId.toString() }, [spec]);
    for (let i = 0; i < 2; i++) nodes.push(await startTestNode({ chain, now, bootstrap: [seed.addr] }));
    for (const node of nodes) dirs.push(node.dir);
    await waitForMesh(nodes);
    key = offerKey(wallet.address, spec.machineId);
  });

  after(async () => {
    await Promise.all(nodes.map((node) => node.stop()));
    await Promise.all(dirs.map((dir) => rm(dir, { recursive: true, force: true })));
  });

  it("delivers a provider's offer to every other node, and an update replaces it", async () => {
    const first = await provider.offers.publisher!.set(machineOffer(1_000n));
    assert.equal(first?.seq, 1);
    await waitFor("the offer on every node", () => nodes.every((node) => node.offers.book.get(key)?.seq === 1));
    for (const node of nodes) {
      const entry = node.offers.book.get(key)!;
      assert.equal(entry.pricePerUnitSecond, 1_000n);
      assert.equal(entry.model, "H100-80GB-SXM");
      assert.equal(entry.peerId, provider.host.peerId.toString());
    }

    const unchanged = await provider.offers.publisher!.set(machineOffer(1_000n));
    assert.equal(unchanged, undefined, "an unchanged offer is not republished");

    await provider.offers.publisher!.set(machineOffer(900n, 6));
    await waitFor("the update on every node", () => nodes.every((node) => node.offers.book.get(key)?.seq === 2));
    for (const node of nodes) {
      assert.equal(node.offers.book.size, 1, "the update replaced the offer, it did not add one");
      assert.equal(node.offers.book.get(key)!.pricePerUnitSecond, 900n);
      assert.equal(node.offers.book.query({ minFreeUnits: 7 }).offers.length, 0);
      assert.equal(node.offers.book.query({ model: "H100", minFreeUnits: 6 }).offers.length, 1);
    }
  });

  it("refuses a bad machine offer from the provider agent, naming the field", async () => {
    const tooFree = machineOffer(1_000n, 9);
    await assert.rejects(provider.offers.publisher!.set(tooFree), (error: unknown) => {
      assert.equal((error as Error).name, "InvalidInputError");
      assert.deepEqual((error as { fields: string[] }).fields, ["capacity.freeUnits"]);
      return true;
    });
    const alias = machineOffer(1_000n);
    alias.machine.model = "H100";
    await assert.rejects(provider.offers.publisher!.set(alias), (error: unknown) => (error as { fields: string[] }).fields[0] === "machine.model");
  });

  it("re-announces on the interval with a higher sequence number", async () => {
    await provider.offers.publisher!.reannounce();
    await waitFor("the re-announcement on every node", () => nodes.every((node) => node.offers.book.get(key)?.seq === 3));
  });

  it("gives a node that joins later the current book through offers-sync, without waiting for a re-announcement", async () => {
    const late = await startTestNode({ chain, now, bootstrap: [nodes[0]!.addr] });
    nodes.push(late);
    dirs.push(late.dir);
    await waitFor("the synced offer", () => late.offers.book.get(key)?.seq === 3);
    const synced = await late.metrics.offersAccepted.get();
    assert.ok(synced.values.some((v) => v.labels.source === "sync" && v.value >= 1));
  });

  it("reloads its book from level after a restart, before hearing from anyone", async () => {
    const index = nodes.length - 1;
    const node = nodes[index]!;
    await node.stop();
    const restarted = await startTestNode({ chain, now, dir: node.dir });
    nodes[index] = restarted;
    assert.equal(restarted.host.peerId.toString(), node.host.peerId.toString(), "same identity from the data dir");
    assert.equal(restarted.host.getPeers().length, 0);
    assert.equal(restarted.offers.book.get(key)?.seq, 3);
    assert.equal(restarted.offers.book.get(key)?.pricePerUnitSecond, 900n);
    await restarted.host.dial(nodes[0]!.host.getMultiaddrs()[0]!);
    await waitForMesh([restarted]);
  });

  it("a restarted provider continues above its old sequence numbers", async () => {
    const index = nodes.indexOf(provider);
    await provider.stop();
    provider = await startTestNode({ chain, now, dir: provider.dir, bootstrap: [nodes[0]!.addr], provider: wallet.account });
    nodes[index] = provider;
    await waitForMesh([nodes[0]!, provider]);
    const message = await provider.offers.publisher!.set(machineOffer(800n));
    assert.equal(message?.seq, 4);
    await waitFor("the provider's new offer on every node", () => nodes.every((node) => node.offers.book.get(key)?.seq === 4));
  });

  it("a provider whose stored sequence numbers were lost (a restored backup) still continues above the network's", async () => {
    await provider.store.repository<number>(Bucket.offerSeq).clear();
    const held = provider.offers.book.get(key)!.seq;
    const message = await provider.offers.publisher!.set(machineOffer(850n));
    assert.equal(message?.seq, held + 1);
    await waitFor("the offer on every node", () => nodes.every((node) => node.offers.book.get(key)?.seq === held + 1));
  });

  it("withdrawing a machine announces it with no free units, so no book matches it any more", async () => {
    const withdrawn = await provider.offers.publisher!.withdraw(spec.machineId);
    assert.equal(withdrawn?.capacity.freeUnits, 0);
    await waitFor("the withdrawal on every node", () => nodes.every((node) => node.offers.book.get(key)?.seq === withdrawn!.seq));
    for (const node of nodes) assert.equal(node.offers.book.query({ minFreeUnits: 1 }).offers.length, 0);
    assert.equal(await provider.offers.publisher!.withdraw(spec.machineId), undefined, "withdrawing twice publishes nothing");
  });

  it("evicts the offer everywhere when the provider deregisters on-chain, and refuses to publish it again", async () => {
    const live = nodes.filter((node) => node.offers.book.get(key));
    assert.ok(live.length >= 2);
    const removed: string[] = [];
    for (const node of nodes) node.offers.book.on("removed", (entry, reason) => removed.push(`${entry.key}:${reason}`));
    chain.deregisterProvider(wallet.address);
    // What the chain watcher does on the ProviderDeregistered event:
    await Promise.all(nodes.map((node) => node.offers.onProviderChanged(wallet.address)));
    for (const node of nodes) assert.equal(node.offers.book.get(key), undefined);
    assert.ok(removed.includes(`${key}:unregistered`));
    await assert.rejects(provider.offers.publisher!.set(machineOffer(700n)), { name: "OfferRejectedError", reason: "unregistered" });
    chain.registerProvider(wallet.address, provider.host.peerId.toString(), 10n ** 12n);
    await Promise.all(nodes.map((node) => node.offers.onProviderChanged(wallet.address)));
  });

  it("removes the offer from every book when it expires", async () => {
    await provider.offers.publisher!.set(machineOffer(600n));
    await waitFor("the offer on every node", () => nodes.every((node) => node.offers.book.get(key)));
    clockOffset = 3_601; // past the Offer's one-hour expiry, for every node's clock
    await waitFor("the offer to expire everywhere", () => nodes.every((node) => node.offers.book.get(key) === undefined));
    const evicted = await nodes[0]!.metrics.offersEvicted.get();
    assert.ok(evicted.values.some((v) => v.labels.reason === "expired" && v.value >= 1));
    clockOffset = 0;
  });
});

/**
 * Attacks on a real provider node (devnet chain, libp2p over TCP on 127.0.0.1) from issue #23:
 * replayed reserve requests raced on concurrent streams, one wallet (or one peer) holding every
 * unit without ever opening a lease.
 */
import assert from "node:assert/strict";
import type { SuanliHost } from "../../common/p2p/host.js";
import { counterValue, lightHost, sendReserve, signedReserve } from "../support/attacker.js";
import { startDevnet, type Devnet } from "../support/devnet.js";
import { startTestProvider, type TestProvider } from "../support/provider.js";
import { TestRenter } from "../support/renter.js";
import { waitFor } from "../support/wait.js";

describe("provider agent: hostile renters at the reserve protocol", function () {
  this.timeout(90_000);
  let devnet: Devnet;
  let provider: TestProvider;
  let wallets: TestRenter[];
  let relay: SuanliHost;
  let machineId: number;
  const base = { units: 1, duration: 60 };

  before(async () => {
    devnet = await startDevnet({ wallClockBlocks: true });
    provider = await startTestProvider(devnet, 1, {
      provider: {
        inventory: { source: "declared", declared: [{ model: "A100-80GB", count: 8, region: "eu-west" }] },
        reserve: { holdSeconds: 5, maxHoldsPerRenter: 2, maxHoldsPerPeer: 3, unopened: { limit: 2, peerLimit: 3, windowSeconds: 600 } },
      },
    });
    machineId = provider.agent.machines[0].machineId;
    wallets = [];
    for (const index of [2, 3, 4, 5]) wallets.push(await TestRenter.start(devnet, index));
    // One deposit (100 × 60 = 6000) and a half: enough for one hold, not two.
    wallets.push(await TestRenter.start(devnet, 6, 9_000n));
    relay = await lightHost();
  });
  after(async () => {
    await relay?.stop();
    for (const wallet of wallets ?? []) await wallet.close();
    await provider?.close();
    await devnet?.close();
  });

  const registry = () => provider.daemon.metrics.registry;

  it("one signed reserve request sent on concurrent streams is accepted exactly once; a hold per wallet stays within its cap and its balance", async () => {
    const [alice, bob, carol, , poor] = wallets;
    // The attack of #23: one signed request, four concurrent streams (the per-peer stream cap), twice.
    for (let round = 0; round < 2; round++) {
      const body = await signedReserve(alice, provider.peer, { machineId, ...base });
      const replies = await Promise.all([0, 1, 2, 3].map(() => sendReserve(relay, provider.peer, body)));
      assert.equal(replies.filter((reply) => reply.accepted).length, 1, replies.map((r) => (r.accepted ? "accepted" : `${r.reason}: ${r.message}`)).join("; "));
      for (const reply of replies.filter((r) => !r.accepted)) {
        assert.equal(reply.accepted ? "" : reply.reason, "invalid-request");
        assert.match(reply.accepted ? "" : reply.message ?? "", /nonce was already used/);
      }
    }
    assert.equal(provider.agent.reservations.holdsOfRenter(alice.address).count, 2);

    // Alice holds two units (her cap): more signed requests, concurrent or not, get no third.
    const more = await Promise.all([0, 1].map(async () => sendReserve(relay, provider.peer, await signedReserve(alice, provider.peer, { machineId, ...base }))));
    for (const reply of more) {
      assert.equal(reply.accepted, false);
      assert.equal(reply.accepted ? "" : reply.reason, "busy");
      assert.match(reply.accepted ? "" : reply.message ?? "", /already holds 2 reservations here \(at most 2\)/);
    }
    // The relay peer holds three (its cap) after Bob's; Carol, through the same relay, is refused.
    assert.equal((await sendReserve(relay, provider.peer, await signedReserve(bob, provider.peer, { machineId, ...base }))).accepted, true);
    const throughRelay = await sendReserve(relay, provider.peer, await signedReserve(carol, provider.peer, { machineId, ...base }));
    assert.equal(throughRelay.accepted ? "" : throughRelay.message?.match(/Peer \S+ already holds 3/)?.[0].slice(0, 4), "Peer");
    // ... and gets a unit from her own peer.
    assert.equal((await carol.reserve(provider.peer, { machineId, ...base })).accepted, true);

    // A wallet whose balance covers one deposit holds one unit, not two.
    assert.equal((await poor.reserve(provider.peer, { machineId, ...base })).accepted, true);
    const second = await poor.reserve(provider.peer, { machineId, ...base });
    assert.equal(second.accepted ? "" : second.reason, "renter-unfunded");
    assert.match(second.accepted ? "" : second.message ?? "", /6000 of it is promised to its 1 live holds/);
    // Units left for everyone else: 8 − (2 alice + 1 bob + 1 carol + 1 poor).
    assert.equal(provider.agent.reservations.table.available(machineId), 3);
  });

  it("holds that expire unopened are counted, logged and throttle their wallet and their peer", async () => {
    const [alice, bob, carol, dave] = wallets;
    const before = await counterValue(registry(), "suanli_provider_holds_unopened_total");
    // Every hold of the first test expires unopened (5 s hold, chain time).
    await waitFor("the holds to expire unopened", async () => (await counterValue(registry(), "suanli_provider_holds_unopened_total")) >= before + 5, { timeoutMs: 30_000 });
    assert.equal(provider.agent.reservations.table.available(machineId), 8);

    // Alice let two expire (her limit): refused wherever she asks from.
    const again = await alice.reserve(provider.peer, { machineId, ...base });
    assert.equal(again.accepted ? "" : again.reason, "busy");
    assert.match(again.accepted ? "" : again.message ?? "", /let 2 holds expire without opening a lease/);
    // The relay let three expire (Alice's two and Bob's): a fresh wallet through it is refused ...
    const relayed = await sendReserve(relay, provider.peer, await signedReserve(dave, provider.peer, { machineId, ...base }));
    assert.equal(relayed.accepted ? "" : relayed.reason, "busy");
    assert.match(relayed.accepted ? "" : relayed.message ?? "", /^Peer .* let 3 holds expire/);
    // ... while Bob (one unopened hold) from his own peer, and Carol, still get units.
    assert.equal((await bob.reserve(provider.peer, { machineId, ...base })).accepted, true);
    const carolsLease = await carol.rent(provider.peer, { machineId, ...base });
    assert.ok(carolsLease > 0n);
  });
});

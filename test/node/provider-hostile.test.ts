/**
 * Attacks on a real provider node (devnet chain, libp2p over TCP on 127.0.0.1) from issue #23:
 * replayed reserve requests raced on concurrent streams, one wallet (or one peer) holding every
 * unit without ever opening a lease, strangers making the node read the chain before it checks
 * a signature, and truncated requests.
 */
import assert from "node:assert/strict";
import { multiaddr } from "@multiformats/multiaddr";
import type { Abi, Address } from "viem";
import type { z } from "zod";
import { leaseMarketAbi, testTokenAbi } from "../../common/abi.js";
import type { SuanliHost } from "../../common/p2p/host.js";
import { CANCEL_PROTOCOL, LOGS_PROTOCOL, STATUS_PROTOCOL, TASK_PROTOCOL } from "../../common/p2p/protocols.js";
import { request } from "../../common/p2p/reqresp.js";
import { cancelAnswerSchema, logsAnswerSchema, signLeaseRequest, taskAnswerSchema, taskStatusSchema, type RenterAction } from "../../common/protocols/lease.js";
import { counterValue, lightHost, rawStream, sendReserve, signedReserve } from "../support/attacker.js";
import { startBundleServer, type BundleServer, type ServedBundle } from "../support/bundles.js";
import { startRpcCounter, type RpcCounter } from "../support/rpc-counter.js";
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
    machineId = provider.agent.machines[0]!.machineId;
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
      const body = await signedReserve(alice!, provider.peer, { machineId, ...base });
      const replies = await Promise.all([0, 1, 2, 3].map(() => sendReserve(relay, provider.peer, body)));
      assert.equal(replies.filter((reply) => reply.accepted).length, 1, replies.map((r) => (r.accepted ? "accepted" : `${r.reason}: ${r.message}`)).join("; "));
      for (const reply of replies.filter((r) => !r.accepted)) {
        assert.equal(reply.accepted ? "" : reply.reason, "invalid-request");
        assert.match(reply.accepted ? "" : (reply.message ?? ""), /nonce was already used/);
      }
    }
    assert.equal(provider.agent.reservations.holdsOfRenter(alice!.address).count, 2);

    // Alice holds two units (her cap): more signed requests, concurrent or not, get no third.
    const more = await Promise.all([0, 1].map(async () => sendReserve(relay, provider.peer, await signedReserve(alice!, provider.peer, { machineId, ...base }))));
    for (const reply of more) {
      assert.equal(reply.accepted, false);
      assert.equal(reply.accepted ? "" : reply.reason, "busy");
      assert.match(reply.accepted ? "" : (reply.message ?? ""), /already holds 2 reservations here \(at most 2\)/);
    }
    // The relay peer holds three (its cap) after Bob's; Carol, through the same relay, is refused.
    assert.equal((await sendReserve(relay, provider.peer, await signedReserve(bob!, provider.peer, { machineId, ...base }))).accepted, true);
    const throughRelay = await sendReserve(relay, provider.peer, await signedReserve(carol!, provider.peer, { machineId, ...base }));
    assert.equal(throughRelay.accepted ? "" : throughRelay.message?.match(/Peer \S+ already holds 3/)?.[0].slice(0, 4), "Peer");
    // ... and gets a unit from her own peer.
    assert.equal((await carol!.reserve(provider.peer, { machineId, ...base })).accepted, true);

    // A wallet whose balance covers one deposit holds one unit, not two.
    assert.equal((await poor!.reserve(provider.peer, { machineId, ...base })).accepted, true);
    const second = await poor!.reserve(provider.peer, { machineId, ...base });
    assert.equal(second.accepted ? "" : second.reason, "renter-unfunded");
    assert.match(second.accepted ? "" : (second.message ?? ""), /6000 of it is promised to its 1 live holds/);
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
    const again = await alice!.reserve(provider.peer, { machineId, ...base });
    assert.equal(again.accepted ? "" : again.reason, "busy");
    assert.match(again.accepted ? "" : (again.message ?? ""), /let 2 holds expire without opening a lease/);
    // The relay let three expire (Alice's two and Bob's): a fresh wallet through it is refused ...
    const relayed = await sendReserve(relay, provider.peer, await signedReserve(dave!, provider.peer, { machineId, ...base }));
    assert.equal(relayed.accepted ? "" : relayed.reason, "busy");
    assert.match(relayed.accepted ? "" : (relayed.message ?? ""), /^Peer .* let 3 holds expire/);
    // ... while Bob (one unopened hold) from his own peer, and Carol, still get units.
    assert.equal((await bob!.reserve(provider.peer, { machineId, ...base })).accepted, true);
    const carolsLease = await carol!.rent(provider.peer, { machineId, ...base });
    assert.ok(carolsLease > 0n);
  });
});

describe("provider agent: strangers at the lease protocols", function () {
  this.timeout(90_000);
  let devnet: Devnet;
  let rpc: RpcCounter;
  let provider: TestProvider;
  let renter: TestRenter;
  let stranger: TestRenter;
  let bundles: BundleServer;
  let leaseId: bigint;
  let spec: { bundle: ServedBundle; command: string };

  before(async () => {
    devnet = await startDevnet({ wallClockBlocks: true });
    rpc = await startRpcCounter(devnet.rpcUrl);
    bundles = await startBundleServer();
    // The provider reads the chain through the counting proxy: every chain read it makes shows.
    provider = await startTestProvider(devnet, 1, { chain: { rpcUrl: rpc.url } });
    renter = await TestRenter.start(devnet, 2);
    stranger = await TestRenter.start(devnet, 3);
    const machineId = provider.agent.machines[0]!.machineId;
    spec = { bundle: await bundles.bundle({ "run.sh": "echo hello\n" }), command: "sh run.sh" };
    leaseId = await renter.rent(provider.peer, { machineId, units: 1, duration: 60 });
    await waitFor("the provider to see the lease opened", () => provider.agent.lease(leaseId));
  });
  after(async () => {
    await stranger?.close();
    await renter?.close();
    await provider?.close();
    await bundles?.close();
    await rpc?.close();
    await devnet?.close();
  });

  /** Reads of leases other than the renter's (the node reconciles that one in the background). */
  const leaseReads = () => rpc.ethCallData(leaseMarketAbi as Abi, "getLease").filter((data) => BigInt(`0x${data.slice(10)}`) !== leaseId).length;
  const send = (protocol: string, body: unknown, schema: z.ZodType) => request(renter.host, multiaddr(provider.peer.addr), protocol, body as never, { responseSchema: schema });
  const authFor = (who: TestRenter, id: bigint, action: RenterAction, body: unknown, overrides: { provider?: Address; nowSeconds?: number } = {}) =>
    signLeaseRequest(who.signer(), renter.domain, { leaseId: id, provider: overrides.provider ?? provider.peer.address, action, body, nowSeconds: overrides.nowSeconds });

  it("an unauthenticated request for an unknown lease costs no chain read, and a stranger cannot tell unknown leases from others' leases", async () => {
    const before = leaseReads();
    const unknown = [leaseId + 1_000n, leaseId + 1n, 10n ** 12n];
    for (const id of unknown) {
      // A signature that is not a signature of this request, one for another provider, a stale one, a tampered body.
      const forged = { ...(await authFor(stranger, id, "status", {})), signature: `0x${"11".repeat(65)}` };
      await assert.rejects(send(STATUS_PROTOCOL, { auth: forged }, taskStatusSchema), { name: "RenterAuthError" });
      await assert.rejects(send(STATUS_PROTOCOL, { auth: await authFor(stranger, id, "status", {}, { provider: stranger.address }) }, taskStatusSchema), {
        name: "RenterAuthError",
      });
      await assert.rejects(send(STATUS_PROTOCOL, { auth: await authFor(stranger, id, "status", {}, { nowSeconds: Math.floor(Date.now() / 1000) - 3_600 }) }, taskStatusSchema), {
        name: "RenterAuthError",
      });
      const taskAuth = await authFor(stranger, id, "task", { spec });
      await assert.rejects(send(TASK_PROTOCOL, { auth: taskAuth, spec: { ...spec, command: "sh -c 'echo other'" } }, taskAnswerSchema), { name: "RenterAuthError" });
      // Well signed by a stranger, for a lease that does not exist: still no read of a lease.
      for (const action of ["status", "cancel"] as const) {
        await assert.rejects(
          send(
            action === "status" ? STATUS_PROTOCOL : CANCEL_PROTOCOL,
            { auth: await authFor(stranger, id, action, {}) },
            action === "status" ? taskStatusSchema : cancelAnswerSchema,
          ),
          { name: "RenterAuthError" },
        );
      }
      const logsBody = { fromSeq: 0, waitMs: 0, limit: 10 };
      await assert.rejects(send(LOGS_PROTOCOL, { auth: await authFor(stranger, id, "logs", logsBody), ...logsBody }, logsAnswerSchema), { name: "RenterAuthError" });
    }
    assert.equal(leaseReads(), before, "no getLease read for requests about unknown leases");

    // The same answer for "no such lease" and "not your lease".
    const answer = async (id: bigint) => {
      const error = await send(STATUS_PROTOCOL, { auth: await authFor(stranger, id, "status", {}) }, taskStatusSchema).then(
        () => assert.fail("a stranger's status request was answered"),
        (e: Error) => e,
      );
      return { name: error.name, message: error.message.replace(String(id), "<id>") };
    };
    assert.deepEqual(await answer(leaseId), await answer(leaseId + 1_000n));
  });

  it("one authorization sent on concurrent streams is served once; a truncated request is answered InvalidMessageError", async () => {
    const auth = await authFor(renter, leaseId, "task", { spec });
    const results = await Promise.allSettled([0, 1, 2, 3].map(() => send(TASK_PROTOCOL, { auth, spec }, taskAnswerSchema)));
    const served = results.filter((r) => r.status === "fulfilled");
    assert.equal(served.length, 1, results.map((r) => (r.status === "fulfilled" ? "served" : (r.reason as Error).name)).join(", "));
    for (const r of results) if (r.status === "rejected") assert.equal((r.reason as Error).name, "RenterAuthError");
    const statusAuth = await authFor(renter, leaseId, "status", {});
    const statuses = await Promise.allSettled([0, 1, 2, 3].map(() => send(STATUS_PROTOCOL, { auth: statusAuth }, taskStatusSchema)));
    assert.equal(statuses.filter((r) => r.status === "fulfilled").length, 1);

    // A length prefix that promises 200 bytes, 20 of them, then the writing side closes.
    const errorsBefore = await counterValue(provider.daemon.metrics.registry, "suanli_p2p_request_errors_total", { protocol: STATUS_PROTOCOL, name: "InvalidMessageError" });
    const { stream, lp } = await rawStream(renter.host, provider.peer, STATUS_PROTOCOL);
    await stream.send(Uint8Array.from([200, 1, ...new TextEncoder().encode('{"auth":{"request":')]));
    await stream.close();
    const envelope = JSON.parse(new TextDecoder().decode((await lp.read({ signal: AbortSignal.timeout(10_000) })).subarray())) as { ok: boolean; error?: { name: string } };
    assert.equal(envelope.ok, false);
    assert.equal(envelope.error?.name, "InvalidMessageError");
    assert.equal(
      await counterValue(provider.daemon.metrics.registry, "suanli_p2p_request_errors_total", { protocol: STATUS_PROTOCOL, name: "InvalidMessageError" }),
      errorsBefore + 1,
    );
    await renter.waitStatus(provider.peer, leaseId, (s) => s.state === "succeeded", "the renter's task to finish");
  });

  it("a fresh wallet's reserve requests share chain reads", async () => {
    const fresh = await TestRenter.start(devnet, 7, 0n);
    try {
      const balanceReads = () => rpc.ethCalls(testTokenAbi as Abi, "balanceOf");
      const before = balanceReads();
      const machineId = provider.agent.machines[0]!.machineId;
      const replies = await Promise.all([0, 1, 2, 3].map(() => fresh.reserve(provider.peer, { machineId, units: 1, duration: 60 })));
      for (const reply of replies) assert.equal(reply.accepted ? "" : reply.reason, "renter-unfunded");
      assert.equal(balanceReads() - before, 1, "four concurrent requests of one wallet, one balance read");
    } finally {
      await fresh.close();
    }
  });
});

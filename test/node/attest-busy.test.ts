/**
 * Issue 35, item 1: anyone could get an honest leased provider faulted. A forced request kept
 * attestor C busy challenging a leased machine; the other attestors' challenges were then refused
 * `busy`, the third recorded as the failure `busy_too_often`, and they co-signed a capacity fault.
 * Now a `busy` refusal is never the provider's failure, requests are rate-limited per requester
 * (its Noise-authenticated peer id), and a request never leads to a fault: a request for a leased
 * machine runs no challenge at all (issue 35 item 4: it is answered from the cache or refused
 * `leased`), so the one thing that can hold a leased machine's GPU is another attestor's light check.
 */
import assert from "node:assert/strict";
import { multiaddr } from "@multiformats/multiaddr";
import { requestChallenge } from "../../common/attest/request.js";
import { readLease } from "../../common/chain/market.js";
import { devnetAccount } from "../../common/devnet.js";
import { createHost } from "../../common/p2p/host.js";
import { CpuRunner } from "../../node/attest/runner/index.js";
import { addrOf, startAttestorDaemon, type TestDaemon } from "../support/attest.js";
import { HeldRunner, leasedProvider, NO_OWN_CHECKS, TEST_LIVENESS as LIVENESS } from "../support/attest-lease.js";
import { startDevnet, type Devnet } from "../support/devnet.js";
import { waitFor } from "../support/wait.js";

const REQUESTS_PER_HOUR = 4;

describe("requests from anyone cannot get a provider faulted: busy is never a failure, requests are rate-limited and never fault (issue 35, item 1)", function () {
  this.timeout(180_000);
  let devnet: Devnet;
  let cpu: CpuRunner;
  const nodes: TestDaemon[] = [];
  before(async () => {
    devnet = await startDevnet({ params: { faultQuorum: 2 }, attestors: [devnetAccount(6).address, devnetAccount(7).address], wallClockBlocks: true });
    cpu = new CpuRunner({ workers: 1 });
  });
  after(async () => {
    for (const node of nodes.reverse()) await node.close().catch(() => undefined);
    await cpu?.close();
    await devnet?.close();
  });

  it("C's light check holds the leased machine's GPU: A's light checks are refused busy every time and record no failure; a forced request for the leased machine runs nothing and is refused leased, even while it answers wrong rows; a requester past its hourly allowance is refused; the lease stays active", async () => {
    const runner = new HeldRunner(cpu);
    const { provider, machineIds, leaseId } = await leasedProvider(devnet, 1, runner);
    nodes.push(provider.daemon);
    const [machineId] = machineIds;

    const role = { scheduleIntervalMs: 3_600_000, maxConcurrentChallenges: 4, requestsPerRequesterPerHour: REQUESTS_PER_HOUR };
    const c = await startAttestorDaemon(devnet, 7, { p2p: { bootstrap: [addrOf(provider.daemon)] }, attest: { liveness: LIVENESS, leaseChecks: NO_OWN_CHECKS, attestor: role } });
    nodes.push(c.daemon);
    const a = await startAttestorDaemon(devnet, 6, {
      p2p: { bootstrap: [addrOf(provider.daemon), addrOf(c.daemon)] },
      attest: { liveness: LIVENESS, leaseChecks: NO_OWN_CHECKS, attestor: role },
    });
    nodes.push(a.daemon);
    for (const { daemon } of [a, c]) await waitFor("the offer in the book", () => daemon.offers.book.byMachine(machineId!).length > 0, { timeoutMs: 30_000 });

    // C's light in-lease check holds the provider's GPU.
    runner.held = true;
    const held = c.attestor.challenger.challenge(machineId!, "lease");
    await waitFor("C's light check holding the GPU", () => runner.holding >= 1, { timeoutMs: 30_000 });
    // A's in-lease checks meet `busy` again and again: each an error, never a failure, and no fault.
    for (let attempt = 0; attempt < 5; attempt++) {
      const record = await a.attestor.challenger.challenge(machineId!, "lease");
      assert.deepEqual([record.outcome, record.reason, record.light], ["error", "busy", true], record.detail ?? "");
    }
    assert.equal((await a.attestor.results.history(machineId!, 20)).filter((record) => record.outcome === "fail").length, 0);
    assert.equal((await a.attestor.failures.ofMachine(machineId!, Date.now())).failures, 0);
    runner.release();
    const light = await held;
    assert.deepEqual([light.outcome, light.light, light.attestation], ["pass", true, null], light.detail ?? "");

    const attacker = await createHost({ listen: [], dht: { enabled: false }, gossip: { enabled: false }, connections: { min: 0 } });
    try {
      // A forced request for the leased machine runs no challenge (a full one needs the renter's GPU): A holds no
      // attestation of it, so it refuses `leased` until the lease ends, and records nothing.
      const before = (await a.attestor.results.history(machineId!, 20)).length;
      const forced = await requestChallenge(
        attacker,
        multiaddr(addrOf(a.daemon)),
        { chainId: devnet.deployment.chainId, machineId: machineId!, force: true },
        { timeoutMs: 60_000 },
      );
      assert.equal(forced.outcome === "error" && forced.reason, "leased", JSON.stringify(forced));
      const lease = await readLease(devnet.admin.publicClient, devnet.deployment.contracts.market!, leaseId);
      assert.equal(forced.outcome === "error" && forced.retryAfter, Number(lease.end));
      assert.equal((await a.attestor.results.history(machineId!, 20)).length, before, "a refused request records nothing");
      assert.equal(runner.holding, 1, "no challenge reached the provider");

      // Rate limit per requester: the attacker's requests past its hourly allowance are refused.
      const answers = [forced];
      for (let n = 1; n < REQUESTS_PER_HOUR + 1; n++)
        answers.push(await requestChallenge(attacker, multiaddr(addrOf(a.daemon)), { chainId: devnet.deployment.chainId, machineId: machineId! }, { timeoutMs: 60_000 }));
      for (const answer of answers.slice(0, -1)) assert.equal(answer.outcome === "error" && answer.reason, "leased");
      const refused = answers.at(-1)!;
      assert.equal(refused.outcome === "error" && refused.reason, "backoff");
      assert.match(refused.outcome === "error" ? refused.detail : "", /challenge requests this hour/);
      assert.ok(refused.outcome === "error" && refused.retryAfter! > Date.now() / 1000);

      // The leased machine now answers wrong rows: another requester's forced request still runs nothing and
      // records no failure (in the old code it ran, failed, and could only be kept from faulting by the trigger).
      runner.cheating = true;
      const other = await createHost({ listen: [], dht: { enabled: false }, gossip: { enabled: false }, connections: { min: 0 } });
      try {
        for (const attestor of [a, c]) {
          const answer = await requestChallenge(other, multiaddr(addrOf(attestor.daemon)), { chainId: devnet.deployment.chainId, machineId: machineId! }, { timeoutMs: 60_000 });
          assert.equal(answer.outcome === "error" && answer.reason, "leased", JSON.stringify(answer));
          assert.equal((await attestor.attestor.failures.ofMachine(machineId!, Date.now())).failures, 0);
        }
      } finally {
        await other.stop();
      }
      assert.equal(runner.holding, 1, "no challenge reached the provider");
    } finally {
      await attacker.stop();
    }
    // Give a proposal time to go out and land if one were made.
    await new Promise((resolve) => setTimeout(resolve, 5_000));
    for (const { attestor } of [a, c]) assert.deepEqual(attestor.faults?.list() ?? [], [], "no fault proposed");
    const lease = await readLease(devnet.admin.publicClient, devnet.deployment.contracts.market!, leaseId);
    assert.equal(lease.status, "Active");
  });
});

/**
 * Issue 35, item 2: a cheating provider switched off in-lease checks. The backoff after a failed
 * challenge was per provider and in-lease checks were skipped as `backoff`: a provider failed a
 * spare machine's challenge on purpose (and re-forced it before the backoff lapsed), and its
 * leased machine was never checked. Now the backoff is per machine and never holds an in-lease
 * check: the leased machine that starts answering wrong rows is caught by a light in-lease check
 * and faulted. A leased machine is never challenged on request (issue 35 item 4): the provider's
 * forced request for it is refused `leased` and records nothing, so it cannot arm a backoff either.
 */
import assert from "node:assert/strict";
import { multiaddr } from "@multiformats/multiaddr";
import { requestChallenge } from "../../common/attest/request.js";
import { readLease } from "../../common/chain/market.js";
import { devnetAccount } from "../../common/devnet.js";
import { FaultKind } from "../../common/eip712.js";
import { CpuRunner } from "../../node/attest/runner/index.js";
import { addrOf, machineOffer, type TestDaemon } from "../support/attest.js";
import { leasedProvider, NO_OWN_CHECKS, startAttestorPair, SwitchRunner, TEST_LIVENESS as LIVENESS } from "../support/attest-lease.js";
import { startDevnet, type Devnet } from "../support/devnet.js";
import { waitFor } from "../support/wait.js";

describe("the failure backoff is per machine and never holds an in-lease check (issue 35, item 2)", function () {
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

  it("the provider fails its spare machine's challenge on purpose and re-forces it; its leased machine is still checked, and its wrong rows are faulted", async () => {
    const runner = new SwitchRunner(cpu);
    const { provider, machines, machineIds, leaseId } = await leasedProvider(devnet, 1, runner, { count: 3 });
    nodes.push(provider.daemon);
    // Only the leased machine's offer at first; `passed` is a third machine that passes before the spare fails.
    const [leased, spare, passed] = machineIds;

    const role = { scheduleIntervalMs: 3_600_000, maxConcurrentChallenges: 4 };
    // No scheduled challenge of the leased machine: it gets only light in-lease checks (issue 35 item 4).
    const { a, b } = await startAttestorPair(devnet, provider.daemon, { liveness: LIVENESS, leaseChecks: NO_OWN_CHECKS, attestor: role }, nodes);
    for (const { daemon } of [a, b]) await waitFor("the leased machine's offer in the book", () => daemon.offers.book.byMachine(leased!).length > 0, { timeoutMs: 30_000 });
    // The third machine's offer appears while the runner is honest: both attestors scan it and pass it (one after a busy retry).
    await provider.daemon.offers.publisher!.set(machineOffer(machines[2]!));
    for (const { attestor } of [a, b]) {
      await waitFor("the third machine's pass", async () => (await attestor.results.history(passed!, 20)).some((record) => record.outcome === "pass"), { timeoutMs: 30_000 });
    }

    // The provider fails its spare machine's challenge on purpose, at both attestors, and re-forces it. Only the spare
    // cheats: its rounds challenge the third machine too (issue 35 item 7), which stays honest.
    runner.only.add(spare!);
    runner.cheating = true;
    await provider.daemon.offers.publisher!.set(machineOffer(machines[1]!));
    const host = provider.daemon.p2p.host;
    for (const { daemon, attestor } of [a, b]) {
      // The new offer's scan may have failed the spare already; then the forced request meets its backoff (issue 35 item 3).
      const failed = await requestChallenge(host, multiaddr(addrOf(daemon)), { chainId: devnet.deployment.chainId, machineId: spare!, force: true }, { timeoutMs: 60_000 });
      assert.ok(failed.outcome === "fail" || (failed.outcome === "error" && failed.reason === "backoff"), failed.outcome);
      assert.ok((await attestor.failures.ofMachine(spare!, Date.now())).failures >= 1);
      // Issue 35 item 9: the attestor announced the failure; the provider's own offer book holds its signed notice.
      const owner = provider.daemon.offers.book.byMachine(spare!)[0]!.provider;
      await waitFor("the attestor's failure notice in the provider's book", () =>
        provider.daemon.offers.notices.machineNotices(owner, spare!).some((notice) => notice.attestor.toLowerCase() === attestor.address.toLowerCase()),
      );
      const again = await requestChallenge(host, multiaddr(addrOf(daemon)), { chainId: devnet.deployment.chainId, machineId: spare!, force: true }, { timeoutMs: 60_000 });
      assert.equal(again.outcome === "error" && again.reason, "backoff", "a forced challenge runs at most once a minute per machine");
    }
    // The provider's forced request for its leased machine runs no challenge: refused `leased` (A holds no
    // attestation of it), no failure recorded, and the spare's backoff neither re-armed nor lengthened.
    const spareHeld = await a.attestor.failures.ofMachine(spare!, Date.now());
    const leasedAsked = await requestChallenge(host, multiaddr(addrOf(a.daemon)), { chainId: devnet.deployment.chainId, machineId: leased!, force: true }, { timeoutMs: 60_000 });
    assert.equal(leasedAsked.outcome === "error" && leasedAsked.reason, "leased", JSON.stringify(leasedAsked));
    assert.equal((await a.attestor.failures.ofMachine(leased!, Date.now())).failures, 0);
    assert.equal((await a.attestor.results.history(leased!, 20)).length, 0, "a refused request records nothing");
    assert.equal((await a.attestor.failures.ofMachine(spare!, Date.now())).failures, spareHeld.failures);
    // The spare is in backoff; the leased machine is not held by it: checked in the lease.
    assert.equal(await a.attestor.challenger.isDue(spare!), false);
    const spareAgain = await a.attestor.challenger.challenge(spare!, "schedule");
    assert.deepEqual([spareAgain.outcome, spareAgain.reason], ["error", "backoff"]);
    // The backoff holds only the machine that failed: the provider's machine that passed earlier is challenged (and,
    // honest again, passes). A machine this attestor never passed would wait on the provider's history instead
    // (test/node/attest-challenge.test.ts, fresh machine id).
    runner.cheating = false;
    const passedAgain = await a.attestor.challenger.challenge(passed!, "schedule");
    assert.deepEqual([passedAgain.outcome, passedAgain.reason], ["pass", null], passedAgain.detail ?? "");
    assert.equal((await a.attestor.failures.ofProvider(devnetAccount(1).address, Date.now())).failures >= 1, true, "the provider's history holds the spare's failure");
    runner.cheating = true;
    runner.only.add(leased!);

    // The leased machine answers wrong rows too: A's light in-lease check runs and catches it (in the old code: `error: backoff`).
    const check = await a.attestor.challenger.challenge(leased!, "lease");
    assert.deepEqual([check.outcome, check.reason, check.light], ["fail", "wrong_rows", true], check.detail ?? "");
    // An in-lease check of a machine in its own backoff runs too.
    const second = await a.attestor.challenger.challenge(leased!, "lease");
    assert.deepEqual([second.outcome, second.reason], ["fail", "wrong_rows"], second.detail ?? "");
    // The proposal carries the signed wrong answer: B co-signs it and the capacity fault lands.
    await waitFor("the capacity fault on-chain", async () => (await readLease(devnet.admin.publicClient, devnet.deployment.contracts.market!, leaseId)).status !== "Active", {
      timeoutMs: 60_000,
      intervalMs: 500,
    });
    const lease = await readLease(devnet.admin.publicClient, devnet.deployment.contracts.market!, leaseId);
    assert.equal(lease.status, "Ended");
    // A's own record follows once it has seen the landing (B may have sent it; under load that comes after the chain's state).
    await waitFor("A's record of the fault to say landed", () => a.attestor.faults!.get(leaseId, FaultKind.capacity)?.status === "landed", { timeoutMs: 30_000, intervalMs: 200 });
  });
});

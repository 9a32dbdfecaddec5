/**
 * Issue 24, item 1: a fault without evidence. One lying attestor (quorum two) proposes faults
 * against a live provider in its own process; the honest co-signer must refuse while the
 * provider answers it, during a blip shorter than the QoS window, and after its own restart;
 * it signs only an outage it watched itself over the whole window, from its own first failed probe.
 */
import assert from "node:assert/strict";
import { rm } from "node:fs/promises";
import { multiaddr } from "@multiformats/multiaddr";
import { parseEventLogs, type Hex } from "viem";
import { leaseMarketAbi, testTokenAbi } from "../../common/abi.js";
import { recoverFaultSigner } from "../../common/attest/liveness.js";
import { signFault } from "../../common/chain/sign.js";
import { faultAnswerSchema, type FaultAnswer } from "../../common/attest/wire.js";
import { readLease } from "../../common/chain/market.js";
import { devnetAccount } from "../../common/devnet.js";
import { FaultKind, type Fault } from "../../common/eip712.js";
import { FAULT_PROTOCOL } from "../../common/p2p/protocols.js";
import { request } from "../../common/p2p/reqresp.js";
import { hasOutageEvidence } from "../../node/attest/faults/liveness.js";
import { addrOf, DURATION, openActiveLease, PRICE, spawnProvider, startAttestorDaemon, TEST_MACHINE, type SpawnedProvider, type TestDaemon } from "../support/attest.js";
import { startTestDaemon } from "../support/daemons.js";
import { fund, registerProvider, send, startDevnet, type Devnet } from "../support/devnet.js";
import { waitFor } from "../support/wait.js";

const LIAR = 6;
const HONEST = 7;
/** The window is long enough that the blip below (a few probes) stays well inside it on a loaded machine. */
const LIVENESS = { probeIntervalMs: 300, probeTimeoutMs: 1_000, qosWindowSeconds: 8, minFailedProbes: 2, backupSubmitDelayMs: 3_000 };

describe("attestor role: a lying proposer cannot fault a live provider (issue 24, item 1)", function () {
  this.timeout(180_000);
  let devnet: Devnet;

  before(async () => {
    devnet = await startDevnet({
      params: { faultQuorum: 2, attestorFaultWindow: LIVENESS.qosWindowSeconds },
      attestors: [LIAR, HONEST].map((i) => devnetAccount(i).address),
      wallClockBlocks: true,
    });
  });
  after(async () => devnet?.close());

  it("the honest co-signer refuses while the provider answers, during a short blip, in the future, and after a restart; it signs only from its own first failed probe once it watched the whole window", async () => {
    const nodes: TestDaemon[] = [];
    let provider: SpawnedProvider | undefined;
    let honestDataDir: string | undefined;
    try {
      const market = devnet.deployment.contracts.market!;
      const renter = await devnet.wallet(5);
      const providerWallet = await devnet.wallet(1);
      provider = await spawnProvider(devnet, 1);
      const [machineId] = await registerProvider(devnet, providerWallet, { peerId: provider.peerId, stake: 10_000_000n, machines: [TEST_MACHINE] });
      await fund(devnet, renter, PRICE * BigInt(DURATION));
      await send(renter, { address: devnet.deployment.contracts.token, abi: testTokenAbi, functionName: "approve", args: [market, PRICE * BigInt(DURATION)] });
      const leaseId = await openActiveLease(devnet, renter, 1, machineId!);
      const { activatedAt } = await readLease(devnet.admin.publicClient, market, leaseId);

      const startHonest = async (dataDir?: string) => {
        const started = await startAttestorDaemon(devnet, HONEST, { ...(dataDir ? { dataDir } : {}), p2p: { bootstrap: provider!.addrs }, attest: { liveness: LIVENESS } });
        nodes.push(started.daemon);
        return started;
      };
      let honest = await startHonest();
      honestDataDir = honest.daemon.config.dataDir;
      const state = () => honest.attestor.prober!.state(leaseId);
      await waitFor("the honest attestor hearing from the provider", () => state()?.lastSuccessAt !== undefined, { timeoutMs: 30_000, intervalMs: 50 });

      // The liar: an attestor key on its own node, proposing straight to the honest attestor.
      const liarNode = await startTestDaemon(devnet);
      nodes.push(liarNode);
      const liar = devnetAccount(LIAR);
      const propose = async (observedAt: number): Promise<FaultAnswer> => {
        const fault: Fault = { leaseId, kind: FaultKind.unresponsive, observedAt };
        const signature: Hex = await signFault(liar, liarNode.domain, fault);
        return request(
          liarNode.p2p.host,
          multiaddr(addrOf(honest.daemon)),
          FAULT_PROTOCOL,
          { v: 1, chainId: devnet.deployment.chainId, fault, signatures: [{ signer: liar.address, signature }] },
          {
            responseSchema: faultAnswerSchema,
            timeoutMs: 20_000,
          },
        );
      };
      const declined = (answer: FaultAnswer, reasons: string[]) => assert.ok(answer.outcome === "declined" && reasons.includes(answer.reason), JSON.stringify(answer));

      // The provider is up: a fault as early as activation, or one "observed" in the future, is refused.
      declined(await propose(activatedAt), ["seen_alive", "provider_alive"]);
      declined(await propose(Math.floor(Date.now() / 1000) + 20), ["out_of_range"]);

      // A blip: the provider's process stops for less than the QoS window. The honest attestor's
      // own probes fail; the liar proposes at the very start of that outage and at "now".
      provider.child.kill("SIGSTOP");
      const blip = await waitFor("the honest attestor's first failed probe", () => state()?.firstFailureAt, { timeoutMs: 15_000, intervalMs: 20 });
      const atStart = await propose(blip);
      declined(atStart, ["no_evidence"]);
      assert.equal(atStart.outcome === "declined" && atStart.earliestObservedAt, blip);
      declined(await propose(Math.floor(Date.now() / 1000)), ["no_evidence"]);
      declined(await propose(blip - 1), ["no_evidence", "seen_alive", "out_of_range"]);
      assert.ok(!hasOutageEvidence(state(), Math.floor(Date.now() / 1000), LIVENESS), "the blip must still be shorter than the window here");
      provider.child.kill("SIGCONT");
      await waitFor("the honest attestor hearing from the provider again", () => state()?.failures === 0 && (state()?.lastSuccessAt ?? 0) > blip, {
        timeoutMs: 20_000,
        intervalMs: 50,
      });
      declined(await propose(blip), ["seen_alive", "provider_alive"]);
      assert.equal(honest.attestor.faults!.get(leaseId), undefined, "the honest attestor signed nothing");

      // A restart: the co-signer keeps its probe state, so it still knows it heard from the provider.
      // A probe in flight when the provider stops may still be answered: what the co-signer last
      // heard is read once it stopped (its probes done, its state written).
      const stoppedAt = Math.floor(Date.now() / 1000);
      provider.child.kill("SIGSTOP");
      await honest.daemon.close({ keepData: true });
      nodes.splice(nodes.indexOf(honest.daemon), 1);
      const lastHeard = state()!.lastSuccessAt!;
      honest = await startHonest(honestDataDir);
      assert.equal(state()?.lastSuccessAt, lastHeard, "the probe state survived the restart");
      const afterRestart = await propose(activatedAt);
      declined(afterRestart, ["seen_alive"]);
      assert.ok(afterRestart.outcome === "declined" && afterRestart.lastSeenAt !== null && afterRestart.lastSeenAt >= lastHeard);
      assert.equal((await readLease(devnet.admin.publicClient, market, leaseId)).status, "Active");

      // A real outage (the process stays stopped): once the honest attestor has watched it for the
      // whole window it signs, but only from its own first failed probe after the restart.
      await waitFor("the honest attestor's own evidence over the window", () => hasOutageEvidence(state(), Math.floor(Date.now() / 1000), LIVENESS), {
        timeoutMs: 40_000,
        intervalMs: 100,
      });
      const own = state()!.firstFailureAt!;
      // Its outage starts no earlier than the provider stopped (a restart shorter than the probe gap
      // continues the watch; a longer one starts it anew), and never before it last heard from it.
      assert.ok(own >= stoppedAt - 1 && own > lastHeard - 1, `the outage it vouches for starts before the provider stopped (${own} < ${stoppedAt})`);
      declined(await propose(own - 1), ["no_evidence", "seen_alive"]);
      // A later observedAt it holds evidence for, but whose fault window has not passed yet: it
      // declines until then (a receipt it gave inside the window would make its signature slashable).
      const early = await propose(own + 5);
      declined(early, ["too_early"]);
      assert.equal(early.outcome === "declined" && early.signsAt, own + 5 + LIVENESS.qosWindowSeconds + 1);
      const signed = await propose(own);
      assert.equal(signed.outcome, "signed", JSON.stringify(signed));
      assert.equal(
        signed.outcome === "signed" && (await recoverFaultSigner(liarNode.domain, { leaseId, kind: FaultKind.unresponsive, observedAt: own }, signed.signature)),
        devnetAccount(HONEST).address,
      );

      // Nothing faulted the lease while the provider was alive.
      const logs = await devnet.admin.publicClient.getLogs({ address: market, fromBlock: devnet.deployment.deploymentBlock });
      const faults = parseEventLogs({ abi: leaseMarketAbi, logs }).filter((event) => event.eventName === "FaultSubmitted");
      assert.ok(
        faults.every((event) => event.eventName === "FaultSubmitted" && event.args.observedAt >= own),
        JSON.stringify(
          faults.map((e) => e.args),
          (_k, v) => (typeof v === "bigint" ? v.toString() : v),
        ),
      );
    } finally {
      for (const node of nodes.reverse()) await node.close();
      if (honestDataDir) await rm(honestDataDir, { recursive: true, force: true });
      if (provider) {
        if (provider.child.exitCode === null && provider.child.signalCode === null) {
          provider.child.kill("SIGCONT");
          provider.child.kill("SIGKILL");
        }
        await rm(provider.dataDir, { recursive: true, force: true });
      }
    }
  });
});

import assert from "node:assert/strict";
import { multiaddr } from "@multiformats/multiaddr";
import type { SignedAttestation } from "../../common/attest/attestation.js";
import { signAttestation, signOffer } from "../../common/chain/sign.js";
import { providerRegistryAbi } from "../../common/abi.js";
import { requestChallenge } from "../../common/attest/request.js";
import { verifyCommitFraud } from "../../common/attest/commit.js";
import { MAX_CONTROL_MESSAGE_BYTES } from "../../common/attest/messages.js";
import { attestAnswerSchema } from "../../common/attest/wire.js";
import { ATTEST_PROTOCOL } from "../../common/p2p/protocols.js";
import { request } from "../../common/p2p/reqresp.js";
import { ANY_RENTER, type Offer } from "../../common/eip712.js";
import { devnetAccount } from "../../common/devnet.js";
import { modelHash } from "../../common/gpu.js";
import { MatchingEngine, offerEntryFromMessage, parseMatchRequest, type MatchResult } from "../../common/matching/index.js";
import { offerKey, offersTopic, encodeOfferMessage } from "../../common/offers/message.js";
import { signOfferMessage } from "../../common/offers/sign.js";
import { engineAttestation, isAttested } from "../../common/offers/validate.js";
import type { ProviderMachine } from "../../node/attest/challenge/index.js";
import { CpuRunner } from "../../node/attest/runner/index.js";
import type { BookEntry } from "../../node/offers/book.js";
import { addrOf, machineOffer, startAttestorDaemon, startProviderDaemon, WrongRowsRunner, type TestDaemon } from "../support/attest.js";
import { lastJson, runCli } from "../support/cli.js";
import { startTestDaemon } from "../support/daemons.js";
import { registerProvider, send, startDevnet, type Devnet } from "../support/devnet.js";
import { waitFor } from "../support/wait.js";

const NO_REPUTATION = { leasesCompleted: 0, faults: 0, unitSecondsDelivered: 0n };
const A100 = { model: "A100-80GB", units: 1, vramMiB: 81_920 };
const nowSec = () => Math.floor(Date.now() / 1000);

/** The matching engine over a node's book, fed the book's verified attestation state. */
function matchOn(book: BookEntry[], request: Record<string, unknown> = {}): MatchResult {
  const engine = new MatchingEngine();
  const now = nowSec();
  for (const entry of book) engine.upsert(offerEntryFromMessage(entry.message, { attestation: engineAttestation(entry.attestation, now), reputation: NO_REPUTATION }));
  return engine.match(parseMatchRequest({ gpuType: "A100", gpuCount: 1, duration: 3600, maxPricePerGpuHour: "3.60", ...request }));
}

function matchedProviders(result: MatchResult): string[] {
  assert.ok(result.ok, result.ok ? "" : result.explanation.message);
  return result.candidates.map((candidate) => candidate.parts[0]!.entry.provider);
}

describe("attestor role over libp2p: proof-of-capacity challenges", function () {
  this.timeout(120_000);
  let devnet: Devnet;
  let cpu: CpuRunner;
  const attestorIndex = 7;
  before(async () => {
    devnet = await startDevnet({ attestors: [devnetAccount(attestorIndex).address] });
    cpu = new CpuRunner({ workers: 1 });
  });
  after(async () => {
    await cpu?.close();
    await devnet?.close();
  });

  it("an honest provider passes and its attested offer is matched; a provider that commits wrong rows fails and stays unattested", async () => {
    const nodes: TestDaemon[] = [];
    try {
      // Filled once the machines are declared on-chain (their ids come from the registry).
      const honestMachines: ProviderMachine[] = [];
      const cheaterMachines: ProviderMachine[] = [];
      const received: SignedAttestation[] = [];
      const cheaterReceived: SignedAttestation[] = [];
      const honest = await startProviderDaemon(devnet, 1, {
        runner: cpu,
        machines: () => honestMachines,
        // What the provider agent does: put the new attestation in the machine's offer.
        onAttestation: async (_machineId, signed) => {
          received.push(signed);
          await honest.daemon.offers.publisher!.set(machineOffer(honestMachines[0]!, [signed]));
        },
      });
      nodes.push(honest.daemon);
      const cheater = await startProviderDaemon(devnet, 2, {
        runner: new WrongRowsRunner(),
        machines: () => cheaterMachines,
        onAttestation: (_machineId, signed) => void cheaterReceived.push(signed),
      });
      nodes.push(cheater.daemon);
      const [honestId] = await registerProvider(devnet, await devnet.wallet(1), { peerId: honest.daemon.p2p.host.peerId.toString(), stake: 100_000_000n, machines: [A100] });
      const [cheaterId] = await registerProvider(devnet, await devnet.wallet(2), { peerId: cheater.daemon.p2p.host.peerId.toString(), stake: 100_000_000n, machines: [A100] });
      honestMachines.push({ machineId: honestId!, ...A100 });
      cheaterMachines.push({ machineId: cheaterId!, ...A100 });

      const bootstrap = [addrOf(honest.daemon), addrOf(cheater.daemon)];
      const { daemon: attestorNode, attestor } = await startAttestorDaemon(devnet, attestorIndex, { p2p: { bootstrap }, attest: { liveness: { enabled: false } } });
      nodes.push(attestorNode);
      const renter = await startTestDaemon(devnet, { p2p: { bootstrap } });
      nodes.push(renter);

      // Unattested offers: the attestor's book learns them and challenges both machines.
      await honest.daemon.offers.publisher!.set(machineOffer(honestMachines[0]!));
      await cheater.daemon.offers.publisher!.set(machineOffer(cheaterMachines[0]!));

      const honestKey = offerKey(devnetAccount(1).address, honestId!);
      const cheaterKey = offerKey(devnetAccount(2).address, cheaterId!);
      const attested = await waitFor(
        "the honest offer attested in the renter's book",
        () => {
          const entry = renter.offers.book.get(honestKey);
          return entry && isAttested(entry.attestation, nowSec()) ? entry : undefined;
        },
        { timeoutMs: 45_000, intervalMs: 100 },
      );
      assert.deepEqual(attested.attestation.attestors, [devnetAccount(attestorIndex).address]);

      // The attestation the provider received and put in its offer describes its machine.
      assert.equal(received.length, 1);
      const { attestation } = received[0]!;
      assert.equal(attestation.provider, devnetAccount(1).address);
      assert.equal(attestation.machineId, honestId);
      assert.equal(attestation.model, modelHash("A100-80GB"));
      assert.equal(attestation.units, 1);
      assert.equal(attestation.vramMiB, 81_920);
      assert.ok(attestation.throughput > 0n);
      assert.equal(attestation.expiry - attestation.issuedAt, 86_400);
      assert.deepEqual(attested.message.attestations, received);

      // The attestor recorded the pass in level, with the measured throughput.
      const pass = await attestor.results.latest(honestId!);
      assert.equal(pass?.outcome, "pass");
      assert.equal(pass?.trigger, "schedule");
      assert.equal(pass?.measuredThroughput, attestation.throughput);

      // The cheater's rows are not the product: a recorded failure, no attestation delivered.
      const failure = await waitFor("the cheater's recorded failure", () => attestor.results.latest(cheaterId!), { timeoutMs: 30_000, intervalMs: 100 });
      assert.equal(failure.outcome, "fail");
      assert.equal(failure.reason, "wrong_rows");
      assert.equal(failure.attestation, null);
      assert.deepEqual(cheaterReceived, []);
      // Its signed commit and wrong rows, kept in level, prove the fraud to anyone (issue 24, item 3).
      const fraud = await verifyCommitFraud(attestorNode.domain, failure.evidence);
      assert.equal(fraud.proven && fraud.provider, devnetAccount(2).address);
      const cheaterEntry = await waitFor("the cheater's offer in the renter's book", () => renter.offers.book.get(cheaterKey), { timeoutMs: 15_000 });
      assert.equal(isAttested(cheaterEntry.attestation, nowSec()), false);

      // The matcher (attested only, the default) takes the honest provider and not the cheater.
      const book = renter.offers.book.all();
      assert.deepEqual(matchedProviders(matchOn(book)), [devnetAccount(1).address]);
      assert.deepEqual(matchedProviders(matchOn(book, { attestedOnly: false })).sort(), [devnetAccount(1).address, devnetAccount(2).address].sort());

      // Asking the attestor directly: the fresh pass and the recent failure come back from its records.
      const target = multiaddr(addrOf(attestorNode));
      const again = await requestChallenge(renter.p2p.host, target, { chainId: devnet.deployment.chainId, machineId: honestId! });
      assert.equal(again.outcome, "pass");
      assert.equal(again.outcome === "pass" && again.cached, true);
      const refused = await requestChallenge(renter.p2p.host, target, { chainId: devnet.deployment.chainId, machineId: cheaterId! });
      assert.equal(refused.outcome, "fail");
      assert.equal(refused.outcome === "fail" && refused.reason, "wrong_rows");
      // A new machine id costs only gas: it does not buy the cheater a new try, the backoff is per provider.
      const cheaterWallet = await devnet.wallet(2);
      const registry = devnet.deployment.contracts.registry!;
      const addArgs = [modelHash(A100.model), A100.units, A100.vramMiB, 1, "eu-west", `0x${"0".repeat(64)}`] as const;
      const { result: freshId } = await cheaterWallet.publicClient.simulateContract({
        account: cheaterWallet.account,
        address: registry,
        abi: providerRegistryAbi,
        functionName: "addMachine",
        args: addArgs,
      });
      await send(cheaterWallet, { address: registry, abi: providerRegistryAbi, functionName: "addMachine", args: addArgs });
      const fresh = await requestChallenge(renter.p2p.host, target, { chainId: devnet.deployment.chainId, machineId: Number(freshId) });
      assert.equal(
        fresh.outcome === "error" && fresh.reason,
        "backoff",
        JSON.stringify(fresh, (_k, v) => (typeof v === "bigint" ? String(v) : v)),
      );
      assert.ok(fresh.outcome === "error" && fresh.retryAfter !== null && fresh.retryAfter > nowSec());
      assert.equal(await attestor.challenger.isDue(Number(freshId)), false);
      // Its offer in the book changes nothing.
      cheaterMachines.push({ machineId: Number(freshId), ...A100 });
      await cheater.daemon.offers.publisher!.set(machineOffer(cheaterMachines[1]!));
      await waitFor("the fresh machine's offer in the attestor's book", () => attestorNode.offers.book.get(offerKey(devnetAccount(2).address, Number(freshId))), {
        timeoutMs: 15_000,
      });
      const viaBook = await requestChallenge(renter.p2p.host, target, { chainId: devnet.deployment.chainId, machineId: Number(freshId) });
      assert.equal(viaBook.outcome === "error" && viaBook.reason, "backoff");
      assert.deepEqual(await attestor.challenger.runDue(), []);
      const undeclared = await requestChallenge(renter.p2p.host, target, { chainId: devnet.deployment.chainId, machineId: 999 });
      assert.equal(undeclared.outcome, "error");
      assert.equal(undeclared.outcome === "error" && undeclared.reason, "not_declared");

      // The same through the CLI an operator uses.
      const cli = await runCli([
        "attestor",
        "challenge",
        "--machine",
        String(honestId),
        "--attestor",
        addrOf(attestorNode),
        "--rpc-url",
        devnet.rpcUrl,
        "--deployments",
        devnet.deploymentsDir,
        "--json",
      ]);
      assert.equal(cli.code, 0, cli.stderr);
      const printed = lastJson<{ outcome: string; machineId: number; attestation: { attestation: { provider: string } } }>(cli.stdout);
      assert.equal(printed.outcome, "pass");
      assert.equal(printed.machineId, honestId);
      assert.equal(printed.attestation.attestation.provider, devnetAccount(1).address);
      const cliFail = await runCli([
        "attestor",
        "challenge",
        "--machine",
        String(cheaterId),
        "--attestor",
        addrOf(attestorNode),
        "--rpc-url",
        devnet.rpcUrl,
        "--deployments",
        devnet.deploymentsDir,
        "--json",
      ]);
      assert.equal(cliFail.code, 1);
      assert.equal(lastJson<{ reason: string }>(cliFail.stdout).reason, "wrong_rows");

      // The records are in level: a restarted attestor knows both machines and challenges neither again.
      const dataDir = attestorNode.config.dataDir;
      nodes.splice(nodes.indexOf(attestorNode), 1);
      await attestorNode.close({ keepData: true });
      const restarted = await startAttestorDaemon(devnet, attestorIndex, { dataDir, p2p: { bootstrap }, attest: { liveness: { enabled: false } } });
      nodes.push(restarted.daemon);
      assert.equal((await restarted.attestor.results.latest(honestId!))?.outcome, "pass");
      assert.equal((await restarted.attestor.results.latest(cheaterId!))?.reason, "wrong_rows");
      assert.equal(await restarted.attestor.challenger.isDue(honestId!), false);
      assert.equal(await restarted.attestor.challenger.isDue(cheaterId!), false);
      assert.deepEqual(await restarted.attestor.challenger.runDue(), []);
    } finally {
      for (const node of nodes.reverse()) await node.close();
    }
  });

  it("a version-1 attestor's challenge is refused unsupported_version, with a message naming both versions", async () => {
    const provider = await startProviderDaemon(devnet, 4, { runner: cpu, machines: () => [] });
    const asker = await startTestDaemon(devnet, {});
    try {
      // What a v1 attestor sent: one tree for the whole machine (`rows`, no per-unit fields).
      const v1Challenge = { v: 1, type: "challenge", id: `0x${"ab".repeat(32)}`, seed: `0x${"cd".repeat(32)}`, rows: 1024, cols: 64, rounds: 2, units: 1 };
      const answer = await request(asker.p2p.host, multiaddr(addrOf(provider.daemon)), ATTEST_PROTOCOL, v1Challenge, {
        responseSchema: attestAnswerSchema,
        timeoutMs: 10_000,
        maxMessageBytes: MAX_CONTROL_MESSAGE_BYTES,
      });
      assert.equal(answer.type, "refused");
      assert.equal(answer.v, 2);
      const refusal = answer as { reason: string; message: string; challengeId: string };
      assert.equal(refusal.reason, "unsupported_version");
      assert.equal(refusal.challengeId, v1Challenge.id);
      assert.match(refusal.message, /attest protocol v1 .* no longer accepted: this node speaks v2/);
    } finally {
      await asker.close();
      await provider.daemon.close();
    }
  });

  it("offer books and the matcher ignore expired attestations and those of non-attestors, and refuse one about another machine", async () => {
    const nodes: TestDaemon[] = [];
    try {
      const machines: ProviderMachine[] = [];
      const provider = await startProviderDaemon(devnet, 3, { runner: cpu, machines: () => machines });
      nodes.push(provider.daemon);
      const [machineId] = await registerProvider(devnet, await devnet.wallet(3), { peerId: provider.daemon.p2p.host.peerId.toString(), stake: 100_000_000n, machines: [A100] });
      const machine = { machineId: machineId!, ...A100 };
      machines.push(machine);
      const renter = await startTestDaemon(devnet, { p2p: { bootstrap: [addrOf(provider.daemon)] } });
      nodes.push(renter);
      const key = offerKey(devnetAccount(3).address, machineId!);
      const about = {
        provider: devnetAccount(3).address,
        machineId: machineId!,
        model: modelHash("A100-80GB"),
        units: 1,
        vramMiB: 81_920,
        throughput: 10n ** 12n,
        challengeId: `0x${"00".repeat(32)}` as const,
        root: `0x${"00".repeat(32)}` as const,
        gpus: `0x${"00".repeat(32)}` as const,
        cc: `0x${"00".repeat(32)}` as const,
        failures: 0,
        lastFailureAt: 0,
      };

      // Signed by a real attestor, but a day old and expired an hour ago.
      const now = nowSec();
      const expired = await signAttestation(devnetAccount(attestorIndex), provider.daemon.domain, { ...about, issuedAt: now - 90_000, expiry: now - 3_600 });
      await provider.daemon.offers.publisher!.set(machineOffer(machine, [expired]));
      const entry = await waitFor("the offer with an expired attestation", () => renter.offers.book.get(key), { timeoutMs: 20_000 });
      assert.deepEqual(entry.message.attestations, [expired]);
      assert.equal(isAttested(entry.attestation, nowSec()), false);
      assert.equal(engineAttestation(entry.attestation, nowSec()), null);
      const result = matchOn(renter.offers.book.all());
      assert.ok(!result.ok);
      assert.equal(result.explanation.steps.find((step) => step.constraint === "attestation")?.removed, 1);
      assert.deepEqual(matchedProviders(matchOn(renter.offers.book.all(), { attestedOnly: false })), [devnetAccount(3).address]);

      // Signed by an address outside the attestor set: it does not count, and nobody is punished.
      const forged = await signAttestation(devnetAccount(9), provider.daemon.domain, { ...about, issuedAt: now, expiry: now + 3_600 });
      await provider.daemon.offers.publisher!.set(machineOffer(machine, [forged]));
      const outsider = await waitFor(
        "the offer carrying the outsider's attestation",
        () => {
          const held = renter.offers.book.get(key);
          return held?.message.attestations[0]?.signature === forged.signature ? held : undefined;
        },
        { timeoutMs: 20_000 },
      );
      assert.deepEqual(outsider.attestation.attestors, []);
      assert.equal(engineAttestation(outsider.attestation, nowSec()), null);
      assert.equal(matchOn(renter.offers.book.all()).ok, false, "attested-only matching skips it");

      // An attestation about another machine is a lie the provider's node refuses to publish...
      const elsewhere = await signAttestation(devnetAccount(attestorIndex), provider.daemon.domain, { ...about, units: 4, issuedAt: now, expiry: now + 3_600 });
      await assert.rejects(provider.daemon.offers.publisher!.set(machineOffer(machine, [elsewhere])), (error: Error & { reason?: string }) => {
        assert.equal(error.name, "OfferRejectedError");
        assert.equal(error.reason, "bad_attestation");
        return true;
      });
      // ...and a message carrying it, sent over gossip anyway, is rejected by the other books.
      const held = renter.offers.book.get(key)!;
      const { peerSignature: _old, ...unsigned } = held.message;
      const offer: Offer = { ...held.message.offer, renter: ANY_RENTER };
      const message = await signOfferMessage(
        {
          ...unsigned,
          offer,
          signature: await signOffer(devnetAccount(3), provider.daemon.domain, offer),
          attestations: [elsewhere],
          seq: held.seq + 100,
          publishedAt: nowSec(),
        },
        provider.daemon.p2p.peerKey,
      );
      await provider.daemon.p2p.host.services.pubsub!.publish(offersTopic(devnet.deployment.chainId), encodeOfferMessage(message));
      await waitFor(
        "the lying attestation rejected by the renter's node",
        async () => {
          const counts = await renter.metrics.offersRejected.get();
          return counts.values.some((value) => value.labels.reason === "bad_attestation" && value.value > 0);
        },
        { timeoutMs: 20_000, intervalMs: 100 },
      );
      const after = renter.offers.book.get(key)!;
      assert.equal(after.seq, held.seq, "the book kept the earlier message");
      assert.equal(isAttested(after.attestation, nowSec()), false);
    } finally {
      for (const node of nodes.reverse()) await node.close();
    }
  });
});

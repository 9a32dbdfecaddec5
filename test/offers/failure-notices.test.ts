/**
 * Failure notices (issue 35 item 9) between real libp2p nodes on 127.0.0.1: an attestor's signed
 * notice of a failed challenge revokes its earlier attestation of the machine in other nodes'
 * offer books; forged, unsigned and non-staked notices are dropped; notices survive a restart and
 * reach a fresh node through offers-sync; matching skips machines over `maxAttestFailures`; the
 * CLI refuses a bad `--max-attest-failures`.
 */
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { keccak256, toHex, type Hex } from "viem";
import { verifyAttestation } from "../../common/attest/attestation.js";
import { attestFailuresTopic, signFailureNotice, type FailureNotice } from "../../common/attest/failure-notice.js";
import { suanliDomain } from "../../common/eip712.js";
import { MatchingEngine, offerEntryFromMessage, parseMatchRequest } from "../../common/matching/index.js";
import { NO_REPUTATION } from "../../common/matching/offer-index.js";
import { offerKey } from "../../common/offers/message.js";
import { engineAttestation, isAttested } from "../../common/offers/validate.js";
import { NoticeBook } from "../../node/offers/notice-book.js";
import { Store } from "../../node/store/store.js";
import { runCli } from "../support/cli.js";
import { MemoryChainView } from "../support/memory-chain-view.js";
import {
  TEST_CHAIN_ID,
  TEST_MARKET,
  attest,
  buildOfferMessage,
  createProvider,
  createSigner,
  machineSpec,
  nowSec,
  registerOnChain,
  signAttestationFast,
  type Signer,
} from "../support/offer-fixtures.js";
import { startTestNode, waitForMesh, type TestNode } from "../support/nodes.js";
import { waitFor } from "../support/wait.js";

const spec = machineSpec(21, { model: "H100-80GB-SXM", units: 8, vramMiB: 81_559, region: "ap-east" });
const domain = suanliDomain(TEST_CHAIN_ID, TEST_MARKET);
let challenges = 0;
const challengeId = (): Hex => keccak256(toHex(`challenge-${++challenges}`));

describe("attestors' failure notices revoke attestations (real libp2p on 127.0.0.1)", function () {
  this.timeout(40_000);
  const chain = new MemoryChainView();
  const attestor = createSigner();
  const outsider = createSigner();
  const nodes: TestNode[] = [];
  const dirs: string[] = [];
  let key: string;
  let provider: Awaited<ReturnType<typeof createProvider>>;

  const notice = (signer: Signer, overrides: Partial<FailureNotice["failure"]> = {}) =>
    signFailureNotice(signer.account, domain, {
      attestor: signer.address,
      provider: provider.address,
      machineId: spec.machineId,
      reason: "wrong_rows",
      challengeId: challengeId(),
      observedAt: nowSec(),
      ...overrides,
    });

  before(async () => {
    chain.addAttestor(attestor.address);
    provider = await createProvider();
    registerOnChain(chain, provider, [spec]);
    const seed = await startTestNode({ chain });
    nodes.push(seed, await startTestNode({ chain, bootstrap: [seed.addr] }));
    for (const node of nodes) dirs.push(node.dir);
    await waitForMesh(nodes);
    key = offerKey(provider.address, spec.machineId);
    // Issued 10 s ago by a staked attestor: the offer is attested everywhere.
    const message = await buildOfferMessage(provider, spec, { attestations: [attest(attestor, provider.address, spec)] });
    await nodes[0]!.offers.gossip.publish(message);
    await waitFor("the attested offer on both nodes", () => nodes.every((node) => node.offers.book.get(key) && isAttested(node.offers.book.get(key)!.attestation, nowSec())));
  });

  after(async () => {
    await Promise.all(nodes.map((node) => node.stop()));
    await Promise.all(dirs.map((dir) => rm(dir, { recursive: true, force: true })));
  });

  it("drops forged, unsigned and non-staked notices, on gossip and on direct ingest", async () => {
    const [sender, receiver] = nodes as [TestNode, TestNode];
    // Signed by an outsider but naming the staked attestor: the signature is not the attestor's.
    const forged = await notice(outsider, { attestor: attestor.address });
    const byOutsider = await notice(outsider);
    const unsigned = { ...(await notice(attestor)), signature: `0x${"11".repeat(65)}` as Hex };
    const results = await Promise.all([forged, byOutsider, unsigned].map((n) => receiver.offers.failures.ingest(JSON.stringify(n), "gossip")));
    assert.deepEqual(
      results.map((r) => (r.ok ? "ok" : r.reason)),
      ["bad_signature", "not_attestor", "bad_signature"],
    );
    // Straight onto the topic from a peer: the receiver's topic validator drops all three.
    const pubsub = sender.host.services.pubsub!;
    for (const n of [forged, byOutsider, unsigned]) await pubsub.publish(attestFailuresTopic(TEST_CHAIN_ID), new TextEncoder().encode(JSON.stringify(n)));
    await new Promise((resolve) => setTimeout(resolve, 500));
    assert.equal(receiver.offers.notices.size, 0);
    assert.ok(isAttested(receiver.offers.book.get(key)!.attestation, nowSec()), "nothing revoked");
  });

  it("a staked attestor's notice revokes its earlier attestation in another node's book", async () => {
    const [sender, receiver] = nodes as [TestNode, TestNode];
    const published = await sender.offers.failures.publish(await notice(attestor));
    assert.ok(published.ok, published.ok ? "" : published.detail);
    // The notice is held before the receiver re-checks the machine's offers: wait for the re-check.
    await waitFor("the notice on the receiver", () => receiver.offers.notices.size === 1 && (receiver.offers.book.get(key)!.attestation.revokedBy?.length ?? 0) > 0);
    const entry = receiver.offers.book.get(key)!;
    assert.equal(isAttested(entry.attestation, nowSec()), false, "the offer is no longer attested");
    assert.deepEqual(entry.attestation.revokedBy, [attestor.address]);
    assert.equal(entry.attestation.failures, 1);
    assert.equal(engineAttestation(entry.attestation, nowSec()), null, "matching sees it unattested");
    const verdict = await verifyAttestation(entry.message.attestations[0]!, {
      domain,
      now: nowSec(),
      isAttestor: (address) => address === attestor.address,
      notices: receiver.offers.notices.ofMachine(provider.address, spec.machineId, nowSec()),
    });
    assert.deepEqual(verdict, { valid: false, reason: "revoked", attestor: attestor.address });
    // A pass after the failure is not revoked: the attestor's newer word counts again.
    const later = signAttestationFast(attestor, { ...entry.message.attestations[0]!.attestation, issuedAt: nowSec() + 1 });
    const fresh = await verifyAttestation(later, {
      domain,
      now: nowSec() + 2,
      isAttestor: () => true,
      notices: receiver.offers.notices.ofMachine(provider.address, spec.machineId, nowSec()),
    });
    assert.equal(fresh.valid, true);
  });

  it("keeps notices across a restart and hands them to a fresh node through offers-sync", async () => {
    const receiver = nodes[1]!;
    await receiver.stop();
    const restarted = await startTestNode({ chain, dir: receiver.dir, bootstrap: [nodes[0]!.addr] });
    nodes[1] = restarted;
    assert.equal(restarted.offers.notices.size, 1, "the notice came back from level");
    assert.deepEqual(restarted.offers.book.get(key)?.attestation.revokedBy, [attestor.address]);

    // A fresh node knows nothing but syncs the book and the notices from its first peer.
    const fresh = await startTestNode({ chain, bootstrap: [nodes[0]!.addr] });
    nodes.push(fresh);
    dirs.push(fresh.dir);
    await waitFor("the notice and the offer synced", () => fresh.offers.notices.size === 1 && fresh.offers.book.get(key) !== undefined, { timeoutMs: 15_000 });
    assert.equal(isAttested(fresh.offers.book.get(key)!.attestation, nowSec()), false, "revoked on the fresh node too");
  });

  it("matching skips a machine over maxAttestFailures and the explanation names it", async () => {
    const sender = nodes[0]!;
    for (let i = 0; i < 3; i++) assert.ok((await sender.offers.failures.publish(await notice(attestor))).ok);
    const entry = sender.offers.book.get(key)!;
    assert.equal(entry.attestation.failures, 4, "four notices by one attestor within the week");
    const engine = new MatchingEngine({}, { now: nowSec });
    engine.upsert(offerEntryFromMessage(entry.message, { attestation: null, reputation: NO_REPUTATION, attestFailuresUntil: entry.attestation.failuresUntil! }));
    const ask = { gpuType: "H100-80GB-SXM", gpuCount: 1, duration: 600, maxPricePerGpuHour: "100", attestedOnly: false };
    const refused = engine.match(parseMatchRequest(ask));
    assert.equal(refused.ok, false);
    if (refused.ok) return;
    const step = refused.explanation.steps.find((s) => s.constraint === "attestFailures");
    assert.deepEqual([step?.removed, step?.remaining], [1, 0]);
    assert.match(refused.explanation.message, /maxAttestFailures/);
    assert.match(refused.explanation.nearMisses.find((m) => m.constraint === "attestFailures")!.message, /4 failed challenges in the last week, more than maxAttestFailures 3/);
    assert.ok(engine.match(parseMatchRequest({ ...ask, maxAttestFailures: 4 })).ok, "a renter who accepts 4 gets it");
  });

  it("a notice book at its cap evicts the oldest notice, in memory and on disk", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "suanli-notices-"));
    dirs.push(dir);
    const store = await Store.open(path.join(dir, "db"));
    const small = await NoticeBook.open(store, { maxNotices: 2 });
    const signed = [];
    for (let i = 3; i >= 1; i--) signed.push(await notice(attestor, { observedAt: nowSec() - i * 60 }));
    for (const n of signed) await small.add(n, JSON.stringify(n));
    const kept = () => small.machineNotices(provider.address, spec.machineId).map((n) => n.observedAt);
    assert.deepEqual(kept(), [signed[1]!.failure.observedAt, signed[2]!.failure.observedAt], "the oldest went");
    const reopened = await NoticeBook.open(store, { maxNotices: 2 });
    assert.deepEqual(
      reopened.machineNotices(provider.address, spec.machineId).map((n) => n.observedAt),
      kept(),
    );
    await store.close();
  });

  it("the CLI refuses a bad --max-attest-failures with exit 2", async () => {
    const args = ["--devnet-account", "5", "--gpu", "H100", "--duration", "600", "--max-price", "5", "--bundle", "http://127.0.0.1:9/x.tar.gz", "--sha256", "ab".repeat(32)];
    for (const bad of ["-1", "1.5", "many"]) {
      const result = await runCli(["submit", ...args, "--max-attest-failures", bad, "--", "true"]);
      assert.equal(result.code, 2, result.stderr);
      assert.match(result.stderr, /--max-attest-failures must be a whole number, 0 or more/);
    }
  });
});

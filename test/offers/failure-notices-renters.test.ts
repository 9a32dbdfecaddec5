/**
 * Failure notices (issue 35 item 9) as renters meet them, on a real devnet chain with a staked
 * attestor and real libp2p on 127.0.0.1:
 * - the HTTP API's offer view and match answer carry the machine's failure count, and an SDK
 *   client reading offers over HTTP applies `maxAttestFailures` as the node does;
 * - the SDK's own libp2p feed takes notices from gossip and offers-sync, checks them with the
 *   node's code (a forged or non-staked one changes nothing) and applies them (revocation, count);
 * - a count is a function of time: a machine drops back under the limit as its failures age out,
 *   with no new offer;
 * - a peer of a version before notices refuses the `notices` request; nodes and the SDK sync its
 *   offers anyway, and the node says so once.
 */
import assert from "node:assert/strict";
import type { PeerId } from "@libp2p/interface";
import { keccak256, toHex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { offerPageSchema, type OfferView } from "../../common/api/offers.js";
import { matchResultSchema } from "../../common/api/market.js";
import { machineViewSchema } from "../../common/api/chain.js";
import { FAILURE_WINDOW_SECONDS, MAX_COUNTED_FAILURES, attestFailuresTopic, failuresAt, machineFailures, signFailureNotice } from "../../common/attest/failure-notice.js";
import { throughputBand } from "../../common/attest/params.js";
import { signAttestation, type TypedDataSigner } from "../../common/chain/sign.js";
import { devnetAccount, devnetPrivateKey } from "../../common/devnet.js";
import { suanliDomain, type AttestationFailure } from "../../common/eip712.js";
import { modelHash } from "../../common/gpu.js";
import { offersSyncRequestSchema, offersSyncResponseSchema } from "../../common/offers/sync.js";
import { createHost } from "../../common/p2p/host.js";
import { OFFERS_SYNC_PROTOCOL } from "../../common/p2p/protocols.js";
import { handleProtocol } from "../../common/p2p/reqresp.js";
import { silentLogger, type Logger } from "../../node/log/logger.js";
import { createClient, type SuanliClient } from "../../sdk/index.js";
import { startP2pFeed } from "../../sdk/internal/feed.js";
import { addrOf, machineOffer, type TestDaemon } from "../support/attest.js";
import { startTestDaemon } from "../support/daemons.js";
import { registerProvider, startDevnet, type Devnet } from "../support/devnet.js";
import { waitFor } from "../support/wait.js";

const ATTESTOR = 7;
const PROVIDER = 3;
/** One machine per model, so each test matches its own machine alone. */
const MACHINES = [
  { model: "A100-80GB", units: 1, vramMiB: 81_920 },
  { model: "H100-80GB-SXM", units: 1, vramMiB: 81_559 },
  { model: "L40S-48GB", units: 1, vramMiB: 46_068 },
] as const;
const ask = (gpuType: string, extra: Record<string, unknown> = {}) => ({ gpuType, gpuCount: 1, duration: 600, maxPricePerGpuHour: "100", attestedOnly: false, ...extra });
const nowSec = () => Math.floor(Date.now() / 1000);
let challenges = 0;

/** A logger that keeps its info lines. */
function recordingLogger(): Logger & { infos: string[] } {
  const infos: string[] = [];
  const logger = Object.create(silentLogger()) as Logger & { infos: string[] };
  logger.infos = infos;
  logger.info = (message: string) => void infos.push(message);
  logger.child = () => logger;
  return logger;
}

describe("failure notices reach renters: HTTP view and SDK feeds, aging, older peers (devnet, libp2p on 127.0.0.1)", function () {
  this.timeout(40_000);
  let devnet: Devnet;
  let provider: TestDaemon;
  let ids: number[];
  let p2pClient: SuanliClient;
  let httpClient: SuanliClient;
  const closers: (() => Promise<unknown>)[] = [];
  const attestor = devnetAccount(ATTESTOR);
  let domain: ReturnType<typeof suanliDomain>;

  const notice = (machineId: number, failure: Partial<AttestationFailure> = {}, signer: TypedDataSigner = attestor) =>
    signFailureNotice(signer, domain, {
      attestor: attestor.address,
      provider: devnetAccount(PROVIDER).address,
      machineId,
      reason: "wrong_rows",
      challengeId: keccak256(toHex(`renters-challenge-${++challenges}`)),
      observedAt: nowSec(),
      ...failure,
    });
  const publish = async (machineId: number, failure: Partial<AttestationFailure> = {}) => {
    const result = await provider.offers.failures.publish(await notice(machineId, failure));
    assert.ok(result.ok, result.ok ? "" : result.detail);
  };
  const api = async (path: string, body?: unknown) => {
    const response = await fetch(
      `${provider.api!.url}${path}`,
      body === undefined ? {} : { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) },
    );
    return (await response.json()) as unknown;
  };
  const view = async (machineId: number): Promise<OfferView> => offerPageSchema.parse(await api("/v1/offers?limit=100")).items.find((o) => o.machineId === machineId)!;
  const summary = async (client: SuanliClient, model: string) => (await client.queryOffers({ gpuType: model }))[0];
  const newClient = async (options: Record<string, unknown>) => {
    const client = await createClient({ rpcUrl: devnet.rpcUrl, account: privateKeyToAccount(generatePrivateKey()), deployment: devnet.deployment, ...options });
    closers.push(() => client.close());
    return client;
  };

  before(async () => {
    devnet = await startDevnet({ attestors: [attestor.address] });
    closers.push(() => devnet.close());
    domain = suanliDomain(devnet.deployment.chainId, devnet.deployment.contracts.market!);
    provider = await startTestDaemon(
      devnet,
      { chain: { privateKey: devnetPrivateKey(PROVIDER) }, api: { enabled: true, host: "127.0.0.1", port: 0 }, offers: { reannounceIntervalMs: 3_600_000 } },
      { publishesOffers: true },
    );
    closers.unshift(() => provider.close());
    ids = await registerProvider(devnet, await devnet.wallet(PROVIDER), { peerId: provider.p2p.host.peerId.toString(), stake: 100_000_000n, machines: [...MACHINES] });
    for (const [i, spec] of MACHINES.entries()) {
      const issuedAt = nowSec() - 10;
      const attestation = await signAttestation(attestor, domain, {
        provider: devnetAccount(PROVIDER).address,
        machineId: ids[i]!,
        model: modelHash(spec.model),
        units: spec.units,
        vramMiB: spec.vramMiB,
        throughput: throughputBand(spec.model, spec.units)!.ceiling / 2n,
        challengeId: `0x${"00".repeat(32)}`,
        root: `0x${"00".repeat(32)}`,
        gpus: `0x${"00".repeat(32)}`,
        cc: `0x${"00".repeat(32)}`,
        failures: 0,
        lastFailureAt: 0,
        issuedAt,
        expiry: issuedAt + 3_600,
      });
      await provider.offers.publisher!.set(machineOffer({ machineId: ids[i]!, ...spec }, [attestation]));
    }
    p2pClient = await newClient({ bootstrap: [addrOf(provider)] });
    httpClient = await newClient({ nodeUrl: provider.api!.url });
    for (const client of [p2pClient, httpClient]) {
      await waitFor("every attested offer seen by the renter", async () => (await client.queryOffers()).filter((o) => o.attested).length === MACHINES.length, {
        timeoutMs: 15_000,
      });
    }
  });

  after(async () => {
    for (const close of closers) await close().catch(() => undefined);
  });

  it("the HTTP offer view and match answer carry the failure count; the SDK over HTTP applies maxAttestFailures", async () => {
    const [machineId] = ids as [number];
    assert.deepEqual([(await view(machineId)).attestFailures, (await view(machineId)).lastAttestFailureAt], [0, null]);
    const observed = nowSec();
    for (let i = 0; i < 4; i++) await publish(machineId, { observedAt: observed - i });
    const shown = await view(machineId);
    assert.equal(shown.attestFailures, 4);
    assert.deepEqual(
      shown.attestFailuresUntil,
      [3, 2, 1, 0].map((i) => ({ until: observed - i + FAILURE_WINDOW_SECONDS, failures: 1 })),
    );
    assert.equal(shown.lastAttestFailureAt, observed);
    assert.equal(shown.attested, false, "the attestor's own notice revoked its attestation");
    // The machine's record (GET /v1/machines/:id, the explorer's provider page) carries the same count.
    const machine = machineViewSchema.parse(await api(`/v1/machines/${machineId}`));
    assert.deepEqual([machine.attestFailures, machine.lastAttestFailureAt], [4, observed]);

    // POST /v1/match: refused by maxAttestFailures; accepted at 4 with the count in the allocation.
    const refused = matchResultSchema.parse(await api("/v1/match", ask("A100")));
    assert.equal(refused.matched, false);
    assert.deepEqual(
      refused.explanation!.steps.filter((s) => s.constraint === "attestFailures").map((s) => [s.removed, s.remaining]),
      [[1, 0]],
    );
    const accepted = matchResultSchema.parse(await api("/v1/match", ask("A100", { maxAttestFailures: 4 })));
    assert.deepEqual(
      accepted.candidates.map((c) => c.allocations.map((a) => [a.machineId, a.attestFailures])),
      [[[machineId, 4]]],
    );

    // The SDK reading offers over HTTP: the same count, the same refusal.
    await waitFor("the count in the HTTP client's offers", async () => (await summary(httpClient, "A100"))?.attestFailures === 4, { timeoutMs: 10_000 });
    const overHttp = await httpClient.match(ask("A100"));
    assert.equal(overHttp.ok, false);
    if (!overHttp.ok) assert.match(overHttp.explanation.message, /maxAttestFailures/);
    assert.equal((await httpClient.match(ask("A100", { maxAttestFailures: 4 }))).ok, true);
  });

  it("the SDK's libp2p feed takes notices from gossip and offers-sync, checks them as a node does and applies them", async () => {
    const [, , machineId] = ids as [number, number, number];
    // Forged (an outsider's signature naming the attestor) and by a non-staked key, straight onto the topic.
    const outsider = privateKeyToAccount(generatePrivateKey());
    const forged = await notice(machineId, {}, outsider);
    const unstaked = await notice(machineId, { attestor: outsider.address }, outsider);
    for (const bad of [forged, unstaked])
      await provider.p2p.host.services.pubsub!.publish(attestFailuresTopic(devnet.deployment.chainId), new TextEncoder().encode(JSON.stringify(bad)));
    await new Promise((resolve) => setTimeout(resolve, 700));
    const unchanged = (await summary(p2pClient, "L40S"))!;
    assert.deepEqual([unchanged.attested, unchanged.attestFailures], [true, 0], "nothing changed");

    // The staked attestor's notice: its attestation is revoked and the failure counted.
    await publish(machineId);
    await waitFor("the notice applied by the libp2p client", async () => (await summary(p2pClient, "L40S"))?.attestFailures === 1, { timeoutMs: 10_000 });
    assert.equal((await summary(p2pClient, "L40S"))!.attested, false, "revoked");
    for (let i = 0; i < 3; i++) await publish(machineId);
    await waitFor("four failures on the libp2p client", async () => (await summary(p2pClient, "L40S"))?.attestFailures === 4, { timeoutMs: 10_000 });
    const refused = await p2pClient.match(ask("L40S"));
    assert.equal(refused.ok, false);
    if (!refused.ok) assert.equal(refused.explanation.steps.find((s) => s.constraint === "attestFailures")?.removed, 1);

    // A client that joins later, without gossip, gets the notices through offers-sync.
    const late = await newClient({ bootstrap: [addrOf(provider)], gossip: false });
    assert.equal((await summary(late, "L40S"))?.attestFailures, 4);
    assert.equal((await late.match(ask("L40S"))).ok, false);
  });

  it("a client without gossip re-pulls only the notices the node received since its last pull (a cursor per peer); a cursor the node does not know gets them all", async () => {
    const [, , machineId] = ids as [number, number, number];
    const feed = await startP2pFeed({
      chainId: devnet.deployment.chainId,
      market: devnet.deployment.contracts.market!,
      registry: devnet.deployment.contracts.registry!,
      publicClient: devnet.admin.publicClient,
      bootstrap: [addrOf(provider)],
      gossip: false,
      resyncAfterMs: 0,
    });
    closers.unshift(() => feed.close());
    await feed.ready(10_000);
    const held = provider.offers.notices.size;
    assert.ok(held >= 4, `the node holds the notices published so far (${held})`);
    // Count what the node serves each pull (what travels and what the client checks).
    const served: number[] = [];
    const book = provider.offers.notices;
    const pageSince = book.pageSince.bind(book);
    book.pageSince = (since, limit) => {
      const page = pageSince(since, limit);
      served.push(page.raw.length);
      return page;
    };
    const pull = async () => {
      served.length = 0;
      await new Promise((resolve) => setTimeout(resolve, 5));
      await feed.ready(10_000);
      return served.reduce((sum, n) => sum + n, 0);
    };
    try {
      assert.equal(await pull(), 0, "nothing new: the re-pull carries no notice");
      await publish(machineId);
      await publish(machineId);
      assert.equal(await pull(), 2, "the two new notices only");
      assert.equal(await pull(), 0);
    } finally {
      book.pageSince = pageSince;
    }
    // A cursor from before the node restarted (another numbering) or none: every notice, in the order received.
    const all = book.pageSince("start", 64);
    assert.equal(all.raw.length, held + 2);
    assert.equal(book.pageSince(`${"0".repeat(16)}:1`, 64).raw.length, held + 2);
    assert.deepEqual(book.pageSince(all.cursor, 64), { raw: [], next: null, cursor: all.cursor });
    const pages = [book.pageSince("start", 2)];
    while (pages.at(-1)!.next) pages.push(book.pageSince(pages.at(-1)!.next!, 2));
    assert.deepEqual(
      pages.flatMap((page) => page.raw),
      all.raw,
    );
  });

  it("failures age out at match time, without a new offer", async () => {
    const [, machineId] = ids as [number, number];
    const seq = (await view(machineId)).seq;
    // Four failures that leave the week's window 8 s from now.
    const agesOutAt = nowSec() + 8;
    for (let i = 0; i < 4; i++) await publish(machineId, { observedAt: agesOutAt - FAILURE_WINDOW_SECONDS });
    await waitFor(
      "the failures on every renter",
      async () => (await summary(p2pClient, "H100"))?.attestFailures === 4 && (await summary(httpClient, "H100"))?.attestFailures === 4,
      {
        timeoutMs: 6_000,
      },
    );
    assert.equal(matchResultSchema.parse(await api("/v1/match", ask("H100"))).matched, false);
    assert.equal((await p2pClient.match(ask("H100"))).ok, false);
    assert.equal((await httpClient.match(ask("H100"))).ok, false);

    await new Promise((resolve) => setTimeout(resolve, Math.max(0, agesOutAt + 1 - Date.now() / 1000) * 1000));
    assert.equal(matchResultSchema.parse(await api("/v1/match", ask("H100"))).matched, true, "the node matches it again");
    assert.equal((await p2pClient.match(ask("H100"))).ok, true, "so does the libp2p client");
    assert.equal((await httpClient.match(ask("H100"))).ok, true, "and the HTTP client");
    const shown = await view(machineId);
    assert.deepEqual([shown.attestFailures, shown.attestFailuresUntil, shown.lastAttestFailureAt, shown.seq], [0, [], null, seq], "no new offer was needed");
  });

  it("a peer that does not know the notices request still has its offers synced (node and SDK), and the node says so once", async () => {
    // A peer of a version before notices: offers-sync with the request schema of that version.
    const offerRaw = provider.offers.book.all().map((entry) => entry.raw);
    const old = await createHost({ listen: ["/ip4/127.0.0.1/tcp/0"], allowPrivateAddresses: true, dht: { enabled: false }, gossip: { enabled: false } });
    closers.unshift(async () => old.stop());
    const oldRequestSchema = offersSyncRequestSchema.omit({ notices: true });
    await handleProtocol(old, OFFERS_SYNC_PROTOCOL, {
      requestSchema: oldRequestSchema,
      responseSchema: offersSyncResponseSchema.omit({ notices: true }),
      handler: (req) => ({ offers: req.after ? [] : offerRaw, next: null }),
    });
    const oldAddr = `${old.getMultiaddrs()[0]!.toString()}`;
    assert.ok(!oldRequestSchema.safeParse({ chainId: 1, limit: 1, notices: true }).success, "the old schema refuses the field");

    const logger = recordingLogger();
    const fresh = await startTestDaemon(devnet, { p2p: { bootstrap: [oldAddr] } }, { logger });
    closers.unshift(() => fresh.close());
    await waitFor("the old peer's offers in the fresh node's book", () => fresh.offers.book.size === offerRaw.length, { timeoutMs: 15_000 });
    assert.equal(logger.infos.filter((line) => line === "Synced offers without failure notices from a peer").length, 1);
    // Asking again (a second sync from the same kind of peer) logs no second info line.
    await fresh.offers.gossip.syncFrom(old.peerId as PeerId);
    assert.equal(logger.infos.filter((line) => line === "Synced offers without failure notices from a peer").length, 1);

    const client = await newClient({ bootstrap: [oldAddr], gossip: false });
    assert.equal((await client.queryOffers()).length, offerRaw.length);
  });
});

describe("a machine's failure count as a function of time (machineFailures)", () => {
  const W = FAILURE_WINDOW_SECONDS;
  const NOW = 1_800_000_000;
  const a = "0x00000000000000000000000000000000000000aa";
  const b = "0x00000000000000000000000000000000000000bb";

  it("per attestor the larger of its attestation's count and its notices at every moment, summed; capped at MAX_COUNTED_FAILURES", () => {
    // Attestor a: an attestation carrying 2 failures (the latest 100 s ago) and 3 notices (1000, 500, 10 s ago).
    // Attestor b: one notice 50 s ago.
    const notices = new Map([
      [a, { count: 3, latest: NOW - 10, times: [NOW - 1_000, NOW - 500, NOW - 10] }],
      [b, { count: 1, latest: NOW - 50, times: [NOW - 50] }],
    ]);
    const signed = new Map([[a, { failures: 2, lastFailureAt: NOW - 100 }]]);
    const { until, lastAt } = machineFailures(notices, signed, NOW);
    // a: level 1 until max(L+W, n1+W) = NOW-10+W; level 2 until max(NOW-100+W, NOW-500+W); level 3 until NOW-1000+W.
    assert.deepEqual(until, [NOW - 1_000 + W, NOW - 100 + W, NOW - 50 + W, NOW - 10 + W]);
    assert.equal(lastAt, NOW - 10);
    assert.deepEqual(
      [NOW, NOW - 1_000 + W, NOW - 100 + W, NOW - 50 + W, NOW - 10 + W].map((t) => failuresAt(until, t)),
      [4, 3, 2, 1, 0],
    );
    const absurd = new Map([
      [a, { failures: 65_535, lastFailureAt: NOW - 5 }],
      [b, { failures: 65_535, lastFailureAt: NOW - 6 }],
    ]);
    assert.equal(machineFailures(undefined, absurd, NOW).until.length, MAX_COUNTED_FAILURES);
  });
});

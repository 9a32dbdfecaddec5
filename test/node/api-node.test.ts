/**
 * The HTTP API served by a real node on a devnet: the node's offer book fed by a provider node's
 * gossip, providers, machines and leases from the contracts (a lease opened and activated here),
 * statistics, match dry-runs on the node's matching engine, the event stream, and the relay of
 * renters' signed requests to a provider over libp2p.
 */
import assert from "node:assert/strict";
import { z } from "zod";
import { recoverTypedDataAddress, type Address } from "viem";
import { generateKeyPair } from "@libp2p/crypto/keys";
import { peerIdFromPrivateKey } from "@libp2p/peer-id";
import { leaseMarketAbi, testTokenAbi } from "../../common/abi.js";
import { leasePageSchema, leaseViewSchema, machinePageSchema, machineViewSchema, providerPageSchema, providerViewSchema } from "../../common/api/chain.js";
import { marketEventSchemas } from "../../common/api/events.js";
import { healthSchema, marketStatsSchema, matchResultSchema, reservationAnswerSchema } from "../../common/api/market.js";
import { offerPageSchema, offerViewSchema } from "../../common/api/offers.js";
import { statusRelayAnswerSchema } from "../../common/api/relay.js";
import { devnetAccount, devnetPrivateKey } from "../../common/devnet.js";
import { suanliDomain, suanliTypes, type Offer, type ReserveRequest } from "../../common/eip712.js";
import { SuanliError } from "../../common/errors.js";
import { modelHash } from "../../common/gpu.js";
import { reserveReplySchema } from "../../common/matching/handshake.js";
import { offerKey } from "../../common/offers/message.js";
import { signAttestation, signOffer } from "../../common/chain/sign.js";
import { CANCEL_PROTOCOL, LOGS_PROTOCOL, RESERVE_PROTOCOL, STATUS_PROTOCOL, TASK_PROTOCOL } from "../../common/p2p/protocols.js";
import { handleProtocol } from "../../common/p2p/reqresp.js";
import {
  cancelAnswerSchema,
  leaseRequestBodyHash,
  logsAnswerSchema,
  reserveBodySchema,
  signLeaseRequest,
  taskAnswerSchema,
  taskStatusSchema,
  type RenterAction,
} from "../../common/protocols/lease.js";
import { PROVIDER_ANSWER_STATUS, ProviderAnsweredError } from "../../node/api/errors.js";
import { startTestDaemon } from "../support/daemons.js";
import { fund, registerProvider, send, startDevnet, type Devnet } from "../support/devnet.js";
import { accounts } from "../support/market.js";
import { openEventStream } from "../support/sse.js";
import { waitFor } from "../support/wait.js";

type TestDaemon = Awaited<ReturnType<typeof startTestDaemon>>;
type ErrorBody = { error: { name: string; message: string; fields?: { path: string; message: string }[] } };

const ZERO32 = `0x${"0".repeat(64)}` as const;
const A100 = { model: "A100-80GB", units: 4, vramMiB: 81_920, region: "eu-west" };
const H100 = { model: "H100-80GB-SXM", units: 8, vramMiB: 81_559, region: "us-east" };

/** A provider-side error with a name of its own, as the provider agent would answer. */
class TaskNotRunningError extends SuanliError {
  override name = "TaskNotRunningError";
}

describe("HTTP API on a devnet node", function () {
  this.timeout(120_000);
  let devnet: Devnet;
  let provider: TestDaemon;
  let node: TestDaemon;
  let base: string;
  let providerAddress: Address;
  let a100Id: number;
  let h100Id: number;
  let a100Key: string;
  let h100Key: string;
  let leaseId: bigint;
  const received: { protocol: string; body: unknown }[] = [];
  const unhandle: (() => Promise<void>)[] = [];

  const get = async (path: string) => {
    const response = await fetch(`${base}${path}`);
    return { status: response.status, body: (await response.json()) as never };
  };
  const post = async (path: string, body: unknown) => {
    const response = await fetch(`${base}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
    return { status: response.status, body: (await response.json()) as never };
  };
  const errorOf = (body: unknown) => (body as ErrorBody).error;
  const domain = () => suanliDomain(devnet.deployment.chainId, devnet.deployment.contracts.market!);

  /** A RenterRequest for `action` on the lease, signed by the renter (or `signer`), as JSON. */
  async function auth(action: RenterAction, body: Record<string, unknown>, options: { signer?: typeof accounts.renter; leaseId?: bigint } = {}) {
    const signer = options.signer ?? accounts.renter;
    const signed = await signLeaseRequest((p) => signer.signTypedData(p), domain(), {
      leaseId: options.leaseId ?? leaseId,
      provider: providerAddress,
      action,
      body,
    });
    return { request: { ...signed.request, leaseId: signed.request.leaseId.toString() }, signature: signed.signature };
  }

  async function publish(machineId: number, machine: typeof A100, pricePerUnitSecond: bigint, attested: boolean) {
    const attestations = [];
    if (attested) {
      const now = Math.floor(Date.now() / 1000);
      const attestation = {
        provider: providerAddress,
        machineId,
        model: modelHash(machine.model),
        units: machine.units,
        vramMiB: machine.vramMiB,
        throughput: 5_000_000n,
        challengeId: `0x${"00".repeat(32)}` as const,
        root: `0x${"00".repeat(32)}` as const,
        gpus: `0x${"00".repeat(32)}` as const,
        cc: `0x${"00".repeat(32)}` as const,
        failures: 0,
        lastFailureAt: 0,
        issuedAt: now - 60,
        expiry: now + 86_400,
      };
      attestations.push(await signAttestation(accounts.attestor, domain(), attestation));
    }
    await provider.offers.publisher!.set({
      machine: { machineId, model: machine.model, units: machine.units, vramMiB: machine.vramMiB, interconnect: "nvlink", region: machine.region, cluster: ZERO32 },
      terms: { pricePerUnitSecond, minDuration: 60, maxDuration: 86_400, collateralBps: 2_000, startWindow: 600 },
      capacity: { freeUnits: machine.units },
      attestations,
    });
  }

  before(async () => {
    devnet = await startDevnet({ attestors: [accounts.attestor.address] });
    provider = await startTestDaemon(devnet, { chain: { privateKey: devnetPrivateKey(1) } }, { publishesOffers: true });
    providerAddress = provider.account!.address;
    // Registered before the API node starts: the node learns the provider from past events (the backfill).
    [a100Id, h100Id] = (await registerProvider(devnet, await devnet.wallet(1), {
      peerId: provider.p2p.host.peerId.toString(),
      stake: 100_000_000_000n,
      machines: [A100, H100],
    })) as [number, number];
    a100Key = offerKey(providerAddress, a100Id);
    h100Key = offerKey(providerAddress, h100Id);
    node = await startTestDaemon(devnet, {
      p2p: { bootstrap: [provider.p2p.host.getMultiaddrs()[0]!.toString()] },
      api: { enabled: true, port: 0 },
    });
    base = node.api!.url;
    await node.api!.source.ready;
    await waitFor("the provider connected to the node", () => node.p2p.host.getPeers().length > 0);
    await publish(a100Id, A100, 500n, true);
    await publish(h100Id, H100, 900n, false);
    await waitFor("both offers in the node's book", () => node.offers.book.get(a100Key) && node.offers.book.get(h100Key), { timeoutMs: 15_000 });

    // The provider side of the lease protocols: tiny handlers that record what arrives (the real
    // provider agent serves these; here they let the test see exactly what the node forwarded).
    const record = (protocol: string) => (body: unknown) => {
      received.push({ protocol, body });
    };
    const passthrough = z.looseObject({});
    unhandle.push(
      await handleProtocol(provider.p2p.host, TASK_PROTOCOL, {
        requestSchema: passthrough,
        responseSchema: taskAnswerSchema,
        handler: (body) => {
          record(TASK_PROTOCOL)(body);
          return { leaseId, state: "accepted" as const };
        },
      }),
      await handleProtocol(provider.p2p.host, STATUS_PROTOCOL, {
        requestSchema: passthrough,
        responseSchema: taskStatusSchema,
        handler: (body) => {
          record(STATUS_PROTOCOL)(body);
          return {
            leaseId,
            state: "succeeded" as const,
            startedAt: 1_000,
            endedAt: 2_000,
            heartbeatAt: 2_000,
            unitSeconds: 2,
            gpus: [{ device: "GPU-0", utilizationPct: 97, memoryUsedMiB: 1024, temperatureC: 60, powerW: 250 }],
            exitCode: 0,
            error: null,
            completion: { report: { leaseId, exitCode: 0, outputDigest: `0x${"ee".repeat(32)}`, unitSeconds: 2n }, signature: `0x${"22".repeat(65)}` },
            nextLogSeq: 3,
          };
        },
      }),
      await handleProtocol(provider.p2p.host, LOGS_PROTOCOL, {
        requestSchema: passthrough,
        responseSchema: logsAnswerSchema,
        handler: (body) => {
          record(LOGS_PROTOCOL)(body);
          return { lines: [{ seq: 2, ts: 1_500, stream: "stdout" as const, text: "epoch 1 done" }], nextSeq: 3, done: true, firstAvailableSeq: 0 };
        },
      }),
      await handleProtocol(provider.p2p.host, CANCEL_PROTOCOL, {
        requestSchema: passthrough,
        responseSchema: cancelAnswerSchema,
        handler: (body) => {
          record(CANCEL_PROTOCOL)(body);
          throw new TaskNotRunningError("The task is already over");
        },
      }),
    );
  });

  after(async () => {
    for (const stop of unhandle) await stop().catch(() => undefined);
    await node?.close();
    await provider?.close();
    await devnet?.close();
  });

  it("serves the offers the provider published, as validated by the node's book", async () => {
    const page = offerPageSchema.decode((await get("/v1/offers")).body);
    assert.deepEqual(
      page.items.map((offer) => offer.key),
      [a100Key, h100Key],
    );
    const [a100] = page.items;
    assert.equal(a100!.model, "A100-80GB");
    assert.equal(a100!.pricePerUnitSecond, 500n);
    assert.equal(a100!.attested, true);
    assert.deepEqual(
      a100!.attestations.map((attestation) => [attestation.attestor, attestation.current]),
      [[accounts.attestor.address, true]],
    );
    assert.equal(a100!.peerId, provider.p2p.host.peerId.toString());
    // The provider's track record beside its offer (issue #40 item 9): no counted lease yet.
    assert.deepEqual(a100!.reputation, { leasesCompleted: 0, faults: 0, unitSecondsDelivered: 0n, uptimePercent: null });
    const signer = await recoverTypedDataAddress({
      domain: domain(),
      types: { Offer: suanliTypes.Offer },
      primaryType: "Offer",
      message: a100!.signed.offer,
      signature: a100!.signed.signature,
    });
    assert.equal(signer, providerAddress);

    const attested = offerPageSchema.decode((await get("/v1/offers?attested=true")).body);
    assert.deepEqual(
      attested.items.map((offer) => offer.key),
      [a100Key],
    );
    const h100 = offerPageSchema.decode((await get("/v1/offers?model=H100&region=us-east")).body);
    assert.deepEqual(
      h100.items.map((offer) => offer.key),
      [h100Key],
    );
    assert.equal(offerViewSchema.decode((await get(`/v1/offers/${a100Key}`)).body).machineId, a100Id);
    const missing = await get(`/v1/offers/${accounts.stranger.address}:1`);
    assert.equal(missing.status, 404);
    assert.equal(errorOf(missing.body).name, "OfferNotFoundError");
  });

  it("serves providers and machines from the registry, found through past events", async () => {
    const providers = providerPageSchema.decode((await get("/v1/providers")).body);
    assert.deepEqual(
      providers.items.map((item) => item.address),
      [providerAddress],
    );
    const record = providerViewSchema.decode((await get(`/v1/providers/${providerAddress.toLowerCase()}`)).body);
    assert.equal(record.registered, true);
    assert.equal(record.stake, 100_000_000_000n);
    assert.equal(record.peerId, provider.p2p.host.peerId.toString());
    assert.deepEqual(record.reputation, { leasesCompleted: 0, faults: 0, unitSecondsDelivered: 0n, uptimePercent: null });
    assert.deepEqual(
      record.machines.map((machine) => [machine.machineId, machine.model, machine.offerKey]),
      [
        [a100Id, "A100-80GB", a100Key],
        [h100Id, "H100-80GB-SXM", h100Key],
      ],
    );
    assert.equal(record.machines[0]!.attestations[0]!.attestor, accounts.attestor.address);
    const stranger = await get(`/v1/providers/${accounts.stranger.address}`);
    assert.equal(stranger.status, 404);
    assert.equal(errorOf(stranger.body).name, "ProviderNotFoundError");

    const machines = machinePageSchema.decode((await get("/v1/machines?region=us-east")).body);
    assert.deepEqual(
      machines.items.map((machine) => machine.machineId),
      [h100Id],
    );
    const machine = machineViewSchema.decode((await get(`/v1/machines/${a100Id}`)).body);
    assert.deepEqual([machine.units, machine.vramMiB, machine.interconnect, machine.idleUnits], [4, 81_920, "nvlink", 4]);
    assert.equal((await get("/v1/machines/999")).status, 404);
  });

  it("answers a match dry-run from the node's engine, and explains a miss", async () => {
    const result = matchResultSchema.decode((await post("/v1/match", { gpuType: "A100", gpuCount: 2, duration: 3600, maxPricePerGpuHour: "2.00" })).body);
    assert.equal(result.matched, true);
    assert.deepEqual(
      result.candidates[0]!.allocations.map((allocation) => [allocation.offerKey, allocation.units]),
      [[a100Key, 2]],
    );
    assert.equal(result.candidates[0]!.totalCost, 2n * 500n * 3600n);
    assert.equal(result.candidates[0]!.allocations[0]!.peerId, provider.p2p.host.peerId.toString());

    // The H100 offer carries no attestation: attestedOnly (the default) removes it.
    const miss = matchResultSchema.decode((await post("/v1/match", { gpuType: "H100", gpuCount: 1, duration: 3600, maxPricePerGpuHour: "5" })).body);
    assert.equal(miss.matched, false);
    assert.deepEqual(
      miss.explanation!.steps.filter((step) => step.removed > 0).map((step) => [step.constraint, step.removed]),
      [
        ["gpuType", 1],
        ["attestation", 1],
      ],
    );
    const any = matchResultSchema.decode((await post("/v1/match", { gpuType: "H100", gpuCount: 1, duration: 3600, maxPricePerGpuHour: "5", attestedOnly: false })).body);
    assert.equal(any.candidates[0]!.allocations[0]!.offerKey, h100Key);
  });

  it("relays a signed reservation to the provider over libp2p and returns its acceptance", async () => {
    const renter = accounts.renter;
    unhandle.push(
      await handleProtocol(provider.p2p.host, RESERVE_PROTOCOL, {
        requestSchema: reserveBodySchema,
        responseSchema: reserveReplySchema,
        handler: async (body) => {
          received.push({ protocol: RESERVE_PROTOCOL, body });
          // The renter's signature arrives intact: the provider can check it itself.
          const signer = await recoverTypedDataAddress({
            domain: domain(),
            types: { ReserveRequest: suanliTypes.ReserveRequest },
            primaryType: "ReserveRequest",
            message: body.request,
            signature: body.signature,
          });
          if (signer !== body.request.renter) return { accepted: false as const, reason: "invalid-request" as const, message: "bad signature" };
          const held = node.offers.book.get(offerKey(body.request.provider, body.request.machineId))!.message.offer;
          const holdUntil = Math.floor(Date.now() / 1000) + 300;
          const offer: Offer = { ...held, renter: body.request.renter, expiry: holdUntil, nonce: 77n };
          const signature = await signOffer(accounts.providerA, domain(), offer);
          return { accepted: true as const, offer, signature, units: body.request.units, holdUntil, preempt: [] };
        },
      }),
    );
    const request: ReserveRequest = {
      renter: renter.address,
      provider: providerAddress,
      machineId: a100Id,
      units: 2,
      duration: 3600,
      interruptible: false,
      bidPerUnitSecond: 0n,
      issuedAt: Math.floor(Date.now() / 1000),
      nonce: `0x${"5a".repeat(32)}`,
    };
    const signature = await renter.signTypedData({ domain: domain(), types: { ReserveRequest: suanliTypes.ReserveRequest }, primaryType: "ReserveRequest", message: request });
    const response = await post("/v1/reservations", { request: { ...request, bidPerUnitSecond: "0" }, signature });
    assert.equal(response.status, 200, JSON.stringify(response.body));
    const answer = reservationAnswerSchema.decode(response.body);
    assert.equal(answer.accepted, true);
    if (!answer.accepted) return;
    assert.equal(answer.acceptance.offer.renter, renter.address);
    assert.equal(answer.units, 2);
    assert.equal(received.length, 1);

    // The renter opens the lease with the acceptance, as the SDK would.
    const wallet = await devnet.wallet(renter);
    const deposit = 2n * 500n * 3600n;
    await fund(devnet, wallet, deposit);
    await send(wallet, { address: devnet.deployment.contracts.token, abi: testTokenAbi, functionName: "approve", args: [devnet.deployment.contracts.market!, deposit] });
    const market = devnet.deployment.contracts.market!;
    leaseId = (await wallet.publicClient.readContract({ address: market, abi: leaseMarketAbi, functionName: "nextLeaseId" })) as bigint;
    const stream = await openEventStream(`${base}/v1/events?types=lease`);
    try {
      await send(wallet, {
        address: market,
        abi: leaseMarketAbi,
        functionName: "openLease",
        args: [
          answer.acceptance.offer,
          answer.acceptance.signature,
          { units: 2, duration: 3600, maxPricePerUnitSecond: 500n, interruptible: false, bidPerUnitSecond: 0n, preempt: [] },
        ],
      });
      await stream.waitFor((events) => events.some((event) => marketEventSchemas.lease.decode(JSON.parse(event.data)).id === leaseId), 10_000);
      const opened = marketEventSchemas.lease.decode(JSON.parse(stream.events.at(-1)!.data));
      assert.deepEqual([opened.status, opened.renter, opened.provider, opened.units], ["Open", renter.address, providerAddress, 2]);
    } finally {
      stream.close();
    }
  });

  it("serves the lease by id and by address, and follows it to Active", async () => {
    const lease = leaseViewSchema.decode((await get(`/v1/leases/${leaseId}`)).body);
    assert.deepEqual([lease.status, lease.machineId, lease.deposit, lease.activatedAt], ["Open", a100Id, 2n * 500n * 3600n, null]);
    const ids = async (query: string) => leasePageSchema.decode((await get(`/v1/leases?${query}`)).body).items.map((item) => item.id);
    assert.deepEqual(await ids(`address=${accounts.renter.address}&role=renter`), [leaseId]);
    assert.deepEqual(await ids(`address=${accounts.renter.address}&role=provider`), []);
    assert.deepEqual(await ids(`address=${providerAddress}&role=provider&status=Open`), [leaseId]);

    await send(await devnet.wallet(1), { address: devnet.deployment.contracts.market!, abi: leaseMarketAbi, functionName: "activate", args: [leaseId] });
    await waitFor("the lease indexed as Active", async () => (await ids(`address=${providerAddress}&status=Active`)).length === 1, { timeoutMs: 10_000 });
    const active = leaseViewSchema.decode((await get(`/v1/leases/${leaseId}`)).body);
    assert.equal(active.status, "Active");
    assert.ok(active.activatedAt !== null && active.end !== null && active.end > active.activatedAt);
    assert.deepEqual(await ids(`address=${providerAddress}&status=Open`), []);
    const missing = await get("/v1/leases/999");
    assert.equal(missing.status, 404);
    assert.equal(errorOf(missing.body).name, "LeaseNotFoundError");
  });

  it("reports utilization from the chain's capacity and prices from the book", async () => {
    // The lease holds 2 of the A100 machine's 4 units on-chain; the offer's own snapshot says 0.
    await waitFor("utilization from CapacityChanged", async () => {
      const stats = marketStatsSchema.decode((await get("/v1/stats?model=A100")).body);
      return stats.models[0]?.current.usedUnits === 2;
    });
    const stats = marketStatsSchema.decode((await get("/v1/stats")).body);
    const a100 = stats.models.find((model) => model.model === "A100-80GB")!;
    assert.deepEqual([a100.current.offers, a100.current.units, a100.current.utilization], [1, 4, 0.5]);
    assert.deepEqual(a100.current.price, { min: 500n, p10: 500n, p50: 500n, p90: 500n, max: 500n });
    assert.ok(a100.series.some((bucket) => bucket.offers === 1));
  });

  it("forwards the task spec to the provider exactly as the renter signed it", async () => {
    // An upper-case sha256 with 0x: the node's schema accepts it, and must not rewrite it.
    const spec = { bundle: { url: "https://example.com/job.tar.gz", sha256: `0x${"AB".repeat(32)}` }, command: ["python", "train.py"], env: { SEED: "7" } };
    const body = { auth: await auth("task", { spec }), spec };
    const response = await post(`/v1/leases/${leaseId}/task`, body);
    assert.equal(response.status, 200, JSON.stringify(response.body));
    assert.deepEqual(response.body, { leaseId: leaseId.toString(), state: "accepted" });
    const delivered = received.at(-1)!;
    assert.equal(delivered.protocol, TASK_PROTOCOL);
    assert.deepEqual(delivered.body, body);
    assert.equal(leaseRequestBodyHash("task", { spec }), body.auth.request.bodyHash);
  });

  it("relays status and logs, answers decoded with the shared schemas", async () => {
    const status = await post(`/v1/leases/${leaseId}/status`, { auth: await auth("status", {}) });
    assert.equal(status.status, 200, JSON.stringify(status.body));
    const decoded = statusRelayAnswerSchema.decode(status.body);
    assert.deepEqual([decoded.state, decoded.exitCode, decoded.completion?.report.unitSeconds], ["succeeded", 0, 2n]);
    const logs = await post(`/v1/leases/${leaseId}/logs`, { auth: await auth("logs", { fromSeq: 2, waitMs: 100 }), fromSeq: 2, waitMs: 100 });
    assert.equal(logs.status, 200, JSON.stringify(logs.body));
    assert.deepEqual(
      (logs.body as { lines: { text: string }[] }).lines.map((line) => line.text),
      ["epoch 1 done"],
    );
    assert.deepEqual((received.at(-1)!.body as { waitMs: number }).waitMs, 100);
  });

  it("passes the provider's own error back under its name, with the status of its meaning, not 502 (issue #40 item 6)", async () => {
    const response = await post(`/v1/leases/${leaseId}/cancel`, { auth: await auth("cancel", {}) });
    // The provider answered correctly that the task is over: a state conflict, not a bad gateway.
    assert.equal(response.status, 409);
    assert.equal(errorOf(response.body).name, "TaskNotRunningError");
    assert.match(errorOf(response.body).message, /already over/);
    // A client prints "name: message": the name once, not "X: The provider answered X: ..." (issue #40 item 6).
    assert.doesNotMatch(errorOf(response.body).message, /TaskNotRunningError/);
  });

  it("refuses a request not signed by the lease's renter, and an unknown lease, without reaching the provider", async () => {
    const before = received.length;
    const forged = await post(`/v1/leases/${leaseId}/status`, { auth: await auth("status", {}, { signer: accounts.stranger }) });
    assert.equal(forged.status, 401);
    assert.equal(errorOf(forged.body).name, "InvalidSignatureError");
    assert.match(errorOf(forged.body).message, new RegExp(accounts.renter.address));
    const unknown = await post("/v1/leases/999/status", { auth: await auth("status", {}, { leaseId: 999n }) });
    assert.equal(unknown.status, 404);
    assert.equal(errorOf(unknown.body).name, "LeaseNotFoundError");
    const stale = await auth("status", {});
    stale.request.issuedAt -= 3600;
    const old = await post(`/v1/leases/${leaseId}/status`, { auth: stale });
    assert.equal(old.status, 401);
    assert.equal(errorOf(old.body).name, "StaleSignatureError");
    assert.equal(received.length, before);
  });

  it("answers 502 when the provider's node cannot be reached, and 404 for an address that never registered", async () => {
    // A provider registered with a peer id whose node never started.
    const ghostKey = await generateKeyPair("Ed25519");
    const ghost = await devnet.wallet(4);
    const [machineId] = await registerProvider(devnet, ghost, { peerId: peerIdFromPrivateKey(ghostKey).toString(), stake: 1_000_000n, machines: [A100] });
    const request: ReserveRequest = {
      renter: accounts.renter.address,
      provider: ghost.account.address,
      machineId: machineId!,
      units: 1,
      duration: 600,
      interruptible: false,
      bidPerUnitSecond: 0n,
      issuedAt: Math.floor(Date.now() / 1000),
      nonce: `0x${"6b".repeat(32)}`,
    };
    const signature = await accounts.renter.signTypedData({
      domain: domain(),
      types: { ReserveRequest: suanliTypes.ReserveRequest },
      primaryType: "ReserveRequest",
      message: request,
    });
    const response = await post("/v1/reservations", { request: { ...request, bidPerUnitSecond: "0" }, signature });
    assert.equal(response.status, 502, JSON.stringify(response.body));
    assert.equal(errorOf(response.body).name, "ProviderUnreachableError");

    // An address that never registered has no peer to relay to.
    const nobody = { ...request, provider: accounts.stranger.address, nonce: `0x${"7c".repeat(32)}` as const };
    const nobodySignature = await accounts.renter.signTypedData({
      domain: domain(),
      types: { ReserveRequest: suanliTypes.ReserveRequest },
      primaryType: "ReserveRequest",
      message: nobody,
    });
    const missing = await post("/v1/reservations", { request: { ...nobody, bidPerUnitSecond: "0" }, signature: nobodySignature });
    assert.equal(missing.status, 404);
    assert.equal(errorOf(missing.body).name, "ProviderNotFoundError");
  });

  it("streams a new offer version the moment the book accepts it", async () => {
    const stream = await openEventStream(`${base}/v1/events?types=offer`);
    try {
      await publish(a100Id, A100, 450n, true);
      await stream.waitFor((events) => events.some((event) => marketEventSchemas.offer.decode(JSON.parse(event.data)).pricePerUnitSecond === 450n), 10_000);
      const offer = marketEventSchemas.offer.decode(JSON.parse(stream.events.at(-1)!.data));
      assert.equal(offer.key, a100Key);
      assert.equal(offer.attested, true);
    } finally {
      stream.close();
    }
  });

  it("reports its health: chain, index, peers and book", async () => {
    const response = await get("/v1/health");
    assert.equal(response.status, 200);
    const health = healthSchema.decode(response.body);
    assert.equal(health.status, "ok", JSON.stringify(health.checks));
    assert.deepEqual(
      health.checks.map((check) => check.name),
      ["chain", "index", "p2p", "offers"],
    );
    assert.match(health.checks[0]!.detail ?? "", /^chain 31337 at block \d+/);
    assert.match(health.checks[3]!.detail ?? "", /^2 offers in the book, 2 matchable/);
  });

  it("keeps its index across a restart and catches up with what happened while it was down", async () => {
    const dataDir = node.config.dataDir;
    assert.equal(node.api!.source.index.backfill?.fromBlock, devnet.deployment.deploymentBlock, "a first start reads from the deployment block");
    await node.close({ keepData: true });
    const stoppedAt = await devnet.admin.publicClient.getBlockNumber();
    // While the node is down: a new provider registers.
    const late = await devnet.wallet(3);
    await registerProvider(devnet, late, { peerId: "12D3KooWLateProviderLateProviderLateProviderLate", stake: 5_000_000n, machines: [H100] });
    node = await startTestDaemon(devnet, { dataDir, p2p: { bootstrap: [provider.p2p.host.getMultiaddrs()[0]!.toString()] }, api: { enabled: true, port: 0 } });
    base = node.api!.url;
    await node.api!.source.ready;
    // It resumed where it stopped, not from the deployment block, and read the late registration.
    const backfill = node.api!.source.index.backfill!;
    assert.ok(backfill.fromBlock > devnet.deployment.deploymentBlock && backfill.fromBlock <= stoppedAt + 1n, `resumed at ${backfill.fromBlock}`);
    assert.ok(backfill.events >= 3, `events read while down: ${backfill.events}`);
    const providers = providerPageSchema.decode((await get("/v1/providers?sort=stake")).body);
    assert.deepEqual(
      providers.items.map((item) => item.address),
      [providerAddress, late.account.address, devnetAccount(4).address],
    );
    const leases = leasePageSchema.decode((await get(`/v1/leases?address=${accounts.renter.address}`)).body);
    assert.deepEqual(
      leases.items.map((lease) => [lease.id, lease.status]),
      [[leaseId, "Active"]],
    );
  });
});

describe("HTTP status of a provider's answered error (issue #40 item 6)", () => {
  it("is the answer's meaning: no output yet is 404, a task over is 409; an unknown name or a broken answer stays 502", () => {
    assert.equal(new ProviderAnsweredError("OutputNotAvailableError", "no output/ folder yet").statusCode, 404);
    assert.equal(new ProviderAnsweredError("TaskNotRunningError", "over").statusCode, 409);
    assert.equal(new ProviderAnsweredError("RenterAuthError", "not the renter").statusCode, 403);
    assert.equal(new ProviderAnsweredError("SomeNewerProviderError", "?").statusCode, 502);
    assert.equal(new ProviderAnsweredError("InvalidMessageError", "more bytes than the manifest", 502).statusCode, 502);
    // Every listed status is a client-side or availability answer, never a success or a gateway failure.
    for (const [name, status] of Object.entries(PROVIDER_ANSWER_STATUS)) assert.ok([400, 403, 404, 409, 429, 503].includes(status), `${name}: ${status}`);
  });
});

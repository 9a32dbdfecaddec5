/**
 * Issue 37, autoscaling: `client.deployEndpoint` rents a replica when the requests in flight per
 * replica stay above target, within its spend cap per hour, and releases one after the load stops
 * (out of the record first, then its lease closed and the unused deposit refunded), and replaces
 * a preempted interruptible replica. Two providers of one A100 each (each task in its own network
 * namespace: replicas listen on the same port), a gateway on a third node, a bounded load loop of
 * plain `fetch` through the gateway.
 */
import assert from "node:assert/strict";
import path from "node:path";
import { readLease } from "../../common/chain/market.js";
import { InvalidInputError } from "../../common/errors.js";
import { stringifyPlain } from "../../common/json.js";
import { getEndpointStats, type AutoscalerEvent, type DeployEndpointParameters, type DeployedEndpoint } from "../../sdk/index.js";
import { startTestDaemon } from "../support/daemons.js";
import { TestRenter } from "../support/renter.js";
import { freePort } from "../support/ports.js";
import { startRenterMarket, type RenterMarket } from "../support/renter-market.js";
import { waitFor } from "../support/wait.js";

/** Answers a name of its own (each replica draws one at its start); /slow?ms= waits first. */
const SERVER_JS = `
const http = require("node:http");
const port = Number(process.argv[2]);
const name = require("node:crypto").randomUUID();
const after = (req) => Number(new URL(req.url, "http://x").searchParams.get("ms") || 0);
http.createServer((req, res) => {
  if (req.url.startsWith("/health")) return res.end("ok");
  setTimeout(() => res.end(name), after(req));
}).listen(port, "127.0.0.1", () => console.log("listening on " + port));
`;

describe("gateway autoscaling: deployEndpoint adds a replica under load within its spend cap and releases it after, replaces a preempted one (2 providers, a gateway node)", function () {
  this.timeout(120_000);
  let market: RenterMarket;
  let gatewayUrl: string;
  let options: DeployEndpointParameters;
  const events: AutoscalerEvent[] = [];
  let deployed: DeployedEndpoint | undefined;

  before(async () => {
    const provider = {
      provider: {
        inventory: { source: "declared", declared: [{ model: "A100-80GB", count: 1, region: "eu-west" }] },
        minBids: { "A100-80GB": { pricePerUnitSecond: "50" } },
        reserve: { holdSeconds: 5 },
        runtime: { sandbox: "bubblewrap", network: false, readOnlyPaths: [path.dirname(process.execPath)] },
      },
    };
    market = await startRenterMarket({ name: "autoscale", providers: [provider, provider], freeUnits: 1, offers: 2 });
    const gateway = await startTestDaemon(market.devnet, {
      dataDir: path.join(market.work, "gateway-node"),
      p2p: { bootstrap: market.providers.map((p) => p.peer.addr) },
      gateway: { enabled: true, port: 0, health: { intervalMs: 300, timeoutMs: 2000, unhealthyAfter: 2 } },
    });
    market.defer(() => gateway.close());
    gatewayUrl = gateway.gateway!.url;
    const port = await freePort();
    const bundle = await market.bundles.bundle({ "server.js": SERVER_JS });
    // The provider asks 100 base units a GPU-second (0.36 USD/h); a replica is counted at its cap of
    // 0.50 USD/h until rented: 1 USD/h pays for two replicas, not three.
    options = {
      gatewayUrl,
      public: true,
      healthPath: "/health",
      task: {
        gpuType: "A100",
        gpuCount: 1,
        duration: 300,
        maxPricePerGpuHour: "0.5",
        attestedOnly: false,
        bundleUrl: bundle.url,
        sha256: bundle.sha256,
        command: [process.execPath, "server.js", String(port)],
        ports: [port],
      },
      replicas: { min: 1, max: 3 },
      scale: { targetConcurrency: 1, scaleDownAfterSeconds: 2, intervalMs: 300, drainMs: 5000 },
      maxSpendPerHour: "1",
      onEvent: (event) => events.push(event),
    };
  });
  after(async () => {
    await deployed?.stop();
    await market?.close();
  });

  it("refuses bad parameters before renting anything, naming each field", async () => {
    const freeUnits = async () => (await market.client.queryOffers()).reduce((sum, offer) => sum + offer.freeUnits, 0);
    const freeBefore = await freeUnits();
    const refusals: [Partial<DeployEndpointParameters>, RegExp][] = [
      [{ replicas: { min: 3, max: 2 } }, /replicas\.min: min must not be greater than max/],
      [{ scale: { targetConcurrency: 0, scaleDownAfterSeconds: 2 } }, /scale\.targetConcurrency: must be greater than 0/],
      [{ maxSpendPerHour: "0.4" }, /maxSpendPerHour: 0\.40 USD\/h cannot pay for 1 replica\(s\) of up to 0\.4968 USD\/h/],
      [{ task: { ...options.task, ports: [] } }, /port: must be one of the task's ports \(task\.ports: none declared\)/],
      [{ task: { ...options.task, bundleUrl: undefined, sha256: undefined } }, /template: give a template, or the task's image/],
      [{ task: { ...options.task, maxPricePerGpuHour: undefined } }, /maxPricePerGpuHour/],
    ];
    for (const [change, message] of refusals) {
      await assert.rejects(
        market.client.deployEndpoint({ ...options, ...change }),
        (error: unknown) => error instanceof InvalidInputError && message.test(error.message),
        `refused: ${message}`,
      );
    }
    await assert.rejects(market.client.deployEndpoint({ ...options, template: "no-such-template" }), /no-such-template/);
    assert.deepEqual(await market.client.tasks(), [], "no task was submitted");
    assert.equal(await freeUnits(), freeBefore, "no GPU was rented");
    assert.deepEqual(events, []);
  });

  it("adds a replica while a bounded load keeps 3 requests in flight (the third refused by the spend cap), then releases it and refunds its lease", async () => {
    const endpoint = (deployed = await market.client.deployEndpoint(options));
    const first = endpoint.replicas();
    assert.equal(first.length, 1);
    await waitFor("the first replica ready", async () => (await getEndpointStats(gatewayUrl, endpoint.endpointId)).replicas[0]?.state === "ready", {
      timeoutMs: 30_000,
      state: () => getEndpointStats(gatewayUrl, endpoint.endpointId),
    });

    // The load: 3 workers, each a request of 300 ms after another through the handle's current URL,
    // until both replicas have answered (at most 40 s).
    const answers: { status: number; body: string }[] = [];
    let loading = true;
    const worker = async () => {
      while (loading) {
        const response = await fetch(`${endpoint.url}slow?ms=300`);
        answers.push({ status: response.status, body: await response.text() });
      }
    };
    const workers = [worker(), worker(), worker()];
    try {
      await waitFor("answers from two replicas", () => new Set(answers.filter((a) => a.status === 200).map((a) => a.body)).size === 2, {
        timeoutMs: 40_000,
        intervalMs: 100,
        state: () => ({ events, replicas: endpoint.replicas() }),
      });
    } finally {
      loading = false;
      await Promise.all(workers);
    }
    assert.deepEqual(
      answers.filter((a) => a.status !== 200),
      [],
      "no request failed while the record changed",
    );
    const grown = events.find((e) => e.type === "replica-added" && e.reason === "load");
    assert.ok(grown && grown.type === "replica-added", stringifyPlain(events));
    assert.ok(
      events.some((e) => e.type === "spend-capped" && e.reason === "load" && e.maxSpendPerHour === 1_000_000n),
      `a third replica was wanted (3 in flight, target 1) and refused by the cap: ${stringifyPlain(events)}`,
    );
    assert.equal(events.filter((e) => e.type === "replica-added").length, 2, "never a third");
    assert.equal(events.filter((e) => e.type === "spend-capped").length, 1, "told once while the set stayed the same");

    // The load stopped: after scaleDownAfterSeconds the newest replica leaves the record, then its lease closes.
    const removed = await waitFor("a replica released", () => events.find((e) => e.type === "replica-removed"), {
      timeoutMs: 20_000,
      state: () => events,
    });
    assert.ok(removed.type === "replica-removed");
    assert.equal(removed.reason, "load");
    assert.equal(removed.replica.leaseId, grown.replica.leaseId, "the newest replica is released");
    assert.deepEqual(
      endpoint.replicas().map((r) => r.leaseId),
      [first[0]!.leaseId],
    );
    const records = events.filter((e) => e.type === "endpoint");
    assert.deepEqual(
      records.map((e) => e.leaseIds),
      [[first[0]!.leaseId], [first[0]!.leaseId, grown.replica.leaseId], [first[0]!.leaseId]],
      "one record per change: the released replica left the record before its lease closed",
    );
    const lastRecord = events.lastIndexOf(records.at(-1)!);
    assert.ok(lastRecord < events.indexOf(removed), "the record without it came first");
    assert.equal(endpoint.endpointId, records.at(-1)!.endpointId);
    // Money: closed by the renter, billed for the seconds it ran, the rest of its 300 s deposit refunded.
    const lease = await readLease(market.devnet.admin.publicClient, market.devnet.deployment.contracts.market!, removed.replica.leaseId);
    assert.equal(lease.endReason, "RenterClosed");
    assert.equal(removed.refunded + lease.deposit, removed.replica.deposit, "refunded what the provider did not earn");
    assert.ok(lease.deposit < removed.replica.deposit / 4n, `billed for seconds, not the lease's 300 s: ${lease.deposit} of ${removed.replica.deposit}`);
    // The superseded records are gone from the gateway; the current one serves.
    for (const record of records.slice(0, -1)) assert.equal((await fetch(`${gatewayUrl}/e/${record.endpointId}/`)).status, 404);
    assert.equal((await fetch(endpoint.url)).status, 200);

    // stop(): the record is deleted and the last lease closed too.
    await endpoint.stop();
    assert.equal((await fetch(endpoint.url)).status, 404);
    const last = events.at(-1)!;
    assert.ok(last.type === "replica-removed" && last.reason === "stop" && last.replica.leaseId === first[0]!.leaseId, stringifyPlain(last));
    const firstLease = await readLease(market.devnet.admin.publicClient, market.devnet.deployment.contracts.market!, first[0]!.leaseId);
    assert.equal(firstLease.endReason, "RenterClosed");
    assert.ok(!events.some((e) => e.type === "error"), stringifyPlain(events.filter((e) => e.type === "error")));
  });

  it("replaces an interruptible replica that is preempted: out of the record, a new lease on the other provider, the endpoint serves again; stop({ closeLeases: false }) leaves that lease running", async () => {
    await waitFor("both machines free again", async () => (await market.client.queryOffers()).filter((offer) => offer.freeUnits >= 1).length === 2, { timeoutMs: 20_000 });
    events.length = 0;
    const endpoint = (deployed = await market.client.deployEndpoint({
      ...options,
      task: { ...options.task, interruptible: true, bidPerGpuHour: "0.2", maxPricePerGpuHour: undefined },
      replicas: { min: 1, max: 1 },
      maxSpendPerHour: "0.5",
    }));
    const [victim] = endpoint.replicas();
    assert.ok(victim?.interruptible);
    await waitFor("the replica ready", async () => (await getEndpointStats(gatewayUrl, endpoint.endpointId)).replicas[0]?.state === "ready", { timeoutMs: 30_000 });
    // An on-demand renter takes the replica's machine.
    const provider = market.providers.find((p) => p.peer.address === victim.provider)!;
    const preemptor = await TestRenter.start(market.devnet, 6);
    try {
      await preemptor.rent(provider.peer, { machineId: provider.agent.machines[0]!.machineId, units: 1, duration: 30 });
    } finally {
      await preemptor.close();
    }
    const added = await waitFor("a replacement", () => events.find((e) => e.type === "replica-added" && e.reason === "replace"), { timeoutMs: 30_000, state: () => events });
    assert.ok(added.type === "replica-added");
    const ended = events.find((e) => e.type === "replica-ended");
    assert.ok(ended?.type === "replica-ended" && ended.endReason === "Preempted" && ended.replica.leaseId === victim.leaseId, stringifyPlain(events));
    assert.notEqual(added.replica.provider, victim.provider, "on the provider that is free");
    const record = await waitFor("the record with the replacement", () => events.find((e) => e.type === "endpoint" && e.leaseIds.includes(added.replica.leaseId)), {
      state: () => events,
    });
    assert.ok(record.type === "endpoint");
    assert.deepEqual(record.leaseIds, [added.replica.leaseId], "the preempted lease is out");
    assert.equal(endpoint.endpointId, record.endpointId);
    await waitFor("the replacement ready", async () => (await getEndpointStats(gatewayUrl, endpoint.endpointId)).replicas[0]?.state === "ready", { timeoutMs: 30_000 });
    assert.equal((await fetch(endpoint.url)).status, 200);
    assert.ok(!events.some((e) => e.type === "error"), stringifyPlain(events.filter((e) => e.type === "error")));

    // stop({ closeLeases: false }): the record is gone, the lease runs on until the renter closes it.
    await endpoint.stop({ closeLeases: false });
    deployed = undefined;
    assert.equal((await fetch(endpoint.url)).status, 404);
    assert.ok(!events.some((e) => e.type === "replica-removed"), stringifyPlain(events));
    const marketAddress = market.devnet.deployment.contracts.market!;
    assert.equal((await readLease(market.devnet.admin.publicClient, marketAddress, added.replica.leaseId)).status, "Active");
    await market.client.cancel(added.replica.taskId);
    assert.equal((await readLease(market.devnet.admin.publicClient, marketAddress, added.replica.leaseId)).endReason, "RenterClosed");
  });
});

/**
 * Issue 37, Replicas: one endpoint over two leases on two providers, behind a gateway on a third
 * node. The gateway sends each request to the ready replica with the fewest requests in flight,
 * health-checks each one on the record's health path, retries a request that changes nothing once
 * on another replica, stops routing to a replica whose lease is preempted while its streams in
 * flight finish, and answers 503 with Retry-After once no replica runs. Plain `fetch` from outside.
 */
import assert from "node:assert/strict";
import path from "node:path";
import { stringifyPlain } from "../../common/json.js";
import { readLease } from "../../common/chain/market.js";
import type { EndpointStats } from "../../common/endpoints.js";
import { getEndpointStats } from "../../sdk/index.js";
import { startTestDaemon } from "../support/daemons.js";
import { freePort } from "../support/ports.js";
import type { TestProvider } from "../support/provider.js";
import { TestRenter } from "../support/renter.js";
import { startRenterMarket, type RenterMarket } from "../support/renter-market.js";
import { waitFor } from "../support/wait.js";

/**
 * Answers with its replica's NAME; /health fails while it is sick; /down closes its port for a while.
 * SIGTERM (a preemption notice begins) drains it, as a server should: no new connections, the open
 * streams finish, then it exits; a second SIGTERM (the notice's end) exits at once.
 */
const SERVER_JS = `
const http = require("node:http");
const port = Number(process.argv[2]);
const name = process.env.NAME;
let sickUntil = 0;
const after = (req) => Number(new URL(req.url, "http://x").searchParams.get("ms") || 0);
const server = http.createServer((req, res) => {
  if (req.url.startsWith("/health")) {
    res.writeHead(Date.now() < sickUntil ? 503 : 200);
    return res.end(name);
  }
  if (req.url.startsWith("/sick")) {
    sickUntil = Date.now() + after(req);
    return res.end(name);
  }
  if (req.url.startsWith("/down")) {
    return res.end(name, () => {
      server.close();
      server.closeAllConnections();
      setTimeout(() => server.listen(port, "127.0.0.1"), after(req));
    });
  }
  if (req.url.startsWith("/slow")) return void setTimeout(() => res.end(name), after(req));
  if (req.url.startsWith("/events")) {
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    let n = 0;
    const timer = setInterval(() => { res.write("data: " + name + " " + n + "\\n\\n"); if (++n === 3) { clearInterval(timer); res.end(); } }, 700);
    return;
  }
  res.end(name);
});
server.listen(port, "127.0.0.1", () => console.log("listening on " + port));
let draining = false;
process.on("SIGTERM", () => {
  if (draining) process.exit(0);
  draining = true;
  server.close(() => process.exit(0));
});
`;

/** The chain's preemption notice here, seconds: the preempted replica's streams in flight finish within it (it drains on the notice's SIGTERM). */
const NOTICE = 6;

const provider = {
  provider: {
    inventory: { source: "declared", declared: [{ model: "A100-80GB", count: 1, region: "eu-west" }] },
    minBids: { "A100-80GB": { pricePerUnitSecond: "50" } },
    reserve: { holdSeconds: 5 },
    // Each task in its own network namespace: both replicas listen on the same port of one host.
    runtime: { sandbox: "bubblewrap", network: false, readOnlyPaths: [path.dirname(process.execPath)] },
  },
};

describe("gateway replicas: least outstanding requests, health checks, a retry, a preemption mid-stream (2 providers, a gateway node)", function () {
  this.timeout(120_000);
  let market: RenterMarket;
  let gatewayUrl: string;
  let taskPort: number;
  const tasks: { name: string; taskId: string; leaseId: bigint; provider: TestProvider }[] = [];
  /** With the health path /health. */
  let checked: { id: string; url: string };
  /** Without one: failures seen only by requests. */
  let plain: { id: string; url: string };
  /** The gateway node's Prometheus text, as its /metrics serves it. */
  let scrape: () => Promise<string>;
  /** One per-replica series' value, by endpoint and task name (undefined when the series is missing). */
  const series = (text: string, name: string, id: string, task: string, extra = "") => {
    const leaseId = tasks.find((t) => t.name === task)!.leaseId;
    const line = text.split("\n").find((l) => l.startsWith(`${name}{endpoint="${id}",lease="${leaseId}"${extra}} `));
    return line === undefined ? undefined : Number(line.split(" ").at(-1));
  };

  const get = async (url: string) => {
    const response = await fetch(url);
    return { status: response.status, text: await response.text(), headers: response.headers };
  };
  const stats = (id: string): Promise<EndpointStats> => getEndpointStats(gatewayUrl, id);
  const replicaOf = async (id: string, name: string) => {
    const task = tasks.find((t) => t.name === name)!;
    return (await stats(id)).replicas.find((replica) => replica.leaseId === String(task.leaseId))!;
  };
  const other = (name: string) => (name === "a" ? "b" : "a");

  before(async () => {
    market = await startRenterMarket({ name: "replicas", devnet: { params: { preemptionNotice: NOTICE } }, providers: [provider, provider], freeUnits: 1, offers: 2 });
    const gateway = await startTestDaemon(market.devnet, {
      dataDir: path.join(market.work, "gateway-node"),
      p2p: { bootstrap: market.providers.map((p) => p.peer.addr) },
      gateway: {
        enabled: true,
        port: 0,
        responseTimeoutMs: 3000,
        retryAfterSeconds: 2,
        health: { intervalMs: 400, timeoutMs: 2500, unhealthyAfter: 2 },
        ejectMs: 3000,
        drainSeconds: 5,
      },
    });
    market.defer(() => gateway.close());
    gatewayUrl = gateway.gateway!.url;
    scrape = () => gateway.metrics.registry.metrics();
    taskPort = await freePort();
    const bundle = await market.bundles.bundle({ "server.js": SERVER_JS });
    // Interruptible: an on-demand renter can take a replica's machine (the last tests).
    for (const name of ["a", "b"]) {
      const submitted = await market.client.submitTask({
        gpuType: "A100",
        gpuCount: 1,
        duration: 120,
        interruptible: true,
        bidPerGpuHour: "0.2",
        attestedOnly: false,
        bundleUrl: bundle.url,
        sha256: bundle.sha256,
        command: [process.execPath, "server.js", String(taskPort)],
        env: { NAME: name },
        ports: [taskPort],
      });
      tasks.push({ name, taskId: submitted.taskId, leaseId: BigInt(submitted.leaseId), provider: market.providers.find((p) => p.peer.address === submitted.provider)! });
    }
    assert.notEqual(tasks[0]!.provider, tasks[1]!.provider, "one replica on each provider");
    for (const task of tasks) {
      await waitFor(
        `replica ${task.name} listening`,
        async () => {
          for await (const line of market.client.logs(task.taskId, { follow: false })) if (line.text.includes(`listening on ${taskPort}`)) return true;
          return false;
        },
        { timeoutMs: 30_000 },
      );
    }
  });
  after(async () => {
    await market?.close();
  });

  it("registers one endpoint over both tasks' leases (with a health path) and reports each replica ready once its check passes", async () => {
    const taskIds = tasks.map((t) => t.taskId);
    const created = await market.client.createEndpoint({ gatewayUrl, taskIds, port: taskPort, public: true, healthPath: "/health", ttlSeconds: 600 });
    checked = { id: created.endpointId, url: created.url };
    assert.deepEqual(
      created.endpoint.leaseIds,
      tasks.map((t) => t.leaseId),
    );
    assert.equal(created.endpoint.healthPath, "/health");
    const second = await market.client.createEndpoint({ gatewayUrl, taskIds, port: taskPort, public: true, ttlSeconds: 600 });
    plain = { id: second.endpointId, url: second.url };
    await waitFor("both replicas ready", async () => (await stats(checked.id)).replicas.every((r) => r.state === "ready"), {
      timeoutMs: 10_000,
      state: async () => stats(checked.id),
    });
    const view = await stats(checked.id);
    assert.ok(
      view.replicas.every((r) => r.lastCheck?.ok === true && r.lastCheck.detail === "HTTP 200"),
      stringifyPlain(view),
    );
    assert.deepEqual(
      view.replicas.map((r) => r.provider),
      tasks.map((t) => t.provider.peer.address),
    );
    // Every answer says when the endpoint's last lease stops (its deposit runs out within the notice window).
    const ends = await Promise.all(tasks.map(async (t) => (await readLease(market.devnet.admin.publicClient, market.devnet.deployment.contracts.market!, t.leaseId)).end));
    const answer = await get(checked.url);
    assert.equal(answer.status, 200);
    assert.equal(answer.headers.get("suanli-endpoint-ends-at"), String(Math.max(...ends)));
    assert.equal(view.endsAt, Math.max(...ends));

    // The same per replica in Prometheus: the state it is in (1, the others 0), requests, failures, in flight.
    const after = await stats(checked.id);
    const text = await scrape();
    for (const task of tasks) {
      const replica = after.replicas.find((r) => r.leaseId === String(task.leaseId))!;
      assert.equal(series(text, "suanli_gateway_replica_state", checked.id, task.name, ',state="ready"'), 1, text);
      assert.equal(series(text, "suanli_gateway_replica_state", checked.id, task.name, ',state="unhealthy"'), 0, text);
      assert.equal(series(text, "suanli_gateway_replica_requests_total", checked.id, task.name), replica.requests, text);
      assert.equal(series(text, "suanli_gateway_replica_failures_total", checked.id, task.name), 0, text);
      assert.equal(series(text, "suanli_gateway_replica_outstanding", checked.id, task.name), 0, text);
    }
    assert.equal(
      after.replicas.reduce((sum, r) => sum + r.requests, 0),
      1,
      "the one request so far went to one replica",
    );
  });

  it("sends each request to the replica with the fewest in flight", async () => {
    const both = await Promise.all([get(`${checked.url}slow?ms=1500`), get(`${checked.url}slow?ms=1500`)]);
    assert.deepEqual(both.map((r) => r.text).sort(), ["a", "b"], "two at once: one on each replica");
    const long = get(`${checked.url}slow?ms=2500`);
    await new Promise((resolve) => setTimeout(resolve, 300));
    const quick: string[] = [];
    for (let i = 0; i < 4; i++) quick.push((await get(`${checked.url}quick`)).text);
    const busy = (await long).text;
    assert.deepEqual(quick, Array(4).fill(other(busy)), `while ${busy} holds a slow request, the quick ones go to the other`);
  });

  it("stops routing to a replica whose health checks fail, and routes to it again once they pass", async () => {
    const sick = (await get(`${checked.url}sick?ms=4000`)).text;
    await waitFor(`replica ${sick} unhealthy`, async () => (await replicaOf(checked.id, sick)).state === "unhealthy", { timeoutMs: 5_000 });
    const replica = await replicaOf(checked.id, sick);
    assert.deepEqual(replica.lastCheck && { ok: replica.lastCheck.ok, detail: replica.lastCheck.detail }, { ok: false, detail: "HTTP 503" });
    for (let i = 0; i < 4; i++) assert.equal((await get(checked.url)).text, other(sick));
    await waitFor(`replica ${sick} ready again`, async () => (await replicaOf(checked.id, sick)).state === "ready", { timeoutMs: 8_000 });
    const seen = new Set<string>();
    for (let i = 0; i < 4; i++) seen.add((await get(checked.url)).text);
    assert.deepEqual([...seen].sort(), ["a", "b"]);
  });

  it("a GET to a replica whose port is closed is answered by the other replica; the failure is counted and the replica left out", async () => {
    const down = (await get(`${plain.url}down?ms=3000`)).text;
    const answers: number[] = [];
    const names = new Set<string>();
    for (let i = 0; i < 4; i++) {
      const answer = await get(plain.url);
      answers.push(answer.status);
      names.add(answer.text);
    }
    assert.deepEqual(answers, [200, 200, 200, 200]);
    assert.deepEqual([...names], [other(down)]);
    const replica = await replicaOf(plain.id, down);
    assert.ok(replica.failures >= 1, stringifyPlain(replica));
    assert.equal(replica.state, "unhealthy");
    const text = await scrape();
    assert.equal(series(text, "suanli_gateway_replica_failures_total", plain.id, down), replica.failures, text);
    assert.equal(series(text, "suanli_gateway_replica_state", plain.id, down, ',state="unhealthy"'), 1, text);
    // Back after its port opens again and the eject time passes.
    await waitFor(`replica ${down} answering again`, async () => (await get(plain.url)).text === down || (await get(plain.url)).text === down, { timeoutMs: 10_000 });
  });

  it("a replica preempted mid-stream: it drains on the notice's SIGTERM, its open stream finishes within the notice, no request after the preemption fails, and new ones go to the other", async () => {
    await waitFor("both replicas ready", async () => (await stats(checked.id)).replicas.every((r) => r.state === "ready"), {
      timeoutMs: 10_000,
      state: async () => stats(checked.id),
    });
    const read = async (url: string) => {
      const response = await fetch(url);
      return response.text();
    };
    // One event stream on each replica (the fewest in flight).
    const first = read(`${checked.url}events`);
    await new Promise((resolve) => setTimeout(resolve, 200));
    const secondStream = read(`${checked.url}events`);
    await new Promise((resolve) => setTimeout(resolve, 200));
    const victim = tasks[1]!;
    const preemptor = await TestRenter.start(market.devnet, 6);
    try {
      await preemptor.rent(victim.provider.peer, { machineId: victim.provider.agent.machines[0]!.machineId, units: 1, duration: 30 });
    } finally {
      await preemptor.close();
    }
    const statuses: number[] = [];
    for (let i = 0; i < 8; i++) {
      statuses.push((await get(checked.url)).status);
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    assert.deepEqual(statuses, Array(8).fill(200), "no request after the preemption failed");
    const streams = await Promise.all([first, secondStream]);
    const events = streams.map((text) => text.split("\n").filter((line) => line.startsWith("data: ")));
    assert.deepEqual(
      events.map((lines) => lines.length),
      [3, 3],
      `both streams ran to their end: ${stringifyPlain(streams)}`,
    );
    assert.deepEqual(events.map((lines) => lines[0]!.split(" ")[1]).sort(), ["a", "b"], "one stream was on the preempted replica");
    const state = (await replicaOf(checked.id, "b")).state;
    assert.ok(state === "ending" || state === "ended", state);
    for (let i = 0; i < 4; i++) assert.equal((await get(checked.url)).text, "a");
  });

  it("answers 503 with Retry-After, never 500, once no replica runs, and says why", async () => {
    await market.client.cancel(tasks[0]!.taskId);
    await waitFor("both replicas ended", async () => (await stats(checked.id)).replicas.every((r) => r.state === "ended"), {
      timeoutMs: 15_000,
      state: async () => stats(checked.id),
    });
    const answer = await get(`${checked.url}anything`);
    assert.equal(answer.status, 503);
    assert.equal(answer.headers.get("retry-after"), "2");
    const ids = tasks.map((t) => t.leaseId);
    assert.match(JSON.parse(answer.text).error.message, new RegExp(`lease ${ids[0]} ended; lease ${ids[1]} ended`));
    const view = await stats(checked.id);
    assert.equal(view.endsAt, null);
  });
});

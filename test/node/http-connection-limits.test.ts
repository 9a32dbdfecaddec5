/**
 * Issue #33 item 11: the node's HTTP servers (the API, the metrics endpoint) bound how long and how
 * many connections they hold. Real sockets on 127.0.0.x against servers listening on 127.0.0.1:
 * slow-loris clients that never finish their headers, idle connections that never send a byte,
 * floods from one address and from many. Small configured caps and timeouts keep the test quick;
 * the defaults are in docs/configuration.md.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { connect, type Socket } from "node:net";
import { Registry } from "prom-client";
import { apiOptionsSchema } from "../../node/api/options.js";
import { silentLogger } from "../../node/log/logger.js";
import { metricsOptionsSchema } from "../../node/metrics/options.js";
import { startMetricsServer, type MetricsServer } from "../../node/metrics/server.js";
import { startApiFixture, type ApiFixture } from "../support/api-fixture.js";
import { BUNDLE_SERVER_LIMITS, startBundleServer, type BundleServer } from "../../node/demo/bundles.js";
import { DEVNET_RPC_LIMITS, DEVNET_RPC_MAX_BODY_BYTES, startEmbeddedChain, type EmbeddedChain } from "../../node/chain/embedded.js";

/** A client connection and what happened to it. */
type Probe = { socket: Socket; received: string; closed: Promise<void>; isClosed: () => boolean };

function open(port: number, localAddress: string): Promise<Probe> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: "127.0.0.1", port, localAddress });
    let received = "";
    let closed = false;
    const probe: Probe = {
      socket,
      get received() {
        return received;
      },
      closed: new Promise<void>((done) => socket.once("close", () => done())),
      isClosed: () => closed,
    };
    socket.on("data", (chunk: Buffer) => (received += chunk.toString("latin1")));
    socket.on("error", () => undefined);
    socket.once("close", () => (closed = true));
    socket.once("connect", () => resolve(probe));
    socket.once("error", reject);
  });
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Slow loris: each connection starts a request and then sends one more header line every 100 ms,
 * never the blank line that ends the head. Returns once every connection is closed, or after
 * `maxRounds` rounds (the bound: a server without a head timeout holds them all past it).
 */
async function slowLoris(probes: Probe[], maxRounds: number): Promise<{ rounds: number }> {
  for (const probe of probes) probe.socket.write("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n");
  for (let round = 1; round <= maxRounds; round++) {
    const live = probes.filter((probe) => !probe.isClosed());
    if (live.length === 0) return { rounds: round };
    for (const probe of live) probe.socket.write(`X-Slow-${round}: a\r\n`);
    await sleep(100);
  }
  return { rounds: maxRounds };
}

function counterValue(registry: Registry, name: string, labels: Record<string, string>): Promise<number> {
  return registry
    .getSingleMetric(name)!
    .get()
    .then((metric) => metric.values.find((value) => Object.entries(labels).every(([key, wanted]) => value.labels[key] === wanted))?.value ?? 0);
}

describe("HTTP connection limits (API and metrics endpoint)", function () {
  this.timeout(60_000);

  describe("the API", () => {
    let fx: ApiFixture;
    let port: number;
    const connections = { headersTimeoutMs: 1500, requestTimeoutMs: 3000, keepAliveTimeoutMs: 300, idleTimeoutMs: 4000, maxPerAddress: 10, maxTotal: 30 };

    before(async () => {
      fx = await startApiFixture({ host: "127.0.0.1", port: 0, connections, sse: { heartbeatMs: 1000 } });
      port = Number(new URL(await fx.api.listen()).port);
    });
    after(async () => {
      await fx.close();
    });

    it("closes 50 slow-loris connections from one address: 10 held until the head timeout (408), 40 refused at once; another address is served meanwhile", async () => {
      const refusedBefore = await counterValue(fx.registry, "suanli_api_connections_refused_total", { reason: "per_address" });
      const probes = await Promise.all(Array.from({ length: 50 }, () => open(port, "127.0.0.1")));
      const loris = slowLoris(probes, 300);
      // While the flood holds its share, a client from another address gets its answer.
      const other = await open(port, "127.0.0.2");
      other.socket.write("GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
      await other.closed;
      assert.match(other.received, /^HTTP\/1\.1 200 /);

      const { rounds } = await loris;
      const open_ = probes.filter((probe) => !probe.isClosed());
      assert.equal(open_.length, 0, `${open_.length} slow connections still held after ${rounds} rounds of 100 ms`);
      const timedOut = probes.filter((probe) => /^HTTP\/1\.1 408 /.test(probe.received));
      const refused = probes.filter((probe) => probe.received === "");
      assert.equal(timedOut.length + refused.length, 50, "each was either cut at the head timeout or refused without a byte");
      assert.ok(timedOut.length >= 1 && timedOut.length <= connections.maxPerAddress, `held ${timedOut.length}, at most ${connections.maxPerAddress}`);
      const refusedAfter = await counterValue(fx.registry, "suanli_api_connections_refused_total", { reason: "per_address" });
      assert.equal(refusedAfter - refusedBefore, refused.length, "every refusal is counted");
    });

    it("holds at most maxPerAddress idle connections (never a byte sent) from one address, and closes those", async () => {
      const probes = await Promise.all(Array.from({ length: 40 }, () => open(port, "127.0.0.3")));
      await Promise.all(probes.map((probe) => probe.closed));
      const refused = probes.filter((probe) => probe.received === "");
      // The held ones are closed by the head timeout, with a 408 or without a word.
      assert.ok(refused.length >= 40 - connections.maxPerAddress, `refused ${refused.length}`);
    });

    it("holds at most maxTotal connections from many addresses together", async () => {
      const before = await counterValue(fx.registry, "suanli_api_connections_refused_total", { reason: "total" });
      const probes: Probe[] = [];
      for (const address of ["127.0.0.4", "127.0.0.5", "127.0.0.6", "127.0.0.7"]) {
        probes.push(...(await Promise.all(Array.from({ length: 10 }, () => open(port, address)))));
      }
      await Promise.all(probes.map((probe) => probe.closed));
      const refusedTotal = (await counterValue(fx.registry, "suanli_api_connections_refused_total", { reason: "total" })) - before;
      assert.ok(refusedTotal >= probes.length - connections.maxTotal, `refused ${refusedTotal} of ${probes.length} over a cap of ${connections.maxTotal}`);
      // Once they are gone, the server takes new connections again.
      const again = await open(port, "127.0.0.4");
      again.socket.write("GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
      await again.closed;
      assert.match(again.received, /^HTTP\/1\.1 200 /);
    });

    it("closes a keep-alive connection left idle after its request", async () => {
      const probe = await open(port, "127.0.0.8");
      probe.socket.write("GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
      await probe.closed;
      assert.match(probe.received, /^HTTP\/1\.1 200 /);
      assert.match(probe.received, /keep-alive/i, "the connection was kept open for another request, then closed by the server");
    });

    it("validates the options: the head fits in the request, event-stream heartbeats come before the idle timeout, documented defaults", () => {
      const defaults = apiOptionsSchema.parse({}).connections;
      assert.deepEqual(defaults, {
        headersTimeoutMs: 10_000,
        requestTimeoutMs: 30_000,
        keepAliveTimeoutMs: 5_000,
        idleTimeoutMs: 120_000,
        maxPerAddress: 64,
        maxTotal: 4096,
        maxRequestsPerSocket: 0,
      });
      assert.throws(() => apiOptionsSchema.parse({ connections: { headersTimeoutMs: 5000, requestTimeoutMs: 1000 } }), /requestTimeoutMs must be at least headersTimeoutMs/);
      assert.throws(() => apiOptionsSchema.parse({ connections: { idleTimeoutMs: 10_000 } }), /sse.heartbeatMs must be shorter than connections.idleTimeoutMs/);
      assert.throws(() => apiOptionsSchema.parse({ connections: { maxPerAddress: 10, maxTotal: 5 } }), /maxPerAddress must be at most maxTotal/);
    });
  });

  describe("the metrics endpoint", () => {
    let server: MetricsServer;
    let port: number;
    const connections = metricsOptionsSchema.parse({
      connections: { headersTimeoutMs: 1000, requestTimeoutMs: 2000, idleTimeoutMs: 3000, maxPerAddress: 5, maxTotal: 20 },
    }).connections;

    before(async () => {
      server = await startMetricsServer(new Registry(), { host: "127.0.0.1", port: 0, connections }, silentLogger());
      port = Number(new URL(server.url).port);
    });
    after(async () => {
      await server.close();
    });

    it("closes 20 slow-loris connections from one address: 5 held until the head timeout, the rest refused at once", async () => {
      const probes = await Promise.all(Array.from({ length: 20 }, () => open(port, "127.0.0.1")));
      const { rounds } = await slowLoris(probes, 300);
      assert.equal(probes.filter((probe) => !probe.isClosed()).length, 0, `slow connections still held after ${rounds} rounds`);
      const held = probes.filter((probe) => probe.received !== "");
      assert.ok(held.length >= 1 && held.length <= 5, `held ${held.length}`);
      // A scraper on its own address is served.
      const scraper = await open(port, "127.0.0.2");
      scraper.socket.write("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
      await scraper.closed;
      assert.match(scraper.received, /^HTTP\/1\.1 200 /);
    });
  });
});

describe("the demo bundle server bounds its connections like the node's servers (issue #33 item 11)", function () {
  this.timeout(30_000);
  let server: BundleServer;
  let port: number;

  before(async () => {
    server = await startBundleServer({ limits: { ...BUNDLE_SERVER_LIMITS, headersTimeoutMs: 1_000, requestTimeoutMs: 2_000, maxPerAddress: 5, maxTotal: 20 } });
    port = Number(new URL(server.baseUrl).port);
  });
  after(async () => server?.close());

  it("closes every slow-loris connection (held ones at the head timeout, those past the per-address cap at once) and still serves a bundle", async () => {
    const probes = await Promise.all(Array.from({ length: 12 }, () => open(port, "127.0.0.5")));
    const started = Date.now();
    const { rounds } = await slowLoris(probes, 60);
    assert.ok(rounds < 60, "every slow-loris connection was closed within 6 s");
    assert.ok(Date.now() - started < 6_000);
    assert.ok(probes.every((probe) => probe.isClosed()));
    const bundle = await server.bundle({ "a.txt": "a" });
    const response = await fetch(bundle.url);
    assert.equal(response.status, 200, "an ordinary client is served");
    await response.arrayBuffer();
  });
});

describe("the devnet's JSON-RPC server bounds its connections like the node's servers (issue #33 item 11)", function () {
  this.timeout(60_000);
  let chain: EmbeddedChain;
  let port: number;
  const limits = { ...DEVNET_RPC_LIMITS, headersTimeoutMs: 1_000, requestTimeoutMs: 2_000, keepAliveTimeoutMs: 300, idleTimeoutMs: 3_000, maxPerAddress: 5, maxTotal: 12 };

  before(async () => {
    chain = await startEmbeddedChain({ connections: limits });
    port = chain.port;
  });
  after(async () => chain?.close());

  const rpc = (body: string) => fetch(chain.rpcUrl, { method: "POST", headers: { "content-type": "application/json" }, body }).then((response) => response.json());

  it("closes every slow-loris connection (held ones at the head timeout, those past the per-address cap at once), and still answers JSON-RPC as Hardhat does", async () => {
    const probes = await Promise.all(Array.from({ length: 12 }, () => open(port, "127.0.0.9")));
    const started = Date.now();
    const { rounds } = await slowLoris(probes, 60);
    assert.ok(rounds < 60, "every slow-loris connection was closed within 6 s");
    assert.ok(Date.now() - started < 6_000);
    assert.ok(probes.every((probe) => probe.isClosed()));
    const refused = probes.filter((probe) => probe.received === "");
    assert.ok(refused.length >= 12 - limits.maxPerAddress, `refused ${refused.length} of 12 at once, over a cap of ${limits.maxPerAddress}`);
    // Hardhat's own handler behind the bounded server: answers, batches and its parse error.
    assert.deepEqual(await rpc('{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}'), { jsonrpc: "2.0", id: 1, result: "0x7a69" });
    const batch = (await rpc('[{"jsonrpc":"2.0","id":1,"method":"eth_chainId"},{"jsonrpc":"2.0","id":2,"method":"net_version"}]')) as { id: number }[];
    assert.deepEqual(
      batch.map((answer) => answer.id),
      [1, 2],
    );
    assert.equal(((await rpc("{not json")) as { error: { code: number } }).error.code, -32700);
  });

  it("holds at most maxTotal idle connections from many addresses together, then serves again", async () => {
    const probes: Probe[] = [];
    for (const address of ["127.0.0.10", "127.0.0.11", "127.0.0.12", "127.0.0.13"]) probes.push(...(await Promise.all(Array.from({ length: 5 }, () => open(port, address)))));
    await Promise.all(probes.map((probe) => probe.closed));
    const refused = probes.filter((probe) => probe.received === "");
    assert.ok(refused.length >= probes.length - limits.maxTotal, `refused ${refused.length} of ${probes.length} over a cap of ${limits.maxTotal}`);
    assert.deepEqual(await rpc('{"jsonrpc":"2.0","id":7,"method":"eth_chainId"}'), { jsonrpc: "2.0", id: 7, result: "0x7a69" });
  });

  type CapAnswer = { status: number; body: { id: unknown; error: { code: number; message: string; data: { maxBytes: number } } } };

  /** Waits (at most `withinMs`) for a whole HTTP/1.1 answer with a Content-Length on the probe, and parses it. */
  async function answerOf(probe: Probe, withinMs: number): Promise<CapAnswer> {
    const deadline = Date.now() + withinMs;
    for (;;) {
      const [head = "", body = ""] = probe.received.split("\r\n\r\n");
      const length = /content-length: (\d+)/i.exec(head)?.[1];
      if (length !== undefined && Buffer.byteLength(body) >= Number(length)) return { status: Number(head.split(" ")[1]), body: JSON.parse(body) as never };
      assert.ok(Date.now() < deadline && !probe.isClosed(), `a whole answer within ${withinMs} ms, got ${JSON.stringify(probe.received)}`);
      await sleep(20);
    }
  }

  /** Sends one chunk of a chunked body, waiting while the socket's buffer is full (or until it closes). */
  async function sendChunk(probe: Probe, chunk: Buffer): Promise<void> {
    probe.socket.write(`${chunk.length.toString(16)}\r\n`);
    probe.socket.write(chunk);
    if (!probe.socket.write("\r\n")) await Promise.race([new Promise((resolve) => probe.socket.once("drain", resolve)), probe.closed]);
  }

  it("answers 413 with a JSON-RPC error naming the cap to a body that declares more than DEVNET_RPC_MAX_BODY_BYTES, without waiting for it", async () => {
    const probe = await open(port, "127.0.0.20");
    probe.socket.write(`POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${DEVNET_RPC_MAX_BODY_BYTES + 1}\r\n\r\n{`);
    const answer = await answerOf(probe, 1_000);
    assert.equal(answer.status, 413);
    assert.equal(answer.body.error.code, -32600);
    assert.equal(answer.body.error.data.maxBytes, DEVNET_RPC_MAX_BODY_BYTES);
    assert.match(answer.body.error.message, new RegExp(`larger than ${DEVNET_RPC_MAX_BODY_BYTES} bytes`));
    // The client that never sends the rest is closed at the request timeout, as any slow body.
    const started = Date.now();
    await probe.closed;
    assert.ok(Date.now() - started < limits.requestTimeoutMs + 1_500, "closed by the request timeout");
  });

  it("counts a chunked body (no declared length) as it streams, answers 413 once it passes the cap, and closes a client that streams on", async () => {
    const probe = await open(port, "127.0.0.21");
    probe.socket.write("POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n");
    const chunk = Buffer.alloc(64 * 1024, 0x20);
    // What the kernel may hold between the client's writes and the server's reads on loopback:
    // the largest send and receive buffers (their autotuning maxima).
    const maxBuffer = (file: string) => Number(readFileSync(`/proc/sys/net/ipv4/${file}`, "utf8").trim().split(/\s+/)[2]);
    const inFlight = maxBuffer("tcp_wmem") + maxBuffer("tcp_rmem");
    const cap = DEVNET_RPC_MAX_BODY_BYTES;
    let sent = 0;
    while (!probe.received.includes("\r\n\r\n") && sent < 4 * (cap + inFlight)) {
      await sendChunk(probe, chunk);
      sent += chunk.length;
    }
    const answer = await answerOf(probe, 1_000);
    assert.equal(answer.status, 413, `answered after ${sent} bytes sent`);
    assert.equal(answer.body.error.data.maxBytes, cap);
    assert.ok(sent <= cap + inFlight + chunk.length, `answered after ${sent} bytes, by the cap (${cap}) and what loopback buffers hold (${inFlight})`);
    // A client that ignores the answer and streams on: at most another cap's worth is read and dropped.
    while (!probe.isClosed() && sent < 4 * (cap + inFlight)) {
      await sendChunk(probe, chunk);
      sent += chunk.length;
    }
    assert.ok(probe.isClosed(), `closed after ${sent} bytes sent`);
    assert.ok(sent <= 2 * cap + inFlight + 2 * chunk.length, `closed after ${sent} bytes, by twice the cap (${cap}) and the loopback buffers (${inFlight})`);
  });

  it("still answers a request whose body is exactly at the cap (Hardhat reads it whole)", async () => {
    const request = '{"jsonrpc":"2.0","id":9,"method":"eth_chainId","params":[]}';
    const body = request + " ".repeat(DEVNET_RPC_MAX_BODY_BYTES - request.length);
    assert.equal(Buffer.byteLength(body), DEVNET_RPC_MAX_BODY_BYTES);
    assert.deepEqual(await rpc(body), { jsonrpc: "2.0", id: 9, result: "0x7a69" });
  });
});

/**
 * Issue 37, Endpoints: a gateway on a third node serves a renter's task port at
 * `/e/<endpointId>/` over HTTP, carried over libp2p (forward streams signed by the gateway's key
 * with the renter's delegation) to the provider. Plain `fetch` from the outside world.
 */
import assert from "node:assert/strict";
import path from "node:path";
import { privateKeyToAccount, generatePrivateKey } from "viem/accounts";
import { devnetAccount } from "../../common/devnet.js";
import { endpointRequestMessage, mintToken, randomNonceHex, registrationToJson } from "../../common/endpoints.js";
import { suanliDomain, suanliTypes, type Endpoint } from "../../common/eip712.js";
import { signSessionDelegation } from "../../common/sessions.js";
import { lastJson, runCli } from "../support/cli.js";
import { startTestDaemon } from "../support/daemons.js";
import { freePort } from "../support/ports.js";
import { startRenterMarket, type RenterMarket } from "../support/renter-market.js";
import { waitFor } from "../support/wait.js";

const SERVER_JS = `
const http = require("node:http");
const crypto = require("node:crypto");
const port = Number(process.argv[2]);
const server = http.createServer((req, res) => {
  if (req.url.startsWith("/events")) {
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    let n = 0;
    const timer = setInterval(() => { res.write("data: " + n + "\\n\\n"); if (++n === 3) { clearInterval(timer); res.end(); } }, 400);
    return;
  }
  if (req.url.startsWith("/hang")) return;
  if (req.url.startsWith("/big")) return res.end(Buffer.alloc(3 * 1024 * 1024, 7));
  if (req.url.startsWith("/count")) {
    let bytes = 0;
    req.on("data", (chunk) => (bytes += chunk.length));
    return req.on("end", () => res.end(String(bytes)));
  }
  let body = "";
  req.on("data", (chunk) => (body += chunk));
  req.on("end", () => {
    res.writeHead(200, { "content-type": "text/plain", "x-client-port": String(req.socket.remotePort), "x-prefix": req.headers["x-forwarded-prefix"] || "" });
    res.end(req.method + " " + req.url + " auth=" + (req.headers.authorization || "none") + (body ? " body=" + body : ""));
  });
});
// A WebSocket echo of small text frames, enough for one message each way.
server.on("upgrade", (req, socket) => {
  const accept = crypto.createHash("sha1").update(req.headers["sec-websocket-key"] + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest("base64");
  socket.write("HTTP/1.1 101 Switching Protocols\\r\\nUpgrade: websocket\\r\\nConnection: Upgrade\\r\\nSec-WebSocket-Accept: " + accept + "\\r\\n\\r\\n");
  socket.on("data", (frame) => {
    if ((frame[0] & 0x0f) === 8) return socket.end(Buffer.from([0x88, 0]));
    const length = frame[1] & 0x7f;
    const mask = frame.subarray(2, 6);
    const text = Buffer.from(frame.subarray(6, 6 + length).map((byte, i) => byte ^ mask[i % 4])).toString();
    const reply = Buffer.from("echo " + text + " via " + req.url);
    socket.write(Buffer.concat([Buffer.from([0x81, reply.length]), reply]));
  });
});
server.listen(port, "127.0.0.1", () => console.log("listening on " + port));
`;

type Gateway = Awaited<ReturnType<typeof startTestDaemon>>;

describe("gateway endpoints: a renter's task port served to the world over HTTP through a gateway node", function () {
  this.timeout(120_000);
  let market: RenterMarket;
  let gateway: Gateway;
  let gatewayDir: string;
  let taskId: string;
  let taskPort: number;
  let publicUrl: string;
  let privateId: string;
  let privateUrl: string;
  let publicId: string;
  const renter = devnetAccount(5);

  const startGatewayNode = () =>
    startTestDaemon(market.devnet, {
      dataDir: gatewayDir,
      p2p: { bootstrap: [market.provider.peer.addr] },
      gateway: { enabled: true, port: 0, responseTimeoutMs: 1500, retryAfterSeconds: 3, tokenRateLimitPerMinute: 5 },
    });
  const domain = () => suanliDomain(market.devnet.deployment.chainId, market.devnet.deployment.contracts.market!);

  before(async () => {
    // The CLI's state file name: `suanli endpoint create` finds the task the SDK submitted.
    market = await startRenterMarket({ name: "gateway", renterStateFile: `tasks-{deployment}-${renter.address.toLowerCase()}.json` });
    gatewayDir = path.join(market.work, "gateway-node");
    gateway = await startGatewayNode();
    market.defer(() => gateway.close());
    taskPort = await freePort();
    const bundle = await market.bundles.bundle({ "server.js": SERVER_JS });
    ({ taskId } = await market.client.submitTask({
      gpuType: "A100",
      gpuCount: 1,
      duration: 120,
      maxPricePerGpuHour: "1",
      attestedOnly: false,
      bundleUrl: bundle.url,
      sha256: bundle.sha256,
      command: [process.execPath, "server.js", String(taskPort)],
      ports: [taskPort],
    }));
    await waitFor(
      "the task's server listening",
      async () => {
        for await (const line of market.client.logs(taskId, { follow: false })) if (line.text.includes(`listening on ${taskPort}`)) return true;
        return false;
      },
      { timeoutMs: 30_000 },
    );
  });
  after(async () => {
    await market?.close();
  });

  it("tells renters its address and registers a public endpoint signed by the renter", async () => {
    const info = (await (await fetch(`${gateway.gateway!.url}/v1/gateway`)).json()) as { address: string; publicUrl: string; chainId: number };
    assert.equal(info.address, gateway.gateway!.address);
    assert.equal(info.chainId, market.devnet.deployment.chainId);
    const created = await market.client.createEndpoint({ gatewayUrl: gateway.gateway!.url, taskId, port: taskPort, public: true, ttlSeconds: 3600 });
    assert.match(created.endpointId, /^[0-9a-f]{32}$/);
    assert.equal(created.url, `${info.publicUrl}/e/${created.endpointId}/`);
    publicId = created.endpointId;
    publicUrl = created.url;
  });

  it("serves the task's bytes to a plain GET and POST (megabytes both ways), the path after the endpoint id, hop-by-hop headers stripped", async () => {
    const response = await fetch(`${publicUrl}index.html?x=1`);
    assert.equal(response.status, 200);
    assert.equal(await response.text(), "GET /index.html?x=1 auth=none");
    assert.equal(response.headers.get("x-prefix"), `/e/${publicId}`);
    const posted = await fetch(`${publicUrl}api`, { method: "POST", body: "ping", headers: { authorization: "Bearer app-key" } });
    assert.equal(await posted.text(), "POST /api auth=Bearer app-key body=ping", "a public endpoint passes the app's own Authorization on");
    // More than the forward window (1 MiB) each way: acknowledgements keep both directions moving.
    const big = new Uint8Array(await (await fetch(`${publicUrl}big`)).arrayBuffer());
    assert.equal(big.length, 3 * 1024 * 1024);
    assert.ok(big.every((byte) => byte === 7));
    const counted = await fetch(`${publicUrl}count`, { method: "POST", body: new Uint8Array(5 * 1024 * 1024) });
    assert.equal(await counted.text(), String(5 * 1024 * 1024));
    const bare = await fetch(publicUrl.slice(0, -1), { redirect: "manual" });
    assert.equal(bare.status, 308);
    assert.equal(bare.headers.get("location"), `/e/${publicId}/`);
  });

  it("streams an event-stream response as it comes, not at its end", async () => {
    const started = Date.now();
    const response = await fetch(`${publicUrl}events`);
    assert.equal(response.headers.get("content-type"), "text/event-stream");
    const arrivals: { atMs: number; text: string }[] = [];
    const decoder = new TextDecoder();
    const reader = response.body!.getReader();
    for (let read = await reader.read(); !read.done; read = await reader.read()) arrivals.push({ atMs: Date.now() - started, text: decoder.decode(read.value) });
    assert.equal(arrivals.map((a) => a.text).join(""), "data: 0\n\ndata: 1\n\ndata: 2\n\n");
    assert.ok(arrivals.length >= 2, `the events came in one piece: ${JSON.stringify(arrivals)}`);
    assert.ok(arrivals.at(-1)!.atMs - arrivals[0]!.atMs >= 500, `the first event waited for the last: ${JSON.stringify(arrivals)}`);
  });

  it("keeps the connection to the task alive between requests: one forward stream for several", async () => {
    const first = await fetch(`${publicUrl}a`);
    await first.text();
    const opened = gateway.gateway!.proxy.streamsOpened;
    const second = await fetch(`${publicUrl}b`);
    await second.text();
    assert.equal(second.headers.get("x-client-port"), first.headers.get("x-client-port"), "the task saw the same TCP connection");
    assert.equal(gateway.gateway!.proxy.streamsOpened, opened, "no new stream was opened");
  });

  it("carries a WebSocket: the upgrade and messages both ways", async () => {
    const socket = new WebSocket(`${publicUrl.replace(/^http/, "ws")}socket?room=1`);
    const reply = await new Promise<string>((resolve, reject) => {
      socket.addEventListener("open", () => socket.send("hi"));
      socket.addEventListener("message", (event) => resolve(String(event.data)));
      socket.addEventListener("error", () => reject(new Error("the WebSocket failed")));
    });
    socket.close();
    assert.equal(reply, "echo hi via /socket?room=1");
  });

  it("answers 404 for an unknown endpoint and 504 when the task does not answer in time", async () => {
    const unknown = await fetch(`${gateway.gateway!.url}/e/${"0".repeat(32)}/`);
    assert.equal(unknown.status, 404);
    assert.equal(((await unknown.json()) as { error: { name: string } }).error.name, "EndpointNotFoundError");
    const hung = await fetch(`${publicUrl}hang`);
    assert.equal(hung.status, 504);
    assert.equal(((await hung.json()) as { error: { name: string } }).error.name, "UpstreamTimeoutError");
  });

  it("lets only bearers of the renter's tokens call a private endpoint: 401 with the reason otherwise, 429 past a token's rate", async () => {
    const created = await market.client.createEndpoint({ gatewayUrl: gateway.gateway!.url, taskId, port: taskPort });
    privateId = created.endpointId;
    privateUrl = created.url;
    const call = (token?: string) => fetch(`${privateUrl}secret`, token ? { headers: { authorization: `Bearer ${token}` } } : {});
    const refusal = async (token: string | undefined) => {
      const response = await call(token);
      assert.equal(response.status, 401);
      return ((await response.json()) as { error: { reason: string } }).error.reason;
    };
    assert.equal(await refusal(undefined), "missing");
    const now = Math.floor(Date.now() / 1000);
    const sign = (message: string) => renter.signMessage({ message });
    assert.equal(await refusal(await mintToken({ e: privateId, x: now - 5, n: randomNonceHex() }, sign)), "expired");
    assert.equal(await refusal((await market.client.mintEndpointToken({ endpointId: publicId })).token), "wrong-endpoint");
    const stranger = privateKeyToAccount(generatePrivateKey());
    assert.equal(await refusal(await mintToken({ e: privateId, x: now + 600, n: randomNonceHex() }, (m) => stranger.signMessage({ message: m }))), "bad-signature");
    assert.equal(await refusal("not-a-token"), "malformed");

    const { token } = await market.client.mintEndpointToken({ endpointId: privateId, ttlSeconds: 600 });
    const good = await call(token);
    assert.equal(good.status, 200);
    assert.equal(await good.text(), "GET /secret auth=none", "the gateway's token is not passed to the task");
    for (let i = 0; i < 4; i++) assert.equal((await call(token)).status, 200);
    const limited = await call(token);
    assert.equal(limited.status, 429, "the sixth request of the minute passes gateway.tokenRateLimitPerMinute (5)");
    assert.ok(Number(limited.headers.get("retry-after")) >= 1);
    assert.equal((await call((await market.client.mintEndpointToken({ endpointId: privateId, ttlSeconds: 600 })).token)).status, 200, "another token has its own budget");
    await market.client.revokeEndpointToken({ gatewayUrl: gateway.gateway!.url, endpointId: privateId, token });
    assert.equal(await refusal(token), "revoked");
  });

  it("counts each endpoint's requests by status, latency and bytes, in its stats and in Prometheus", async () => {
    const view = (await (await fetch(`${gateway.gateway!.url}/v1/endpoints/${privateId}/stats`)).json()) as {
      requests: { total: number; byStatus: Record<string, number> };
      latencyMs: { p50: number; p99: number };
      bytesOut: number;
    };
    assert.equal(view.requests.byStatus["200"], 6, "the good token's five and the other token's one");
    assert.equal(view.requests.byStatus["401"], 6, "missing, expired, wrong-endpoint, bad-signature, malformed, revoked");
    assert.equal(view.requests.byStatus["429"], 1);
    assert.ok(view.latencyMs.p50 > 0 && view.latencyMs.p99 >= view.latencyMs.p50);
    assert.equal(view.bytesOut, 6 * "GET /secret auth=none".length);
    const metrics = await gateway.metrics.registry.metrics();
    assert.match(metrics, new RegExp(`suanli_gateway_requests_total\\{endpoint="${privateId}",status="401"\\} 6`));
  });

  it("suanli endpoint create prints the URL and a token that opens it; suanli endpoint token mints another; suanli endpoint stats counts them; revoke and delete end them", async () => {
    const base = ["--rpc-url", market.devnet.rpcUrl, "--deployments", market.devnet.deploymentsDir, "--state-dir", market.work, "--devnet-account", "5", "--json"];
    const created = await runCli(["endpoint", "create", taskId, "--port", String(taskPort), "--gateway", gateway.gateway!.url, "--ttl", "600", ...base]);
    assert.equal(created.code, 0, created.stderr);
    const answer = lastJson<{ endpointId: string; url: string; token: string; public: boolean }>(created.stdout);
    assert.equal(answer.public, false);
    assert.equal((await fetch(`${answer.url}cli`)).status, 401);
    const opened = await fetch(`${answer.url}cli`, { headers: { authorization: `Bearer ${answer.token}` } });
    assert.equal(await opened.text(), "GET /cli auth=none");
    const minted = await runCli(["endpoint", "token", answer.endpointId, "--ttl", "60", ...base]);
    assert.equal(minted.code, 0, minted.stderr);
    const { token } = lastJson<{ token: string }>(minted.stdout);
    assert.equal((await fetch(`${answer.url}cli`, { headers: { authorization: `Bearer ${token}` } })).status, 200);
    const stats = await runCli(["endpoint", "stats", answer.endpointId, "--gateway", gateway.gateway!.url, "--json"]);
    assert.equal(stats.code, 0, stats.stderr);
    const view = lastJson<{ requests: { byStatus: Record<string, number> }; replicas: { leaseId: string; state: string; requests: number }[] }>(stats.stdout);
    assert.deepEqual(view.requests.byStatus, { "200": 2, "401": 1 });
    assert.deepEqual(view.replicas, [{ ...view.replicas[0]!, leaseId: String((await market.client.status(taskId)).leaseId), state: "ready", requests: 2 }]);
    const text = await runCli(["endpoint", "stats", answer.endpointId, "--gateway", gateway.gateway!.url]);
    assert.match(text.stdout, /replica lease \d+: ready, 0 in flight, 2 requests, 0 failures/);

    // The CLI's revoke (by the token) and delete, each signed by the wallet.
    const revoked = await runCli(["endpoint", "revoke", answer.endpointId, token, "--gateway", gateway.gateway!.url, ...base]);
    assert.equal(revoked.code, 0, revoked.stderr);
    assert.deepEqual(lastJson(revoked.stdout), { endpointId: answer.endpointId, revoked: true });
    const refused = await fetch(`${answer.url}cli`, { headers: { authorization: `Bearer ${token}` } });
    assert.equal(refused.status, 401);
    assert.equal(((await refused.json()) as { error: { reason: string } }).error.reason, "revoked");
    assert.equal((await fetch(`${answer.url}cli`, { headers: { authorization: `Bearer ${answer.token}` } })).status, 200, "the other token still opens it");
    const deleted = await runCli(["endpoint", "delete", answer.endpointId, "--gateway", gateway.gateway!.url, ...base]);
    assert.equal(deleted.code, 0, deleted.stderr);
    assert.deepEqual(lastJson(deleted.stdout), { endpointId: answer.endpointId, deleted: true });
    assert.equal((await fetch(`${answer.url}cli`, { headers: { authorization: `Bearer ${answer.token}` } })).status, 404);
  });

  it("refuses a record not signed by the lease's renter, and a lease of another renter", async () => {
    const leaseId = BigInt((await market.client.status(taskId)).leaseId);
    const attacker = devnetAccount(6);
    const record: Endpoint = {
      renter: renter.address,
      gateway: gateway.gateway!.address,
      leaseIds: [leaseId],
      port: taskPort,
      healthPath: "",
      public: true,
      tokenSigner: attacker.address,
      expiresAt: BigInt(Math.floor(Date.now() / 1000) + 600),
      salt: `0x${"11".repeat(32)}`,
    };
    const register = async (endpoint: Endpoint, signer: typeof attacker) => {
      const signature = await signer.signTypedData({ domain: domain(), types: { Endpoint: suanliTypes.Endpoint }, primaryType: "Endpoint", message: endpoint });
      const delegation = await signSessionDelegation((p) => signer.signTypedData(p), domain(), {
        renter: signer.address,
        sessionKey: gateway.gateway!.address,
        actions: ["forward"],
        leaseIds: [leaseId],
      });
      const body = registrationToJson({ endpoint, signature, delegation });
      const response = await fetch(`${gateway.gateway!.url}/v1/endpoints`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
      return { status: response.status, body: (await response.json()) as { error: { message: string } } };
    };
    const forged = await register(record, attacker);
    assert.equal(forged.status, 403);
    assert.match(forged.body.error.message, /not signed by its renter/);
    const own = await register({ ...record, renter: attacker.address }, attacker);
    assert.equal(own.status, 403);
    assert.match(own.body.error.message, new RegExp(`Lease ${leaseId} is not the renter's`));
  });

  it("serves its endpoints again after a restart, from their signed records, with the same key", async () => {
    const address = gateway.gateway!.address;
    await gateway.close({ keepData: true });
    gateway = await startGatewayNode();
    market.defer(() => gateway.close());
    assert.equal(gateway.gateway!.address, address);
    const again = await fetch(`${gateway.gateway!.url}/e/${publicId}/after-restart`);
    assert.equal(again.status, 200);
    assert.equal(await again.text(), "GET /after-restart auth=none");
    const { token } = await market.client.mintEndpointToken({ endpointId: privateId, ttlSeconds: 600 });
    assert.equal((await fetch(`${gateway.gateway!.url}/e/${privateId}/x`, { headers: { authorization: `Bearer ${token}` } })).status, 200);
  });

  it("deletes an endpoint on its renter's signed request only: 404 after", async () => {
    const url = gateway.gateway!.url;
    const issuedAt = Math.floor(Date.now() / 1000);
    const message = endpointRequestMessage({ gateway: gateway.gateway!.address, endpointId: privateId, action: "delete", issuedAt });
    const stranger = await fetch(`${url}/v1/endpoints/${privateId}`, {
      method: "DELETE",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ issuedAt, signature: await devnetAccount(6).signMessage({ message }) }),
    });
    assert.equal(stranger.status, 403);
    await market.client.deleteEndpoint({ gatewayUrl: url, endpointId: privateId });
    assert.equal((await fetch(`${url}/e/${privateId}/x`)).status, 404);
    assert.equal((await fetch(`${url}/v1/endpoints/${privateId}`)).status, 404);
  });

  it("answers 503 with Retry-After once the task has ended, never 500", async () => {
    await market.client.cancel(taskId);
    await waitFor(
      "the endpoint to answer 503",
      async () => {
        const response = await fetch(`${gateway.gateway!.url}/e/${publicId}/late`);
        await response.arrayBuffer();
        assert.notEqual(response.status, 500);
        return response.status === 503 && response.headers.get("retry-after") === "3";
      },
      { timeoutMs: 15_000 },
    );
  });
});

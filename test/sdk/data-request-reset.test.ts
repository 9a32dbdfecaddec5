/**
 * The SDK's data requests (sdk/internal/data.ts) and a node that closes a kept-alive connection as
 * a request goes out on it (CI saw `suanli data pin` fail so: "fetch failed", ECONNRESET): a safe
 * request is sent once more on a new connection; a DELETE is not (removing twice would answer that
 * nothing is there). A real TCP server on 127.0.0.1 resets the first connection it gets.
 */
import assert from "node:assert/strict";
import net from "node:net";
import { dataRequest, DataRequestError } from "../../sdk/internal/data.js";

describe("sdk data requests: a connection reset before any answer", function () {
  this.timeout(20_000);
  let server: net.Server;
  let url: string;
  let connections = 0;
  let requests: string[] = [];

  before(async () => {
    server = net.createServer((socket) => {
      const n = ++connections;
      socket.once("data", (chunk) => {
        requests.push(chunk.toString("latin1").split("\r\n")[0]!);
        // The first connection: reset as the request arrives (RST, as a node closing an idle keep-alive socket).
        if (n === 1) return socket.resetAndDestroy();
        const body = JSON.stringify({ ok: true });
        socket.end(`HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\nconnection: close\r\n\r\n${body}`);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
  });
  beforeEach(() => {
    connections = 0;
    requests = [];
  });
  after(async () => new Promise<void>((resolve) => server.close(() => resolve())));

  it("a GET and a POST with a JSON body are sent again once and answered", async () => {
    const got = await dataRequest(url, "/v1/data");
    assert.deepEqual(await got.json(), { ok: true });
    assert.deepEqual(requests, ["GET /v1/data HTTP/1.1", "GET /v1/data HTTP/1.1"]);
    connections = 0;
    requests = [];
    const posted = await dataRequest(url, "/v1/data/pins", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ cid: "bafy" }) });
    assert.equal(posted.status, 200);
    assert.equal(connections, 2);
  });

  it("a DELETE is not sent again: DataRequestError naming the node", async () => {
    await assert.rejects(dataRequest(url, "/v1/data/bafy", { method: "DELETE" }), (error: unknown) => {
      assert.ok(error instanceof DataRequestError);
      assert.match(error.message, /Cannot reach the node at http:\/\/127\.0\.0\.1:\d+/);
      return true;
    });
    assert.deepEqual(requests, ["DELETE /v1/data/bafy HTTP/1.1"]);
  });
});

import assert from "node:assert/strict";
import type { Stream } from "@libp2p/interface";
import { lpStream } from "@libp2p/utils";
import { z } from "zod";
import { SuanliError } from "../../common/errors.js";
import { createHost, type SuanliHost } from "../../common/p2p/host.js";
import { RemoteError } from "../../common/p2p/errors.js";
import { handleProtocol, request } from "../../common/p2p/reqresp.js";
import { waitFor } from "../support/wait.js";

const ECHO = "/suanli-test/echo/1.0.0";
const requestSchema = z.strictObject({ text: z.string().max(100_000), delayMs: z.number().int().min(0).max(5_000).optional() });
const responseSchema = z.strictObject({ text: z.string() });

class OfferNotFoundError extends SuanliError {
  override name = "OfferNotFoundError";
}

function loopbackHost(): Promise<SuanliHost> {
  return createHost({
    listen: ["/ip4/127.0.0.1/tcp/0"],
    allowPrivateAddresses: true,
    dht: { enabled: false },
    gossip: { enabled: false },
    connections: { inboundPerSecondPerHost: 1_000 },
  });
}

describe("request/response plumbing", function () {
  this.timeout(20_000);
  let server: SuanliHost;
  let client: SuanliHost;
  let unhandle: () => Promise<void>;
  let inHandler = 0;

  before(async () => {
    [server, client] = await Promise.all([loopbackHost(), loopbackHost()]);
    unhandle = await handleProtocol(server, ECHO, {
      requestSchema,
      responseSchema,
      maxMessageBytes: 1_024,
      timeoutMs: 1_000,
      maxInboundStreamsPerPeer: 2,
      handler: async ({ text, delayMs }) => {
        inHandler++;
        try {
          if (delayMs) await new Promise((resolve) => setTimeout(resolve, delayMs));
          if (text === "missing") throw new OfferNotFoundError("No such offer", { metaMessages: ["Query the book first."] });
          if (text === "crash") throw new TypeError("secret internal detail");
          if (text === "bad-answer") return { text: 42 } as unknown as { text: string };
          return { text: text.toUpperCase() };
        } finally {
          inHandler--;
        }
      },
    });
    await client.dial(server.getMultiaddrs()[0]!);
  });

  after(async () => {
    await unhandle();
    await Promise.all([server.stop(), client.stop()]);
  });

  const ask = (body: unknown, options: { timeoutMs?: number; maxMessageBytes?: number } = {}) => request(client, server.peerId, ECHO, body, { responseSchema, ...options });

  it("answers a valid request with a validated response", async () => {
    assert.deepEqual(await ask({ text: "hello" }), { text: "HELLO" });
  });

  it("returns the handler's error with the same name, message and hints", async () => {
    await assert.rejects(ask({ text: "missing" }), (error: unknown) => {
      assert.ok(error instanceof RemoteError);
      assert.equal(error.name, "OfferNotFoundError");
      assert.equal(error.shortMessage, "No such offer");
      assert.deepEqual(error.metaMessages, ["Query the book first."]);
      assert.equal(error.peer, server.peerId.toString());
      return true;
    });
  });

  it("answers unexpected failures as InternalError without leaking their text", async () => {
    await assert.rejects(ask({ text: "crash" }), (error: Error) => {
      assert.equal(error.name, "InternalError");
      assert.doesNotMatch(error.message, /secret internal detail/);
      return true;
    });
    await assert.rejects(ask({ text: "bad-answer" }), { name: "InternalError" });
  });

  it("answers a schema-invalid request with InvalidMessageError naming the field", async () => {
    await assert.rejects(ask({ text: 5 }), (error: unknown) => {
      assert.equal((error as Error).name, "InvalidMessageError");
      assert.deepEqual((error as { fields: string[] }).fields, ["text"]);
      return true;
    });
  });

  it("validates the request locally when given its schema, sending nothing", async () => {
    await assert.rejects(request(client, server.peerId, ECHO, { text: 5 } as never, { requestSchema, responseSchema }), { name: "InvalidInputError" });
  });

  it("answers an oversized request with MessageTooLargeError", async () => {
    await assert.rejects(ask({ text: "x".repeat(5_000) }), { name: "MessageTooLargeError" });
  });

  it("refuses an answer larger than the client's cap", async () => {
    await assert.rejects(ask({ text: "y".repeat(600) }, { maxMessageBytes: 100 }), { name: "MessageTooLargeError" });
  });

  it("answers a request that is not JSON with InvalidMessageError (a raw stream, as a buggy peer sends)", async () => {
    const stream: Stream = await client.dialProtocol(server.peerId, ECHO);
    const lp = lpStream(stream);
    await lp.write(new TextEncoder().encode("{ not json"));
    const answer = JSON.parse(new TextDecoder().decode((await lp.read()).subarray())) as { ok: boolean; error: { name: string } };
    assert.equal(answer.ok, false);
    assert.equal(answer.error.name, "InvalidMessageError");
    await stream.close();
  });

  it("times out on the server when a peer never sends its request, answering RequestTimeoutError", async () => {
    const stream: Stream = await client.dialProtocol(server.peerId, ECHO);
    const lp = lpStream(stream);
    const answer = JSON.parse(new TextDecoder().decode((await lp.read({ signal: AbortSignal.timeout(5_000) })).subarray())) as {
      error: { name: string };
    };
    assert.equal(answer.error.name, "RequestTimeoutError");
    await stream.close();
  });

  it("times out on the client when the answer is late", async () => {
    await assert.rejects(ask({ text: "slow", delayMs: 800 }, { timeoutMs: 200 }), { name: "RequestTimeoutError" });
  });

  it("frees a peer's stream slots as soon as the requester gives up", async () => {
    const abandoned = await Promise.allSettled([1, 2].map(() => ask({ text: "long", delayMs: 900 }, { timeoutMs: 100 })));
    assert.ok(abandoned.every((r) => r.status === "rejected" && r.reason.name === "RequestTimeoutError"));
    // Both slots of this peer were taken by the abandoned requests; they must be free again.
    await waitFor(
      "the server to notice",
      async () =>
        await ask({ text: "x" }).then(
          () => true,
          () => false,
        ),
    );
    assert.deepEqual(await Promise.all([ask({ text: "a" }), ask({ text: "b" })]), [{ text: "A" }, { text: "B" }]);
  });

  it("caps concurrent streams per peer with a TooManyStreamsError answer, then keeps serving", async () => {
    await waitFor("the handlers to finish", () => inHandler === 0, { timeoutMs: 5_000 });
    const results = await Promise.allSettled([1, 2, 3, 4].map(() => ask({ text: "wait", delayMs: 300 })));
    const refused = results.filter((r) => r.status === "rejected");
    assert.equal(results.filter((r) => r.status === "fulfilled").length, 2);
    assert.equal(refused.length, 2);
    for (const r of refused) assert.equal((r as PromiseRejectedResult).reason.name, "TooManyStreamsError");
    await waitFor("the handlers to finish", () => inHandler === 0);
    assert.deepEqual(await ask({ text: "after" }), { text: "AFTER" });
  });

  it("reports a protocol the peer does not serve", async () => {
    await assert.rejects(request(client, server.peerId, "/suanli-test/nope/1.0.0", {}, { responseSchema }), {
      name: "ProtocolNotSupportedError",
    });
  });
});

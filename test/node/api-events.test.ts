import assert from "node:assert/strict";
import net from "node:net";
import { marketEventSchemas } from "../../common/api/events.js";
import type { OfferEntry } from "../../node/api/source.js";
import { startApiFixture, T0, type ApiFixture } from "../support/api-fixture.js";
import { accounts, leaseRecord, signedOfferEntry } from "../support/market.js";
import { eventually, openEventStream } from "../support/sse.js";

describe("HTTP API event stream (GET /v1/events)", () => {
  let fx: ApiFixture;
  let base: string;
  let template: OfferEntry;
  let seq = 10;

  /** A new version of the A100 offer of provider A (same signed offer, higher seq). */
  function bump(extra: Partial<OfferEntry["message"]> = {}): OfferEntry {
    seq += 1;
    return { ...template, message: { ...template.message, seq, ...extra } };
  }

  before(async () => {
    fx = await startApiFixture({ port: 0, sse: { heartbeatMs: 1000, replayEvents: 5, maxClientsPerIp: 3, clientBufferEvents: 4 } });
    base = await fx.api.listen();
    template = await signedOfferEntry({ provider: accounts.providerA, machineId: 7, model: "L40S-48GB", pricePerUnitSecond: 700n, at: T0, units: 4 });
  });
  after(async () => {
    await fx.close();
  });

  it("streams offer, offer-removed and lease events as they happen, decodable with the shared schemas", async () => {
    const stream = await openEventStream(`${base}/v1/events`, { origin: "https://dapp.example" });
    try {
      assert.equal(stream.status, 200);
      assert.match(String(stream.headers["content-type"]), /^text\/event-stream/);
      assert.equal(stream.headers["access-control-allow-origin"], "*");
      const entry = bump();
      fx.source.putOffer(entry);
      fx.source.putLease(leaseRecord(40n, accounts.renter.address, accounts.providerA.address, { status: "Open", activatedAt: null, end: null }));
      fx.source.removeOffer(`${accounts.providerA.address}:7`, "withdrawn");
      await stream.waitFor((events) => events.length >= 3);
      assert.deepEqual(
        stream.events.map((event) => event.event),
        ["offer", "lease", "offer-removed"],
      );
      const ids = stream.events.map((event) => Number(event.id));
      assert.ok(ids[0]! < ids[1]! && ids[1]! < ids[2]!, `increasing ids ${ids}`);
      const offer = marketEventSchemas.offer.decode(JSON.parse(stream.events[0]!.data));
      assert.equal(offer.model, "L40S-48GB");
      assert.equal(offer.pricePerUnitSecond, 700n);
      assert.equal(offer.seq, entry.message.seq);
      const lease = marketEventSchemas.lease.decode(JSON.parse(stream.events[1]!.data));
      assert.equal(lease.id, 40n);
      assert.equal(lease.status, "Open");
      const removed = marketEventSchemas["offer-removed"].decode(JSON.parse(stream.events[2]!.data));
      assert.deepEqual({ key: removed.key, reason: removed.reason }, { key: `${accounts.providerA.address.toLowerCase()}:7`, reason: "withdrawn" });
    } finally {
      stream.close();
    }
  });

  it("sends only the event types asked for, and refuses unknown ones with 400", async () => {
    const stream = await openEventStream(`${base}/v1/events?types=lease`);
    try {
      fx.source.putOffer(bump());
      fx.source.putLease(leaseRecord(41n, accounts.renter.address, accounts.providerA.address));
      // A second lease after them: the stream is in order, so once it arrives an offer event
      // (changed before it) would have arrived too. No fixed sleep to prove it did not.
      fx.source.putLease(leaseRecord(42n, accounts.renter.address, accounts.providerA.address));
      await stream.waitFor((events) => events.length >= 2);
      assert.deepEqual(
        stream.events.map((event) => event.event),
        ["lease", "lease"],
      );
      assert.deepEqual(
        stream.events.map((event) => marketEventSchemas.lease.decode(JSON.parse(event.data)).id),
        [41n, 42n],
      );
    } finally {
      stream.close();
    }
    const bad = await openEventStream(`${base}/v1/events?types=offer,gossip`);
    assert.equal(bad.status, 400);
    assert.equal(JSON.parse(bad.body).error.fields[0].path, "types");
  });

  it("replays missed events after Last-Event-ID, and says reset when they are no longer held", async () => {
    const first = await openEventStream(`${base}/v1/events`);
    fx.source.putLease(leaseRecord(50n, accounts.renter.address, accounts.providerA.address));
    await first.waitFor((events) => events.length >= 1);
    const lastSeen = first.events[0]!.id!;
    first.close();

    fx.source.putLease(leaseRecord(51n, accounts.renter.address, accounts.providerA.address));
    fx.source.putLease(leaseRecord(52n, accounts.renter.address, accounts.providerA.address));
    const resumed = await openEventStream(`${base}/v1/events`, { "last-event-id": lastSeen });
    try {
      await resumed.waitFor((events) => events.length >= 2);
      assert.deepEqual(
        resumed.events.map((event) => marketEventSchemas.lease.decode(JSON.parse(event.data)).id),
        [51n, 52n],
      );
    } finally {
      resumed.close();
    }

    // Six more events push the one after lastSeen out of a ring of five.
    for (let id = 53n; id < 59n; id++) fx.source.putLease(leaseRecord(id, accounts.renter.address, accounts.providerA.address));
    const late = await openEventStream(`${base}/v1/events`, { "last-event-id": lastSeen });
    try {
      await late.waitFor((events) => events.length >= 1);
      assert.equal(late.events[0]!.event, "reset");
    } finally {
      late.close();
    }
  });

  it("sends heartbeat comments on an idle stream", async () => {
    const stream = await openEventStream(`${base}/v1/events`);
    try {
      await eventually(() => stream.comments.includes("heartbeat"), "a heartbeat comment", 3000);
    } finally {
      stream.close();
    }
  });

  it("forgets a client when it disconnects", async () => {
    const streams = await Promise.all([openEventStream(`${base}/v1/events`), openEventStream(`${base}/v1/events`)]);
    await eventually(() => fx.api.hub.clientCount === 2, "two clients connected");
    for (const stream of streams) stream.close();
    await eventually(() => fx.api.hub.clientCount === 0, "no client left");
    // The hub holds one subscription to the source, whatever the number of clients.
    assert.equal(fx.source.subscriberCount, 1);
    const metrics = (await fx.api.app.inject({ method: "GET", url: "/metrics" })).body;
    assert.match(metrics, /suanli_api_sse_clients 0/);
    assert.match(metrics, /suanli_api_sse_disconnects_total\{reason="closed"\} \d+/);
  });

  it("refuses more streams per client address than allowed with 429", async () => {
    const open = await Promise.all([1, 2, 3].map(() => openEventStream(`${base}/v1/events`)));
    try {
      const refused = await openEventStream(`${base}/v1/events`);
      assert.equal(refused.status, 429);
      assert.equal(JSON.parse(refused.body).error.name, "TooManyStreamsError");
    } finally {
      for (const stream of open) stream.close();
    }
    await eventually(() => fx.api.hub.clientCount === 0, "streams closed");
  });

  it("disconnects a client that stops reading once its buffer is full", async () => {
    const socket = net.connect(Number(new URL(base).port), "127.0.0.1");
    await new Promise<void>((done) => socket.once("connect", () => done()));
    socket.write("GET /v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n");
    await eventually(() => fx.api.hub.clientCount === 1, "raw client connected");
    socket.pause();
    // Large offer versions until the kernel buffers fill and the client's queue of 4 overflows.
    const addrs = Array.from({ length: 8 }, (_, i) => `/dns4/provider-${i}.example/tcp/4001/p2p/${"x".repeat(200)}`);
    for (let batch = 0; batch < 200 && fx.api.hub.clientCount > 0; batch++) {
      for (let i = 0; i < 100; i++) fx.source.putOffer(bump({ addrs }));
      await new Promise((done) => setImmediate(done));
    }
    socket.destroy();
    assert.equal(fx.api.hub.clientCount, 0);
    const metrics = (await fx.api.app.inject({ method: "GET", url: "/metrics" })).body;
    assert.match(metrics, /suanli_api_sse_disconnects_total\{reason="slow"\} 1/);
  });

  it("ends open streams when the server closes", async () => {
    const other = await startApiFixture({ port: 0 });
    const url = await other.api.listen();
    const stream = await openEventStream(`${url}/v1/events`);
    await other.close();
    await stream.closed;
    assert.equal(other.api.hub.clientCount, 0);
  });
});

/**
 * The server-sent event stream: one subscription to the data source, fanned out to every client.
 * Each event is encoded once; a client that reads too slowly gets a bounded queue and is then
 * disconnected (its EventSource reconnects with Last-Event-ID and catches up from the replay ring,
 * or gets `reset`). Heartbeat comments keep proxies from closing idle streams.
 */
import type { ServerResponse } from "node:http";
import type { FastifyReply, FastifyRequest } from "fastify";
import { marketEventSchemas, type MarketEventName } from "../../common/api/events.js";
import type { Logger } from "../log/logger.js";
import { TooManyStreamsError } from "./errors.js";
import type { ApiMetrics } from "./metrics.js";
import { toOfferView } from "./offer-view.js";
import type { ApiOptions } from "./options.js";
import type { MarketChange, MarketDataSource } from "./source.js";

type Frame = { id: number; event: MarketEventName; text: string };
type StreamType = "offer" | "offer-removed" | "lease";

class SseClient {
  private queue: string[] = [];
  private blocked = false;
  closed = false;

  constructor(
    readonly ip: string,
    readonly types: ReadonlySet<StreamType>,
    private readonly raw: ServerResponse,
    private readonly maxQueue: number,
    private readonly onOverflow: (client: SseClient) => void,
  ) {}

  write(text: string): void {
    if (this.closed) return;
    if (this.blocked) {
      if (this.queue.length >= this.maxQueue) {
        this.onOverflow(this);
        return;
      }
      this.queue.push(text);
      return;
    }
    if (!this.raw.write(text)) {
      this.blocked = true;
      this.raw.once("drain", () => this.flush());
    }
  }

  private flush(): void {
    this.blocked = false;
    while (this.queue.length > 0 && !this.closed) {
      const next = this.queue.shift()!;
      if (!this.raw.write(next)) {
        this.blocked = true;
        this.raw.once("drain", () => this.flush());
        return;
      }
    }
  }

  get queued(): number {
    return this.queue.length;
  }

  end(): void {
    if (this.closed) return;
    this.closed = true;
    this.queue = [];
    this.raw.end();
  }
}

export type EventHubDeps = {
  source: MarketDataSource;
  options: ApiOptions["sse"];
  metrics: ApiMetrics;
  logger: Logger;
  nowSeconds: () => number;
};

export class EventHub {
  private readonly clients = new Set<SseClient>();
  private readonly perIp = new Map<string, number>();
  private readonly ring: Frame[] = [];
  private nextId = 1;
  private unsubscribe: (() => void) | undefined;
  private heartbeat: NodeJS.Timeout | undefined;

  constructor(private readonly deps: EventHubDeps) {}

  start(): void {
    if (this.unsubscribe) return;
    this.unsubscribe = this.deps.source.subscribe((change) => this.publish(change));
    this.heartbeat = setInterval(() => {
      for (const client of this.clients) client.write(": heartbeat\n\n");
    }, this.deps.options.heartbeatMs);
    this.heartbeat.unref();
  }

  /** Ends every stream and stops listening to the source (before the server closes). */
  stop(): void {
    this.unsubscribe?.();
    this.unsubscribe = undefined;
    if (this.heartbeat) clearInterval(this.heartbeat);
    this.heartbeat = undefined;
    for (const client of [...this.clients]) this.drop(client, "shutdown");
  }

  get clientCount(): number {
    return this.clients.size;
  }

  private encode(change: MarketChange): { event: MarketEventName; data: unknown } {
    switch (change.type) {
      case "offer":
        return {
          event: "offer",
          data: marketEventSchemas.offer.encode(toOfferView(change.entry, this.deps.nowSeconds(), this.deps.source.reputationOf?.(change.entry.message.offer.provider))),
        };
      case "offer-removed":
        return { event: "offer-removed", data: marketEventSchemas["offer-removed"].encode({ key: change.key, reason: change.reason, at: change.at }) };
      case "lease":
        return { event: "lease", data: marketEventSchemas.lease.encode(change.lease) };
    }
  }

  private publish(change: MarketChange): void {
    let encoded: { event: MarketEventName; data: unknown };
    try {
      encoded = this.encode(change);
    } catch (error) {
      this.deps.logger.warn("Market change does not fit the event schema; not streamed", { type: change.type }, error);
      return;
    }
    const id = this.nextId++;
    const frame: Frame = { id, event: encoded.event, text: `id: ${id}\nevent: ${encoded.event}\ndata: ${JSON.stringify(encoded.data)}\n\n` };
    if (this.deps.options.replayEvents > 0) {
      this.ring.push(frame);
      if (this.ring.length > this.deps.options.replayEvents) this.ring.shift();
    }
    for (const client of this.clients) {
      if (!client.types.has(frame.event as StreamType)) continue;
      client.write(frame.text);
      this.deps.metrics.sseEvents.inc({ event: frame.event });
    }
  }

  /**
   * Takes over the request's connection and streams events until the client goes away.
   * Throws TooManyStreamsError (before taking over) when the limits are reached.
   */
  attach(request: FastifyRequest, reply: FastifyReply, types: StreamType[] | undefined, lastEventId: string | undefined): void {
    const { maxClients, maxClientsPerIp, clientBufferEvents } = this.deps.options;
    const ip = request.ip;
    if (this.clients.size >= maxClients) {
      throw new TooManyStreamsError(`This node serves at most ${maxClients} event streams; retry later`, 503);
    }
    const fromIp = this.perIp.get(ip) ?? 0;
    if (fromIp >= maxClientsPerIp) {
      throw new TooManyStreamsError(`At most ${maxClientsPerIp} event streams per client address; close one first`);
    }

    reply.hijack();
    const raw = reply.raw;
    const headers: Record<string, string | number | string[]> = {};
    for (const [name, value] of Object.entries(reply.getHeaders())) if (value !== undefined) headers[name] = value as string | number | string[];
    raw.writeHead(200, {
      ...headers,
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-cache, no-transform",
      connection: "keep-alive",
      // nginx buffers responses unless told not to
      "x-accel-buffering": "no",
    });
    raw.socket?.setNoDelay(true);

    const client = new SseClient(ip, new Set(types ?? ["offer", "offer-removed", "lease"]), raw, clientBufferEvents, (slow) => this.drop(slow, "slow"));
    this.clients.add(client);
    this.perIp.set(ip, fromIp + 1);
    this.deps.metrics.sseClients.set(this.clients.size);
    raw.on("close", () => this.drop(client, "closed"));

    client.write("retry: 3000\n: connected\n\n");
    const last = lastEventId !== undefined && /^\d{1,15}$/.test(lastEventId) ? Number(lastEventId) : undefined;
    if (last !== undefined && last < this.nextId - 1) {
      const oldest = this.ring[0]?.id;
      if (oldest === undefined || oldest > last + 1) {
        client.write(`id: ${this.nextId - 1}\nevent: reset\ndata: ${JSON.stringify({ reason: "missed events are no longer held" })}\n\n`);
      } else {
        for (const frame of this.ring) if (frame.id > last && client.types.has(frame.event as StreamType)) client.write(frame.text);
      }
    }
  }

  private drop(client: SseClient, reason: "closed" | "slow" | "shutdown"): void {
    if (!this.clients.delete(client)) return;
    const left = (this.perIp.get(client.ip) ?? 1) - 1;
    if (left <= 0) this.perIp.delete(client.ip);
    else this.perIp.set(client.ip, left);
    this.deps.metrics.sseClients.set(this.clients.size);
    this.deps.metrics.sseDisconnects.inc({ reason });
    if (reason === "slow") this.deps.logger.debug("Event-stream client too slow; disconnected", { ip: client.ip, queued: client.queued });
    client.end();
  }
}

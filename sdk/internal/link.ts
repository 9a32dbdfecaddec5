/**
 * How the client reaches providers: over libp2p in Node (dialing the provider's peer id at the
 * addresses its offer announced), or through a node's HTTP relay routes in a browser. Bodies are
 * the shared lease-protocol messages; errors keep the provider's error name.
 */
import { peerIdFromString } from "@libp2p/peer-id";
import { multiaddr } from "@multiformats/multiaddr";
import type { z } from "zod";
import type { SuanliHost } from "../../common/p2p/host.js";
import { CANCEL_PROTOCOL, LOGS_PROTOCOL, RESERVE_PROTOCOL, STATUS_PROTOCOL, TASK_PROTOCOL } from "../../common/p2p/protocols.js";
import { request } from "../../common/p2p/reqresp.js";
import { openStreamProtocol } from "../../common/p2p/streams.js";
import type { Stream } from "@libp2p/interface";
import type { LengthPrefixedStream } from "@libp2p/utils";
import {
  cancelAnswerSchema,
  cancelBodySchema,
  logsAnswerSchema,
  logsBodySchema,
  reserveBodySchema,
  reserveReplySchema,
  statusBodySchema,
  taskAnswerSchema,
  taskBodySchema,
  taskStatusSchema,
} from "../../common/protocols/lease.js";

/** Where a provider node can be reached: its libp2p peer id and announced addresses. */
export type ProviderAddress = { peerId: string; addrs: readonly string[] };

export type ProviderLink = {
  reserve(to: ProviderAddress, body: z.input<typeof reserveBodySchema>, signal?: AbortSignal): Promise<z.output<typeof reserveReplySchema>>;
  task(to: ProviderAddress, body: z.input<typeof taskBodySchema>): Promise<z.output<typeof taskAnswerSchema>>;
  status(to: ProviderAddress, body: z.input<typeof statusBodySchema>): Promise<z.output<typeof taskStatusSchema>>;
  logs(to: ProviderAddress, body: z.input<typeof logsBodySchema>): Promise<z.output<typeof logsAnswerSchema>>;
  cancel(to: ProviderAddress, body: z.input<typeof cancelBodySchema>): Promise<z.output<typeof cancelAnswerSchema>>;
  /**
   * Opens a streaming task I/O exchange (output, exec, forward): sends `body`, checks the answer,
   * returns the stream for the protocol's frames. Absent where the client has no libp2p (browsers).
   */
  openStream?<S extends z.ZodType>(
    to: ProviderAddress,
    protocol: string,
    body: unknown,
    options: { responseSchema: S; maxFrameBytes: number; signal?: AbortSignal },
  ): Promise<{ answer: z.output<S>; lp: LengthPrefixedStream<Stream>; stream: Stream }>;
  /**
   * The output protocol through a node's HTTP relay (clients without libp2p): `list` answers the
   * manifest, `read` the HTTP response whose body streams the bytes. Absent over libp2p.
   */
  relayOutput?: {
    list(leaseId: bigint, body: unknown, signal?: AbortSignal): Promise<unknown>;
    read(leaseId: bigint, body: unknown, signal?: AbortSignal): Promise<Response>;
  };
};

/** Reaches providers over libp2p from the client's own host. */
export function p2pLink(host: SuanliHost, options: { timeoutMs?: number } = {}): ProviderLink {
  const timeoutMs = options.timeoutMs ?? 15_000;
  async function target(to: ProviderAddress) {
    const peer = peerIdFromString(to.peerId);
    // Teach the peer store the announced addresses, so dialing the peer id works without a DHT.
    const addrs = to.addrs.map((addr) => multiaddr(addr));
    if (addrs.length) await host.peerStore.merge(peer, { multiaddrs: addrs }).catch(() => undefined);
    return peer;
  }
  return {
    async reserve(to, body, signal) {
      return request(host, await target(to), RESERVE_PROTOCOL, body, { requestSchema: reserveBodySchema, responseSchema: reserveReplySchema, timeoutMs, signal });
    },
    async task(to, body) {
      return request(host, await target(to), TASK_PROTOCOL, body, { requestSchema: taskBodySchema, responseSchema: taskAnswerSchema, timeoutMs });
    },
    async status(to, body) {
      return request(host, await target(to), STATUS_PROTOCOL, body, { requestSchema: statusBodySchema, responseSchema: taskStatusSchema, timeoutMs });
    },
    async logs(to, body) {
      const waitMs = (body as { waitMs?: number }).waitMs ?? 0;
      return request(host, await target(to), LOGS_PROTOCOL, body, {
        requestSchema: logsBodySchema,
        responseSchema: logsAnswerSchema,
        timeoutMs: timeoutMs + waitMs,
        maxMessageBytes: 4 * 1024 * 1024,
      });
    },
    async cancel(to, body) {
      return request(host, await target(to), CANCEL_PROTOCOL, body, { requestSchema: cancelBodySchema, responseSchema: cancelAnswerSchema, timeoutMs });
    },
    async openStream(to, protocol, body, options) {
      return openStreamProtocol(host, await target(to), protocol, body, { ...options, timeoutMs });
    },
  };
}

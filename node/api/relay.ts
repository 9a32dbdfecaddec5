/**
 * The node side of the relay routes: a renter without libp2p (a browser) sends its signed request
 * to any node, and the node forwards it to the provider over the lease protocols and returns the
 * provider's answer. The node trusts nothing it relays: it checks the renter's signature against
 * the on-chain lease before it spends a stream on it (so a node cannot be used to flood providers
 * with junk), forwards the body byte-for-byte as the renter sent it (the signature's bodyHash
 * covers the renter's own JSON), and passes the provider's typed errors back by name.
 *
 * The provider's peer: the peer id the provider registered on-chain; its addresses from the
 * provider's offers in the book when there are any, otherwise libp2p's peer routing (the DHT)
 * finds them when it dials.
 */
import { peerIdFromString } from "@libp2p/peer-id";
import type { PeerId } from "@libp2p/interface";
import { multiaddr } from "@multiformats/multiaddr";
import { recoverTypedDataAddress, type Address, type Chain, type Hex, type PublicClient, type Transport } from "viem";
import type { z } from "zod";
import type { ReservationBody } from "../../common/api/market.js";
import type { OutputRelayBody, RelayAction, RelayBody } from "../../common/api/relay.js";
import { readLease } from "../../common/chain/market.js";
import { suanliDomain, suanliTypes, type ReserveRequest } from "../../common/eip712.js";
import { SuanliError } from "../../common/errors.js";
import { reserveReplySchema, type ReserveReply } from "../../common/matching/handshake.js";
import type { CachedChainView } from "../../common/offers/chain-view.js";
import { PeerUnreachableError, ProtocolNotSupportedError, RequestTimeoutError } from "../../common/p2p/errors.js";
import type { SuanliHost } from "../../common/p2p/host.js";
import { CANCEL_PROTOCOL, LOGS_PROTOCOL, OUTPUT_PROTOCOL, RESERVE_PROTOCOL, STATUS_PROTOCOL, TASK_PROTOCOL } from "../../common/p2p/protocols.js";
import { request } from "../../common/p2p/reqresp.js";
import { openStreamProtocol } from "../../common/p2p/streams.js";
import { OUTPUT_ACK_BYTES, OUTPUT_FRAME_BYTES, TASK_IO_CONTROL_MAX_BYTES, outputManifestSchema, type OutputManifest } from "../../common/protocols/task-io.js";
import { cancelAnswerSchema, logsAnswerSchema, taskAnswerSchema, taskStatusSchema } from "../../common/protocols/lease.js";
import type { Logger } from "../log/logger.js";
import type { OfferBook } from "../offers/book.js";
import {
  InvalidSignatureError,
  LeaseNotFoundError,
  ProviderAnsweredError,
  ProviderNotFoundError,
  ProviderNotRentingError,
  ProviderTimeoutError,
  ProviderUnreachableError,
  RequestInputError,
  StaleSignatureError,
} from "./errors.js";
import type { OutputRead, ProviderRelay } from "./source.js";
import { renterBehind } from "./signed.js";
import type { DelegationVerifier } from "../sessions/delegations.js";

const PROTOCOLS: Record<RelayAction, string> = {
  task: TASK_PROTOCOL,
  status: STATUS_PROTOCOL,
  logs: LOGS_PROTOCOL,
  cancel: CANCEL_PROTOCOL,
};

const ANSWERS: Record<RelayAction, z.ZodType> = {
  task: taskAnswerSchema,
  status: taskStatusSchema,
  logs: logsAnswerSchema,
  cancel: cancelAnswerSchema,
};

/**
 * The signed request must be about the route's lease and action: a signature for `status` cannot
 * be replayed as a `cancel`. Throws the 400 naming the field.
 */
export function checkRelayAuth(action: RelayAction, leaseId: bigint, body: RelayBody): void {
  const { request: signed } = body.auth;
  const issues = [];
  if (signed.leaseId !== leaseId) issues.push({ path: "auth.request.leaseId", message: `must be the lease of the route (${leaseId})` });
  if (signed.action !== action) issues.push({ path: "auth.request.action", message: `must be "${action}" on this route` });
  if (issues.length) throw new RequestInputError("request body", issues);
}

/** The signed request of an output download must be about the route's lease and be an `output` request. */
export function checkOutputAuth(leaseId: bigint, body: OutputRelayBody): void {
  const { request: signed } = body.auth;
  if (signed.leaseId !== leaseId) throw new RequestInputError("request body", [{ path: "auth.request.leaseId", message: `must be the lease of the route (${leaseId})` }]);
}

/** Bytes of the output from (`fromPath`, `fromOffset`) to the end, by the manifest; 400 when the start is not in it. */
export function remainingBytes(manifest: OutputManifest, fromPath: string | undefined, fromOffset: number): number {
  const start = fromPath === undefined ? 0 : manifest.files.findIndex((file) => file.path === fromPath);
  if (start < 0) throw new RequestInputError("request body", [{ path: "params.fromPath", message: `is not a file of the output` }]);
  const before = manifest.files.slice(0, start).reduce((sum, file) => sum + file.size, 0);
  return manifest.totalBytes - before - (fromPath === undefined ? 0 : fromOffset);
}

/** Answers can be larger than requests: a page of logs holds up to 1000 lines of 16 KiB. */
const LOGS_MAX_ANSWER_BYTES = 17 * 1024 * 1024;

export type NodeProviderRelayOptions = {
  host: SuanliHost;
  book: OfferBook;
  /** The node's cached registry view: providers' peer ids. */
  chainView: CachedChainView;
  publicClient: PublicClient<Transport, Chain>;
  chainId: number;
  market: Address;
  logger: Logger;
  /** How far a signed request's issuedAt may be from this node's clock (api.signatureMaxAgeSeconds). */
  maxAgeSeconds: number;
  /** Checks requests signed by renters' session keys; without it they are refused. */
  delegations?: DelegationVerifier;
  /** Deadline of one exchange with a provider, ms (logs add their long-poll wait). */
  timeoutMs?: number;
  /** Unix seconds now (tests). */
  nowSeconds?: () => number;
};

/**
 * @example
 * const relay = new NodeProviderRelay({ host, book, chainView, publicClient, chainId, market, logger, maxAgeSeconds: 300 });
 * const api = await createApiServer({ source, relay, deployment, options });
 */
export class NodeProviderRelay implements ProviderRelay {
  private readonly timeoutMs: number;
  private readonly nowSeconds: () => number;

  constructor(private readonly options: NodeProviderRelayOptions) {
    this.timeoutMs = options.timeoutMs ?? 10_000;
    this.nowSeconds = options.nowSeconds ?? (() => Math.floor(Date.now() / 1000));
  }

  async reserve(reserveRequest: ReserveRequest, signature: Hex, delegation?: ReservationBody["delegation"]): Promise<ReserveReply> {
    const peer = await this.providerPeer(reserveRequest.provider, reserveRequest.machineId);
    const body = { chainId: this.options.chainId, request: reserveRequest, signature, ...(delegation ? { delegation } : {}) };
    return (await this.call(peer, RESERVE_PROTOCOL, body, reserveReplySchema, this.timeoutMs)) as ReserveReply;
  }

  async forward(action: RelayAction, leaseId: bigint, body: RelayBody, raw: unknown): Promise<unknown> {
    checkRelayAuth(action, leaseId, body);
    const lease = await this.checkRenter(leaseId, body.auth);
    const peer = await this.providerPeer(lease.provider, lease.machineId);
    const waitMs = action === "logs" ? (((raw as { waitMs?: unknown }).waitMs as number | undefined) ?? 0) : 0;
    return this.call(peer, PROTOCOLS[action], raw, ANSWERS[action], this.timeoutMs + waitMs, action === "logs" ? LOGS_MAX_ANSWER_BYTES : undefined);
  }

  /**
   * Opens the output protocol to the lease's provider with the renter's body unchanged (the
   * provider checks the signature's bodyHash over `params` and its nonce, so this node can
   * neither forge a request nor widen one). `list` returns the manifest; `read` the manifest and
   * the bytes, acknowledged to the provider as the caller consumes them (flow control: a slow
   * browser holds the provider back instead of filling this node's memory).
   */
  async openOutput(leaseId: bigint, body: OutputRelayBody, raw: unknown, signal?: AbortSignal): Promise<OutputRead> {
    checkOutputAuth(leaseId, body);
    const lease = await this.checkRenter(leaseId, body.auth);
    const peer = await this.providerPeer(lease.provider, lease.machineId);
    let opened;
    try {
      opened = await openStreamProtocol(this.options.host, peer, OUTPUT_PROTOCOL, raw, {
        responseSchema: outputManifestSchema,
        maxFrameBytes: Math.max(OUTPUT_FRAME_BYTES, TASK_IO_CONTROL_MAX_BYTES),
        timeoutMs: this.timeoutMs,
        signal,
      });
    } catch (error) {
      throw this.translate(error, peer, OUTPUT_PROTOCOL);
    }
    const { answer, lp, stream } = opened;
    const manifest = answer as OutputManifest;
    if (body.params.op === "list") {
      await stream.close().catch(() => undefined);
      return { manifest, remaining: 0, bytes: (async function* () {})(), abort: () => undefined };
    }
    const remaining = remainingBytes(manifest, body.params.fromPath, body.params.fromOffset);
    const timeoutMs = this.timeoutMs;
    async function* bytes(): AsyncGenerator<Uint8Array> {
      let left = remaining;
      let unacked = 0;
      try {
        while (left > 0) {
          const frame = (await lp.read({ signal: AbortSignal.timeout(timeoutMs) })).subarray();
          if (frame.length === 0 || frame.length > left) throw new ProviderAnsweredError("InvalidMessageError", "The provider sent more output bytes than its manifest lists", 502);
          left -= frame.length;
          yield frame;
          // Consumed by the HTTP client: tell the provider it may send more.
          unacked += frame.length;
          while (unacked >= OUTPUT_ACK_BYTES) {
            unacked -= OUTPUT_ACK_BYTES;
            await lp.write(Uint8Array.of(1)).catch(() => undefined);
          }
        }
        await stream.close().catch(() => undefined);
      } finally {
        if (left > 0) stream.abort(new Error("the HTTP download stopped"));
      }
    }
    return { manifest, remaining, bytes: bytes(), abort: (reason) => stream.abort(reason) };
  }

  /**
   * The checks every relayed lease request passes before a stream is spent on it: the lease
   * exists, the signed request names its provider, is fresh, and is signed by its renter.
   */
  private async checkRenter(leaseId: bigint, auth: RelayBody["auth"] | OutputRelayBody["auth"]) {
    const lease = await readLease(this.options.publicClient, this.options.market, leaseId);
    if (lease.status === "None") throw new LeaseNotFoundError(leaseId);
    if (auth.request.provider.toLowerCase() !== lease.provider.toLowerCase()) {
      throw new RequestInputError("request body", [{ path: "auth.request.provider", message: `is not the provider of lease ${leaseId} (${lease.provider})` }]);
    }
    const skew = Math.abs(this.nowSeconds() - auth.request.issuedAt);
    if (skew > this.options.maxAgeSeconds) {
      throw new StaleSignatureError(
        `auth.request.issuedAt is ${skew} s from this node's clock (at most ${this.options.maxAgeSeconds} s accepted); sign it again with the current time`,
      );
    }
    let signer: Address;
    try {
      signer = await recoverTypedDataAddress({
        domain: suanliDomain(this.options.chainId, this.options.market),
        types: { RenterRequest: suanliTypes.RenterRequest },
        primaryType: "RenterRequest",
        message: auth.request,
        signature: auth.signature,
      });
    } catch {
      throw new InvalidSignatureError("auth.signature is not a valid ECDSA signature of auth.request");
    }
    if (auth.delegation) {
      signer = await renterBehind(this.options.delegations, auth.delegation, {
        signer,
        action: auth.request.action,
        leaseId,
        renter: lease.renter,
        mismatch: (delegator) => new InvalidSignatureError(`auth.delegation was made by ${delegator}, not by the renter of lease ${leaseId} (${lease.renter})`),
      });
    }
    if (signer.toLowerCase() !== lease.renter.toLowerCase()) {
      throw new InvalidSignatureError(`auth.signature was made by ${signer}, not by the renter of lease ${leaseId} (${lease.renter})`);
    }
    return lease;
  }

  private providerPeer(provider: Address, machineId: number): Promise<PeerId> {
    return resolveProviderPeer(this.options, provider, machineId);
  }

  private async call(peer: PeerId, protocol: string, body: unknown, responseSchema: z.ZodType, timeoutMs: number, maxMessageBytes?: number): Promise<unknown> {
    try {
      return await request(this.options.host, peer, protocol, body, { responseSchema, timeoutMs, maxMessageBytes });
    } catch (error) {
      throw this.translate(error, peer, protocol);
    }
  }

  /**
   * The p2p layer's errors as the API's: not reaching the provider or its silence is this node's
   * report; anything else (the provider's own refusal, or an answer that breaks the protocol) is
   * passed on under its name.
   */
  private translate(error: unknown, peer: PeerId, protocol: string): Error {
    if (error instanceof RequestTimeoutError) return new ProviderTimeoutError(`The provider (${peer}) did not answer ${protocol} in time`);
    if (error instanceof ProtocolNotSupportedError && protocol === RESERVE_PROTOCOL) {
      return new ProviderNotRentingError(`The provider (${peer}) is reachable but does not serve reservations: its node publishes offers and rents nothing`);
    }
    if (error instanceof PeerUnreachableError || error instanceof ProtocolNotSupportedError) {
      this.options.logger.debug("Relay could not reach a provider", { peer: peer.toString(), protocol, reason: error.shortMessage });
      return new ProviderUnreachableError(
        error instanceof ProtocolNotSupportedError ? `The provider (${peer}) does not serve ${protocol}` : `Cannot reach the provider (${peer}): ${error.shortMessage}`,
      );
    }
    if (error instanceof SuanliError) return new ProviderAnsweredError(error.name, error.shortMessage);
    return error instanceof Error ? error : new Error(String(error));
  }
}

/**
 * The provider's registered peer, with the addresses its offers announce added to the peer store
 * (the relay's and the gateway's way to a lease's provider). ProviderNotFoundError when it is not
 * registered, ProviderUnreachableError when its peer id is not one.
 */
export async function resolveProviderPeer(options: Pick<NodeProviderRelayOptions, "chainView" | "book" | "host">, provider: Address, machineId: number): Promise<PeerId> {
  const record = await options.chainView.getProvider(provider);
  if (!record || !record.registered || record.peerId === "") throw new ProviderNotFoundError(provider);
  let peer: PeerId;
  try {
    peer = peerIdFromString(record.peerId);
  } catch {
    throw new ProviderUnreachableError(`The peer id ${provider} registered on-chain is not a valid libp2p peer id`);
  }
  const offers = options.book.byProvider(provider).filter((entry) => entry.peerId === record.peerId);
  offers.sort((a, b) => Number(b.machineId === machineId) - Number(a.machineId === machineId));
  const addrs = [...new Set(offers.flatMap((entry) => entry.addrs))].flatMap((text) => {
    try {
      return [multiaddr(text)];
    } catch {
      return [];
    }
  });
  if (addrs.length) await options.host.peerStore.merge(peer, { multiaddrs: addrs }).catch(() => undefined);
  return peer;
}

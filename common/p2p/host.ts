/**
 * The libp2p host every Suanli process runs: TCP, Noise, Yamux, identify (and identify push), ping, and optionally
 * the Kademlia DHT (peer discovery), a bootstrap list and gossipsub. The node runs all of it; a
 * light SDK client can skip the DHT (and gossip) and only dial the peers it talks to.
 */
import { noise } from "@chainsafe/libp2p-noise";
import { yamux } from "@chainsafe/libp2p-yamux";
import { bootstrap } from "@libp2p/bootstrap";
import { gossipsub, StrictNoSign, type GossipSub } from "@libp2p/gossipsub";
import { createTopicScoreParams, type TopicScoreParams } from "@libp2p/gossipsub/score";
import { identify, identifyPush, type Identify, type IdentifyPush } from "@libp2p/identify";
import type { Libp2p, PeerId, PeerInfo, PrivateKey } from "@libp2p/interface";
import { kadDHT, passthroughMapper, removePrivateAddressesMapper, type KadDHT } from "@libp2p/kad-dht";
import { ping, type Ping } from "@libp2p/ping";
import { tcp } from "@libp2p/tcp";
import { multiaddr } from "@multiformats/multiaddr";
import { createLibp2p, type ServiceFactoryMap } from "libp2p";
import { z } from "zod";
import { SuanliError } from "../errors.js";
import { parseInput } from "../validation.js";
import { hardenGossipsub } from "./gossip-hardening.js";
import { ipOf, PeerGuard } from "./peer-guard.js";
import { KAD_PROTOCOL, SUANLI_AGENT } from "./protocols.js";
import { runDetached } from "../detached.js";

export class HostStartError extends SuanliError {
  override name = "HostStartError";
}

export const multiaddrString = z
  .string()
  .min(1)
  .max(512)
  .refine(
    (value) => {
      try {
        multiaddr(value);
        return true;
      } catch {
        return false;
      }
    },
    { message: "expected a multiaddr such as /ip4/127.0.0.1/tcp/4001" },
  );

const bootstrapAddr = multiaddrString.refine((value) => /\/p2p\/[1-9A-HJ-NP-Za-km-z]+$/.test(value), {
  message: "a bootstrap address must end in /p2p/<peer id>",
});

export const hostOptionsSchema = z.strictObject({
  /** Addresses to listen on. Empty: dial only (a light client). */
  listen: z.array(multiaddrString).max(16).default([]),
  /** Addresses to announce instead of the listen addresses (public IP behind NAT, DNS name). */
  announce: z.array(multiaddrString).max(16).default([]),
  /** Peers to connect to at start, each `/ip4/…/tcp/…/p2p/<peer id>`. */
  bootstrap: z.array(bootstrapAddr).max(64).default([]),
  dht: z
    .strictObject({
      /** Run the Kademlia DHT to discover peers beyond the bootstrap list. */
      enabled: z.boolean().default(true),
      /** Client mode: query the DHT, never answer it (nodes that are not reachable). */
      clientMode: z.boolean().default(false),
    })
    .prefault({}),
  /**
   * Keep private and loopback addresses in the DHT and gossip them. Off on the public network
   * (they are useless to remote peers); on for a devnet or a LAN where every node is private.
   */
  allowPrivateAddresses: z.boolean().default(false),
  gossip: z
    .strictObject({
      enabled: z.boolean().default(true),
      /** Mesh degree and its bounds: small meshes still reach every subscriber in one hop or two. */
      D: z.number().int().min(1).max(32).default(6),
      Dlo: z.number().int().min(1).max(32).default(4),
      Dhi: z.number().int().min(1).max(64).default(12),
      /** Mesh maintenance; 700 ms heals a mesh quickly after a join without much chatter. */
      heartbeatIntervalMs: z.number().int().min(50).max(60_000).default(700),
      /** Largest gossip frame accepted from a peer (an RPC can batch several messages). */
      maxInboundFrameBytes: z
        .number()
        .int()
        .min(1024)
        .max(16 * 1024 * 1024)
        .default(1024 * 1024),
      /**
       * IPs exempt from the same-IP penalty of peer scoring. Many nodes on one host (a devnet,
       * the tests) would otherwise score each other down.
       */
      ipColocationWhitelist: z.array(z.ipv4().or(z.ipv6())).max(64).default([]),
      /**
       * How long a misbehaving peer (and its address, unless whitelisted above) is remembered:
       * its worst gossip score decays linearly to zero over this period, and while it is at or
       * below the graylist threshold (−80) the host refuses its connections, whatever its
       * gossipsub score says after a reconnect.
       */
      peerMemorySeconds: z
        .number()
        .int()
        .min(1)
        .max(7 * 86_400)
        .default(3_600),
    })
    .prefault({}),
  connections: z
    .strictObject({
      /** Upper bound on open connections. */
      max: z.number().int().min(1).max(10_000).default(300),
      /** Below this many connections the host dials peers it has discovered. */
      min: z.number().int().min(0).max(1_000).default(8),
      /** Inbound connections per second accepted from one IP (many nodes on one host need more). */
      inboundPerSecondPerHost: z.number().int().min(1).max(10_000).default(5),
      /** Dial timeout. */
      dialTimeoutMs: z.number().int().min(100).max(120_000).default(10_000),
    })
    .prefault({}),
});
export type HostOptionsInput = z.input<typeof hostOptionsSchema>;
export type HostOptions = z.output<typeof hostOptionsSchema>;

export type SuanliServices = {
  identify: Identify;
  /** Tells connected peers of this host's protocols when asked (announceProtocols): a service that starts after the host (the data plane's bitswap) is then known to peers that identified the host before it. */
  identifyPush: IdentifyPush;
  ping: Ping;
  dht?: KadDHT;
  pubsub?: GossipSub;
};

/** What gossipsub's class offers beyond its published interface (mesh and score inspection). */
export type GossipSubInspect = GossipSub & {
  getMeshPeers(topic: string): string[];
  getScore(peerId: string): number;
  readonly score: { readonly params: { readonly topics: Record<string, TopicScoreParams> } };
};

/** A started libp2p host with Suanli's services. */
export type SuanliHost = Libp2p<SuanliServices>;

export type CreateHostParameters = HostOptionsInput & {
  /** The host's identity. Without it a fresh Ed25519 key is generated (the peer id changes every start). */
  privateKey?: PrivateKey | undefined;
  /** Gossip topics the host may carry, each with its peer-score parameters. Others are dropped. */
  topics?: Record<string, Partial<TopicScoreParams>> | undefined;
  /** Called when a connection is refused because the peer or its address misbehaved (metrics, logs). */
  onPeerRefused?: ((match: "peer" | "address", who: string) => void) | undefined;
  /** Called when a peer sent a gossip frame over our limit (it is penalised and disconnected). */
  onOversizedFrame?: ((peer: string, score: number) => void) | undefined;
};

/** The graylist threshold of gossipsub's default thresholds: below it a peer's RPCs are ignored. */
export const GRAYLIST_THRESHOLD = -80;
/** What one oversized gossip frame costs in the host's own memory: two within a few minutes pass the graylist threshold. */
export const OVERSIZED_FRAME_SCORE = -45;

const guards = new WeakMap<object, PeerGuard>();

/** The host's memory of misbehaving peers (undefined for hosts not made by createHost). */
export function peerGuardOf(host: SuanliHost): PeerGuard | undefined {
  return guards.get(host);
}

/**
 * Creates and starts a host. Stop it with `host.stop()`; the host also stops dialing
 * discovered peers then.
 *
 * @example
 * import { createHost } from "suanli/common/p2p/host";
 * const host = await createHost({ listen: ["/ip4/127.0.0.1/tcp/0"], bootstrap: [] });
 * console.log(host.peerId.toString(), host.getMultiaddrs().map(String));
 * await host.stop();
 */
export async function createHost(parameters: CreateHostParameters = {}): Promise<SuanliHost> {
  const { privateKey, topics, onPeerRefused, onOversizedFrame, ...rest } = parameters;
  const options = parseInput(hostOptionsSchema, rest, "p2p host options", ["Multiaddrs look like /ip4/127.0.0.1/tcp/4001; bootstrap entries end in /p2p/<peer id>."]);
  if (options.gossip.Dlo > options.gossip.D || options.gossip.D > options.gossip.Dhi) {
    throw new HostStartError("Gossip mesh bounds must satisfy Dlo <= D <= Dhi", {
      details: `Dlo=${options.gossip.Dlo} D=${options.gossip.D} Dhi=${options.gossip.Dhi}`,
    });
  }

  const services: ServiceFactoryMap<SuanliServices> = {
    identify: identify({ protocolPrefix: "ipfs" }),
    // Pushes only when asked (announceProtocols): pushing at every change of this host's record
    // (each protocol handled or dropped, each address) to every connected peer cost the tests
    // that hold many connections (50 short-lived CLI clients through one node, attestors' rounds)
    // their streams and timing.
    identifyPush: identifyPush({ protocolPrefix: "ipfs", runOnSelfUpdate: false }),
    ping: ping(),
  };
  if (options.dht.enabled) {
    services.dht = kadDHT({
      protocol: KAD_PROTOCOL,
      clientMode: options.dht.clientMode,
      peerInfoMapper: options.allowPrivateAddresses ? passthroughMapper : removePrivateAddressesMapper,
      logPrefix: "suanli:kad",
      datastorePrefix: "/suanli-kad",
      metricsPrefix: "suanli_kad",
    });
  }
  if (options.gossip.enabled) {
    const topicParams: Record<string, TopicScoreParams> = {};
    for (const [topic, params] of Object.entries(topics ?? {})) topicParams[topic] = createTopicScoreParams(params);
    services.pubsub = gossipsub({
      // Offer messages carry their own signatures, bound to the provider's on-chain identity, so
      // they can be relayed and re-served verbatim; a gossipsub envelope signature would add
      // nothing but a second verification per message.
      globalSignaturePolicy: StrictNoSign,
      allowPublishToZeroTopicPeers: true,
      ignoreDuplicatePublishError: true,
      emitSelf: false,
      fallbackToFloodsub: false,
      floodPublish: true,
      doPX: false,
      D: options.gossip.D,
      Dlo: options.gossip.Dlo,
      Dhi: options.gossip.Dhi,
      heartbeatInterval: options.gossip.heartbeatIntervalMs,
      // One message at a time per peer stream: a flooding peer waits on its own backlog (TCP
      // back-pressure) instead of filling our memory with pending validations.
      awaitRpcHandler: true,
      awaitRpcMessageHandler: true,
      maxInboundDataLength: options.gossip.maxInboundFrameBytes,
      allowedTopics: topics ? Object.keys(topics) : undefined,
      scoreParams: {
        topics: topicParams,
        IPColocationFactorWhitelist: new Set(options.gossip.ipColocationWhitelist),
      },
    });
  }

  const guard = new PeerGuard({
    retentionMs: options.gossip.peerMemorySeconds * 1000,
    refuseAtOrBelow: GRAYLIST_THRESHOLD,
    addressWhitelist: options.gossip.ipColocationWhitelist,
    onRefused: onPeerRefused,
  });

  let host: SuanliHost;
  try {
    host = (await createLibp2p({
      privateKey,
      connectionGater: guard.gater(),
      start: false,
      nodeInfo: { userAgent: SUANLI_AGENT },
      addresses: { listen: options.listen, announce: options.announce },
      transports: [tcp()],
      connectionEncrypters: [noise()],
      streamMuxers: [yamux()],
      peerDiscovery: options.bootstrap.length ? [bootstrap({ list: options.bootstrap, timeout: 0 })] : [],
      connectionManager: {
        maxConnections: options.connections.max,
        inboundConnectionThreshold: options.connections.inboundPerSecondPerHost,
        dialTimeout: options.connections.dialTimeoutMs,
      },
      services,
    })) as unknown as SuanliHost;
  } catch (error) {
    throw new HostStartError("Cannot create the p2p host", { cause: error });
  }

  guards.set(host, guard);
  const pubsub = host.services.pubsub;
  if (pubsub) {
    const ipOfPeer = (peer: PeerId) => ipOf(host.getConnections(peer)[0]?.remoteAddr);
    hardenGossipsub(pubsub, {
      // A quarter of the frame stays free for the control messages gossipsub piggybacks.
      maxOutboundRpcBytes: Math.floor((options.gossip.maxInboundFrameBytes * 3) / 4),
      onOversizedFrame: (peer, score) => {
        guard.penalize(peer.toString(), ipOfPeer(peer), OVERSIZED_FRAME_SCORE);
        guard.remember(peer.toString(), ipOfPeer(peer), score);
        onOversizedFrame?.(peer.toString(), guard.scoreOf(peer.toString()));
        // Out of gossip but connected helps nobody: an honest peer redials and resumes.
        runDetached(host.hangUp(peer), undefined, "Hanging up on a peer that sent an oversized frame");
      },
    });
    // Every heartbeat, negative scores go into the guard's memory; a peer at or below the
    // graylist threshold is disconnected, and the gater keeps it out while the memory lasts.
    const inspect = pubsub as GossipSubInspect;
    const onHeartbeat = () => {
      for (const peer of pubsub.getPeers()) {
        const id = peer.toString();
        const score = inspect.getScore(id);
        if (score < 0) guard.remember(id, ipOfPeer(peer), score);
        if (guard.refusesPeer(id)) runDetached(host.hangUp(peer), undefined, "Hanging up on a refused peer");
      }
    };
    pubsub.addEventListener("gossipsub:heartbeat", onHeartbeat);
    host.addEventListener("stop", () => pubsub.removeEventListener("gossipsub:heartbeat", onHeartbeat));
  }

  const keeper = new ConnectionKeeper(host, options.connections.min);
  host.addEventListener("start", () => keeper.start());
  host.addEventListener("stop", () => keeper.stop());
  try {
    await host.start();
  } catch (error) {
    await Promise.resolve(host.stop()).catch(() => undefined);
    throw new HostStartError(`Cannot start the p2p host on ${options.listen.join(", ") || "(no listen address)"}`, {
      cause: error,
      metaMessages: ["Another process may hold the port: choose another one in p2p.listen, or use port 0."],
    });
  }
  return host;
}

/**
 * libp2p 3 no longer dials discovered peers by itself. While the host has fewer connections
 * than `min`, this dials peers as they are discovered (bootstrap, DHT) and, every few seconds,
 * peers already in the peer store.
 */
class ConnectionKeeper {
  private timer: ReturnType<typeof setInterval> | undefined;
  private readonly dialing = new Set<string>();
  private readonly onDiscovery = (event: CustomEvent<PeerInfo>) => {
    runDetached(this.maybeDial(event.detail.id), undefined, "Dialling a discovered peer");
  };

  constructor(
    private readonly host: SuanliHost,
    private readonly min: number,
  ) {}

  start(): void {
    if (this.min === 0 || this.timer) return;
    this.host.addEventListener("peer:discovery", this.onDiscovery);
    this.timer = setInterval(() => runDetached(this.topUp(), undefined, "Topping up connections"), 3_000);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    this.host.removeEventListener("peer:discovery", this.onDiscovery);
  }

  private below(): boolean {
    return this.host.getPeers().length + this.dialing.size < this.min;
  }

  private async maybeDial(peer: PeerId): Promise<void> {
    const id = peer.toString();
    if (!this.timer || peer.equals(this.host.peerId) || this.dialing.has(id) || !this.below()) return;
    if (this.host.getConnections(peer).length) return;
    this.dialing.add(id);
    try {
      await this.host.dial(peer);
    } catch {
      // unreachable peers are normal on an open network; the next discovery tries others
    } finally {
      this.dialing.delete(id);
    }
  }

  private async topUp(): Promise<void> {
    if (!this.below()) return;
    const peers = await this.host.peerStore.all({ limit: 64 }).catch(() => []);
    for (const peer of peers) {
      if (!this.below()) break;
      runDetached(this.maybeDial(peer.id), undefined, "Dialling a known peer");
    }
  }
}

/**
 * Tells every connected peer this host's protocols now (identify push): call it after handling a
 * protocol once the host runs (the data plane's bitswap), so that peers which identified the host
 * before learn of it on the same connection. Debounced by libp2p; a host without the service (a
 * test's bare libp2p) is left as it is.
 */
export async function announceProtocols(host: Libp2p): Promise<void> {
  const push = (host.services as { identifyPush?: IdentifyPush }).identifyPush;
  await push?.push();
}

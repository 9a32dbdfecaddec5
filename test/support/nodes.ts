/**
 * Real Suanli nodes for multi-node tests and benchmarks: each one a libp2p host on 127.0.0.1
 * (real TCP), a level store in a temp dir and the offers service, all over one in-memory chain.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import type { PrivateKey } from "@libp2p/interface";
import { offersTopic } from "../../common/offers/message.js";
import type { LocalSigner } from "../../common/chain/sign.js";
import type { GossipSubInspect, SuanliHost } from "../../common/p2p/host.js";
import { silentLogger, type Logger } from "../../node/log/logger.js";
import { createMetrics, type Metrics } from "../../node/metrics/metrics.js";
import { offersOptionsSchema, type OffersOptionsInput } from "../../node/offers/options.js";
import { offersTopics, startOfferService, type OfferService } from "../../node/offers/service.js";
import { p2pOptionsSchema, type P2pOptions } from "../../node/p2p/options.js";
import { startNodeHost } from "../../node/p2p/start.js";
import { Store } from "../../node/store/store.js";
import type { MemoryChainView } from "./memory-chain-view.js";
import { TEST_CHAIN_ID, TEST_MARKET } from "./offer-fixtures.js";
import { waitFor } from "./wait.js";

export type TestNode = {
  dir: string;
  host: SuanliHost;
  peerKey: PrivateKey;
  store: Store;
  offers: OfferService;
  metrics: Metrics;
  addr: string;
  pubsub: GossipSubInspect;
  /** Stops everything; keeps the data dir unless `removeDir`. */
  stop(options?: { removeDir?: boolean }): Promise<void>;
};

export type StartTestNodeOptions = {
  chain: MemoryChainView;
  /** Data dir to reuse (a restart); a fresh temp dir otherwise. */
  dir?: string;
  bootstrap?: string[];
  dht?: boolean;
  /** Makes it a provider node publishing with this wallet. */
  provider?: LocalSigner;
  offers?: OffersOptionsInput;
  p2p?: Partial<P2pOptions>;
  now?: () => number;
  logger?: Logger;
};

/** Host options for many nodes on one loopback host: fast mesh upkeep, no same-IP penalties. */
export function loopbackP2pOptions(overrides: Partial<P2pOptions> = {}): P2pOptions {
  return p2pOptionsSchema.parse({
    listen: ["/ip4/127.0.0.1/tcp/0"],
    allowPrivateAddresses: true,
    dht: { enabled: false },
    gossip: { heartbeatIntervalMs: 100, ipColocationWhitelist: ["127.0.0.1"] },
    connections: { inboundPerSecondPerHost: 10_000, min: 4 },
    ...overrides,
  });
}

export async function startTestNode(options: StartTestNodeOptions): Promise<TestNode> {
  const dir = options.dir ?? (await mkdtemp(path.join(tmpdir(), "suanli-node-")));
  const logger = options.logger ?? silentLogger();
  const metrics = createMetrics();
  const p2p = loopbackP2pOptions({
    bootstrap: options.bootstrap ?? [],
    dht: { enabled: options.dht ?? false, clientMode: false },
    ...options.p2p,
  });
  const node = await startNodeHost({ dataDir: dir, options: p2p, topics: offersTopics(TEST_CHAIN_ID), logger, metrics });
  const store = await Store.open(path.join(dir, "db"));
  const offersOptions = offersOptionsSchema.parse({ sweepIntervalMs: 100, ...options.offers });
  const offers = await startOfferService({
    host: node.host,
    store,
    chain: options.chain,
    chainId: TEST_CHAIN_ID,
    market: TEST_MARKET,
    options: offersOptions,
    metrics,
    logger,
    provider: options.provider ? { account: options.provider, peerKey: node.peerKey } : undefined,
    now: options.now,
  });
  let stopped = false;
  return {
    dir,
    host: node.host,
    peerKey: node.peerKey,
    store,
    offers,
    metrics,
    addr: node.host.getMultiaddrs()[0]!.toString(),
    pubsub: node.host.services.pubsub as GossipSubInspect,
    async stop(stopOptions = {}) {
      if (stopped) return;
      stopped = true;
      await offers.stop();
      await node.stop();
      await store.close();
      if (stopOptions.removeDir) await rm(dir, { recursive: true, force: true });
    },
  };
}

/** Waits until every node has at least `min` mesh peers on the offers topic. */
export async function waitForMesh(nodes: { pubsub: GossipSubInspect }[], min = 1, timeoutMs = 10_000): Promise<void> {
  const topic = offersTopic(TEST_CHAIN_ID);
  await waitFor("gossip meshes to form", () => nodes.every((node) => node.pubsub.getMeshPeers(topic).length >= min), { timeoutMs });
}

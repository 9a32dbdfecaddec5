import path from "node:path";
import type { PrivateKey } from "@libp2p/interface";
import type { TopicScoreParams } from "@libp2p/gossipsub/score";
import { createHost, type SuanliHost } from "../../common/p2p/host.js";
import type { Logger } from "../log/logger.js";
import type { Metrics } from "../metrics/metrics.js";
import { loadOrCreatePeerKey } from "./identity.js";
import type { P2pOptions } from "./options.js";

export type NodeHost = {
  host: SuanliHost;
  /** The node's libp2p key: it signs the node's offer messages. */
  peerKey: PrivateKey;
  stop(): Promise<void>;
};

/**
 * Starts the node's libp2p host with its persistent identity from the data dir.
 *
 * @example
 * const { host, stop } = await startNodeHost({ dataDir, options: config.p2p, topics, logger, metrics });
 */
export async function startNodeHost(parameters: {
  dataDir: string;
  options: P2pOptions;
  /** Gossip topics with their peer-score parameters (see node/offers/service.ts). */
  topics?: Record<string, Partial<TopicScoreParams>>;
  logger: Logger;
  metrics?: Metrics;
}): Promise<NodeHost> {
  const { options, logger, metrics } = parameters;
  const file = path.resolve(parameters.dataDir, options.identityFile);
  const { key, created } = await loadOrCreatePeerKey(file);
  const { identityFile: _file, ...hostOptions } = options;
  const host = await createHost({
    ...hostOptions,
    privateKey: key,
    topics: parameters.topics,
    onPeerRefused: (match, who) => {
      metrics?.p2pPeersRefused.inc({ match });
      logger.debug("Connection refused: the peer misbehaved recently", { match, who });
    },
    onOversizedFrame: (peer, score) => logger.info("Gossip peer sent a frame over the limit: penalised and disconnected", { peer, score }),
  });
  const updatePeers = () => metrics?.p2pPeers.set(host.getPeers().length);
  host.addEventListener("peer:connect", updatePeers);
  host.addEventListener("peer:disconnect", updatePeers);
  logger.info("P2P host started", {
    peerId: host.peerId.toString(),
    addrs: host.getMultiaddrs().map(String),
    identity: created ? `created ${file}` : file,
    bootstrap: options.bootstrap.length,
  });
  return {
    host,
    peerKey: key,
    async stop() {
      host.removeEventListener("peer:connect", updatePeers);
      host.removeEventListener("peer:disconnect", updatePeers);
      await host.stop();
      logger.info("P2P host stopped", { peerId: host.peerId.toString() });
    },
  };
}

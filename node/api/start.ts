/**
 * Serving the HTTP API from a node: the real data source over the daemon's offer book, chain and
 * market index, the relay over its libp2p host, and the server on `api.host:api.port`. The daemon
 * starts it when `api.enabled` is set; it is a module like any other, stopped with the node.
 */
import type { Daemon, DaemonModule } from "../daemon.js";
import { rm } from "node:fs/promises";
import { stagingDir } from "../data/transfer.js";
import { NodeMarketSource } from "./node-source.js";
import { NodeProviderRelay } from "./relay.js";
import { createApiServer, type ApiServer } from "./server.js";

export type ApiModule = DaemonModule & {
  /** Base URL the API listens on (`http://127.0.0.1:8080`). */
  url: string;
  server: ApiServer;
  source: NodeMarketSource;
  relay: NodeProviderRelay;
};

/**
 * Starts the API on a running daemon with `daemon.config.api` (its `enabled` flag is the caller's
 * business). Resolves once the server listens; the market index reads the chain's past events in
 * the background (`source.ready`).
 *
 * @example
 * const daemon = await startDaemon(config, { api: false });
 * const api = await startApi(daemon);
 * daemon.attach(api);
 * console.log(`${api.url}/explorer/`);
 */
export async function startApi(daemon: Daemon): Promise<ApiModule> {
  const { config } = daemon;
  const logger = daemon.logger.child({ module: "api" });
  const source = await NodeMarketSource.start({
    book: daemon.offers.book,
    store: daemon.store,
    publicClient: daemon.chain.publicClient,
    deployment: daemon.deployment,
    market: daemon.market,
    registry: daemon.registry,
    chainView: daemon.chainView,
    follower: daemon.follower,
    host: daemon.p2p.host,
    matching: config.matching,
    cache: config.offers.chainCache,
    logger,
  });
  const relay = new NodeProviderRelay({
    host: daemon.p2p.host,
    book: daemon.offers.book,
    chainView: daemon.chainView,
    publicClient: daemon.chain.publicClient,
    chainId: daemon.deployment.chainId,
    market: daemon.market,
    logger,
    maxAgeSeconds: config.api.signatureMaxAgeSeconds,
    delegations: daemon.delegations,
  });
  // Transfers a previous run left half-done (a crash mid-upload) are staging copies only: drop them.
  if (daemon.data) await rm(stagingDir(config.dataDir), { recursive: true, force: true });
  let server: ApiServer;
  let url: string;
  try {
    server = await createApiServer({
      source,
      relay,
      data: daemon.data ? { store: daemon.data, staging: stagingDir(config.dataDir) } : undefined,
      deployment: daemon.deployment,
      delegations: daemon.delegations,
      options: config.api,
      logger: daemon.logger,
      registry: daemon.metrics.registry,
      chainRpcUrl: config.chain.rpcUrl,
    });
    url = await server.listen();
  } catch (error) {
    await source.stop();
    throw error;
  }
  return {
    name: "api",
    url,
    server,
    source,
    relay,
    async stop() {
      await server.close();
      await source.stop();
    },
  };
}

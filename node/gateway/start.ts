/**
 * Running the gateway in a node (docs/endpoints.md): its key from the data dir, the endpoints
 * from the store, the proxy over the daemon's libp2p host, the server on `gateway.host:port`. The
 * daemon runs it when `gateway.enabled` is set; it is a module like any other, stopped with the node.
 */
import { readLease } from "../../common/chain/market.js";
import type { Daemon, DaemonModule } from "../daemon.js";
import { loadGatewayKey } from "./key.js";
import { EndpointProxy } from "./proxy.js";
import { EndpointRegistry } from "./registry.js";
import { GatewayStats } from "./stats.js";
import { createGatewayServer, type GatewayServer } from "./server.js";

export type GatewayModule = DaemonModule & {
  /** Where it listens (`http://127.0.0.1:8090`). */
  url: string;
  /** The base URL of the endpoint URLs it prints (`gateway.publicUrl`, or `url`). */
  publicUrl: string;
  /** The gateway key's address: what renters delegate "forward" to. */
  address: `0x${string}`;
  registry: EndpointRegistry;
  proxy: EndpointProxy;
  server: GatewayServer;
};

/**
 * Starts the gateway on a running daemon with `daemon.config.gateway` (its `enabled` flag is the caller's business).
 *
 * @example
 * const daemon = await startDaemon(config);
 * const gateway = await startGateway(daemon);
 * daemon.attach(gateway);
 * console.log(`${gateway.publicUrl}/v1/gateway`);
 */
export async function startGateway(daemon: Daemon): Promise<GatewayModule> {
  const options = daemon.config.gateway;
  const logger = daemon.logger.child({ module: "gateway" });
  const account = await loadGatewayKey(daemon.config.dataDir);
  const registry = await EndpointRegistry.open({
    store: daemon.store,
    domain: daemon.domain,
    gateway: account.address,
    delegations: daemon.delegations,
    readLease: (leaseId) => readLease(daemon.chain.publicClient, daemon.market, leaseId),
    maxEndpoints: options.maxEndpoints,
  });
  const proxy = new EndpointProxy({
    host: daemon.p2p.host,
    book: daemon.offers.book,
    chainView: daemon.chainView,
    publicClient: daemon.chain.publicClient,
    market: daemon.market,
    domain: daemon.domain,
    account,
    options,
    logger,
  });
  const stats = new GatewayStats(daemon.metrics.registry, () => proxy.replicaViews());
  const server = await createGatewayServer({ registry, proxy, options, address: account.address, chainId: daemon.deployment.chainId, logger, stats });
  // The endpoints kept from before a restart: their replicas' health checks start with the node.
  for (const endpoint of registry.list()) proxy.replicas(endpoint);
  const url = await server.listen();
  logger.info("Gateway serving endpoints", { address: account.address, endpoints: registry.list().length });
  return {
    name: "gateway",
    url,
    publicUrl: server.publicUrl,
    address: account.address,
    registry,
    proxy,
    server,
    stop: () => server.close(),
  };
}

/**
 * The base of a Suanli node. Builds every module from the config, hands each a child logger and
 * the metrics registry, and closes them in reverse order. Roles (provider, attestor, the HTTP
 * API) attach on top of the base node (store, chain, chain follower, libp2p host, offer book);
 * `runNode` (run.ts) is what starts a node with its roles.
 */
import path from "node:path";
import type { Address, LocalAccount } from "viem";
import type { Deployment } from "../common/deployment.js";
import { contractAddress, readDeploymentBinding } from "../common/deployment.js";
import { providerRegistryAbi } from "../common/abi.js";
import { suanliDomain } from "../common/eip712.js";
import { SuanliError } from "../common/errors.js";
import { CachedChainView } from "../common/offers/chain-view.js";
import { connectChain, type ChainClients } from "./chain/clients.js";
import { DEFAULT_DEPLOYMENTS_DIR, readDeployment } from "./chain/manifest.js";
import { RegistryChainView } from "../common/chain/registry-view.js";
import { ChainFollower, type ChainEvent } from "./chain/follower.js";
import type { NodeConfig } from "./config/schema.js";
import { createLogger, type Logger } from "./log/logger.js";
import { createMetrics, type Metrics } from "./metrics/metrics.js";
import { offersTopics, startOfferService, type OfferService } from "./offers/service.js";
import { startNodeHost, type NodeHost } from "./p2p/start.js";
import { DataStore } from "./data/store.js";
import { Store } from "./store/store.js";
import { DelegationVerifier } from "./sessions/delegations.js";

export class DaemonError extends SuanliError {
  override name = "DaemonError";
}

/** A module a role adds to the node; stopped (in reverse order) when the node stops. */
export type DaemonModule = { name: string; stop(): Promise<void> };

export type Daemon = {
  config: NodeConfig;
  logger: Logger;
  metrics: Metrics;
  store: Store;
  chain: ChainClients;
  /** Checks requests signed by renters' session keys (node/sessions/delegations.ts). */
  delegations: DelegationVerifier;
  /** The node's wallet (chain.privateKey), when configured. */
  account: LocalAccount | undefined;
  deployment: Deployment;
  domain: ReturnType<typeof suanliDomain>;
  market: Address;
  registry: Address;
  /** Registry reads behind a bounded cache that the follower's events invalidate. */
  chainView: CachedChainView;
  /** The process's one chain follower; roles subscribe to it. */
  follower: ChainFollower;
  p2p: NodeHost;
  /** The data plane (docs/data.md); undefined when data.enabled is false. */
  data: DataStore | undefined;
  offers: OfferService;
  /** Adds a module to stop with the node. */
  attach(module: DaemonModule): void;
  stop(): Promise<void>;
};

export type StartDaemonOptions = {
  logger?: Logger;
  /** The node signs offers (provider role): requires chain.privateKey. */
  publishesOffers?: boolean;
};

/** Registry events and the offer-book hooks they call. */
/**
 * The AttestorStaking the registry names, for the follower to watch (its stake changes move the
 * attestor set the offer book counts); none when unset or unreadable. A staking governance attaches
 * later is followed after a restart (until then the chain view's cache TTL bounds the staleness).
 */
async function attestorStakingOf(publicClient: ChainClients["publicClient"], registry: Address, logger: Logger): Promise<Address[]> {
  try {
    const staking = await publicClient.readContract({ address: registry, abi: providerRegistryAbi, functionName: "attestorStaking" });
    return staking === "0x0000000000000000000000000000000000000000" ? [] : [staking];
  } catch (error) {
    logger.warn("Cannot read the registry's attestor staking: its stake changes reach the offer book only through the cache TTL", { registry }, error);
    return [];
  }
}

async function applyRegistryEvent(event: ChainEvent, chainView: CachedChainView, offers: OfferService): Promise<void> {
  switch (event.eventName) {
    case "ProviderRegistered":
    case "ProfileUpdated":
    case "ProviderDeregistered":
    case "StakeChanged":
    case "OfferNonceRevoked":
    case "OfferNonceFloorRaised":
      chainView.invalidateProvider(event.args.provider);
      await offers.onProviderChanged(event.args.provider);
      return;
    case "CollateralSlashed":
      chainView.invalidateProvider(event.args.provider);
      await offers.onProviderChanged(event.args.provider);
      return;
    case "MachineRemoved":
      chainView.invalidateMachine(event.args.machineId);
      await offers.onMachineRemoved(event.args.machineId);
      return;
    case "MachineUpdated":
      chainView.invalidateMachine(event.args.machineId);
      await offers.onMachineChanged(event.args.machineId);
      return;
    case "RoleGranted":
    case "RoleRevoked":
    case "FaultQuorumChanged":
    case "FaultQuorumBpsChanged":
    case "AttestorStakingChanged":
    case "AttestorStakeChanged":
    case "AttestorSlashed":
      chainView.invalidateAttestors();
      await offers.onAttestorsChanged();
      return;
    default:
      return;
  }
}

/**
 * Starts the base node. The caller attaches roles (provider agent, attestor, HTTP API: `runNode`
 * in run.ts does) and calls `stop()` to close everything in reverse order.
 *
 * @example
 * const config = await loadConfig(nodeConfigSchema, { file, env: process.env });
 * const daemon = await startDaemon(config);
 * process.on("SIGTERM", () => daemon.stop());
 */
export async function startDaemon(config: NodeConfig, options: StartDaemonOptions = {}): Promise<Daemon> {
  const logger = options.logger ?? createLogger(config.log);
  const modules: DaemonModule[] = [];
  const stopAll = async () => {
    for (const module of modules.splice(0).reverse()) {
      try {
        await module.stop();
      } catch (error) {
        logger.warn("Module failed to stop cleanly", { module: module.name }, error);
      }
    }
  };

  try {
    const dataDir = path.resolve(config.dataDir);
    const metrics = createMetrics({ processMetrics: true, dataDir });

    const account = config.chain.privateKey ? (await import("viem/accounts")).privateKeyToAccount(config.chain.privateKey as `0x${string}`) : undefined;
    if (options.publishesOffers && !account) {
      throw new DaemonError("This role signs offers and transactions, but no wallet is configured", {
        metaMessages: ["Set chain.privateKey in the config file, or SUANLI_CHAIN__PRIVATE_KEY in the environment."],
      });
    }
    const chain = await connectChain({
      rpcUrl: config.chain.rpcUrl,
      chainId: config.chain.chainId,
      account,
      pollingIntervalMs: config.chain.pollingIntervalMs,
    });
    const reported = await chain.publicClient.getChainId();
    if (config.chain.chainId !== undefined && reported !== config.chain.chainId) {
      throw new DaemonError(`The endpoint ${config.chain.rpcUrl} serves chain ${reported}, but chain.chainId is ${config.chain.chainId}`);
    }
    const deployment = await readDeployment(config.chain.deploymentsDir ?? DEFAULT_DEPLOYMENTS_DIR, reported);
    const market = contractAddress(deployment, "market");
    const registry = contractAddress(deployment, "registry");
    const domain = suanliDomain(deployment.chainId, market);
    const delegations = new DelegationVerifier({ domain, publicClient: chain.publicClient, sessions: deployment.contracts.sessions });

    const binding = await readDeploymentBinding(chain.publicClient, deployment);
    const store = await Store.open(path.join(dataDir, "db"));
    modules.push({ name: "store", stop: () => store.close() });
    await store.bindDeployment(binding, dataDir);

    const chainView = new CachedChainView(new RegistryChainView(chain.publicClient, registry), config.offers.chainCache);

    const p2p = await startNodeHost({
      dataDir,
      options: config.p2p,
      topics: offersTopics(deployment.chainId),
      logger: logger.child({ module: "p2p" }),
      metrics,
    });
    modules.push({ name: "p2p", stop: () => p2p.stop() });

    const data = config.data.enabled ? await DataStore.open({ dataDir, libp2p: p2p.host, options: config.data, logger: logger.child({ module: "data" }), metrics }) : undefined;
    if (data) modules.push({ name: "data", stop: () => data.stop() });

    const offers = await startOfferService({
      host: p2p.host,
      store,
      chain: chainView,
      chainId: deployment.chainId,
      market,
      options: config.offers,
      metrics,
      logger,
      provider: options.publishesOffers && account ? { account, peerKey: p2p.peerKey } : undefined,
    });
    modules.push({ name: "offers", stop: () => offers.stop() });

    // One follower for the process: roles (provider, attestor, API index) subscribe to it with
    // their own cursors. The offer book needs only changes from now on (a restarted book re-checks
    // itself), so its subscription starts at the head and keeps no cursor.
    const follower = new ChainFollower({
      publicClient: chain.publicClient,
      deployment,
      extraAddresses: await attestorStakingOf(chain.publicClient, registry, logger),
      store,
      pollIntervalMs: config.chain.pollingIntervalMs,
      confirmations: config.chain.confirmations,
      logger: logger.child({ module: "chain" }),
      metrics,
    });
    await follower.subscribe("offers", (event) => applyRegistryEvent(event, chainView, offers), { from: "head", persist: false });
    await follower.start();
    modules.push({ name: "follower", stop: () => follower.stop() });

    logger.info("Node started", {
      chainId: deployment.chainId,
      market,
      peerId: p2p.host.peerId.toString(),
      wallet: account?.address ?? null,
    });

    let stopped = false;
    const daemon: Daemon = {
      config,
      logger,
      metrics,
      store,
      chain,
      account,
      deployment,
      domain,
      delegations,
      market,
      registry,
      chainView,
      follower,
      p2p,
      data,
      offers,
      attach(module) {
        modules.push(module);
      },
      async stop() {
        if (stopped) return;
        stopped = true;
        await stopAll();
        logger.info("Node stopped");
      },
    };
    return daemon;
  } catch (error) {
    await stopAll();
    throw error;
  }
}

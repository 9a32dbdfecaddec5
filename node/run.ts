/**
 * The one way a Suanli process runs a node: `runNode(config, roles)` starts the base node (the
 * daemon: store, chain, libp2p, offer book), then the roles asked for — the provider agent, the
 * attestor service, the HTTP API, the endpoint gateway — then the Prometheus endpoint when `metrics.enabled`, and
 * stops them all in reverse order. `node start`, `provider start`, `attestor start` and the
 * devnet only parse their input and call it; `stopOnSignal` is the process's one signal waiter.
 *
 * @example
 * import { runNode } from "./run.js";
 * const node = await runNode(config, { provider: { hiddenPaths: [configFile] }, api: false });
 * const signal = await node.stopOnSignal(); // SIGINT or SIGTERM: every part stopped
 */
import { startApi, type ApiModule } from "./api/start.js";
import { startAttestorService, type AttestorService } from "./attest/service.js";
import type { NodeConfig } from "./config/schema.js";
import { startDaemon, type Daemon } from "./daemon.js";
import type { Logger } from "./log/logger.js";
import { startGateway, type GatewayModule } from "./gateway/start.js";
import { startSponsor, type SponsorModule } from "./sponsor/start.js";
import { startMetricsServer, type MetricsServer } from "./metrics/server.js";
import { startProviderAgent, type ProviderAgent, type ProviderAgentOptions } from "./provider/agent.js";
import { waitForShutdown } from "./signals.js";

export { waitForShutdown } from "./signals.js";

/** The roles a node runs on top of the base node. */
export type NodeRoles = {
  /** Sell this machine's GPU time (signs offers: needs chain.privateKey). */
  provider?: ProviderAgentOptions | boolean;
  /** Challenge providers, watch leases, co-sign faults (the wallet must hold ATTESTOR_ROLE). */
  attestor?: boolean;
  /** Serve the HTTP API; default: the config's `api.enabled`. */
  api?: boolean;
};

export type RunningNode = {
  daemon: Daemon;
  provider: ProviderAgent | undefined;
  attestor: AttestorService | undefined;
  api: ApiModule | undefined;
  /** The endpoint gateway, when `gateway.enabled` (docs/endpoints.md). */
  gateway: GatewayModule | undefined;
  /** The sponsor when `sponsor.enabled` (docs/aa.md "Gas without ETH"). */
  sponsor: SponsorModule | undefined;
  /** The Prometheus endpoint, when `metrics.enabled`. */
  metrics: MetricsServer | undefined;
  /** Stops every part, roles first (idempotent). */
  stop(): Promise<void>;
  /**
   * Waits for SIGINT or SIGTERM, calls `onSignal`, then stops the node; resolves with the signal
   * once it stopped. A second Ctrl-C while stopping exits at once (code 130). Pass `shutdown`
   * (waitForShutdown(), called before the command prints that it is ready) so that a signal sent
   * the moment the ready line appears is not met by Node's default action (exit, no clean stop).
   */
  stopOnSignal(onSignal?: (signal: NodeJS.Signals) => void, shutdown?: Promise<NodeJS.Signals>): Promise<NodeJS.Signals>;
};

/** Starts a node with its roles; on any failure, what was started is stopped and the error thrown. */
export async function runNode(config: NodeConfig, roles: NodeRoles = {}, options: { logger?: Logger } = {}): Promise<RunningNode> {
  const daemon = await startDaemon(config, { ...(options.logger ? { logger: options.logger } : {}), publishesOffers: Boolean(roles.provider) });
  try {
    // Each role attaches itself (or is attached) to the daemon: daemon.stop() stops it first.
    const provider = roles.provider ? await startProviderAgent(daemon, roles.provider === true ? {} : roles.provider) : undefined;
    let attestor: AttestorService | undefined;
    if (roles.attestor) {
      attestor = await startAttestorService(daemon);
      daemon.attach(attestor);
    }
    let api: ApiModule | undefined;
    if (roles.api ?? config.api.enabled) {
      api = await startApi(daemon);
      daemon.attach(api);
    }
    let gateway: GatewayModule | undefined;
    if (config.gateway.enabled) {
      gateway = await startGateway(daemon);
      daemon.attach(gateway);
    }
    let sponsor: SponsorModule | undefined;
    if (config.sponsor.enabled) {
      sponsor = await startSponsor(daemon);
      daemon.attach(sponsor);
    }
    let metrics: MetricsServer | undefined;
    if (config.metrics.enabled) {
      const server = await startMetricsServer(daemon.metrics.registry, config.metrics, daemon.logger);
      daemon.attach({ name: "metrics", stop: () => server.close() });
      metrics = server;
    }
    const stop = () => daemon.stop();
    return {
      daemon,
      provider,
      attestor,
      api,
      gateway,
      sponsor,
      metrics,
      stop,
      async stopOnSignal(onSignal, shutdown = waitForShutdown()) {
        const signal = await shutdown;
        onSignal?.(signal);
        await stop();
        return signal;
      },
    };
  } catch (error) {
    await daemon.stop();
    throw error;
  }
}

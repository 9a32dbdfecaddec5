/**
 * What the HTTP API's route handlers read from: the node's market data, the relay to providers,
 * the options and the shared parts of the server.
 */
import type { Registry } from "prom-client";
import type { Deployment } from "../../common/deployment.js";
import type { EventHub } from "./events.js";
import type { ExplorerAssets } from "./explorer-assets.js";
import type { ApiMetrics } from "./metrics.js";
import type { ApiOptions } from "./options.js";
import type { ReplayGuard } from "./signed.js";
import type { MarketDataSource, ProviderRelay } from "./source.js";

export type RouteDeps = {
  source: MarketDataSource;
  /** Forwards renters' signed requests to providers; absent on a node without a p2p host (503). */
  relay: ProviderRelay | undefined;
  options: ApiOptions;
  deployment: Deployment;
  hub: EventHub;
  registry: Registry;
  metrics: ApiMetrics;
  guard: ReplayGuard;
  explorer: ExplorerAssets | undefined;
  version: string;
  startedAtMs: number;
  nowSeconds: () => number;
  document: () => Record<string, unknown>;
};

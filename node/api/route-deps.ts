/**
 * What the HTTP API's route handlers read from: the node's market data, the relay to providers,
 * the options and the shared parts of the server.
 */
import type { Registry } from "prom-client";
import type { Deployment } from "../../common/deployment.js";
import type { DataStore } from "../data/store.js";
import type { DelegationVerifier } from "../sessions/delegations.js";
import type { EventHub } from "./events.js";
import type { ExplorerAssets, PageAssets } from "./explorer-assets.js";
import type { ApiMetrics } from "./metrics.js";
import type { ApiOptions } from "./options.js";
import type { ReplayGuard } from "./signed.js";
import type { MarketDataSource, ProviderRelay } from "./source.js";

export type RouteDeps = {
  source: MarketDataSource;
  /** Forwards renters' signed requests to providers; absent on a node without a p2p host (503). */
  relay: ProviderRelay | undefined;
  options: ApiOptions;
  /** The node's data plane and the folder transfers are staged in; absent when data.enabled is false (the data routes answer 503). */
  data: { store: DataStore; staging: string } | undefined;
  deployment: Deployment;
  hub: EventHub;
  registry: Registry;
  metrics: ApiMetrics;
  guard: ReplayGuard;
  /** Checks requests signed by renters' session keys; absent: they are refused. */
  delegations: DelegationVerifier | undefined;
  explorer: ExplorerAssets | undefined;
  /** The renter console's files, when `api.console.enabled`. */
  console: PageAssets | undefined;
  /** The chain RPC URL the console page reads from (null: none published). */
  consoleRpcUrl: string | null;
  version: string;
  startedAtMs: number;
  nowSeconds: () => number;
  document: () => Record<string, unknown>;
};

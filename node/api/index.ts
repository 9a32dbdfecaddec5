/**
 * The HTTP API for dApp front ends: what the node's composition root and other parts use.
 * Wire schemas (shared with the SDK's browser client) are in common/api/.
 */
export { createApiServer, type ApiServer, type ApiServerDeps } from "./server.js";
export { apiOptionsSchema, type ApiOptions } from "./options.js";
export type { MarketChange, MarketDataSource, MarketListener, OfferEntry, Page, PageOf, ProviderRelay, VerifiedAttestation } from "./source.js";
export { NodeMarketSource, type NodeMarketSourceDeps } from "./node-source.js";
export { NodeProviderRelay, type NodeProviderRelayOptions } from "./relay.js";
export { MarketIndex, type LeaseSummary } from "./market-index.js";
export { startApi, type ApiModule } from "./start.js";
export { StatsRecorder, percentile, summarizePrices, type StatsRecorderOptions } from "./stats.js";
export { toOfferView, offerMatchesFilter, offerComparator, isAttested } from "./offer-view.js";
export { toMatchResult } from "./match-view.js";
export { createApiMetrics, type ApiMetrics } from "./metrics.js";

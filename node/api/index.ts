/**
 * The HTTP API for dApp front ends: what the node's composition root and other parts use.
 * Wire schemas (shared with the SDK's browser client) are in common/api/.
 */
export { createApiServer, type ApiServer, type ApiServerDeps } from "./server.js";
export { apiOptionsSchema, type ApiOptions } from "./options.js";
export type { MarketChange, MarketDataSource, MarketListener, OfferEntry, Page, PageOf, VerifiedAttestation } from "./source.js";
export { InMemoryMarketSource, type InMemoryMarketSourceOptions } from "./memory-source.js";
export { StatsRecorder, percentile, summarizePrices, type StatsRecorderOptions } from "./stats.js";
export { toOfferView, offerMatchesFilter, offerComparator, isAttested } from "./offer-view.js";
export { referenceMatch } from "./reference-match.js";
export { createApiMetrics, type ApiMetrics } from "./metrics.js";

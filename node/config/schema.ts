import { z } from "zod";
import { logOptionsSchema } from "../log/logger.js";
import { chainOptionsSchema } from "../chain/options.js";
import { attestOptionsSchema } from "../attest/options.js";
import { providerOptionsSchema } from "../provider/options.js";
import { apiOptionsSchema } from "../api/options.js";
import { offersOptionsSchema } from "../offers/options.js";
import { p2pOptionsSchema } from "../p2p/options.js";
import { matchingOptionsSchema } from "../../common/matching/options.js";
import { metricsOptionsSchema } from "../metrics/options.js";
import { dataOptionsSchema } from "../data/options.js";
import { gatewayOptionsSchema } from "../gateway/options.js";
import { sponsorOptionsSchema } from "../sponsor/options.js";

/**
 * The node's configuration: one strict object, each concern's options defined beside the
 * concern and composed here. Documented key by key in docs/configuration.md.
 */
export const nodeConfigSchema = z.strictObject({
  /** Where the node keeps its database, peer identity and workspaces. */
  dataDir: z.string().min(1).default(".suanli"),
  log: logOptionsSchema.prefault({}),
  chain: chainOptionsSchema.prefault({}),
  attest: attestOptionsSchema.prefault({}),
  provider: providerOptionsSchema.prefault({}),
  api: apiOptionsSchema.prefault({}),
  p2p: p2pOptionsSchema.prefault({}),
  offers: offersOptionsSchema.prefault({}),
  /** Ranking weights and limits of the matching engine (docs/matching.md). */
  matching: matchingOptionsSchema.prefault({}),
  /** The node's Prometheus endpoint (docs/configuration.md#metrics). */
  metrics: metricsOptionsSchema.prefault({}),
  /** The data plane: Helia on the node's libp2p host (docs/data.md). */
  data: dataOptionsSchema.prefault({}),
  /** Renters' endpoints served over HTTP and carried over libp2p to their tasks (docs/endpoints.md). */
  gateway: gatewayOptionsSchema.prefault({}),
  sponsor: sponsorOptionsSchema.prefault({}),
});
export type NodeConfig = z.output<typeof nodeConfigSchema>;

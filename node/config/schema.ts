import { z } from "zod";
import { logOptionsSchema } from "../log/logger.js";
import { chainOptionsSchema } from "../chain/options.js";
import { matchingOptionsSchema } from "../../common/matching/options.js";

/**
 * The node's configuration: one strict object, each concern's options defined beside the
 * concern and composed here. Documented key by key in docs/configuration.md.
 */
export const nodeConfigSchema = z.strictObject({
  /** Where the node keeps its database, peer identity and workspaces. */
  dataDir: z.string().min(1).default(".suanli"),
  log: logOptionsSchema.prefault({}),
  chain: chainOptionsSchema.prefault({}),
  /** Ranking weights and limits of the matching engine (docs/matching.md). */
  matching: matchingOptionsSchema.prefault({}),
});
export type NodeConfig = z.output<typeof nodeConfigSchema>;

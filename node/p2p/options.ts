import { z } from "zod";
import { hostOptionsSchema, multiaddrString } from "../../common/p2p/host.js";

/**
 * The node's `p2p` configuration: the host options shared with the SDK (common/p2p/host.ts),
 * with daemon defaults. Documented in docs/configuration.md and docs/p2p.md.
 */
export const p2pOptionsSchema = hostOptionsSchema.extend({
  /** A daemon listens on every interface by default: providers must be reachable from anywhere. */
  listen: z.array(multiaddrString).max(16).default(["/ip4/0.0.0.0/tcp/4001"]),
  /** The node's libp2p private key, relative to dataDir unless absolute. Created (0600) on first start. */
  identityFile: z.string().min(1).default("peer.key"),
});
export type P2pOptions = z.output<typeof p2pOptionsSchema>;

import { z } from "zod";

export const chainOptionsSchema = z.strictObject({
  /** JSON-RPC endpoint. The devnet (`npm run chain`) listens on 127.0.0.1:8545. */
  rpcUrl: z.url({ protocol: /^https?$/ }).default("http://127.0.0.1:8545"),
  /** Expected chain id; when set, the node refuses an endpoint that reports another one. */
  chainId: z.number().int().positive().optional(),
  /** Folder holding `<chainId>.json` deployment manifests; default: the package's deployments/. */
  deploymentsDir: z.string().min(1).optional(),
  /** Private key (0x + 64 hex) of the wallet the node signs and pays gas with. Never logged. */
  privateKey: z
    .string()
    .regex(/^0x[0-9a-fA-F]{64}$/, "expected 0x followed by 64 hex digits")
    .optional(),
  /** How often to poll for new blocks and events. 500 ms suits a devnet with 1 s blocks. */
  pollingIntervalMs: z.number().int().min(50).max(60_000).default(500),
  /**
   * Blocks an event must be buried under before the node's event followers see it (state read
   * directly, such as a lease's status, is still the latest block's). 0 (the default) suits the
   * devnet and chains with instant finality; see docs/configuration.md for others.
   */
  confirmations: z.number().int().min(0).max(1_000).default(0),
  /**
   * With confirmations above 0: how long a provider holds a renter's request about a lease whose
   * block is not yet that deep before it answers LeaseNotConfirmedError (the renter sends again).
   * Within the renter protocols' 10 s deadline.
   */
  confirmationWaitMs: z.number().int().min(0).max(9_000).default(6_000),
});
export type ChainOptions = z.output<typeof chainOptionsSchema>;

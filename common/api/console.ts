/**
 * What the renter console page (node/api/console) reads from the node that serves it: the
 * deployment its SDK client binds to and the chain RPC URL it reads from. Nothing secret: the
 * node publishes an RPC URL only when its operator set `api.console.rpcUrl` or its own is loopback.
 */
import { z } from "zod";
import { addressWireSchema, amountSchema } from "./primitives.js";

export const consoleConfigSchema = z.strictObject({
  chainId: z.number().int().positive(),
  rpcUrl: z
    .string()
    .nullable()
    .describe("The chain JSON-RPC URL for the page's reads; null when the node publishes none (the page then says so and how to set `api.console.rpcUrl`)."),
  deployment: z
    .strictObject({
      chainId: z.number().int().positive(),
      deploymentBlock: amountSchema,
      deployedAt: z.string(),
      deployer: addressWireSchema,
      contracts: z.strictObject({
        token: addressWireSchema,
        registry: addressWireSchema.optional(),
        market: addressWireSchema.optional(),
        sessions: addressWireSchema.optional().describe("The SessionKeys revocation list (absent when the deployment predates it)."),
      }),
      token: z.strictObject({
        symbol: z.string(),
        decimals: z.number().int().min(0).max(36),
        permit: z
          .strictObject({ name: z.string(), version: z.string() })
          .nullable()
          .optional()
          .describe("The token's EIP-2612 permit domain, as the deploy found it; null: no permit (deposits are approved)."),
      }),
    })
    .describe("The deployment manifest (deployments/<chainId>.json) the node serves, as the SDK's createClient takes it."),
});
export type ConsoleConfig = z.output<typeof consoleConfigSchema>;

/**
 * What the renter console page (node/api/console) reads from the node that serves it: the
 * deployment its SDK client binds to, the chain RPC URL it reads from and, for "Sign in with a
 * passkey" (docs/aa.md "A passkey owner"), the ERC-4337 bundler and the sponsor (ERC-7677 paymaster
 * service) it sends user operations through. Nothing secret: the node publishes an RPC URL only
 * when its operator set `api.console.rpcUrl` or its own is loopback, and the bundler and sponsor
 * URLs only when set (`api.console.bundlerUrl`, `api.console.paymasterUrl`).
 */
import { z } from "zod";
import { addressWireSchema, amountSchema } from "./primitives.js";

export const consoleConfigSchema = z.strictObject({
  chainId: z.number().int().positive(),
  rpcUrl: z
    .string()
    .nullable()
    .describe("The chain JSON-RPC URL for the page's reads; null when the node publishes none (the page then says so and how to set `api.console.rpcUrl`)."),
  bundlerUrl: z.string().url().nullable().describe("The ERC-4337 bundler a passkey's smart account sends its user operations to; null: the page offers no passkey sign-in."),
  paymasterUrl: z
    .string()
    .url()
    .nullable()
    .describe("The deployment's sponsor (an ERC-7677 paymaster service) that pays those operations' gas; null: the account pays its own gas in ETH."),
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
        entryPoint: addressWireSchema.optional().describe("ERC-4337's EntryPoint v0.8 (absent: no smart accounts)."),
        accountFactory: addressWireSchema.optional().describe("The SimpleAccountFactory of key-owned smart accounts."),
        paymaster: addressWireSchema.optional().describe("The deployment's SponsorPaymaster."),
        passkeyAccountFactory: addressWireSchema.optional().describe("The PasskeyAccountFactory: a passkey's smart account is its clone (absent: no passkey sign-in)."),
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

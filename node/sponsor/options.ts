import { z } from "zod";
import { connectionLimitsSchema } from "../http/limits.js";

const weiSchema = z
  .string()
  .regex(/^\d{1,30}$/, "expected a whole number of wei, as a decimal string")
  .transform((value) => BigInt(value));

/**
 * Options of the sponsor (`sponsor.*` in the node's configuration, docs/configuration.md and
 * docs/aa.md "Gas without ETH"): an ERC-7677 paymaster service whose key signs sponsorships the
 * deployment's SponsorPaymaster honours, for user operations that only call the deployment's own
 * contracts, within the caps and each account's daily budget below.
 */
export const sponsorOptionsSchema = z.strictObject({
  /** Serve sponsorships at all. */
  enabled: z.boolean().default(false),
  /** Interface to listen on: loopback by default, behind the operator's TLS reverse proxy. */
  host: z.string().min(1).default("127.0.0.1"),
  /** TCP port; 0 picks a free one. */
  port: z.number().int().min(0).max(65_535).default(8095),
  /**
   * Origins whose web pages may call the service (CORS): the renter console's "Sign in with a
   * passkey" calls it from the browser (docs/console.md), so name the console's origin here
   * (`https://console.example`; `*` for any). Default none: only non-browser clients (the SDK in
   * Node, the CLI). A loopback address is no fence against pages: any site open in a browser on
   * this machine could call it, and each new account it makes up has a budget of its own.
   */
  corsOrigins: z.array(z.string().regex(/^(\*|https?:\/\/[^/\s]+)$/, "expected * or an origin like https://app.example")).default([]),
  /** How long a sponsorship is valid after it is signed, seconds: the bundler must land the operation by then. */
  validSeconds: z.number().int().min(30).max(3600).default(300),
  /** Sponsored operations per account per UTC day. */
  maxOperationsPerAccountPerDay: z.number().int().min(1).max(1_000_000).default(50),
  /** Wei of gas (at each operation's maximum: all its gas limits × maxFeePerGas) sponsored per account per UTC day. */
  maxWeiPerAccountPerDay: weiSchema.default(50_000_000_000_000_000n),
  /** The most one operation may cost at its maximum, wei. */
  maxWeiPerOperation: weiSchema.default(10_000_000_000_000_000n),
  /** Gas caps of one operation. */
  maxCallGasLimit: z.number().int().min(21_000).max(30_000_000).default(3_000_000),
  maxVerificationGasLimit: z.number().int().min(10_000).max(10_000_000).default(1_000_000),
  maxPreVerificationGas: z.number().int().min(10_000).max(10_000_000).default(500_000),
  /** What the paymaster's validation may use (it recovers one signature), and its postOp (it has none). */
  paymasterVerificationGasLimit: z.number().int().min(20_000).max(1_000_000).default(60_000),
  /** The HTTP limits of its port (node/http/limits.ts). */
  connections: connectionLimitsSchema({
    headersTimeoutMs: 10_000,
    requestTimeoutMs: 30_000,
    keepAliveTimeoutMs: 5_000,
    idleTimeoutMs: 60_000,
    maxPerAddress: 32,
    maxTotal: 1024,
    maxRequestsPerSocket: 0,
  }),
});
export type SponsorOptions = z.output<typeof sponsorOptionsSchema>;

/**
 * The sponsor's ERC-7677 paymaster service (docs/aa.md "Gas without ETH"): JSON-RPC 2.0 over HTTP
 * POST, the two methods viem's `createPaymasterClient` calls:
 *
 * - `pm_getPaymasterStubData(userOp, entryPoint, chainId, context)`: the paymaster, its gas limits
 *   and stub data of the right length for the bundler's gas estimate, once the calls pass the
 *   policy (policy.ts);
 * - `pm_getPaymasterData(userOp, entryPoint, chainId, context)`: the signed sponsorship, once the
 *   calls, the gas caps and the account's daily budget (kept in the node's store) all pass.
 *
 * A refusal is a JSON-RPC error -32602 whose message lists every rule broken; nothing is charged.
 */
import http from "node:http";
import cors from "@fastify/cors";
import Fastify from "fastify";
import { getAddress, isHex, type Address, type Hex, type PrivateKeyAccount, type TypedDataDomain } from "viem";
import { formatUserOperation, type UserOperation } from "viem/account-abstraction";
import { z } from "zod";
import { encodeSponsorData, sponsorshipMessage, sponsorshipTypes, sponsorStubData } from "../../common/sponsor.js";
import { httpServerOptions, limitConnections } from "../http/limits.js";
import type { Logger } from "../log/logger.js";
import type { Repository } from "../store/store.js";
import type { SponsorOptions } from "./options.js";
import { maxCostWei, sponsorRefusals, type SponsorScope } from "./policy.js";

const hex = z.string().refine((value) => isHex(value, { strict: true }), "expected 0x-prefixed hex");
const address = z.string().regex(/^0x[0-9a-fA-F]{40}$/, "expected a 20-byte 0x address");
/** A v0.8 user operation in its JSON-RPC form (quantities as hex). */
const rpcUserOperationSchema = z.object({
  sender: address,
  nonce: hex,
  factory: address.nullish(),
  factoryData: hex.nullish(),
  callData: hex,
  callGasLimit: hex,
  verificationGasLimit: hex,
  preVerificationGas: hex,
  maxFeePerGas: hex,
  maxPriorityFeePerGas: hex,
  paymaster: address.nullish(),
  paymasterVerificationGasLimit: hex.nullish(),
  paymasterPostOpGasLimit: hex.nullish(),
  paymasterData: hex.nullish(),
  signature: hex.optional(),
});
const requestSchema = z.strictObject({
  jsonrpc: z.literal("2.0"),
  id: z.union([z.string().max(100), z.number().int(), z.null()]),
  method: z.string().max(100),
  params: z.tuple([rpcUserOperationSchema, address, hex, z.unknown().optional()]),
});

/** One account's sponsored gas on one UTC day. */
export type SponsorSpend = { operations: number; wei: string };

export type SponsorServiceOptions = {
  options: SponsorOptions;
  account: PrivateKeyAccount;
  paymaster: Address;
  entryPoint: Address;
  chainId: number;
  scope: SponsorScope;
  budget: Repository<SponsorSpend>;
  logger: Logger;
  /** Unix seconds. */
  now?: () => number;
};

class RpcError extends Error {
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
  }
}

export async function createSponsorServer(parameters: SponsorServiceOptions) {
  const { options, account, paymaster, entryPoint, chainId, scope, budget, logger } = parameters;
  const now = () => parameters.now?.() ?? Math.floor(Date.now() / 1000);
  const domain: TypedDataDomain = { name: "SuanliSponsor", version: "1", chainId, verifyingContract: paymaster };
  let charging: Promise<unknown> = Promise.resolve();

  const operationOf = (raw: unknown, entry: string, chain: string): UserOperation<"0.8"> => {
    if (getAddress(entry) !== getAddress(entryPoint)) throw new RpcError(-32602, `entry point ${entry} is not this deployment's ${entryPoint}`);
    if (BigInt(chain) !== BigInt(chainId)) throw new RpcError(-32602, `chain ${BigInt(chain)} is not this sponsor's ${chainId}`);
    return formatUserOperation(raw as never) as UserOperation<"0.8">;
  };

  /** Charges the account's budget for today, or refuses; one charge at a time. */
  const charge = (sender: Address, wei: bigint): Promise<void> => {
    const run = charging.then(async () => {
      const key = `${sender.toLowerCase()}/${Math.floor(now() / 86_400)}`;
      const spent = (await budget.get(key)) ?? { operations: 0, wei: "0" };
      if (spent.operations + 1 > options.maxOperationsPerAccountPerDay)
        throw new RpcError(-32602, `account ${sender} has had ${spent.operations} sponsored operations today, the sponsor's daily limit (maxOperationsPerAccountPerDay)`);
      const total = BigInt(spent.wei) + wei;
      if (total > options.maxWeiPerAccountPerDay)
        throw new RpcError(
          -32602,
          `account ${sender} would reach ${total} wei of sponsored gas today, above the sponsor's ${options.maxWeiPerAccountPerDay} (maxWeiPerAccountPerDay)`,
        );
      await budget.put(key, { operations: spent.operations + 1, wei: total.toString() });
    });
    charging = run.catch(() => undefined);
    return run;
  };

  const stub = (op: UserOperation<"0.8">) => {
    const refusals = sponsorRefusals({ ...op, callGasLimit: 0n, verificationGasLimit: 0n, preVerificationGas: 0n, maxFeePerGas: 0n }, scope, options);
    if (refusals.length) throw new RpcError(-32602, `The sponsor does not pay for this operation: ${refusals.join("; ")}`);
    return {
      paymaster,
      paymasterData: sponsorStubData(now() + options.validSeconds, 0),
      paymasterVerificationGasLimit: `0x${options.paymasterVerificationGasLimit.toString(16)}`,
      paymasterPostOpGasLimit: "0x0",
      isFinal: false,
    };
  };

  const data = async (op: UserOperation<"0.8">) => {
    if (op.paymasterVerificationGasLimit === undefined || op.paymasterPostOpGasLimit === undefined)
      throw new RpcError(-32602, "the operation has no paymaster gas limits: call pm_getPaymasterStubData first");
    if (op.paymasterVerificationGasLimit > BigInt(options.paymasterVerificationGasLimit) * 2n)
      throw new RpcError(-32602, `paymasterVerificationGasLimit ${op.paymasterVerificationGasLimit} is above twice the sponsor's ${options.paymasterVerificationGasLimit}`);
    const refusals = sponsorRefusals(op, scope, options);
    if (refusals.length) throw new RpcError(-32602, `The sponsor does not pay for this operation: ${refusals.join("; ")}`);
    const cost = maxCostWei(op);
    await charge(getAddress(op.sender), cost);
    const validUntil = now() + options.validSeconds;
    // No lower bound: the validation is simulated at the latest block, whose timestamp lags this
    // host's clock by as long as no block was mined (an automining devnet: minutes). A lower bound
    // of a minute ago refused a fresh sponsorship as "not due" (AA32) on a busy CI host; the
    // signature's sender, nonce and validUntil already bound what it pays for and until when.
    const validAfter = 0;
    const withPaymaster = { ...op, paymaster };
    const signature = await account.signTypedData({
      domain,
      types: sponsorshipTypes,
      primaryType: "Sponsorship",
      message: sponsorshipMessage(withPaymaster, validUntil, validAfter),
    });
    logger.info("Sponsored a user operation", { sender: op.sender, nonce: String(op.nonce), maxCostWei: String(cost), validUntil });
    return { paymaster, paymasterData: encodeSponsorData(validUntil, validAfter, signature as Hex) };
  };

  const limits = options.connections;
  const app = Fastify({
    logger: false,
    bodyLimit: 128 * 1024,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    requestTimeout: limits.requestTimeoutMs,
    serverFactory: (handler) => {
      const server = http.createServer(httpServerOptions(limits), handler);
      limitConnections(server, limits, { perAddress: true });
      return server;
    },
  });
  // Browsers (the renter console's passkey sign-in) call it from the page's origin; the preflight's
  // Content-Type: application/json is all viem's http transport sends.
  if (options.corsOrigins.length)
    await app.register(cors, { origin: options.corsOrigins.includes("*") ? "*" : options.corsOrigins, methods: ["POST"], allowedHeaders: ["content-type"], maxAge: 600 });
  app.post("/", async (request, reply) => {
    const body = request.body as { id?: unknown } | undefined;
    const id = typeof body?.id === "string" || typeof body?.id === "number" ? body.id : null;
    const parsed = requestSchema.safeParse(request.body);
    if (!parsed.success) {
      const issues = parsed.error.issues.map((issue) => `${issue.path.join(".") || "request"}: ${issue.message}`).join("; ");
      return reply.send({ jsonrpc: "2.0", id, error: { code: -32602, message: `Invalid request: ${issues}` } });
    }
    const { method, params } = parsed.data;
    try {
      const op = operationOf(params[0], params[1], params[2]);
      if (method === "pm_getPaymasterStubData") return reply.send({ jsonrpc: "2.0", id, result: stub(op) });
      if (method === "pm_getPaymasterData") return reply.send({ jsonrpc: "2.0", id, result: await data(op) });
      return reply.send({
        jsonrpc: "2.0",
        id,
        error: { code: -32601, message: `Unknown method ${method}: this sponsor serves pm_getPaymasterStubData and pm_getPaymasterData (ERC-7677)` },
      });
    } catch (error) {
      if (error instanceof RpcError) return reply.send({ jsonrpc: "2.0", id, error: { code: error.code, message: error.message } });
      logger.warn("Sponsor request failed", {}, error);
      return reply.send({ jsonrpc: "2.0", id, error: { code: -32603, message: "The sponsor failed to answer" } });
    }
  });
  return {
    async listen(): Promise<string> {
      return app.listen({ host: options.host, port: options.port });
    },
    close: () => app.close(),
  };
}

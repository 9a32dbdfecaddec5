import { z } from "zod";
import { SuanliError } from "./errors.js";
import { addressSchema } from "./schemas.js";
import { describeIssues } from "./validation.js";

/** Roles of the deployed contracts, as keys of `contracts` in the manifest. */
export const contractRoles = [
  "token",
  "registry",
  "market",
  "extension",
  "attestorStaking",
  "sessions",
  "timelock",
  "entryPoint",
  "accountFactory",
  "paymaster",
  "passkeyAccountFactory",
] as const;
export type ContractRole = (typeof contractRoles)[number];

/** The EIP-712 domain (name, version) under which a token's EIP-2612 permit verifies. */
export const permitDomainSchema = z.strictObject({ name: z.string(), version: z.string() });
export type PermitDomain = z.output<typeof permitDomainSchema>;

/**
 * The deployment manifest: where a deployment's contracts live on one chain, which token it settles
 * in, its parameters and who holds each role. Written by the deploy script to `<dir>/<chainId>.json`;
 * read by node, SDK and CLI. Everything but chainId, deploymentBlock, deployedAt, deployer,
 * contracts.token and token.symbol/decimals is optional, so a manifest written before issue #34 still reads.
 */
export const deploymentSchema = z.strictObject({
  chainId: z.number().int().positive(),
  /** Block of the first deployment transaction: event scans start here. */
  deploymentBlock: z.union([z.bigint(), z.string().regex(/^\d+$/), z.number().int().nonnegative()]).transform((v) => BigInt(v)),
  deployedAt: z.string(),
  deployer: addressSchema,
  contracts: z.strictObject({
    token: addressSchema,
    registry: addressSchema.optional(),
    market: addressSchema.optional(),
    /** The market's LeaseMarketExtension (its code for the rarer paths). */
    extension: addressSchema.optional(),
    /** The AttestorStaking attached at deployment (`registry.attestorStaking()` is the current one). */
    attestorStaking: addressSchema.optional(),
    /**
     * The SessionKeys revocation list: nodes read `isRevoked` before honouring a request made under a renter's
     * session-key delegation, and renters revoke there. Absent in manifests written before issue 38.
     */
    sessions: addressSchema.optional(),
    /** The TimelockController holding every admin power, when the deployment has one. */
    timelock: addressSchema.optional(),
    /**
     * ERC-4337's EntryPoint v0.8 that smart-account renters' user operations go through (docs/aa.md), when the deploy
     * put it there or found it (deployContracts' `accountAbstraction`). Absent: no smart accounts.
     */
    entryPoint: addressSchema.optional(),
    /** eth-infinitism's SimpleAccountFactory for that EntryPoint: a renter's smart account is its CREATE2 proxy. */
    accountFactory: addressSchema.optional(),
    /** The deployment's SponsorPaymaster (docs/aa.md "Gas without ETH"): pays the gas of user operations its sponsor signed. */
    paymaster: addressSchema.optional(),
    /**
     * The deployment's PasskeyAccountFactory (contracts/aa/, docs/aa.md "A passkey owner"): a renter whose owner is a
     * passkey (WebAuthn, P-256) rents from its clone. Absent in manifests written before it, and without `entryPoint`.
     */
    passkeyAccountFactory: addressSchema.optional(),
  }),
  token: z.strictObject({
    symbol: z.string(),
    decimals: z.number().int().min(0).max(36),
    /** The token's EIP-2612 permit domain; null: no permit (deposits are approved). Absent in older manifests. */
    permit: permitDomainSchema.nullable().optional(),
    /** "TestToken": deployed with the devnet's open faucet; "existing": an ERC-20 the deployment was given (--token). */
    origin: z.enum(["TestToken", "existing"]).optional(),
  }),
  /** The parameters set at deployment: the preset they started from and every value (amounts as decimal strings). */
  params: z
    .strictObject({
      preset: z.enum(["devnet", "production"]),
      values: z.record(z.string(), z.union([z.number(), z.string()])),
    })
    .optional(),
  /** Who governs: the holder of the registry's DEFAULT_ADMIN_ROLE (every admin power) and, when it is a timelock, its settings. */
  governance: z
    .strictObject({
      admin: addressSchema,
      timelock: z
        .strictObject({
          minDelaySeconds: z.number().int().nonnegative(),
          proposers: z.array(addressSchema),
          /** The zero address: anyone may execute a ready proposal. */
          executors: z.array(addressSchema),
          /** Proposers can cancel too; these accounts can only cancel. */
          cancellers: z.array(addressSchema),
        })
        .optional(),
    })
    .optional(),
  /** The registry's role holders when the deployment ended (the chain has the current ones: getRoleMember). */
  roles: z
    .strictObject({
      admin: z.array(addressSchema),
      market: z.array(addressSchema),
      attestor: z.array(addressSchema),
    })
    .optional(),
});
export type Deployment = z.output<typeof deploymentSchema>;

export class DeploymentError extends SuanliError {
  override name = "DeploymentError";
}

/** Parses a manifest object (already read from JSON). */
export function parseDeployment(value: unknown, source = "deployment manifest"): Deployment {
  const result = deploymentSchema.safeParse(value);
  if (result.success) return result.data;
  const issues = describeIssues(deploymentSchema, result.error);
  throw new DeploymentError(`Invalid ${source}: ${issues.map((i) => `${i.path}: ${i.message}`).join("; ")}`, {
    metaMessages: ["Redeploy with `npm run deploy` to write a fresh manifest."],
  });
}

/** Serializes a manifest for writing (bigints as decimal strings). */
export function serializeDeployment(deployment: Deployment): string {
  return `${JSON.stringify({ ...deployment, deploymentBlock: deployment.deploymentBlock.toString() }, null, 2)}\n`;
}

/** The address of a contract role, or a clear error if this deployment lacks it. */
export function contractAddress(deployment: Deployment, role: ContractRole): `0x${string}` {
  const address = deployment.contracts[role];
  if (!address) {
    throw new DeploymentError(`The deployment on chain ${deployment.chainId} has no ${role} contract`, {
      metaMessages: ["It was written by an older deploy; run `npm run deploy` again."],
    });
  }
  return address;
}

/**
 * What identifies one deployment beyond doubt: a devnet restarted on the same port has the same
 * chain id and (deterministic deploys) the same contract addresses, and its lease ids start again
 * at 1, so data written for an earlier chain would be read as this one's. The hash of the
 * deployment block tells the two apart. Every store a node or client keeps is bound to it.
 */
export type DeploymentBinding = { chainId: number; market: `0x${string}`; deploymentBlock: bigint; deploymentBlockHash: `0x${string}` };

/** A short, file-name-safe id of a binding: `<chainId>-<market 8 hex>-<block hash 12 hex>`. */
export function bindingId(binding: DeploymentBinding): string {
  return `${binding.chainId}-${binding.market.slice(2, 10).toLowerCase()}-${binding.deploymentBlockHash.slice(2, 14).toLowerCase()}`;
}

/** True when two bindings name the same deployment. */
export function sameBinding(a: DeploymentBinding, b: DeploymentBinding): boolean {
  return (
    a.chainId === b.chainId &&
    a.market.toLowerCase() === b.market.toLowerCase() &&
    BigInt(a.deploymentBlock) === BigInt(b.deploymentBlock) &&
    a.deploymentBlockHash.toLowerCase() === b.deploymentBlockHash.toLowerCase()
  );
}

/** One line naming a binding, for error messages. */
export function describeBinding(binding: DeploymentBinding): string {
  return `chain ${binding.chainId}, market ${binding.market}, deployed in block ${binding.deploymentBlock} (hash ${binding.deploymentBlockHash})`;
}

/**
 * Reads the deployment block's hash from the chain the client talks to. Fails with
 * DeploymentError when that chain has no such block (the manifest is from an earlier chain, e.g.
 * a devnet that was restarted without deploying) or no market at the manifest's address.
 *
 * @example
 * const binding = await readDeploymentBinding(publicClient, deployment);
 * console.log(bindingId(binding)); // "31337-e7f1725e-5a1c3d9e0b2f"
 */
export async function readDeploymentBinding(
  client: { getBlock(args: { blockNumber: bigint }): Promise<{ hash: `0x${string}` | null }>; getCode(args: { address: `0x${string}` }): Promise<`0x${string}` | undefined> },
  deployment: Deployment,
): Promise<DeploymentBinding> {
  const market = contractAddress(deployment, "market");
  let hash: `0x${string}` | null = null;
  try {
    hash = (await client.getBlock({ blockNumber: deployment.deploymentBlock })).hash;
  } catch (error) {
    if (!/not (be )?found|could not be found/i.test(String((error as Error).message))) throw error;
  }
  const code = hash ? await client.getCode({ address: market }) : undefined;
  if (!hash || !code || code === "0x") {
    throw new DeploymentError(
      `The deployment manifest of chain ${deployment.chainId} does not describe this chain: ${hash ? `no contract at the market address ${market}` : `it has no block ${deployment.deploymentBlock}`}`,
      {
        metaMessages: ["The manifest is from an earlier chain (a devnet restarted without deploying?). Deploy again: `npm run devnet` or `npm run deploy`."],
      },
    );
  }
  return { chainId: deployment.chainId, market, deploymentBlock: deployment.deploymentBlock, deploymentBlockHash: hash };
}

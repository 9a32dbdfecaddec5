import { z } from "zod";
import { SuanliError } from "./errors.js";
import { addressSchema } from "./schemas.js";
import { describeIssues } from "./validation.js";

/** Roles of the deployed contracts, as keys of `contracts` in the manifest. */
export const contractRoles = ["token", "registry", "market"] as const;
export type ContractRole = (typeof contractRoles)[number];

/**
 * The deployment manifest: where a deployment's contracts live on one chain. Written by the
 * deploy script to `<dir>/<chainId>.json`; read by node, SDK and CLI.
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
  }),
  token: z.strictObject({ symbol: z.string(), decimals: z.number().int().min(0).max(36) }),
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

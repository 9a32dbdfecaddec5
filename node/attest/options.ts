import { z } from "zod";
import { challengeProfileSchema } from "../../common/attest/params.js";
import { ccOptionsSchema } from "./cc/options.js";
import { attestorRoleOptionsSchema } from "./challenge/options.js";
import { livenessOptionsSchema } from "./faults/options.js";
import { leaseChecksOptionsSchema } from "./lease-checks/options.js";
import { memoryOptionsSchema } from "./memory/options.js";
import { attestRunnerOptionsSchema } from "./runner/options.js";

/**
 * Options of attestation (config key `attest`): the challenge profile an attestor issues, how
 * long its attestations last, the runner a provider computes challenges with, and the attestor
 * role's schedule, liveness probes and fault exchange.
 * Documented in docs/configuration.md; the reasoning in docs/attestation.md.
 * Each concern's options are defined beside it (cc/, challenge/, faults/, lease-checks/, memory/,
 * runner/ options.ts) and composed here, as node/config/schema.ts composes the node's.
 */
export const attestOptionsSchema = z.strictObject({
  challenge: challengeProfileSchema.prefault({}),
  memory: memoryOptionsSchema.prefault({}),
  cc: ccOptionsSchema.prefault({}),
  /** Validity of an attestation this node signs, seconds. One day: machines are re-challenged daily. */
  attestationTtlSeconds: z
    .number()
    .int()
    .min(60)
    .max(30 * 86_400)
    .default(86_400),
  /** Largest challenge a provider computes, in tera-ops (10¹² int8 ops); larger ones are refused. */
  maxChallengeTeraOps: z.number().positive().max(1e9).default(1e6),
  runner: attestRunnerOptionsSchema.prefault({}),
  attestor: attestorRoleOptionsSchema.prefault({}),
  liveness: livenessOptionsSchema.prefault({}),
  leaseChecks: leaseChecksOptionsSchema.prefault({}),
  /**
   * Provider: dispute a liveness fault of one of this provider's leases that an attestor signed
   * while its own probe receipt says it heard from the provider inside the fault window
   * (AttestorStaking.disputeFault, from the provider's wallet; docs/provider.md). Needs the
   * attestor staking on the registry; the provider is owed the disputer's share of the slash.
   */
  disputeFalseFaults: z.boolean().default(true),
});
export type AttestOptions = z.output<typeof attestOptionsSchema>;

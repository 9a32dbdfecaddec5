/**
 * Providers, machines and leases as the HTTP API shows them. They mirror the contracts
 * (docs/contracts.md): the node reads them from the chain and adapts them to these shapes.
 */
import { z } from "zod";
import { attestationViewSchema } from "./offers.js";
import {
  MAX_UINT256,
  addressWireSchema,
  amountSchema,
  bytes32WireSchema,
  gpuModelQuery,
  interconnectWireSchema,
  pageQueryShape,
  pageSchema,
  queryAddress,
  queryPositiveInt,
  regionQuery,
  uint16Schema,
  uint32Schema,
  unixSecondsSchema,
} from "./primitives.js";

export { reputationSchema, uptimePercentOf, type Reputation } from "./reputation.js";
import { reputationSchema } from "./reputation.js";

/** A machine as declared in the ProviderRegistry, with its live use and attestations. */
export const machineViewSchema = z.strictObject({
  machineId: uint32Schema,
  provider: addressWireSchema,
  model: z.string().nullable().describe("Canonical GPU model name, or null when the on-chain hash is not a model this node knows."),
  modelHash: bytes32WireSchema,
  units: uint16Schema,
  vramMiB: uint32Schema,
  interconnect: interconnectWireSchema,
  region: z.string(),
  cluster: bytes32WireSchema,
  onDemandUnits: uint16Schema.describe("Units held by on-demand leases."),
  interruptibleUnits: uint16Schema.describe("Units held by interruptible leases."),
  idleUnits: uint16Schema.describe("Units running the provider's idle workload (not leased)."),
  attestations: z.array(attestationViewSchema).describe("Hardware attestations verified by this node (current and expired)."),
  offerKey: z.string().nullable().describe("The key of the machine's live offer, or null when none is in the book."),
  attestFailures: uint32Schema.describe(
    "The machine's failed challenges that count now, as its live offer's `attestFailures` (GET /v1/offers): from its attestations and staked attestors' signed failure notices. 0 without a live offer.",
  ),
  lastAttestFailureAt: unixSecondsSchema.nullable().describe("When the latest of those failures was observed (unix seconds); null with none."),
});
export type MachineView = z.output<typeof machineViewSchema>;

/** A provider's registry record: stake, collateral, reputation and machines. */
export const providerViewSchema = z.strictObject({
  address: addressWireSchema,
  peerId: z.string().describe("libp2p peer id registered on-chain."),
  metadataURI: z.string(),
  registered: z.boolean().describe("False after deregistration (the record stays while stake unbonds)."),
  stake: amountSchema.describe("Total stake, token base units."),
  locked: amountSchema.describe("Collateral locked by open leases."),
  unbonding: amountSchema.describe("Stake waiting for its unbonding delay."),
  unlockAt: unixSecondsSchema.nullable().describe("When unbonding stake can be withdrawn; null when nothing unbonds."),
  freeStake: amountSchema.describe("stake − locked − unbonding: what backs new leases."),
  reputation: reputationSchema,
  machines: z.array(machineViewSchema),
});
export type ProviderView = z.output<typeof providerViewSchema>;

export const leaseStatusSchema = z.enum(["Open", "Active", "Ended", "Settled", "Cancelled"], {
  error: "expected one of Open, Active, Ended, Settled, Cancelled",
});
export type LeaseStatus = z.output<typeof leaseStatusSchema>;

/** A lease of the LeaseMarket. Timestamps are unix seconds; null where the lease has not got there. */
export const leaseViewSchema = z.strictObject({
  id: amountSchema,
  renter: addressWireSchema,
  provider: addressWireSchema,
  machineId: uint32Schema,
  units: uint16Schema,
  pricePerUnitSecond: amountSchema.describe("The lease's price (the offer price, or the bid of an interruptible lease)."),
  collateralBps: uint16Schema,
  deposit: amountSchema,
  paid: amountSchema.describe("Paid out to the provider so far."),
  accrued: amountSchema.describe("Accrued at the time of the read (paid included), capped at the deposit."),
  status: leaseStatusSchema,
  interruptible: z.boolean(),
  startDeadline: unixSecondsSchema.describe("The provider must activate before this time, or the renter may cancel."),
  activatedAt: unixSecondsSchema.nullable(),
  stopAt: unixSecondsSchema.nullable().describe("Set when accrual stops before `end` (close, completion, fault, preemption)."),
  end: unixSecondsSchema.nullable().describe("activatedAt + deposit / (units × price): when the deposit runs out; null before activation."),
});
export type LeaseView = z.output<typeof leaseViewSchema>;

export const providerPageSchema = pageSchema(providerViewSchema);
export const machinePageSchema = pageSchema(machineViewSchema);
export const leasePageSchema = pageSchema(leaseViewSchema);

export const providerListQuerySchema = z.strictObject({
  sort: z
    .enum(["stake", "reputation", "machines"], { error: "expected one of stake, reputation, machines" })
    .default("stake")
    .describe("Sort order: stake (default), reputation (completed leases), machines."),
  ...pageQueryShape,
});
export type ProviderListQuery = z.output<typeof providerListQuerySchema>;

export const machineQuerySchema = z.strictObject({
  provider: queryAddress.optional(),
  model: gpuModelQuery.optional(),
  region: regionQuery.optional(),
  minUnits: queryPositiveInt.optional(),
  ...pageQueryShape,
});
export type MachineQuery = z.output<typeof machineQuerySchema>;
export type MachineFilter = Omit<MachineQuery, "limit" | "offset">;

export const leaseRoleSchema = z.enum(["renter", "provider", "any"], { error: "expected one of renter, provider, any" });
export type LeaseRole = z.output<typeof leaseRoleSchema>;

export const leaseQuerySchema = z.strictObject({
  address: queryAddress.describe("Whose leases: required."),
  role: leaseRoleSchema.default("any").describe("The address as renter, as provider, or either (default)."),
  status: leaseStatusSchema.optional(),
  ...pageQueryShape,
});
export type LeaseQuery = z.output<typeof leaseQuerySchema>;

export const providerParamsSchema = z.strictObject({ address: queryAddress });
export const leaseIdParamsSchema = z.strictObject({
  id: z
    .string()
    .regex(/^\d{1,78}$/, "expected a lease id (decimal integer)")
    .transform((text) => BigInt(text))
    .refine((value) => value <= MAX_UINT256, "expected a lease id below 2^256"),
});

/**
 * The lease relay routes of the HTTP API: a browser (no libp2p) sends a renter-signed request
 * about its lease to any node, which forwards it unchanged to the lease's provider over the lease
 * protocols (common/protocols/lease.ts) and returns the provider's answer.
 *
 * The bodies here are the protocol bodies in their JSON form (amounts as decimal strings, so the
 * OpenAPI document can describe them); the node checks them with these schemas, checks the
 * renter's signature against the on-chain lease, and forwards the body exactly as received (the
 * signature's bodyHash covers the renter's own bytes). Answers are the protocol answers, with
 * bigints as decimal strings.
 */
import { z } from "zod";
import { MAX_CHECKPOINTS_LISTED } from "../attest/checkpoint.js";
import { TASK_STATES, taskImageSchema } from "../protocols/lease.js";
import { SESSION_ACTIONS, SESSION_MAX_LEASES, SESSION_MAX_SECONDS } from "../sessions.js";
import { outputManifestSchema, outputParamsSchema } from "../protocols/task-io.js";
import { taskSpecSchema } from "../protocols/task-spec.js";
import { addressWireSchema, amountSchema, bytes32WireSchema, signatureWireSchema, unixSecondsSchema } from "./primitives.js";

/** The four lease actions a renter can relay through a node. */
export const RELAY_ACTIONS = ["task", "status", "logs", "cancel"] as const;
export type RelayAction = (typeof RELAY_ACTIONS)[number];

const leaseIdWireSchema = amountSchema.refine((value) => value > 0n, { message: "expected a lease id > 0" });

/** The EIP-712 RenterRequest (common/eip712.ts) signed by the lease's renter. */
export const renterRequestApiSchema = z.strictObject({
  leaseId: leaseIdWireSchema.describe("The lease, decimal; must be the lease of the route."),
  provider: addressWireSchema.describe("The lease's provider."),
  action: z.enum(RELAY_ACTIONS).describe("Must be the route's action."),
  bodyHash: bytes32WireSchema.describe("keccak256 of the canonical JSON of the request body (hashBody in common/protocols/lease.ts); the provider checks it."),
  issuedAt: unixSecondsSchema.describe("When the renter signed, unix seconds; refused when further than api.signatureMaxAgeSeconds from the node's clock."),
  nonce: bytes32WireSchema.describe("Fresh random bytes: the provider refuses a nonce it has seen."),
});

/** A renter's EIP-712 SessionDelegation to a session key (common/sessions.ts), with the renter's signature. */
export const delegationApiSchema = z
  .strictObject({
    message: z.strictObject({
      renter: addressWireSchema.describe("The renter who delegates."),
      sessionKey: addressWireSchema.describe("The session key's address: it signs the requests."),
      actions: z.array(z.enum(SESSION_ACTIONS)).min(1).max(SESSION_ACTIONS.length).describe("What the key may do: reserve, task, status, logs, cancel, output, exec, forward."),
      leaseIds: z.array(amountSchema).max(SESSION_MAX_LEASES).describe("The leases it may act on, decimal; empty: every lease of the renter."),
      issuedAt: amountSchema.describe("Unix seconds, decimal."),
      expiresAt: amountSchema.describe(`Unix seconds, decimal; at most ${SESSION_MAX_SECONDS} s after issuedAt.`),
      salt: bytes32WireSchema.describe("Random bytes: makes each delegation's hash (what SessionKeys.revoke takes) unique."),
    }),
    signature: z
      .union([signatureWireSchema, z.literal("0x")])
      .describe(
        "The renter's EIP-712 signature of `message` (domain: Suanli / 1 / chain id / LeaseMarket), or `0x` when the renter (a smart account) approved it on-chain with SessionKeys.approve.",
      ),
  })
  .describe("Present when a session key signed the request: the renter's delegation to that key. Nodes check its scope, expiry, signature and the on-chain revocation list.");

export const renterAuthApiSchema = z.strictObject({
  request: renterRequestApiSchema,
  signature: signatureWireSchema.describe(
    "The EIP-712 signature of `request` (domain: Suanli / 1 / chain id / LeaseMarket) by the renter, or by its session key with `delegation`.",
  ),
  delegation: delegationApiSchema.optional(),
});

export const taskRelayBodySchema = z.strictObject({
  auth: renterAuthApiSchema,
  spec: taskSpecSchema.describe("The task: bundle or image, command, environment (common/protocols/task-spec.ts)."),
});
export const statusRelayBodySchema = z.strictObject({ auth: renterAuthApiSchema });
export const logsRelayBodySchema = z.strictObject({
  auth: renterAuthApiSchema,
  fromSeq: z.number().int().nonnegative().describe("First log line wanted (the `nextSeq` of the previous answer)."),
  waitMs: z.number().int().min(0).max(20_000).default(0).describe("Long-poll: wait up to this long for new lines when none are there yet."),
  limit: z.number().int().min(1).max(1000).default(500),
});
export const cancelRelayBodySchema = z.strictObject({ auth: renterAuthApiSchema });

/** Body schema of each relay route, by action. */
export const relayBodySchemas = {
  task: taskRelayBodySchema,
  status: statusRelayBodySchema,
  logs: logsRelayBodySchema,
  cancel: cancelRelayBodySchema,
} as const;
export type RelayBody = z.output<(typeof relayBodySchemas)[RelayAction]>;

export const taskRelayAnswerSchema = z.strictObject({
  leaseId: amountSchema,
  state: z.enum(["accepted", "already_running", "already_done"]),
});

const gpuMetricSchema = z.strictObject({
  device: z.string(),
  utilizationPct: z.number().nullable(),
  memoryUsedMiB: z.number().nullable(),
  temperatureC: z.number().nullable(),
  powerW: z.number().nullable(),
});

export const statusRelayAnswerSchema = z.strictObject({
  leaseId: amountSchema,
  state: z.enum(TASK_STATES),
  startedAt: z.number().int().nullable().describe("Unix ms."),
  endedAt: z.number().int().nullable().describe("Unix ms."),
  heartbeatAt: z.number().int().describe("When the provider last sampled the task, unix ms."),
  unitSeconds: z.number().nonnegative(),
  gpus: z.array(gpuMetricSchema),
  exitCode: z.number().int().nullable(),
  error: z.strictObject({ name: z.string(), message: z.string() }).nullable(),
  completion: z
    .strictObject({
      report: z.strictObject({ leaseId: amountSchema, exitCode: z.number().int(), outputDigest: bytes32WireSchema, unitSeconds: amountSchema }),
      signature: signatureWireSchema,
    })
    .nullable()
    .describe("The provider's signed completion report (EIP-712 Completion), once the task is over."),
  nextLogSeq: z.number().int().nonnegative(),
  // The status protocol's later fields (common/protocols/lease.ts taskStatusSchema), relayed as the
  // provider sent them: without them this strict answer refused the status of every task whose
  // provider has the data plane on (a CID-committed output, checkpoints), and a browser renter saw
  // its task's state as "unknown".
  image: taskImageSchema.nullable().optional().describe("The task's container image once prepared; absent or null for a bundle task."),
  outputCid: z
    .string()
    .max(200)
    .regex(/^[A-Za-z0-9]+$/, "a CID (bafy...)")
    .nullable()
    .optional()
    .describe("The output's UnixFS CID when the provider's data plane holds it: the signed completion's outputDigest is its sha2-256 digest (checked, never trusted)."),
  checkpoints: z
    .array(
      z.strictObject({
        record: z.strictObject({ leaseId: amountSchema, seq: amountSchema, cid: z.string().max(200), bytes: amountSchema, time: amountSchema.describe("Unix ms.") }),
        signature: signatureWireSchema,
      }),
    )
    .max(MAX_CHECKPOINTS_LISTED)
    .optional()
    .describe("The provider's signed records of the task's checkpoint snapshots, newest last (docs/data.md); absent when there are none."),
});

export const logsRelayAnswerSchema = z.strictObject({
  lines: z.array(
    z.strictObject({
      seq: z.number().int().nonnegative(),
      ts: z.number().int().describe("Unix ms."),
      stream: z.enum(["stdout", "stderr", "system"]),
      text: z.string(),
    }),
  ),
  nextSeq: z.number().int().nonnegative(),
  done: z.boolean().describe("The task is over and every line has been sent."),
  firstAvailableSeq: z.number().int().nonnegative().describe("Lines before this were dropped from the provider's bounded buffer."),
});

export const cancelRelayAnswerSchema = z.strictObject({ leaseId: amountSchema, state: z.enum(TASK_STATES) });

/** Answer schema of each relay route, by action. */
export const relayAnswerSchemas = {
  task: taskRelayAnswerSchema,
  status: statusRelayAnswerSchema,
  logs: logsRelayAnswerSchema,
  cancel: cancelRelayAnswerSchema,
} as const;

// ---------------------------------------------------------------------------------------------
// output download through the relay (browsers): the output protocol's `{ auth, params }` body

/** The RenterRequest of an output download: action `output`, bodyHash over `params`. */
export const outputRenterRequestApiSchema = renterRequestApiSchema.extend({
  action: z.literal("output").describe('Must be "output".'),
  bodyHash: bytes32WireSchema.describe("keccak256 of the canonical JSON of `params` (leaseRequestBodyHash in common/protocols/lease.ts); the provider checks it."),
});
export const outputAuthApiSchema = z.strictObject({
  request: outputRenterRequestApiSchema,
  signature: signatureWireSchema.describe(
    "The EIP-712 signature of `request` (domain: Suanli / 1 / chain id / LeaseMarket) by the renter, or by its session key with `delegation`.",
  ),
  delegation: delegationApiSchema.optional(),
});
const outputReadParamsSchema = outputParamsSchema.options[1];
export const outputListRelayBodySchema = z.strictObject({
  auth: outputAuthApiSchema,
  params: outputParamsSchema.options[0].describe('`{ "op": "list" }`'),
});
export const outputReadRelayBodySchema = z.strictObject({
  auth: outputAuthApiSchema,
  params: outputReadParamsSchema.describe(
    "Where to start: `fromPath` (a file of the manifest; absent: the first) and `fromOffset` (bytes of it already held). A download resumes by asking again from where it stopped.",
  ),
});
export type OutputRelayBody = z.output<typeof outputListRelayBodySchema> | z.output<typeof outputReadRelayBodySchema>;
/** The provider's manifest of the task's output folder (common/protocols/task-io.ts). */
export const outputManifestApiSchema = outputManifestSchema;

/** Response headers of an output read: the manifest the bytes follow, in brief. */
export const OUTPUT_HEADERS = {
  kind: "x-suanli-output-kind",
  totalBytes: "x-suanli-output-total-bytes",
  files: "x-suanli-output-files",
  manifestDigest: "x-suanli-output-manifest-sha256",
} as const;

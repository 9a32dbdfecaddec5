/**
 * Messages of the lease protocols between a renter (SDK) and a provider node:
 * reserve (hold units before the lease opens), task (the spec, once the lease is open),
 * status (state + heartbeat), logs (long-poll by sequence number) and cancel.
 *
 * Every request about an open lease carries a RenterRequest (EIP-712) signed by the lease's
 * renter, bound to the lease id, the provider, the action, the hash of the body and a fresh
 * nonce; the provider checks the signer against the on-chain lease and refuses stale or
 * replayed authorizations.
 */
import { bytesToHex, keccak256, recoverTypedDataAddress, toBytes, type Address, type Hex, type TypedDataDomain } from "viem";
import { z } from "zod";
import { MAX_CHECKPOINTS_LISTED, signedCheckpointSchema } from "../attest/checkpoint.js";
import { suanliTypes, type RenterRequest, type ReserveRequest } from "../eip712.js";
import { stringifyCanonical } from "../json.js";
import { addressSchema, bytes32Schema, leaseIdSchema, signatureSchema } from "../schemas.js";
import { signedDelegationSchema } from "../sessions.js";
import { execParamsSchema, forwardParamsSchema, outputParamsSchema } from "./task-io.js";
import { taskSpecSchema } from "./task-spec.js";

/** A RenterRequest older than this (or this far in the future) is refused. */
export const RENTER_REQUEST_MAX_AGE_SECONDS = 300;

const uint32 = z
  .number()
  .int()
  .min(0)
  .max(2 ** 32 - 1);
const uint16 = z
  .number()
  .int()
  .min(0)
  .max(2 ** 16 - 1);
const uint96 = z
  .union([z.bigint(), z.string().regex(/^\d{1,29}$/, "expected a decimal integer"), z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER)])
  .transform((value) => BigInt(value))
  .refine((value) => value < 2n ** 96n, { message: "must fit in uint96" });

export const renterRequestWireSchema = z.strictObject({
  leaseId: leaseIdSchema,
  provider: addressSchema,
  action: z.enum(["task", "status", "logs", "cancel", "output", "exec", "forward"]),
  bodyHash: bytes32Schema,
  issuedAt: uint32,
  nonce: bytes32Schema,
}) satisfies z.ZodType<RenterRequest, unknown>;

/** The renter's authorization attached to a lease request. */
export const renterAuthSchema = z.strictObject({
  request: renterRequestWireSchema,
  signature: signatureSchema,
  /** When a session key signed `request`: the renter's delegation to it (common/sessions.ts). */
  delegation: signedDelegationSchema.optional(),
});
export type RenterAuth = z.output<typeof renterAuthSchema>;
export type RenterAction = z.output<typeof renterRequestWireSchema>["action"];

/** keccak256 of the canonical JSON of a value. */
export function hashBody(body: unknown): Hex {
  return keccak256(toBytes(stringifyCanonical(body)));
}

function randomNonce(): Hex {
  const bytes = new Uint8Array(32);
  crypto.getRandomValues(bytes);
  // viem's bytesToHex, not Node's Buffer: this runs in the browser SDK too.
  return bytesToHex(bytes);
}

/**
 * Signs typed data with the renter's wallet: `(p) => account.signTypedData(p)` for a local
 * account, `(p) => walletClient.signTypedData({ account, ...p })` for an EIP-1193 wallet.
 */
export type TypedDataSigner = (parameters: {
  domain: TypedDataDomain;
  types: typeof suanliTypes;
  primaryType: "RenterRequest" | "ReserveRequest";
  message: RenterRequest | ReserveRequest;
}) => Promise<Hex>;

/**
 * Signs a RenterRequest: `(p) => walletClient.signTypedData({ account, ...p })` type-checks as
 * written (a TypedDataSigner is one too).
 *
 * @example
 * import { signLeaseRequest, type RenterRequestSigner } from "suanli/sdk";
 * const signer: RenterRequestSigner = (p) => walletClient.signTypedData({ account: renter, ...p });
 * const auth = await signLeaseRequest(signer, domain, { leaseId, provider, action: "status", body: {} });
 */
export type RenterRequestSigner = (parameters: { domain: TypedDataDomain; types: typeof suanliTypes; primaryType: "RenterRequest"; message: RenterRequest }) => Promise<Hex>;

/** Signs a RenterRequest whose body the caller already normalised (see signLeaseRequest). */
async function signRenterRequest(
  signer: RenterRequestSigner,
  domain: TypedDataDomain,
  parameters: { leaseId: bigint; provider: Address; action: RenterAction; body: unknown; nowSeconds?: number },
): Promise<RenterAuth> {
  const request: RenterRequest = {
    leaseId: parameters.leaseId,
    provider: parameters.provider,
    action: parameters.action,
    bodyHash: hashBody(parameters.body),
    issuedAt: parameters.nowSeconds ?? Math.floor(Date.now() / 1000),
    nonce: randomNonce(),
  };
  const signature = await signer({ domain, types: suanliTypes, primaryType: "RenterRequest", message: request });
  return { request: request as RenterAuth["request"], signature };
}

/** Recovers the signer of a RenterAuth (does not check freshness or the lease: see the provider's checks). */
export async function recoverRenter(domain: TypedDataDomain, auth: RenterAuth): Promise<Address> {
  return recoverTypedDataAddress({ domain, types: suanliTypes, primaryType: "RenterRequest", message: auth.request, signature: auth.signature });
}

// ---------------------------------------------------------------------------------------------
// reserve

export const reserveRequestWireSchema = z.strictObject({
  renter: addressSchema,
  provider: addressSchema,
  machineId: uint32.min(1),
  units: uint16.min(1),
  duration: uint32.min(1),
  interruptible: z.boolean(),
  bidPerUnitSecond: uint96,
  issuedAt: uint32,
  nonce: bytes32Schema,
}) satisfies z.ZodType<ReserveRequest, unknown>;

export const reserveBodySchema = z.strictObject({
  chainId: z.number().int().positive(),
  request: reserveRequestWireSchema,
  /** The renter's EIP-712 signature of `request`, or its session key's (with `delegation`). */
  signature: signatureSchema,
  /** When a session key signed `request`: the renter's delegation to it, allowing "reserve". */
  delegation: signedDelegationSchema.optional(),
});
export type ReserveBody = z.output<typeof reserveBodySchema>;

/** The provider's answer: a signed acceptance or a refusal with a reason (common/matching/handshake.ts). */
export { reserveReplySchema, type ReserveReply, type Acceptance, type Refusal, REFUSAL_REASONS } from "../matching/handshake.js";

// ---------------------------------------------------------------------------------------------
// task

export const taskBodySchema = z.strictObject({
  auth: renterAuthSchema,
  spec: taskSpecSchema,
});
export const taskAnswerSchema = z.strictObject({
  leaseId: leaseIdSchema,
  state: z.enum(["accepted", "already_running", "already_done"]),
  /** For rank 0 of a group job: where the other machines reach it (provider.groupJobs). */
  master: z.strictObject({ addr: z.string().max(253), port: z.number().int().min(1).max(65_535) }).optional(),
});

// ---------------------------------------------------------------------------------------------
// status

export const TASK_STATES = [
  "waiting_spec", // lease known, no task spec yet
  "preparing", // fetching and unpacking the bundle, stopping idle work
  "running",
  "succeeded",
  "failed", // exited non-zero, or could not start (bad bundle, missing command...)
  "exceeded", // killed at the end of the lease time
  "stopped", // cancelled by the renter, or the lease ended
  "preempted",
] as const;
export type TaskState = (typeof TASK_STATES)[number];
export const FINAL_TASK_STATES: ReadonlySet<TaskState> = new Set(["succeeded", "failed", "exceeded", "stopped", "preempted"]);

const gpuMetricSchema = z.strictObject({
  device: z.string().max(128),
  utilizationPct: z.number().min(0).max(100).nullable(),
  memoryUsedMiB: z.number().min(0).nullable(),
  temperatureC: z.number().nullable(),
  powerW: z.number().min(0).nullable(),
});

export const completionWireSchema = z.strictObject({
  leaseId: leaseIdSchema,
  exitCode: z
    .number()
    .int()
    .min(-(2 ** 31))
    .max(2 ** 31 - 1),
  outputDigest: bytes32Schema,
  unitSeconds: z.union([z.bigint(), z.string().regex(/^\d{1,20}$/), z.number().int().nonnegative()]).transform((value) => BigInt(value)),
});

export const statusBodySchema = z.strictObject({ auth: renterAuthSchema });
/**
 * The container image a task runs in: what the renter asked for (`ref`: the registry reference,
 * or the archive's URL without its query), the engine's image id (`digest`, "sha256:<64 hex>"),
 * and whether it came from the provider's image cache (nothing pulled or loaded for this task).
 */
export const taskImageSchema = z.strictObject({
  ref: z.string().min(1).max(2048),
  digest: z.string().regex(/^sha256:[0-9a-f]{64}$/, "sha256:<64 lowercase hex digits>"),
  cached: z.boolean(),
});
export type TaskImage = z.output<typeof taskImageSchema>;
export const taskStatusSchema = z.strictObject({
  leaseId: leaseIdSchema,
  state: z.enum(TASK_STATES),
  /** unix ms */
  startedAt: z.number().int().nullable(),
  endedAt: z.number().int().nullable(),
  /** When the provider last sampled the task (unix ms): the heartbeat. */
  heartbeatAt: z.number().int(),
  unitSeconds: z.number().nonnegative(),
  gpus: z.array(gpuMetricSchema).max(64),
  exitCode: z.number().int().nullable(),
  error: z.strictObject({ name: z.string().max(100), message: z.string().max(2000) }).nullable(),
  /** The provider's signed completion report, once the task is over. */
  completion: z.strictObject({ report: completionWireSchema, signature: signatureSchema }).nullable(),
  /** Sequence number the next log line will get. */
  nextLogSeq: z.number().int().nonnegative(),
  /**
   * The task's container image once it is prepared; absent (or null) for a bundle task or before.
   * Optional: providers from before this field leave it out.
   */
  image: taskImageSchema.nullable().optional(),
  /**
   * The output's CID (issue 36) when the provider's data plane holds it: the signed completion's
   * outputDigest is its sha2-256 digest (common/output-cid.ts), so it is checked against that,
   * never trusted. Absent when the digest is the older one (common/output-digest.ts).
   */
  outputCid: z
    .string()
    .max(200)
    .regex(/^[A-Za-z0-9]+$/, "a CID (bafy...)")
    .nullable()
    .optional(),
  /**
   * The provider's signed records of the task's checkpoint snapshots (docs/data.md), newest last,
   * at most MAX_CHECKPOINTS_LISTED; absent when there are none (or from providers before the field).
   */
  checkpoints: z.array(signedCheckpointSchema).max(MAX_CHECKPOINTS_LISTED).optional(),
  /** Why the latest snapshot was not taken (CheckpointQuotaError: the folder is over the quota); the previous checkpoint stays. */
  checkpointError: z.strictObject({ name: z.string().max(100), message: z.string().max(2000) }).optional(),
});
export type TaskStatus = z.output<typeof taskStatusSchema>;

// ---------------------------------------------------------------------------------------------
// logs

export const logsBodySchema = z.strictObject({
  auth: renterAuthSchema,
  fromSeq: z.number().int().nonnegative(),
  /** Long-poll: wait up to this long for new lines when none are there yet. */
  waitMs: z.number().int().min(0).max(20_000).default(0),
  limit: z.number().int().min(1).max(1000).default(500),
});
export const logLineSchema = z.strictObject({
  seq: z.number().int().nonnegative(),
  /** unix ms */
  ts: z.number().int(),
  stream: z.enum(["stdout", "stderr", "system"]),
  text: z.string().max(16 * 1024),
});
export type LogLine = z.output<typeof logLineSchema>;
export const logsAnswerSchema = z.strictObject({
  lines: z.array(logLineSchema).max(1000),
  nextSeq: z.number().int().nonnegative(),
  /** True once the task is over and every line has been sent. */
  done: z.boolean(),
  /** Lines before this were dropped from the provider's bounded buffer. */
  firstAvailableSeq: z.number().int().nonnegative(),
});

// ---------------------------------------------------------------------------------------------
// cancel

export const cancelBodySchema = z.strictObject({ auth: renterAuthSchema });
export const cancelAnswerSchema = z.strictObject({ leaseId: leaseIdSchema, state: z.enum(TASK_STATES) });

// ---------------------------------------------------------------------------------------------
// task I/O (common/protocols/task-io.ts): `{ auth, params }`

export const outputRequestSchema = z.strictObject({ auth: renterAuthSchema, params: outputParamsSchema });
export const execRequestSchema = z.strictObject({ auth: renterAuthSchema, params: execParamsSchema });
export const forwardRequestSchema = z.strictObject({ auth: renterAuthSchema, params: forwardParamsSchema });

// ---------------------------------------------------------------------------------------------
// what a RenterRequest's bodyHash binds

/** Each lease request's body without `auth`, as the provider's schema outputs it. */
const unauthenticatedBodySchemas = {
  task: taskBodySchema.omit({ auth: true }),
  status: statusBodySchema.omit({ auth: true }),
  logs: logsBodySchema.omit({ auth: true }),
  cancel: cancelBodySchema.omit({ auth: true }),
  // Task I/O (common/protocols/task-io.ts): the params are the body.
  output: outputParamsSchema,
  exec: execParamsSchema,
  forward: forwardParamsSchema,
} as const;

/**
 * The bodyHash of a lease request: `hashBody` of the request body without `auth`, as the
 * protocol's schema outputs it (defaults filled in, sha256 normalised), so renter and provider
 * hash the same value whatever spelling the renter used. Task: `{ spec }`; logs:
 * `{ fromSeq, waitMs, limit }`; status and cancel: `{}`.
 *
 * @example
 * import { leaseRequestBodyHash } from "suanli/common/protocols/lease";
 * const bodyHash = leaseRequestBodyHash("logs", { fromSeq: 0 }); // waitMs 0 and limit 500 included
 */
export function leaseRequestBodyHash(action: RenterAction, body: unknown): Hex {
  return hashBody(unauthenticatedBodySchemas[action].parse(body));
}

/**
 * Signs the authorization of one lease request: its bodyHash is {@link leaseRequestBodyHash}.
 * Every request needs a fresh one (the nonce is single-use and it expires after
 * RENTER_REQUEST_MAX_AGE_SECONDS).
 *
 * @example
 * import { signLeaseRequest } from "suanli/sdk";
 * const auth = await signLeaseRequest((p) => account.signTypedData(p), domain, { leaseId, provider, action: "task", body: { spec } });
 * await request(host, providerPeer, TASK_PROTOCOL, { auth, spec }, { responseSchema: taskAnswerSchema });
 */
export async function signLeaseRequest(
  signer: RenterRequestSigner,
  domain: TypedDataDomain,
  parameters: { leaseId: bigint; provider: Address; action: RenterAction; body: unknown; nowSeconds?: number },
): Promise<RenterAuth> {
  const body = unauthenticatedBodySchemas[parameters.action].parse(parameters.body);
  return signRenterRequest(signer, domain, { ...parameters, body });
}

/**
 * The exit code a provider reports on-chain (`complete`) for a task that never started because
 * its input was bad (bundle digest, unreachable URL, missing command): the renter pays only the
 * second or two between activation and completion. The status carries the error.
 */
export const TASK_NOT_STARTED_EXIT_CODE = -1;

/**
 * The libp2p message formats of the attestor role (docs/attestation.md, "Over libp2p"). JSON,
 * one length-prefixed request and one answer per stream (common/p2p/reqresp.ts); every body is
 * parsed with these schemas before anything reads it. Lease ids are uint256 and travel as
 * decimal strings; times are unix seconds unless the name says otherwise.
 *
 *   /suanli/attest/1.0.0          attestor → provider   challenge → commit | refused    (messages at v: 2; a v1 message is answered unsupported_version)
 *                                                       open      → rows   | refused
 *                                                       result    → ack    (the signed attestation on a pass)
 *   /suanli/attest-request/1.0.0  anyone → attestor     request   → outcome (challenge a machine now)
 *   /suanli/liveness/1.0.0        attestor → provider   probe     → signed Heartbeat
 *   /suanli/fault/1.0.0           attestor → attestor   proposal  → signature | declined
 *   /suanli/attestor-identity/1.0.0  attestor → attestor  {chainId} → signed peer binding (attestor-peer.ts)
 */
import { z } from "zod";
import { commitFraudProofSchema } from "./commit.js";
import { addressSchema, bytes32Schema, signatureSchema, uintSchema } from "../schemas.js";
import { signedAttestationSchema } from "../offers/message.js";
import { memChallengeSchema, memCommitSchema, memFilledSchema, memOpenSchema, memWalkSchema, memWalksSchema } from "./memory-messages.js";
import {
  ATTEST_PROTOCOL_VERSION,
  FAILURE_REASONS,
  openedRowSchema,
  challengeMessageSchema,
  commitMessageSchema,
  legacyV1MessageSchema,
  openRequestMessageSchema,
  openResponseMessageSchema,
  refusalMessageSchema,
} from "./messages.js";

const uint32 = z
  .number()
  .int()
  .min(0)
  .max(2 ** 32 - 1);
const chainIdSchema = z.number().int().positive().max(Number.MAX_SAFE_INTEGER);
/** A uint256 lease id: decimal string (or number) on the wire, bigint after parsing. */
const leaseIdSchema = uintSchema.refine((value) => value > 0n, { message: "lease ids start at 1" });

// ---------------------------------------------------------------- /suanli/attest/1.0.0

/** The attestor tells the provider how its challenge ended; on a pass it carries the attestation for the provider's offers. */
export const resultMessageSchema = z.discriminatedUnion("outcome", [
  z.strictObject({
    v: z.literal(ATTEST_PROTOCOL_VERSION),
    type: z.literal("result"),
    challengeId: bytes32Schema,
    outcome: z.literal("pass"),
    attestation: signedAttestationSchema,
  }),
  z.strictObject({
    v: z.literal(ATTEST_PROTOCOL_VERSION),
    type: z.literal("result"),
    challengeId: bytes32Schema,
    outcome: z.literal("fail"),
    reason: z.enum(FAILURE_REASONS),
    detail: z.string().max(1_000),
  }),
]);
export type ResultMessage = z.output<typeof resultMessageSchema>;
export type ResultMessageInput = z.input<typeof resultMessageSchema>;

export const ackMessageSchema = z.strictObject({
  v: z.literal(ATTEST_PROTOCOL_VERSION),
  type: z.literal("ack"),
  challengeId: bytes32Schema,
});

/** What an attestor sends on /suanli/attest/1.0.0. */
export const attestRequestSchema = z.union([
  challengeMessageSchema,
  openRequestMessageSchema,
  resultMessageSchema,
  memChallengeSchema,
  memWalkSchema,
  memOpenSchema,
  // Last: a version-1 message, parsed only to be answered `unsupported_version` (messages.ts LEGACY_V1_MESSAGE).
  legacyV1MessageSchema,
]);
/** What a provider answers on /suanli/attest/1.0.0. */
export const attestAnswerSchema = z.union([
  commitMessageSchema,
  openResponseMessageSchema,
  refusalMessageSchema,
  ackMessageSchema,
  memFilledSchema,
  memCommitSchema,
  memWalksSchema,
  // Last: a version-1 provider's answer, parsed only to fail the challenge with the version named.
  legacyV1MessageSchema,
]);

// ---------------------------------------------------------------- /suanli/attest-request/1.0.0

export const challengeRequestSchema = z.strictObject({
  v: z.literal(1),
  chainId: chainIdSchema,
  machineId: uint32.min(1),
  /**
   * Challenge now even when a recent result (a pass not due for renewal, a failure within its
   * backoff) would be answered instead. At most one forced challenge per machine a minute.
   */
  force: z.boolean().optional(),
});
export type ChallengeRequest = z.output<typeof challengeRequestSchema>;

/**
 * Why an attestor could not run a challenge at all (not the machine's verdict):
 * `not_declared` (no such machine on-chain), `unreachable` (the provider's node did not answer),
 * `backoff` (the machine failed recently: see retryAfter), `busy` (too many challenges in flight),
 * `wrong_chain`, `internal`; and the provider's signed refusals this attestor checked
 * (common/attest/refusal.ts): `out_of_bounds`, `attestor_share`, `lease_budget`; `leased` (a request for a
 * leased machine this attestor holds no unexpired attestation of: it gets only light in-lease checks; retryAfter: the lease's end).
 */
export const CHALLENGE_ERRORS = ["not_declared", "unreachable", "backoff", "busy", "wrong_chain", "internal", "out_of_bounds", "attestor_share", "lease_budget", "leased"] as const;
export type ChallengeErrorReason = (typeof CHALLENGE_ERRORS)[number];

export const challengeOutcomeSchema = z.discriminatedUnion("outcome", [
  z.strictObject({
    v: z.literal(1),
    machineId: uint32.min(1),
    outcome: z.literal("pass"),
    attestation: signedAttestationSchema,
    /** int8 ops per second over the whole machine, decimal. */
    measuredThroughput: uintSchema,
    /** True when this is a still-fresh earlier result rather than a new challenge. */
    cached: z.boolean(),
  }),
  z.strictObject({
    v: z.literal(1),
    machineId: uint32.min(1),
    outcome: z.literal("fail"),
    reason: z.enum(FAILURE_REASONS),
    detail: z.string().max(1_000),
    measuredThroughput: uintSchema.nullable(),
    cached: z.boolean(),
  }),
  z.strictObject({
    v: z.literal(1),
    machineId: uint32.min(1),
    outcome: z.literal("error"),
    reason: z.enum(CHALLENGE_ERRORS),
    detail: z.string().max(1_000),
    /** With `backoff`: when a new challenge will be accepted (unix s). */
    retryAfter: uint32.nullable(),
  }),
]);
export type ChallengeOutcomeMessage = z.output<typeof challengeOutcomeSchema>;
export type ChallengeOutcomeMessageInput = z.input<typeof challengeOutcomeSchema>;

// ---------------------------------------------------------------- /suanli/liveness/1.0.0

/** A ProbeReceipt on the wire: the lease is the probe's; receivedAtMs is a decimal string (uint64). */
export const probeReceiptWireSchema = z.strictObject({
  challenge: bytes32Schema,
  receivedAtMs: z
    .string()
    .regex(/^(0|[1-9][0-9]{0,19})$/, "a decimal uint64 of at most 20 digits")
    .transform((value) => BigInt(value))
    .refine((value) => value < 2n ** 64n, { message: "receivedAtMs must fit a uint64" }),
  signature: signatureSchema,
});
export type ProbeReceiptWire = z.output<typeof probeReceiptWireSchema>;

/**
 * A liveness probe, signed by the attestor (EIP-712 `LivenessProbe`, common/attest/liveness.ts):
 * a provider spends a chain read and a signature only on probes from the on-chain attestor set.
 * The random challenge makes each heartbeat fresh; `issuedAtMs` bounds how long a probe can be
 * replayed; the provider answers only for active leases it holds.
 */
export const livenessProbeSchema = z.strictObject({
  v: z.literal(1),
  chainId: chainIdSchema,
  leaseId: leaseIdSchema,
  challenge: bytes32Schema,
  attestor: addressSchema,
  issuedAtMs: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER),
  /** The attestor's signature of {leaseId, challenge, attestor, issuedAtMs}. */
  signature: signatureSchema,
  /**
   * The attestor's signed receipt of its previous probe of this lease that the provider answered
   * (EIP-712 `ProbeReceipt`, common/attest/liveness.ts): the provider keeps it as evidence against
   * a liveness fault the same attestor signs (docs/attestation.md, "A false liveness fault").
   */
  receipt: probeReceiptWireSchema.optional(),
});
export type LivenessProbe = z.output<typeof livenessProbeSchema>;

export const heartbeatSchema = z.strictObject({
  leaseId: leaseIdSchema,
  challenge: bytes32Schema,
  respondedAt: uint32,
});

/** The provider's EIP-712 Heartbeat (common/eip712.ts), signed by its registered wallet. */
export const signedHeartbeatSchema = z.strictObject({
  v: z.literal(1),
  heartbeat: heartbeatSchema,
  signature: signatureSchema,
});
export type SignedHeartbeat = z.output<typeof signedHeartbeatSchema>;

// ---------------------------------------------------------------- /suanli/fault/1.0.0

export const faultWireSchema = z.strictObject({
  leaseId: leaseIdSchema,
  kind: z.number().int().min(1).max(255),
  observedAt: uint32,
});

export const faultSignatureSchema = z.strictObject({ signer: addressSchema, signature: signatureSchema });
export type FaultSignature = z.output<typeof faultSignatureSchema>;

/**
 * Most opened rows a capacity fault's transcript carries: a co-signer recomputes each one
 * (rounds·cols² multiply-adds, 2.7·10⁸ at the gpu preset), so a proposal cannot make it burn
 * more than this many rows' worth of CPU; one wrong row already proves the fraud.
 */
export const FAULT_EVIDENCE_MAX_ROWS = 4;
/** Most bytes of a fault proposal on the wire, transcript included (the fault exchange's message limit). */
export const FAULT_PROPOSAL_MAX_BYTES = 256 * 1024;

/**
 * A capacity fault's evidence (kind 2): the provider-signed commit of a challenge started during
 * the lease and opened rows that are wrong under it (verifyCommitFraud, common/attest/commit.ts),
 * only the wrong ones, at most FAULT_EVIDENCE_MAX_ROWS.
 */
export const faultTranscriptSchema = commitFraudProofSchema.extend({ rows: z.array(openedRowSchema).min(1).max(FAULT_EVIDENCE_MAX_ROWS) });
export type FaultTranscript = z.output<typeof faultTranscriptSchema>;

/** A proposed fault with the signatures collected so far (at least the proposer's). */
export const faultProposalSchema = z.strictObject({
  v: z.literal(1),
  chainId: chainIdSchema,
  fault: faultWireSchema,
  signatures: z.array(faultSignatureSchema).min(1).max(32),
  /**
   * Capacity faults only: the proposer's transcript of the provider's signed wrong answer. A
   * co-signer that verifies it signs without a failed challenge of its own (docs/attestation.md,
   * "In-lease checks").
   */
  evidence: faultTranscriptSchema.optional(),
});
export type FaultProposal = z.output<typeof faultProposalSchema>;

/**
 * Why an attestor declined to co-sign (stable codes): `provider_alive` (its own probe just got a
 * heartbeat), `seen_alive` (it heard from the provider after `observedAt`: see lastSeenAt),
 * `no_evidence` (its own probes have not failed `minFailedProbes` times over the whole QoS
 * window, or observedAt is earlier than its own first failed probe: see earliestObservedAt),
 * `too_early` (a liveness fault is signed only once the whole fault window after observedAt has
 * passed, so that no receipt the signer gives later can contradict it: see signsAt),
 * `lease_not_active`, `out_of_range` (observedAt before activation, past the end or in the
 * future), `unsupported_kind`, `bad_proposal` (no valid attestor signature), `not_attestor`
 * (this node lost its role), `wrong_chain`, `internal`; for a proposal's transcript (capacity
 * faults): `bad_evidence` (it proves no wrong answer the provider signed: the detail starts with
 * verifyCommitFraud's reason, e.g. `not_signed_by_provider`, `bad_proof`, `rows_correct`),
 * `evidence_mismatch` (a real transcript of another provider or machine, of a challenge started
 * outside the lease, or an observedAt before the challenge's start), `rate_limited` (this peer's
 * transcripts already cost this attestor its recompute allowance: ask again later).
 */
export const FAULT_DECLINE_REASONS = [
  "provider_alive",
  "seen_alive",
  "no_evidence",
  "lease_not_active",
  "out_of_range",
  "unsupported_kind",
  "bad_proposal",
  "not_attestor",
  "wrong_chain",
  "internal",
  "bad_evidence",
  "evidence_mismatch",
  "rate_limited",
  "too_early",
] as const;
export type FaultDeclineReason = (typeof FAULT_DECLINE_REASONS)[number];

export const faultAnswerSchema = z.discriminatedUnion("outcome", [
  z.strictObject({ v: z.literal(1), outcome: z.literal("signed"), signer: addressSchema, signature: signatureSchema }),
  z.strictObject({
    v: z.literal(1),
    outcome: z.literal("declined"),
    reason: z.enum(FAULT_DECLINE_REASONS),
    detail: z.string().max(500),
    /** With `seen_alive`: when this attestor last got a heartbeat (unix s). Informational: only `receipt` moves a fault. */
    lastSeenAt: uint32.nullable(),
    /**
     * With `seen_alive`: this attestor's signed ProbeReceipt of that heartbeat (the fault's lease;
     * the same receipt it gave the provider). A proposer moves observedAt past a co-signer's
     * answer only on a receipt that recovers to an on-chain attestor and was taken after
     * observedAt's second: an unsigned "seen alive" time is anyone's word and moves nothing.
     * `receivedAtMs` stays a decimal string here (answers are logged and printed as JSON).
     */
    receipt: z
      .strictObject({
        challenge: bytes32Schema,
        receivedAtMs: z.string().regex(/^(0|[1-9][0-9]{0,19})$/, "a decimal uint64 of at most 20 digits"),
        signature: signatureSchema,
      })
      .optional(),
    /**
     * With `no_evidence`: the start of this attestor's own first failed probe of the current
     * outage (unix s), the earliest observedAt it could sign; null when its probes do not fail.
     */
    earliestObservedAt: uint32.nullable().default(null),
    /** With `too_early`: the first second at which this attestor would sign (unix s). */
    signsAt: uint32.nullable().default(null),
  }),
]);
export type FaultAnswer = z.output<typeof faultAnswerSchema>;
export type FaultAnswerInput = z.input<typeof faultAnswerSchema>;

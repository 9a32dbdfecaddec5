/**
 * Failure notices (issue 35, item 9): when a machine fails one of an attestor's challenges, the
 * attestor signs an EIP-712 `AttestationFailure` (common/eip712.ts) and gossips it on
 * `/suanli/<chainId>/attest-failures/1`. Every offer book keeps the notices of staked attestors
 * and, from then on:
 *
 * - an attestation of the machine by that attestor issued before the failure's `observedAt` is
 *   revoked: it no longer counts toward the offer's quorum (`verifyAttestation` says `revoked`);
 * - the notice counts toward the machine's failure history, which the match constraint
 *   `maxAttestFailures` bounds (`machineFailureCount`).
 *
 * A notice binds the chain and market (the EIP-712 domain), the attestor, the machine and the
 * challenge, so it cannot be replayed elsewhere; only the attestor can sign one, and a node keeps
 * it only while the signer is a staked attestor (ProviderRegistry.isAttestor).
 */
import { getAddress, type Address, type Hex, type TypedDataDomain } from "viem";
import { z } from "zod";
import { signTyped, type TypedDataSigner } from "../chain/sign.js";
import { suanliTypes, type AttestationFailure } from "../eip712.js";
import type { TypedDataRecoverer } from "../eip712-recover.js";
import { addressSchema, bytes32Schema, signatureSchema } from "../schemas.js";

/** The gossipsub topic of a chain's failure notices. */
export function attestFailuresTopic(chainId: number): string {
  return `/suanli/${chainId}/attest-failures/1`;
}

/** Notices larger than this are dropped before parsing. */
export const FAILURE_NOTICE_MAX_BYTES = 1_024;

/**
 * How long a notice counts (seconds): a week, the attestors' default failure history
 * (`attest.attestor.failureHistorySeconds`). Older notices are dropped by every book and refused
 * on the wire; the `failures` an attestation carries count over the same window.
 */
export const FAILURE_WINDOW_SECONDS = 7 * 86_400;

const uint32 = z
  .number()
  .int()
  .min(0)
  .max(2 ** 32 - 1);

export const attestationFailureSchema = z.strictObject({
  attestor: addressSchema,
  provider: addressSchema,
  machineId: uint32.min(1),
  /** The failure code (FAILURE_REASONS), a short identifier. */
  reason: z.string().regex(/^[a-z0-9_]{1,48}$/, "expected a failure code such as wrong_rows"),
  challengeId: bytes32Schema,
  observedAt: uint32,
}) satisfies z.ZodType<AttestationFailure, unknown>;

export const failureNoticeSchema = z.strictObject({
  v: z.literal(1),
  failure: attestationFailureSchema,
  /** The attestor's EIP-712 signature of `failure`. */
  signature: signatureSchema,
});
export type FailureNotice = z.output<typeof failureNoticeSchema>;

/** A notice's identity: one per attestor and challenge. */
export function noticeKey(failure: Pick<AttestationFailure, "attestor" | "challengeId">): string {
  return `${failure.attestor.toLowerCase()}/${failure.challengeId.toLowerCase()}`;
}

/**
 * Signs a failure notice.
 *
 * @example
 * const notice = await signFailureNotice(attestorAccount, suanliDomain(chainId, market), {
 *   attestor: attestorAccount.address, provider, machineId: 7, reason: "wrong_rows", challengeId, observedAt: now });
 */
export async function signFailureNotice(signer: TypedDataSigner, domain: TypedDataDomain, failure: AttestationFailure): Promise<FailureNotice> {
  const normalized = { ...failure, attestor: getAddress(failure.attestor), provider: getAddress(failure.provider) };
  const signature = await signTyped(signer, { domain, types: { AttestationFailure: suanliTypes.AttestationFailure }, primaryType: "AttestationFailure", message: normalized });
  return { v: 1, failure: normalized, signature };
}

/** Why a notice was not kept. `reject`: nobody honest sends it (gossip lowers the sender's score); `ignore`: stale or a duplicate. */
export const NOTICE_REJECT_REASONS = {
  too_large: "reject",
  not_json: "reject",
  schema: "reject",
  in_future: "reject",
  too_old: "ignore",
  bad_signature: "reject",
  not_attestor: "reject",
  duplicate: "ignore",
  chain_unavailable: "ignore",
} as const;
export type NoticeRejectReason = keyof typeof NOTICE_REJECT_REASONS;

export type NoticeValidation = { ok: true; notice: FailureNotice; raw: string } | { ok: false; reason: NoticeRejectReason; action: "reject" | "ignore"; detail: string };

export type NoticeCheckOptions = {
  recoverer: TypedDataRecoverer;
  /** ProviderRegistry.isAttestor: holds ATTESTOR_ROLE and is staked (typically a cached read). */
  isAttestor: (address: Address) => Promise<boolean>;
  /** Unix seconds now. */
  now: number;
  /** Already held (checked before the signature). */
  has?: (key: string) => boolean;
  maxClockSkewSeconds?: number;
};

function refuse(reason: NoticeRejectReason, detail: string): NoticeValidation {
  return { ok: false, reason, action: NOTICE_REJECT_REASONS[reason], detail };
}

const decoder = new TextDecoder("utf-8", { fatal: true });

/** Validates one notice as received: size, JSON, schema, age, signature by `failure.attestor`, then the attestor's stake. */
export async function checkFailureNotice(data: Uint8Array | string, options: NoticeCheckOptions): Promise<NoticeValidation> {
  const size = typeof data === "string" ? Buffer.byteLength(data) : data.byteLength;
  if (size > FAILURE_NOTICE_MAX_BYTES) return refuse("too_large", `${size} bytes; at most ${FAILURE_NOTICE_MAX_BYTES}`);
  let raw: string;
  let json: unknown;
  try {
    raw = typeof data === "string" ? data : decoder.decode(data);
    json = JSON.parse(raw);
  } catch {
    return refuse("not_json", "not UTF-8 JSON");
  }
  const parsed = failureNoticeSchema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    return refuse("schema", `${issue.path.join(".") || "(root)"}: ${issue.message}`);
  }
  const notice = parsed.data;
  const { failure } = notice;
  if (failure.observedAt > options.now + (options.maxClockSkewSeconds ?? 300)) return refuse("in_future", `observedAt ${failure.observedAt} is ahead of ${options.now}`);
  if (failure.observedAt <= options.now - FAILURE_WINDOW_SECONDS) return refuse("too_old", `observed more than ${FAILURE_WINDOW_SECONDS} s ago`);
  if (options.has?.(noticeKey(failure))) return refuse("duplicate", "already held");
  const signer = options.recoverer.recoverSigner("AttestationFailure", failure, notice.signature);
  if (!signer || signer.toLowerCase() !== failure.attestor.toLowerCase())
    return refuse("bad_signature", signer ? `signed by ${signer}, not ${failure.attestor}` : "the signature recovers to no key");
  try {
    if (!(await options.isAttestor(signer))) return refuse("not_attestor", `${signer} is not a staked attestor`);
  } catch (error) {
    return refuse("chain_unavailable", (error as Error)?.message ?? String(error));
  }
  return { ok: true, notice, raw };
}

/**
 * What a book holds about one machine's notices, by attestor (lowercase): how many within the
 * window, the latest `observedAt`, and every counted notice's `observedAt` (`times`).
 */
export type MachineNotices = ReadonlyMap<string, { count: number; latest: number; times: readonly number[] }>;

/** The notices a node holds, as the offer validator and matching read them. */
export interface FailureNoticeIndex {
  ofMachine(provider: Address, machineId: number, now: number): MachineNotices;
}

/** Whether `attestor`'s attestation issued at `issuedAt` is revoked by one of its own later failure notices. */
export function isRevoked(notices: MachineNotices | undefined, attestor: Address, issuedAt: number): boolean {
  const held = notices?.get(attestor.toLowerCase());
  return held !== undefined && issuedAt < held.latest;
}

/**
 * The most failures machineFailures lists (the latest to age out): one more than the largest
 * `maxAttestFailures` a request may set, so the limit judges exactly while an attestor that signs
 * absurd `failures` counts cannot blow up what books, views and engines hold.
 */
export const MAX_COUNTED_FAILURES = 65_536;

/** What an attestor's newest counted attestation says of the machine's failures (its `failures` and `lastFailureAt`). */
export type SignedFailures = ReadonlyMap<string, { failures: number; lastFailureAt: number }>;

/**
 * The machine's signed failures as a function of time (issue 35 item 9): one entry per counted
 * failure, the time (unix s) until which it counts, ascending; the count at time t is the number
 * of entries after t (failuresAt), so a machine drops back under `maxAttestFailures` as its
 * failures age out, without a new offer. Per attestor the count is the larger of the `failures`
 * its newest counted attestation carries (counted until its `lastFailureAt` leaves the window; the
 * attestation's count covers the attestor's own history, which holds every failure it announced)
 * and the notices it signed (each counted until its `observedAt` leaves the window); summed over
 * attestors (each attestor's challenges are separate tries). `lastAt`: the latest of those
 * failures, null with none.
 */
export function machineFailures(notices: MachineNotices | undefined, signed: SignedFailures, now: number): { until: number[]; lastAt: number | null } {
  const since = now - FAILURE_WINDOW_SECONDS;
  const attestors = new Set<string>([...signed.keys()].map((a) => a.toLowerCase()));
  for (const attestor of notices?.keys() ?? []) attestors.add(attestor);
  const bySigner = new Map([...signed].map(([attestor, held]) => [attestor.toLowerCase(), held]));
  const until: number[] = [];
  let lastAt: number | null = null;
  for (const attestor of attestors) {
    const held = bySigner.get(attestor);
    const fromAttestation = held && held.failures > 0 && held.lastFailureAt > since ? held : undefined;
    // Notices' aging-out times, latest first: the k-th failure counts while the k-th latest notice does.
    const noticed = (notices?.get(attestor)?.times ?? []).filter((t) => t > since).map((t) => t + FAILURE_WINDOW_SECONDS);
    noticed.sort((a, b) => b - a);
    const levels = Math.min(MAX_COUNTED_FAILURES, Math.max(fromAttestation?.failures ?? 0, noticed.length));
    for (let k = 0; k < levels; k++) {
      const byAttestation = fromAttestation && k < fromAttestation.failures ? fromAttestation.lastFailureAt + FAILURE_WINDOW_SECONDS : 0;
      until.push(Math.max(byAttestation, noticed[k] ?? 0));
    }
    const latest = Math.max(fromAttestation?.lastFailureAt ?? 0, noticed.length ? noticed[0]! - FAILURE_WINDOW_SECONDS : 0);
    if (latest > 0) lastAt = Math.max(lastAt ?? 0, latest);
  }
  until.sort((a, b) => a - b);
  return { until: until.length > MAX_COUNTED_FAILURES ? until.slice(until.length - MAX_COUNTED_FAILURES) : until, lastAt };
}

/** How many of the failures (machineFailures' `until`) still count at `now`. */
export function failuresAt(until: readonly number[], now: number): number {
  let count = 0;
  for (const t of until) if (t > now) count++;
  return count;
}

/** The machine's signed failure count within FAILURE_WINDOW_SECONDS at `now` (machineFailures). */
export function machineFailureCount(notices: MachineNotices | undefined, signed: SignedFailures, now: number): number {
  return failuresAt(machineFailures(notices, signed, now).until, now);
}

/** The fields of a notice the book keeps in memory. */
export type HeldNotice = { key: string; attestor: Address; provider: Address; machineId: number; observedAt: number; reason: string; challengeId: Hex };

/**
 * A capacity fault's transcript (docs/attestation.md, "In-lease checks"): the provider's signed
 * commit of a challenge started during the lease, and opened rows that are wrong under it. It
 * proves the fault to anyone (verifyCommitFraud), so a co-signer that verifies it signs without a
 * failed challenge of its own, at once, instead of waiting for its own in-lease check (which the
 * lease's check budget may not allow for a long time).
 *
 * - The proposer attaches only the wrong rows, of whichever units they are in (protocol v2: a
 *   row is named by its unit and its index in that unit's tree), at most FAULT_EVIDENCE_MAX_ROWS
 *   and within FAULT_PROPOSAL_MAX_BYTES (`transcriptOf`).
 * - The co-signer (`TranscriptVerifier`) checks the cheap things first (the lease's provider and
 *   machine, the challenge's start inside the lease and not after now, observedAt no earlier than
 *   that start), then the signatures and Merkle proofs, and recomputes rows last: at most
 *   FAULT_EVIDENCE_MAX_ROWS per proposal (so at most that many units' matrices B generated),
 *   `perPeerRows` rows per peer a minute, one verification at a time; a transcript already judged is answered from a cache. A hostile
 *   proposer therefore costs a co-signer a bounded amount of CPU.
 */
import { keccak256, stringToBytes, type Address, type TypedDataDomain } from "viem";
import { verifyCommitFraud, type CommitFraudProof, type CommitFraudVerdict } from "../../../common/attest/commit.js";
import { recomputeRowsInline, type RowRecomputer } from "../../../common/attest/verify.js";
import { FAULT_EVIDENCE_MAX_ROWS, FAULT_PROPOSAL_MAX_BYTES, faultTranscriptSchema, type FaultTranscript } from "../../../common/attest/wire.js";
import { FaultKind, type Fault } from "../../../common/eip712.js";
import type { EvidenceVerdict, FaultLease } from "./fault-evidence.js";

/** Rows a peer's transcripts may have recomputed per minute, by default (4 proposals' worth at the cap). */
export const TRANSCRIPT_ROWS_PER_PEER_MINUTE = 4 * FAULT_EVIDENCE_MAX_ROWS;
/** Verifications waiting for the one running before new ones are answered `rate_limited`. */
const MAX_QUEUED = 4;
/** Transcripts whose verdict is remembered (by content hash). */
const CACHE_SIZE = 256;
/**
 * Room left in a proposal for everything but the transcript (the fault, up to 32 signatures of
 * about 200 bytes each, the envelope). The transcript's challenge and commit are counted with its
 * rows: a v2 commit of MAX_UNITS units with 128-character device names is up to ~55 KiB.
 */
const PROPOSAL_OVERHEAD_BYTES = 16 * 1024;

/**
 * The transcript a proposer attaches to a capacity fault: the challenge and the signed commit of
 * `proof` with only its wrong rows, as many as fit (FAULT_EVIDENCE_MAX_ROWS, FAULT_PROPOSAL_MAX_BYTES).
 * Undefined when the proof proves nothing or not even one row fits.
 */
export async function transcriptOf(domain: TypedDataDomain, proof: CommitFraudProof, recompute?: RowRecomputer): Promise<FaultTranscript | undefined> {
  const verdict = await verifyCommitFraud(domain, proof, { recompute });
  if (!verdict.proven) return undefined;
  // A row is named by its unit and its index in that unit's tree (protocol v2): a wrong row of any unit proves the fraud.
  const wrong = new Set(verdict.wrongRows.map(rowKey));
  const rows: FaultTranscript["rows"] = [];
  // UTF-8 bytes, as the fault exchange counts them (a commit's device names may be non-ASCII).
  let bytes = jsonBytes({ challenge: proof.challenge, commit: proof.commit });
  for (const row of proof.rows) {
    if (!wrong.has(rowKey(row)) || rows.length >= FAULT_EVIDENCE_MAX_ROWS) continue;
    const size = jsonBytes(row) + 1;
    if (bytes + size > FAULT_PROPOSAL_MAX_BYTES - PROPOSAL_OVERHEAD_BYTES) break;
    rows.push(row);
    bytes += size;
  }
  if (!rows.length) return undefined;
  return faultTranscriptSchema.parse({ challenge: proof.challenge, commit: proof.commit, rows });
}

const rowKey = (row: { unit: number; index: number }): string => `${row.unit}:${row.index}`;
const jsonBytes = (value: unknown): number => Buffer.byteLength(JSON.stringify(value), "utf8");

class RateLimited extends Error {}

export type TranscriptVerifierOptions = {
  domain: TypedDataDomain;
  /** Whether an address holds ATTESTOR_ROLE (the challenge's signer must). */
  isAttestor: (address: Address) => Promise<boolean>;
  /** The node's row recomputer (worker threads); the pure inline one without. */
  recompute?: RowRecomputer;
  now: () => number;
  /** Rows one peer's transcripts may have recomputed per minute (default TRANSCRIPT_ROWS_PER_PEER_MINUTE). */
  perPeerRows?: number;
};

export class TranscriptVerifier {
  /** Peer → when (unix ms) each row recomputed for it in the last minute was recomputed. */
  private readonly spent = new Map<string, number[]>();
  private readonly cache = new Map<string, CommitFraudVerdict>();
  /** Settles when the verification admitted last has finished (it never rejects). */
  private queue: Promise<void> = Promise.resolve();
  private queued = 0;

  constructor(private readonly o: TranscriptVerifierOptions) {}

  /** Whether `transcript` proves `fault` against the lease's provider; `peer` pays for the recompute. */
  async check(lease: FaultLease, fault: Fault, transcript: FaultTranscript, peer: string): Promise<EvidenceVerdict> {
    if (fault.kind !== FaultKind.capacity)
      return { ok: false, reason: "bad_evidence", detail: `a transcript is evidence of a capacity fault (kind ${FaultKind.capacity}) only, not kind ${fault.kind}` };
    const { challenge } = transcript;
    if (challenge.provider.toLowerCase() !== lease.provider.toLowerCase() || challenge.machineId !== lease.machineId) {
      return {
        ok: false,
        reason: "evidence_mismatch",
        detail: `the transcript's challenge is of machine ${challenge.machineId} of ${challenge.provider}; lease ${lease.leaseId} is of machine ${lease.machineId} of ${lease.provider}`,
      };
    }
    const startedAt = Math.floor(challenge.issuedAtMs / 1000);
    const nowMs = this.o.now();
    if (challenge.issuedAtMs < lease.activatedAt * 1000 || challenge.issuedAtMs >= lease.end * 1000 || challenge.issuedAtMs > nowMs) {
      return {
        ok: false,
        reason: "evidence_mismatch",
        detail: `the transcript's challenge started at ${startedAt}, outside lease ${lease.leaseId} [${lease.activatedAt}, ${Math.min(lease.end, Math.floor(nowMs / 1000))}]: it is no evidence of this lease`,
      };
    }
    if (fault.observedAt < startedAt) {
      return {
        ok: false,
        reason: "evidence_mismatch",
        detail: `observedAt ${fault.observedAt} is before the transcript's challenge started at ${startedAt}`,
        earliestObservedAt: startedAt,
      };
    }
    let verdict: CommitFraudVerdict;
    try {
      verdict = await this.verify(transcript, peer);
    } catch (error) {
      if (!(error instanceof RateLimited)) throw error;
      return { ok: false, reason: "rate_limited", detail: error.message };
    }
    if (!verdict.proven) return { ok: false, reason: "bad_evidence", detail: `${verdict.reason}: ${verdict.detail}` };
    if (!(await this.o.isAttestor(verdict.attestor))) {
      return { ok: false, reason: "bad_evidence", detail: `the transcript's challenge is signed by ${verdict.attestor}, which does not hold ATTESTOR_ROLE` };
    }
    return { ok: true };
  }

  /**
   * verifyCommitFraud, from the cache or with rows recomputed at `peer`'s expense, one verification
   * at a time. The rows are charged all at once, when the first unit's are about to be recomputed
   * (verifyCommitFraud recomputes unit by unit, after every signature and proof checked): a
   * refused transcript costs no recompute, and one admitted is recomputed to its end.
   */
  private async verify(transcript: FaultTranscript, peer: string): Promise<CommitFraudVerdict> {
    const key = keccak256(stringToBytes(JSON.stringify(transcript)));
    const cached = this.cache.get(key);
    if (cached) return cached;
    let release: (() => void) | undefined;
    const recompute: RowRecomputer = async (request) => {
      release ??= await this.admit(peer, transcript.rows.length);
      return (this.o.recompute ?? recomputeRowsInline)(request);
    };
    let verdict: CommitFraudVerdict;
    try {
      verdict = await verifyCommitFraud(this.o.domain, transcript, { recompute });
    } finally {
      release?.();
    }
    this.cache.set(key, verdict);
    if (this.cache.size > CACHE_SIZE) this.cache.delete(this.cache.keys().next().value!);
    return verdict;
  }

  /**
   * Admits a verification that recomputes `rows` rows for `peer`: refused (RateLimited, nothing
   * charged) when MAX_QUEUED wait already or the peer's allowance is spent; else charged, and
   * resolved with the release once the verifications before it have finished.
   */
  private async admit(peer: string, rows: number): Promise<() => void> {
    if (this.queued >= MAX_QUEUED) throw new RateLimited(`${this.queued} transcripts are waiting to be verified; ask again later`);
    this.charge(peer, rows);
    this.queued++;
    const before = this.queue;
    let release!: () => void;
    this.queue = new Promise<void>((resolve) => {
      release = () => {
        this.queued--;
        resolve();
      };
    });
    await before;
    return release;
  }

  /** Counts `rows` against the peer's allowance, or throws RateLimited. */
  private charge(peer: string, rows: number): void {
    const nowMs = this.o.now();
    const limit = this.o.perPeerRows ?? TRANSCRIPT_ROWS_PER_PEER_MINUTE;
    const recent = (this.spent.get(peer) ?? []).filter((at) => nowMs - at < 60_000);
    if (recent.length + rows > limit) {
      this.spent.set(peer, recent);
      const retryAt = Math.ceil(((recent[0] ?? nowMs) + 60_000) / 1000);
      throw new RateLimited(`this peer's transcripts had ${recent.length} rows recomputed in the last minute, ${limit} allowed; ask again after ${retryAt}`);
    }
    for (let i = 0; i < rows; i++) recent.push(nowMs);
    this.spent.set(peer, recent);
    if (this.spent.size > 1_000) this.spent.delete(this.spent.keys().next().value!);
  }
}

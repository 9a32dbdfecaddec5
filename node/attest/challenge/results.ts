/**
 * The attestor's record of challenges, in level: one entry per challenge, keyed by machine and
 * start time so the latest result of a machine is one reverse seek. Older entries beyond
 * `keepPerMachine` are pruned as new ones arrive, except passes whose attestation has not expired
 * (the attestor must be able to answer a dispute of them).
 */
import type { CcVerifiedUnit } from "../cc/index.js";
import type { Address, Hex } from "viem";
import type { SignedAttestation } from "../../../common/attest/attestation.js";
import type { CommitFraudProof } from "../../../common/attest/commit.js";
import type { FailureReason } from "../../../common/attest/messages.js";
import type { ChallengeErrorReason } from "../../../common/attest/wire.js";
import type { PassCommit } from "./attestor.js";
import { Bucket } from "../../store/buckets.js";
import type { Repository, Store } from "../../store/store.js";

/** Why a challenge was run: on schedule, on request, or as an in-lease check of a leased machine (lease-checks/in-lease.ts). */
export type ChallengeTrigger = "schedule" | "request" | "lease";

/** A challenge round as its records name it: its id and the machine ids challenged together. */
export type ChallengeRoundRef = { id: string; machines: number[] };

/** One challenge as the attestor saw it end. */
export type ChallengeRecord = {
  machineId: number;
  provider: Address;
  /** Canonical model name and units claimed (the on-chain declaration). */
  model: string;
  units: number;
  /** Null when no challenge could be issued (outcome `error` before the exchange). */
  challengeId: Hex | null;
  trigger: ChallengeTrigger;
  startedAtMs: number;
  finishedAtMs: number;
  /** pass: signed attestation; fail: the machine's verdict; error: the attestor could not run it. */
  outcome: "pass" | "fail" | "error";
  reason: FailureReason | ChallengeErrorReason | null;
  detail: string | null;
  /** Measured int8 ops per second over the machine, when it committed. */
  measuredThroughput: bigint | null;
  attestation: SignedAttestation | null;
  /** A light check (an in-lease check sized to `attest.leaseChecks.rateShare`): a pass of it carries no attestation. */
  light?: boolean;
  /**
   * The round the challenge was part of (rounds.ts): the provider's machines challenged together,
   * issued at the same instant; every record of the round carries the same id and machine list.
   */
  round?: ChallengeRoundRef;
  /** For a wrong_rows failure: the signed transcript proving it (verifyCommitFraud), kept for slashing. */
  evidence?: CommitFraudProof;
  /** For a pass: the provider's signed commit, which answers a dispute of the attestation (node/attest/disputes/disputes.ts). */
  commit?: PassCommit;
  /** For a pass with confidential-computing evidence: the GPUs it established, per unit (cc/cc-policy.ts). */
  cc?: CcVerifiedUnit[];
};

const pad = (value: number, width: number) => value.toString().padStart(width, "0");
const machinePrefix = (machineId: number) => `${pad(machineId, 10)}/`;

export class ChallengeResults {
  private readonly repo: Repository<ChallengeRecord>;

  constructor(
    store: Store,
    private readonly keepPerMachine: number,
    private readonly now: () => number = Date.now,
  ) {
    this.repo = store.repository<ChallengeRecord>(Bucket.attestResults);
  }

  /**
   * Stores a result and prunes the machine's oldest beyond the limit. Failures are also kept, for
   * longer and per provider too, in the failure history (failure-history.ts), which sets the backoff.
   */
  async add(record: ChallengeRecord): Promise<void> {
    const prefix = machinePrefix(record.machineId);
    await this.repo.put(`${prefix}${pad(record.startedAtMs, 15)}`, record);
    const entries: [string, ChallengeRecord][] = [];
    for await (const entry of this.repo.entries({ gte: prefix, lt: `${prefix.slice(0, -1)}0`, reverse: true })) entries.push(entry);
    // A pass whose attestation has not expired is kept beyond the limit: it may still be disputed
    // (AttestorStaking), and its provider-signed commit is the only answer (disputes/disputes.ts).
    const nowSeconds = Math.floor(this.now() / 1000);
    for (const [key, old] of entries.slice(this.keepPerMachine)) {
      if (old.outcome === "pass" && old.commit && old.attestation && old.attestation.attestation.expiry > nowSeconds) continue;
      await this.repo.del(key);
    }
  }

  /** The machine's results, newest first. */
  async history(machineId: number, limit = 100): Promise<ChallengeRecord[]> {
    const prefix = machinePrefix(machineId);
    return this.repo.values({ gte: prefix, lt: `${prefix.slice(0, -1)}0`, reverse: true, limit });
  }

  /** The machine's latest result. */
  async latest(machineId: number): Promise<ChallengeRecord | undefined> {
    return (await this.history(machineId, 1))[0];
  }
}

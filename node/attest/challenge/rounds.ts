/**
 * Challenge rounds (docs/attestation.md, "Challenge rounds"; issue 35 item 7). A card that paces
 * itself as a slower class and invents a UUID per machine could back several machine ids
 * challenged one after another. So a scheduled or requested full challenge of a machine challenges
 * every unleased machine its provider offers, together: the challenges are issued at the same
 * instant with the same deadline, each the machine's own signed challenge, and n machines of class
 * C need n times C's rate at once. The provider's node computes a round's machines concurrently
 * (provider.ts); it cannot answer one of them `busy` while computing another: in a round where
 * another machine committed, a machine that did not answer (`busy`, a dropped stream, a share
 * refusal) fails `refused` instead of being tried again alone, which would let one card take the
 * round's machines one at a time.
 */
import { randomUUID } from "node:crypto";
import type { Address } from "viem";
import { MAX_ROUND_MACHINES } from "../../../common/attest/bounds.js";
import type { OfferBook } from "../../offers/book.js";
import type { ChallengeRecord, ChallengeRoundRef, ChallengeTrigger } from "./results.js";

/**
 * The machines to challenge with `machineId` in one round: `machineId` first, then the other
 * machine ids its provider (every offer of the provider's address, whichever node published it)
 * offers in the book, unless leased or `skip`ped (a challenge of it is running), at most
 * MAX_ROUND_MACHINES in all.
 */
export function roundMachines(book: OfferBook, machineId: number, skip: (machineId: number) => boolean): number[] {
  const providers = new Set<Address>(book.byMachine(machineId).map((entry) => entry.provider));
  const others = new Set<number>();
  for (const entry of book.all()) {
    if (entry.machineId !== machineId && providers.has(entry.provider) && !skip(entry.machineId)) others.add(entry.machineId);
  }
  return [machineId, ...[...others].sort((a, b) => a - b)].slice(0, MAX_ROUND_MACHINES);
}

/**
 * The work of a running full challenge (a round) of one of `machineId`'s provider's other machines,
 * settled or not; undefined when none. Entries waiting for a round (`waiting`) are not waited on.
 */
export function roundSiblingWork(
  book: OfferBook,
  machineId: number,
  inflight: ReadonlyMap<number, { trigger: ChallengeTrigger; work: Promise<unknown>; waiting?: true }>,
): Promise<unknown> | undefined {
  const running = roundMachines(book, machineId, () => false)
    .slice(1)
    .map((id) => inflight.get(id))
    .find((entry) => entry && !entry.waiting && entry.trigger !== "lease");
  return running?.work.catch(() => undefined);
}

/** One round: a barrier at which its machines' challenges are issued together, and what each answered first. */
export class ChallengeRound {
  readonly ref: ChallengeRoundRef;
  /** Machines that have neither reached the barrier nor left the round. */
  private readonly arriving: Set<number>;
  /** Machines whose first answer (a commit or not) has not come yet. */
  private readonly unanswered: Set<number>;
  private readonly committed = new Set<number>();
  private resolveIssued!: (issuedAtMs: number) => void;
  private readonly issued = new Promise<number>((resolve) => (this.resolveIssued = resolve));
  private resolveAnswered!: () => void;
  private readonly answered = new Promise<void>((resolve) => (this.resolveAnswered = resolve));

  constructor(
    machines: readonly number[],
    private readonly now: () => number,
  ) {
    this.ref = { id: randomUUID(), machines: [...machines] };
    this.arriving = new Set(machines);
    this.unanswered = new Set(machines);
  }

  /** The machine is connected and ready: resolves with the round's issue time once every machine is ready or out. */
  ready(machineId: number): Promise<number> {
    this.arriving.delete(machineId);
    this.settle();
    return this.issued;
  }

  /** The machine's first answer came: a commit (`committed`), or a refusal, an error, nothing by the cutoff. */
  answer(machineId: number, committed: boolean): void {
    if (committed && this.unanswered.has(machineId)) this.committed.add(machineId);
    this.unanswered.delete(machineId);
    this.settle();
  }

  /** The machine is done with the round (also when it was never challenged: unreachable, in its backoff). Idempotent. */
  leave(machineId: number): void {
    this.arriving.delete(machineId);
    this.unanswered.delete(machineId);
    this.settle();
  }

  /**
   * A record that says nothing of the machine because the provider did not answer its challenge
   * (`busy`, unreachable, a share refusal) becomes the failure `refused` when another machine of
   * the round committed: its node was computing the round, and one machine left out would be
   * challenged again alone. A refusal the attestor caused (`out_of_bounds`) stays an error.
   */
  async judge(record: ChallengeRecord): Promise<ChallengeRecord> {
    if (record.outcome !== "error" || record.challengeId === null || record.reason === "out_of_bounds") return record;
    this.answer(record.machineId, false);
    await this.answered;
    const others = [...this.committed].filter((id) => id !== record.machineId);
    if (!others.length) return record;
    const detail = `answered ${record.reason} (${record.detail ?? ""}) while its node committed machine${others.length > 1 ? "s" : ""} ${others.join(", ")} of the same round ${this.ref.id}: a node computes all its machines' challenges of a round at once; one left out is time-shared`;
    return { ...record, outcome: "fail", reason: "refused", detail: detail.slice(0, 1_000) };
  }

  private settle(): void {
    if (this.arriving.size === 0) this.resolveIssued(Math.floor(this.now()));
    if (this.unanswered.size === 0) this.resolveAnswered();
  }
}

/**
 * The provider's side of a proof-of-capacity challenge, transport-agnostic:
 *
 *   const commit = await responder.respond(challengeJson);   // or throws ChallengeRefusedError
 *   const rows = await responder.open(openRequestJson);      // rows + Merkle proofs
 *
 * Before spending GPU time it checks that the challenge is signed by an address in the attestor
 * set, addressed to this provider and one of its machines as declared, not expired, and within
 * the size this node accepts. One attestor holds the slot at a time (the GPUs are the resource
 * being measured): one challenge, or one round, the challenges of one attestor's round (one issue
 * time, different machines: challenger.ts rounds) computed at once; anything else meanwhile is
 * answered `busy`, and so is the rest of a round one of whose challenges was (a round is computed
 * whole or not at all). Answers are kept until opened or until `retainMs` after the commit.
 */
import { getAddress, type Address, type LocalAccount, type TypedDataDomain } from "viem";
import { signCommit } from "../../../common/attest/commit.js";
import { unitSubChallenges } from "../../../common/attest/units.js";
import { verifyChallengeSignature } from "../../../common/attest/challenge.js";
import { challengeOps } from "../../../common/attest/arithmetic.js";
import { ATTESTOR_SLOT_PERIOD_MS, MAX_ATTESTOR_SLOT_MS, challengeBoundsViolation, leaseCheckLimitMs } from "../../../common/attest/bounds.js";
import { isSignedRefusalReason, signRefusal } from "../../../common/attest/refusal.js";
import {
  challengeMessageSchema,
  openRequestMessageSchema,
  ATTEST_PROTOCOL_VERSION,
  type ChallengeMessage,
  type CommitMessage,
  type OpenResponseMessage,
  type RefusalMessage,
} from "../../../common/attest/messages.js";
import { parseInput } from "../../../common/validation.js";
import type { Logger } from "../../log/logger.js";
import { ChallengeRefusedError } from "../errors.js";
import type { Runner, RunnerCommitment } from "../runner/index.js";
import { runDetached } from "../../../common/detached.js";

/** A machine as this provider declared it on-chain. */
export type ProviderMachine = { machineId: number; model: string; units: number; vramMiB: number };

/** A machine's active lease as the provider's node knows it: the in-lease check budget is counted from `activatedAtMs` at `shareBps`. */
export type ProviderLease = { leaseId: bigint; activatedAtMs: number; shareBps: number };

export type ChallengeResponderOptions = {
  /** The provider's address (its registered wallet). */
  provider: Address;
  /** The provider's wallet: signs every commit (a wrong row under a signed root is evidence against it). */
  signer: Pick<LocalAccount, "address" | "signTypedData">;
  /** Looks up one of this provider's machines. */
  machine: (machineId: number) => ProviderMachine | undefined;
  runner: Runner;
  domain: TypedDataDomain;
  /** The on-chain attestor set. */
  isAttestor: (address: Address) => boolean | Promise<boolean>;
  /** Largest challenge accepted, in int8 ops. Default 10¹⁸ (eight H100s at the gpu preset need about 5.6·10¹⁶). */
  maxOps?: bigint;
  /** Tolerated difference between the attestor's clock and ours. Default 30 s. */
  clockSkewMs?: number;
  /** How long an answer is kept for its open request after the commit. Default 120 s. */
  retainMs?: number;
  /**
   * The machine's active leases, if any (a machine's units may be leased to several renters, and a
   * challenge measures all its units): all challenges of a leased machine share each lease's one
   * budget (common/attest/bounds.ts leaseCheckLimitMs). Absent: no machine is leased.
   */
  leaseOf?: (machineId: number) => ProviderLease | readonly ProviderLease[] | undefined | Promise<ProviderLease | readonly ProviderLease[] | undefined>;
  /** The on-chain attestor set's size (ProviderRegistry.attestorCount): the lease budget is split over it. Default 1. */
  attestorCount?: () => number | Promise<number>;
  now?: () => number;
  logger?: Logger;
};

type Held = { commitment: RunnerCommitment; timer: NodeJS.Timeout };
/**
 * How long after its commit the answer of a runner that holds one answer at a time (the external
 * runner: "a new challenge replaces any answer the runner holds") keeps the slot for its open
 * request. The attestor asks for its rows as soon as the commit reaches it; a challenge taken in
 * between would replace the answer, and the first attestor's open would fail `runner_failed`: an
 * honest provider's failure. Past this the attestor is taken to be gone and the slot is free.
 */
export const OPEN_WAIT_MS = 15_000;
/** One challenge's hold of the slot: who, which machine (and lease), from when to when (ms). */
type SlotUse = { attestor: string; leases: string[]; startMs: number; endMs: number };
/** Slot uses kept (bounded: at 2 min a challenge, an hour holds at most a few hundred). */
const MAX_SLOT_USES = 10_000;

export class ChallengeResponder {
  private readonly options: ChallengeResponderOptions;
  private readonly held = new Map<string, Held>();
  private readonly seen = new Set<string>();
  /** The challenges being computed, by id: one attestor's round (its issue time) at most. */
  private readonly computing = new Map<string, { round: string; machineId: number }>();
  /** Rounds one of whose challenges was answered `busy`: the rest are too. */
  private readonly refusedRounds = new Set<string>();
  /** The answer that keeps the slot until its open request (a runner that holds one answer at a time), and until when (ms). */
  private awaitingOpen: { id: string; untilMs: number } | undefined;
  /** Finished holds of the slot, oldest first: per-attestor shares and lease budgets are counted from them. */
  private readonly uses: SlotUse[] = [];

  constructor(options: ChallengeResponderOptions) {
    if (getAddress(options.signer.address) !== getAddress(options.provider)) throw new RangeError("the commit signer must be the provider's wallet");
    this.options = options;
  }

  private get now(): number {
    return this.options.now ? this.options.now() : Date.now();
  }

  /** Checks a challenge without computing it. Throws ChallengeRefusedError with the reason. */
  async accept(input: unknown): Promise<ChallengeMessage> {
    const message = parseInput(challengeMessageSchema, input, "attest challenge");
    const check = await verifyChallengeSignature(this.options.domain, message);
    if (!check.ok) throw new ChallengeRefusedError("bad_signature", "The challenge's id or signature does not match its fields.");
    if (!(await this.options.isAttestor(check.attestor))) throw new ChallengeRefusedError("not_attestor", `${check.attestor} is not in the attestor set.`);
    if (getAddress(message.provider) !== getAddress(this.options.provider)) throw new ChallengeRefusedError("wrong_provider", `The challenge is for ${message.provider}.`);
    const machine = this.options.machine(message.machineId);
    if (!machine) throw new ChallengeRefusedError("unknown_machine", `No machine ${message.machineId} here.`);
    if (machine.model !== message.model || machine.units !== message.units || machine.vramMiB !== message.vramMiB) {
      throw new ChallengeRefusedError(
        "claim_mismatch",
        `Machine ${message.machineId} is ${machine.units} × ${machine.model} (${machine.vramMiB} MiB), not what the challenge names.`,
      );
    }
    const skew = this.options.clockSkewMs ?? 30_000;
    if (this.now > message.cutoffAtMs + skew) throw new ChallengeRefusedError("expired", "The challenge's cutoff has passed.");
    if (message.issuedAtMs > this.now + skew) throw new ChallengeRefusedError("expired", "The challenge is issued in the future of this node's clock.");
    const violation = challengeBoundsViolation(message);
    if (violation) throw new ChallengeRefusedError("out_of_bounds", `The challenge is out of the protocol's bounds: ${violation}.`, { usage: { attestorMs: 0, limitMs: 0 } });
    const ops = challengeOps(message.rowsPerUnit * message.units, message.cols, message.rounds);
    if (ops > (this.options.maxOps ?? 10n ** 18n)) throw new ChallengeRefusedError("too_large", `The challenge needs ${ops} ops, more than this node accepts.`);
    if (this.seen.has(message.id)) throw new ChallengeRefusedError("duplicate", "This challenge was already answered.");
    return message;
  }

  /**
   * Computes the answer and returns the commit to send. Throws ChallengeRefusedError. `signal`
   * aborts when the attestor that sent the challenge is gone (its stream closed): the compute stops
   * at once, so the GPUs are free for the next attestor instead of busy until the cutoff.
   */
  async respond(input: unknown, options: { signal?: AbortSignal } = {}): Promise<CommitMessage> {
    const message = await this.accept(input);
    this.admit(message);
    const attestor = getAddress(message.attestor);
    const found = await this.options.leaseOf?.(message.machineId);
    const leases: readonly ProviderLease[] = found === undefined ? [] : "leaseId" in found ? [found] : found;
    this.admit(message);
    await this.checkShares(attestor, message.machineId, leases);
    this.admit(message);
    this.computing.set(message.id, { round: roundKey(message), machineId: message.machineId });
    const startMs = this.now;
    this.options.logger?.info("Challenge computing", { challengeId: message.id, machineId: message.machineId, attestor: message.attestor });
    this.seen.add(message.id);
    if (this.seen.size > 10_000) this.seen.delete(this.seen.values().next().value!);
    // Past the cutoff the attestor no longer listens: stop the compute and free the GPUs.
    const skew = this.options.clockSkewMs ?? 30_000;
    const abort = new AbortController();
    const timer = setTimeout(
      () => abort.abort(new ChallengeRefusedError("expired", "The challenge's cutoff passed during the compute.")),
      Math.max(0, message.cutoffAtMs + skew - this.now),
    );
    const onGone = () => {
      this.options.logger?.info("Challenge compute stopped: the attestor went away", { challengeId: message.id, machineId: message.machineId, attestor: message.attestor });
      abort.abort(new ChallengeRefusedError("expired", "The attestor that sent the challenge went away during the compute."));
    };
    if (options.signal?.aborted) onGone();
    else options.signal?.addEventListener("abort", onGone, { once: true });
    let commitment: RunnerCommitment;
    try {
      commitment = await this.options.runner.computeCommit(
        {
          id: message.id,
          machineId: message.machineId,
          rowsPerUnit: message.rowsPerUnit,
          cols: message.cols,
          rounds: message.rounds,
          units: unitSubChallenges(message.id, message.seed, message.units),
        },
        { signal: abort.signal },
      );
    } catch (error) {
      if (error instanceof ChallengeRefusedError) throw error;
      this.options.logger?.error("Challenge compute failed", { challengeId: message.id, runner: this.options.runner.name }, error);
      throw new ChallengeRefusedError("runner_failed", "The runner failed to compute the challenge.", { cause: error });
    } finally {
      clearTimeout(timer);
      options.signal?.removeEventListener("abort", onGone);
      this.computing.delete(message.id);
      this.uses.push({ attestor, leases: leases.map((lease) => leaseKey(message.machineId, lease)), startMs, endMs: this.now });
      if (this.uses.length > MAX_SLOT_USES) this.uses.shift();
    }
    const retain = setTimeout(() => runDetached(this.release(message.id), this.options.logger, "Releasing a computed answer"), this.options.retainMs ?? 120_000);
    retain.unref();
    this.held.set(message.id, { commitment, timer: retain });
    if (this.options.runner.holdsOneAnswer) this.awaitingOpen = { id: message.id, untilMs: this.now + OPEN_WAIT_MS };
    this.options.logger?.info("Challenge committed", {
      challengeId: message.id,
      machineId: message.machineId,
      units: message.units,
      rowsPerUnit: message.rowsPerUnit,
      computeMs: Math.round(commitment.computeMs),
    });
    const devices = commitment.devices ?? [];
    if (commitment.roots.length !== message.units || commitment.rowsPerUnit !== message.rowsPerUnit || (devices.length !== 0 && devices.length !== message.units)) {
      await this.release(message.id);
      throw new ChallengeRefusedError(
        "runner_failed",
        `The runner answered ${commitment.roots.length} units of ${commitment.rowsPerUnit} rows with ${devices.length} devices; the challenge has ${message.units} units of ${message.rowsPerUnit}.`,
      );
    }
    if (commitment.cc !== undefined && commitment.cc.length !== message.units) {
      await this.release(message.id);
      throw new ChallengeRefusedError("runner_failed", `The runner gave confidential-computing evidence for ${commitment.cc.length} units; the challenge has ${message.units}.`);
    }
    const fields = { challengeId: message.id, rowsPerUnit: commitment.rowsPerUnit, roots: [...commitment.roots], devices: [...devices] };
    const signature = await signCommit(this.options.signer, this.options.domain, fields);
    return { v: ATTEST_PROTOCOL_VERSION, type: "commit", ...fields, signature, ...(commitment.cc ? { cc: [...commitment.cc] } : {}) };
  }

  /** Throws `busy` unless the slot is free or held by this challenge's round (another machine of it), and the runner is ready. */
  private admit(message: ChallengeMessage): void {
    const round = roundKey(message);
    const busy = (why: string) => {
      this.refusedRounds.add(round);
      if (this.refusedRounds.size > 1_000) this.refusedRounds.delete(this.refusedRounds.values().next().value!);
      return new ChallengeRefusedError("busy", why);
    };
    if (this.refusedRounds.has(round)) throw busy("Another challenge of this round was answered busy: a round is computed whole or not at all.");
    // A runner that holds one answer keeps it for its open: a new challenge would replace it (issue 35, chaos-attestors).
    if (this.awaitingOpen && this.now < this.awaitingOpen.untilMs) throw busy("Another challenge's answer waits for its open request.");
    // Its start-up would count inside this challenge's deadline: ask again once it runs.
    if (this.options.runner.starting) throw busy("The runner program is starting.");
    for (const running of this.computing.values()) {
      if (running.round !== round) throw busy("Another challenge is being computed.");
      // Not the round's refusal: its other machines are being computed.
      if (running.machineId === message.machineId) throw new ChallengeRefusedError("busy", `A challenge of machine ${message.machineId} is being computed.`);
      if (this.options.runner.concurrent === false) {
        throw busy(`This node's runner (${this.options.runner.name}) computes one challenge at a time: it cannot compute a round of several machines at once.`);
      }
    }
  }

  /**
   * Refuses (signed, refusal.ts) an attestor that has held the slot for its share of the last hour
   * (MAX_ATTESTOR_SLOT_MS), or that has used its part of a leased machine's check budget
   * (leaseCheckLimitMs): all challenges of a leased machine count, whatever made the attestor send
   * them (its own checks, a renewal, someone's request).
   */
  private async checkShares(attestor: Address, machineId: number, leases: readonly ProviderLease[]): Promise<void> {
    const nowMs = this.now;
    const since = nowMs - ATTESTOR_SLOT_PERIOD_MS;
    // The time the slot was held: a round's challenges, computed at once, hold it once.
    const held = unionMs(this.uses.filter((use) => use.attestor === attestor && use.endMs > since).map((use) => [Math.max(use.startMs, since), use.endMs] as const));
    if (held >= MAX_ATTESTOR_SLOT_MS) {
      throw new ChallengeRefusedError("attestor_share", `${attestor}'s challenges held this provider's slot ${held} ms of the last hour; at most ${MAX_ATTESTOR_SLOT_MS} ms.`, {
        usage: { attestorMs: Math.floor(held), limitMs: MAX_ATTESTOR_SLOT_MS },
      });
    }
    if (!leases.length) return;
    const count = Math.max(1, Math.floor(Number(await (this.options.attestorCount?.() ?? 1))));
    // Every lease on the machine has its own budget; the challenge is refused when any is spent.
    for (const lease of leases) {
      const key = leaseKey(machineId, lease);
      const spent = this.uses.filter((use) => use.attestor === attestor && use.leases.includes(key)).reduce((sum, use) => sum + (use.endMs - use.startMs), 0);
      const limit = leaseCheckLimitMs(lease.shareBps, nowMs - lease.activatedAtMs, count);
      if (spent === 0 || spent < limit) continue;
      throw new ChallengeRefusedError(
        "lease_budget",
        `${attestor}'s challenges of machine ${machineId} took ${spent} ms of lease ${lease.leaseId}; its part of the lease's check budget is ${limit} ms (${lease.shareBps} bps of ${nowMs - lease.activatedAtMs} ms over ${count} attestors).`,
        { usage: { attestorMs: Math.floor(spent), limitMs: limit } },
      );
    }
  }

  /**
   * The refusal message for an error thrown by respond/open, signed by the provider's wallet when
   * its reason is one the attestor checks (out of bounds, attestor share, lease budget).
   */
  async signedRefusal(challengeId: `0x${string}`, error: unknown): Promise<RefusalMessage> {
    const refusal = ChallengeResponder.refusal(challengeId, error);
    const usage = error instanceof ChallengeRefusedError ? error.usage : undefined;
    if (!isSignedRefusalReason(refusal.reason) || !usage) return refusal;
    const signature = await signRefusal(this.options.signer, this.options.domain, challengeId, refusal.reason, usage);
    return { ...refusal, usage, signature };
  }

  /** Opens the rows the attestor picked. The answer is released afterwards (one open per challenge). */
  async open(input: unknown): Promise<OpenResponseMessage> {
    const request = parseInput(openRequestMessageSchema, input, "attest open request");
    const held = this.held.get(request.challengeId);
    if (!held) throw new ChallengeRefusedError("expired", "No answer is held for this challenge (never computed, already opened, or expired).");
    try {
      const rows = await held.commitment.openRows(request.picks);
      return { v: ATTEST_PROTOCOL_VERSION, type: "rows", challengeId: request.challengeId, rows };
    } catch (error) {
      if (error instanceof ChallengeRefusedError) throw error;
      throw new ChallengeRefusedError("runner_failed", "The runner failed to open rows.", { cause: error });
    } finally {
      await this.release(request.challengeId);
    }
  }

  /** The refusal message to send for an error thrown by respond/open. */
  static refusal(challengeId: `0x${string}`, error: unknown): RefusalMessage {
    const refused = error instanceof ChallengeRefusedError ? error : undefined;
    return {
      v: ATTEST_PROTOCOL_VERSION,
      type: "refused",
      challengeId,
      reason: refused?.reason ?? "runner_failed",
      message: (refused?.shortMessage ?? (error instanceof Error ? error.message : String(error))).slice(0, 512),
    };
  }

  private async release(challengeId: string): Promise<void> {
    if (this.awaitingOpen?.id === challengeId) this.awaitingOpen = undefined;
    const held = this.held.get(challengeId);
    if (!held) return;
    this.held.delete(challengeId);
    clearTimeout(held.timer);
    await held.commitment.release();
  }

  /** Releases every held answer (the runner itself belongs to the caller). */
  async close(): Promise<void> {
    await Promise.all([...this.held.keys()].map((id) => this.release(id)));
  }
}

/** A lease's key in the slot uses: the machine and the lease id (a new lease starts a new budget). */
function leaseKey(machineId: number, lease: ProviderLease): string {
  return `${machineId}:${lease.leaseId}`;
}

/** A challenge's round: its attestor and issue time (an attestor issues a round's challenges at one instant). */
function roundKey(message: Pick<ChallengeMessage, "attestor" | "issuedAtMs">): string {
  return `${message.attestor.toLowerCase()}@${message.issuedAtMs}`;
}

/** The total length of the union of [start, end) intervals. */
function unionMs(intervals: readonly (readonly [number, number])[]): number {
  let total = 0;
  let reach = -Infinity;
  for (const [start, end] of [...intervals].sort((a, b) => a[0] - b[0])) {
    if (end <= reach) continue;
    total += end - Math.max(start, reach);
    reach = end;
  }
  return total;
}

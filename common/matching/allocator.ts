/**
 * Allocation: turn a request into open leases. Match, then for the best candidate ask the
 * provider to reserve (signed acceptance or refusal), then open the lease on-chain with the
 * acceptance; on a refusal, a timeout, a bad acceptance or a failed transaction fall back to the
 * next candidate. When a round's candidates are all lost (other renters took the units), match
 * again, skipping what was tried unless the provider has republished since. The network and the
 * chain are injected, so the same code runs in the SDK, in a node and in tests.
 *
 * Money: `open` must throw only when no lease was opened (a reverted or unsent transaction).
 * A group on several machines opens its leases one by one; when one fails, the ones already
 * opened are closed with `close` (an Open lease closes with a full refund) before moving on.
 */
import type { Address } from "viem";
import { z } from "zod";
import { SuanliError } from "../errors.js";
import { parseInput } from "../validation.js";
import type { Candidate, CandidatePart, MatchOptions, MatchResult } from "./engine.js";
import type { NoMatchExplanation } from "./explain.js";
import { type Acceptance, type ReserveReply, acceptanceMismatch } from "./handshake.js";
import { type MatchRequest, type MatchRequestInput, parseMatchRequest } from "./request.js";
import { runDetached } from "../detached.js";

export const allocatorOptionsSchema = z.strictObject({
  /** How long a provider has to answer a reserve request. */
  timeoutMs: z.number().int().min(1).max(120_000).default(3_000),
  /** Most machines asked to reserve, over all rounds (a group counts each machine). */
  maxAttempts: z.number().int().min(1).max(1_000).default(12),
  /** Most matches (the first one plus re-matches after every candidate of a round was lost). */
  maxRounds: z.number().int().min(1).max(100).default(4),
  /**
   * After losing a race (a try failed), a re-match that finds nothing waits this long and
   * matches again, until maxRounds: units held by other renters' reservations come back when
   * their transactions fail, and a machine that refused may have republished an offer that
   * has not reached this node yet. A lost race is re-matched, not failed.
   */
  rematchDelayMs: z.number().int().min(0).max(60_000).default(250),
});
export type AllocatorOptionsInput = z.input<typeof allocatorOptionsSchema>;

/** The slice of a logger the allocator writes to (node/log's Logger fits). */
export type AllocatorLogger = {
  debug(message: string, context?: Record<string, unknown>): void;
  warn(message: string, context?: Record<string, unknown>, error?: unknown): void;
};

export type AllocateDependencies<L> = AllocatorOptionsInput & {
  engine: { match(request: MatchRequest, options?: MatchOptions): MatchResult };
  /** The renter's address; when given, acceptances must be bound to it. */
  renter?: Address;
  /** Asks the part's provider to hold `part.units`; settle with its reply, reject on a transport error. Abort = give up. */
  reserve(part: CandidatePart, request: MatchRequest, signal: AbortSignal): Promise<ReserveReply>;
  /** Opens the lease on-chain with an acceptance; throws only if no lease was opened. */
  open(acceptance: Acceptance, part: CandidatePart, request: MatchRequest): Promise<L>;
  /** Tells a provider its hold is no longer needed (best effort; holds also expire). */
  release?(acceptance: Acceptance, part: CandidatePart): Promise<void>;
  /** Closes a just-opened lease (full refund); needed for groups spanning several machines. */
  close?(lease: L, part: CandidatePart): Promise<void>;
  /** Unix seconds by this host's wall clock: what gossiped offers' expiries are measured against. */
  now?: () => number;
  /**
   * The chain's time (unix seconds) as the renter estimates it: what an acceptance's offer expiry
   * and hold are measured against (the provider writes them in chain time; the contract checks
   * the expiry against block time). A chain's clock may run minutes off the wall clock, so pass it
   * whenever the caller can read the chain; defaults to `now`.
   */
  chainNow?: () => number;
  signal?: AbortSignal;
  logger?: AllocatorLogger;
};

export type AttemptOutcome = "leased" | "refused" | "timeout" | "reserve-error" | "acceptance-mismatch" | "open-failed" | "group-incomplete" | "close-failed";

export type Attempt = {
  readonly round: number;
  /** The machine (offer key) asked. */
  readonly key: string;
  readonly outcome: AttemptOutcome;
  /** Refusal reason or error message. */
  readonly detail?: string;
};

export type LeasedPart<L> = { readonly lease: L; readonly part: CandidatePart; readonly acceptance: Acceptance };

export type AllocationResult<L> =
  | {
      readonly ok: true;
      readonly request: MatchRequest;
      readonly candidate: Candidate;
      readonly leases: readonly LeasedPart<L>[];
      readonly attempts: readonly Attempt[];
      readonly rounds: number;
    }
  | {
      readonly ok: false;
      readonly request: MatchRequest;
      /** no-match: nothing fits (explanation says why); exhausted: candidates existed but every try failed; aborted: the caller's signal. */
      readonly reason: "no-match" | "exhausted" | "aborted";
      readonly explanation: NoMatchExplanation | null;
      readonly attempts: readonly Attempt[];
      readonly rounds: number;
      /**
       * Leases of an incomplete group that were opened and could not be closed (close threw).
       * Empty in every normal run; when not, the caller must close them (or cancel after the start deadline).
       */
      readonly unclosed: readonly LeasedPart<L>[];
      /** The explanation for people: what was tried and why nothing was leased. */
      readonly message: string;
    };

/** A group of machines was offered but there is no way to undo a half-opened group. */
export class AllocatorConfigurationError extends SuanliError {
  override name = "AllocatorConfigurationError";
}

const TIMED_OUT = Symbol("timed out");

/**
 * Allocates a request: validates it (bad input throws InvalidInputError before anything is
 * reserved), then reserves and opens with fallback and re-matching as described above.
 *
 * @example
 * import { MatchingEngine, allocate } from "suanli/common/matching";
 * const result = await allocate({ gpuType: "A100", gpuCount: 2, duration: 3600, maxPricePerGpuHour: "2.50" }, {
 *   engine, renter: account.address,
 *   reserve: (part, request, signal) => reserveOverP2p(part, request, signal),
 *   open: (acceptance, part, request) => openLeaseOnChain(acceptance, request),
 * });
 * if (!result.ok) console.log(result.message);
 */
export async function allocate<L>(input: MatchRequestInput | unknown, deps: AllocateDependencies<L>): Promise<AllocationResult<L>> {
  const request = parseMatchRequest(input);
  const { engine, reserve, open, release, close, renter, logger, signal } = deps;
  const options = parseInput(
    allocatorOptionsSchema,
    { timeoutMs: deps.timeoutMs, maxAttempts: deps.maxAttempts, maxRounds: deps.maxRounds, rematchDelayMs: deps.rematchDelayMs },
    "allocator options",
  );
  if (request.colocation === "cluster" && !close) {
    throw new AllocatorConfigurationError("Allocating across a cluster needs a `close` dependency.", {
      metaMessages: ["A group opens one lease per machine; `close` undoes the opened ones when a later one fails, so no deposit stays locked."],
    });
  }
  const now = deps.now ?? (() => Math.floor(Date.now() / 1000));
  const chainNow = deps.chainNow ?? now;
  const attempts: Attempt[] = [];
  const unclosed: LeasedPart<L>[] = [];
  // key → seq tried; Infinity: never again in this allocation (timed out, answered nonsense).
  const exclude = new Map<string, number>();
  let reservations = 0;
  let round = 0;

  const failed = (reason: "no-match" | "exhausted" | "aborted", explanation: NoMatchExplanation | null): AllocationResult<L> => ({
    ok: false,
    request,
    reason,
    explanation,
    attempts,
    rounds: round,
    unclosed,
    message: failureMessage(reason, explanation, attempts, options.maxAttempts, unclosed.length),
  });
  const excludeAt = (part: CandidatePart, seq: number) => exclude.set(part.entry.key, Math.max(exclude.get(part.entry.key) ?? -1, seq));
  const isExcluded = (part: CandidatePart) => {
    const seq = exclude.get(part.entry.key);
    return seq !== undefined && part.entry.seq <= seq;
  };
  const releaseQuietly = async (acceptance: Acceptance, part: CandidatePart) => {
    if (!release) return;
    try {
      await release(acceptance, part);
    } catch (error) {
      logger?.warn("Reservation release failed", { key: part.entry.key }, error);
    }
  };

  /** One reserve call with a deadline; a late acceptance is released. */
  const reserveOne = async (part: CandidatePart): Promise<ReserveReply | typeof TIMED_OUT | Error> => {
    const controller = new AbortController();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const pending = reserve(part, request, controller.signal);
    const deadline = new Promise<typeof TIMED_OUT>((resolve) => {
      timer = setTimeout(() => resolve(TIMED_OUT), options.timeoutMs);
    });
    try {
      const reply = await Promise.race([pending, deadline]);
      if (reply === TIMED_OUT) {
        controller.abort(new Error("reserve timed out"));
        pending.then(
          (late) => (late.accepted ? releaseQuietly(late, part) : undefined),
          () => undefined,
        );
      }
      return reply;
    } catch (error) {
      return error instanceof Error ? error : new Error(String(error));
    } finally {
      clearTimeout(timer);
    }
  };

  /** Tries one candidate: reserve every part, then open every part. Returns the leases or null. */
  const tryCandidate = async (candidate: Candidate): Promise<LeasedPart<L>[] | null> => {
    const parts = candidate.parts;
    reservations += parts.length;
    const replies = await Promise.all(parts.map((part) => reserveOne(part)));
    const accepted: { acceptance: Acceptance; part: CandidatePart }[] = [];
    let allAccepted = true;
    replies.forEach((reply, i) => {
      const part = parts[i]!;
      const key = part.entry.key;
      if (reply === TIMED_OUT) {
        attempts.push({ round, key, outcome: "timeout", detail: `no answer within ${options.timeoutMs} ms` });
        excludeAt(part, Number.POSITIVE_INFINITY);
        allAccepted = false;
      } else if (reply instanceof Error) {
        attempts.push({ round, key, outcome: "reserve-error", detail: reply.message });
        excludeAt(part, Number.POSITIVE_INFINITY);
        allAccepted = false;
      } else if (!reply.accepted) {
        attempts.push({ round, key, outcome: "refused", detail: reply.reason + (reply.message ? `: ${reply.message}` : "") });
        excludeAt(part, part.entry.seq);
        allAccepted = false;
      } else {
        const mismatch = acceptanceMismatch(reply, part, request, renter, chainNow());
        if (mismatch) {
          attempts.push({ round, key, outcome: "acceptance-mismatch", detail: mismatch });
          excludeAt(part, Number.POSITIVE_INFINITY);
          allAccepted = false;
          runDetached(releaseQuietly(reply, part), logger, "Releasing a mismatched reservation", { key: part.entry.key });
        } else {
          accepted.push({ acceptance: reply, part });
        }
      }
    });
    if (!allAccepted) {
      for (const held of accepted) {
        attempts.push({ round, key: held.part.entry.key, outcome: "group-incomplete", detail: "another machine of the group did not reserve" });
        await releaseQuietly(held.acceptance, held.part);
      }
      return null;
    }
    const opened: LeasedPart<L>[] = [];
    for (let i = 0; i < accepted.length; i++) {
      const { acceptance, part } = accepted[i]!;
      try {
        const lease = await open(acceptance, part, request);
        opened.push({ lease, part, acceptance });
      } catch (error) {
        const detail = error instanceof Error ? error.message : String(error);
        attempts.push({ round, key: part.entry.key, outcome: "open-failed", detail });
        logger?.warn("Lease open failed; falling back", { key: part.entry.key, round }, error);
        excludeAt(part, part.entry.seq);
        for (const rest of accepted.slice(i)) await releaseQuietly(rest.acceptance, rest.part);
        for (const done of opened) {
          // An opened lease of an incomplete group: close it so its deposit returns at once.
          try {
            await close!(done.lease, done.part);
            attempts.push({ round, key: done.part.entry.key, outcome: "group-incomplete", detail: "lease opened, then closed with a full refund" });
          } catch (closeError) {
            unclosed.push(done);
            attempts.push({ round, key: done.part.entry.key, outcome: "close-failed", detail: closeError instanceof Error ? closeError.message : String(closeError) });
            logger?.warn("Closing a lease of an incomplete group failed", { key: done.part.entry.key }, closeError);
          }
        }
        return null;
      }
    }
    for (const done of opened) attempts.push({ round, key: done.part.entry.key, outcome: "leased" });
    return opened;
  };

  while (round < options.maxRounds && reservations < options.maxAttempts) {
    if (signal?.aborted) return failed("aborted", null);
    round++;
    const result = engine.match(request, { exclude, now: now() });
    if (!result.ok) {
      logger?.debug("No match", { round, summary: result.explanation.summary });
      const lostARace = attempts.length > 0;
      if (lostARace && round < options.maxRounds && options.rematchDelayMs > 0) {
        if (!(await pause(options.rematchDelayMs, signal))) return failed("aborted", null);
        continue;
      }
      return failed(attempts.length === 0 ? "no-match" : "exhausted", result.explanation);
    }
    for (const candidate of result.candidates) {
      if (signal?.aborted) return failed("aborted", null);
      if (reservations + candidate.parts.length > options.maxAttempts) break;
      if (candidate.parts.some(isExcluded)) continue;
      const leases = await tryCandidate(candidate);
      if (leases) {
        logger?.debug("Allocated", { round, keys: leases.map((l) => l.part.entry.key) });
        return { ok: true, request, candidate, leases, attempts, rounds: round };
      }
    }
  }
  return failed("exhausted", null);
}

/** Waits `ms`; false if the signal aborted first. */
function pause(ms: number, signal: AbortSignal | undefined): Promise<boolean> {
  if (signal?.aborted) return Promise.resolve(false);
  return new Promise((resolve) => {
    const onAbort = () => {
      clearTimeout(timer);
      resolve(false);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve(true);
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

function failureMessage(
  reason: "no-match" | "exhausted" | "aborted",
  explanation: NoMatchExplanation | null,
  attempts: readonly Attempt[],
  maxAttempts: number,
  unclosed: number,
): string {
  if (reason === "no-match") return explanation!.message;
  const lines: string[] = [];
  if (unclosed > 0) lines.push(`${unclosed} lease(s) of an incomplete group could not be closed: close them, or cancel them after their start deadline, to get the deposit back.`);
  if (reason === "aborted") lines.push("Allocation aborted by the caller; nothing is leased.");
  else lines.push(`No lease could be opened after trying ${countMachines(attempts)} (limit ${maxAttempts} reservation attempts).`);
  const byOutcome = new Map<AttemptOutcome, number>();
  for (const attempt of attempts) if (attempt.outcome !== "leased") byOutcome.set(attempt.outcome, (byOutcome.get(attempt.outcome) ?? 0) + 1);
  const words: Record<AttemptOutcome, string> = {
    refused: "refused by the provider (most often: the units went to another renter)",
    timeout: "provider did not answer in time",
    "reserve-error": "provider unreachable",
    "acceptance-mismatch": "provider's acceptance did not match the offer",
    "open-failed": "lease transaction failed (nothing was charged)",
    "group-incomplete": "released because another machine of the same group failed",
    "close-failed": "opened for an incomplete group and not closed (see unclosed)",
    leased: "leased",
  };
  for (const [outcome, count] of byOutcome) {
    lines.push(`  - ${count} ${words[outcome]}`);
    // A mismatch names the field and both values: say which (a provider's bug or a clock off).
    if (outcome === "acceptance-mismatch") {
      const details = new Set(attempts.filter((a) => a.outcome === outcome && a.detail).map((a) => a.detail!));
      for (const detail of [...details].slice(0, 3)) lines.push(`      ${detail}`);
    }
  }
  if (explanation) lines.push("The market now:", explanation.message);
  return lines.join("\n");
}

function countMachines(attempts: readonly Attempt[]): string {
  const keys = new Set(attempts.map((a) => a.key));
  return `${keys.size} machine${keys.size === 1 ? "" : "s"}`;
}
